"""A QMP client: QEMU's JSON monitor on a Unix socket, one command at a time.

``Qmp.connect(path, deadline)`` waits for QEMU to create the socket, reads the
greeting and leaves capability negotiation; ``command(name, **arguments)``
sends one command and returns its ``return`` value, skipping the events that
come meanwhile; an ``error`` answer raises ``QmpError`` with QEMU's words.
(QMP's protocol: docs/interop/qmp-spec in QEMU's documentation.)
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

from pyaisvc.errors import AisvcError

CONNECT_EVERY = 0.002  # seconds between tries while QEMU has not made the socket yet


class QmpError(AisvcError):
    """QEMU refused a QMP command, or the monitor went away."""


class Qmp:
    """One QMP connection (see the module's comment)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._file = sock.makefile("rb")

    @classmethod
    def connect(cls, path: Path, deadline: float) -> Qmp:
        """The monitor at path, in command mode; QmpError when QEMU does not open it before
        deadline (time.monotonic())."""
        while True:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(str(path))
                break
            except OSError as e:
                s.close()
                if time.monotonic() > deadline:
                    raise QmpError(f"QEMU's monitor {path} did not open: {e}") from e
                time.sleep(CONNECT_EVERY)
        s.settimeout(max(0.1, deadline - time.monotonic()))
        qmp = cls(s)
        greeting = qmp._read()
        if "QMP" not in greeting:
            qmp.close()
            raise QmpError(f"not a QMP greeting: {greeting}")
        qmp.command("qmp_capabilities")
        return qmp

    def _read(self) -> dict[str, Any]:
        """The next message; QmpError when the monitor closed or timed out."""
        try:
            line = self._file.readline()
        except OSError as e:
            raise QmpError(f"QEMU's monitor failed: {e}") from e
        if not line:
            raise QmpError("QEMU's monitor closed (QEMU exited)")
        return json.loads(line)

    def command(self, name: str, timeout: float = 30.0, **arguments: Any) -> Any:
        """Runs one command and returns its result; QmpError for QEMU's error answer."""
        msg: dict[str, Any] = {"execute": name}
        if arguments:
            msg["arguments"] = arguments
        self._sock.settimeout(timeout)
        try:
            self._sock.sendall(json.dumps(msg).encode() + b"\n")
        except OSError as e:
            raise QmpError(f"QEMU's monitor failed: {e}") from e
        while True:
            answer = self._read()
            if "return" in answer:
                return answer["return"]
            if "error" in answer:
                raise QmpError(f"QEMU refused {name}: {answer['error'].get('desc', answer)}")

    def close(self) -> None:
        """Closes the connection (idempotent)."""
        self._file.close()
        self._sock.close()
