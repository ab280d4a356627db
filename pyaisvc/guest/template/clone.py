"""Clones: guests restored from a template, each with the template's RAM file mapped
privately and a fresh disk overlay of its own.

``start_clone(template)`` is the one entry point: a running guest (a
``Clone``, which is a ``Guest``: its console, ``run()``, ``close()``) whose
gateway socket is ``clone.cfg.port_socket``; the caller connects to it and
says hello (the chardev's connection is not part of the saved state, so the
host reconnects; the hello's nonce tells the answer apart). Its phases:
QEMU started and its monitor open (``qemu``), the state read back
(``restore``). A clone's directory (overlay, sockets) is removed when it
closes. A ``Pool`` keeps QEMUs started and waiting (``-incoming defer``)
so that the next start only restores. Any number of clones of one
template run at once: the RAM file's pages are shared through the host's
page cache until a clone writes one.

Clones are identical: nothing random may come from the guest. The requests'
seeds are the host's (pyaisvc/serve/service.py picks one per request), and
the hello's nonce too.
"""

from __future__ import annotations

import collections
import dataclasses
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from pyaisvc.guest.qemu import Guest, GuestError
from pyaisvc.guest.template.qmp import Qmp, QmpError
from pyaisvc.guest.template.store import Template, qemu_img, wait_migration

MONITOR_SECONDS = 20.0  # QEMU opens its monitor within this long of starting
RESTORE_SECONDS = 60.0  # the device state is read within this long


class Clone(Guest):
    """One guest restored from template (see the module's comment)."""

    def __init__(self, template: Template) -> None:
        self.template = template
        self.dir = Path(tempfile.mkdtemp(prefix="aisvc-clone-"))
        super().__init__(dataclasses.replace(
            template.cfg, image=self.dir / "disk.qcow2", disk_format="qcow2", snapshot=False,
            ram_file=template.ram, ram_shared=False, port_socket=self.dir / "gateway.sock",
            qmp_socket=self.dir / "qmp.sock", incoming=True))
        self.qmp: Qmp | None = None
        self.phases: dict[str, float] = {}  # phase -> seconds

    def start_waiting(self) -> None:
        """Makes the overlay and starts QEMU waiting for its state; GuestError (the clone
        closed) when either fails."""
        start = time.monotonic()
        try:
            subprocess.run([qemu_img(), "create", "-q", "-f", "qcow2", "-b",
                            str(self.template.disk.resolve()), "-F", "qcow2",
                            str(self.dir / "disk.qcow2")],
                           check=True, capture_output=True, timeout=60)
            self.spawn()
            assert self.cfg.qmp_socket is not None
            self.qmp = Qmp.connect(self.cfg.qmp_socket, start + MONITOR_SECONDS)
        except (OSError, subprocess.SubprocessError, QmpError, GuestError) as e:
            self.close()
            why = str(e).splitlines()[0] if str(e) else repr(e)
            raise GuestError(f"a clone of {self.template.dir.name} did not start: {why}",
                             self.transcript) from e
        self.phases["qemu"] = time.monotonic() - start

    def restore(self, timeout: float = RESTORE_SECONDS) -> None:
        """Reads the template's state into the waiting QEMU and lets the guest run;
        GuestError (the clone closed) when QEMU refuses it."""
        start = time.monotonic()
        if not self.template.state.is_file() or not (self.dir / "disk.qcow2").is_file():
            self.close()
            raise GuestError(f"a clone of {self.template.dir.name}: its state file or its "
                             "overlay is missing")
        try:
            assert self.qmp is not None
            self.qmp.command("migrate-set-capabilities", capabilities=[
                {"capability": "x-ignore-shared", "state": True}])
            self.qmp.command("migrate-incoming", uri=f"file:{self.template.state}")
            wait_migration(self.qmp, timeout, f"restoring {self.template.dir.name}")
            # the template was saved stopped, and QEMU keeps the saved run state: go on
            if self.qmp.command("query-status").get("status") == "paused":
                self.qmp.command("cont")
            status = self.qmp.command("query-status").get("status")
            if status != "running":
                raise GuestError(f"the restored guest is {status}, not running")
        except (QmpError, GuestError) as e:
            self.close()
            raise GuestError(f"QEMU refused the state of {self.template.dir.name}: "
                             f"{str(e).splitlines()[0]}", self.transcript) from e
        self.phases["restore"] = time.monotonic() - start
        self.boot_seconds = sum(self.phases.values())

    def boot(self, timeout: float = 60.0) -> float:
        """start_waiting() and restore(): what entering the context manager does."""
        self.start_waiting()
        self.restore(timeout)
        return self.boot_seconds or 0.0

    def close(self) -> None:
        """Stops QEMU and removes the clone's directory (idempotent; never raises)."""
        if self.qmp is not None:
            self.qmp.close()
            self.qmp = None
        super().close()
        shutil.rmtree(self.dir, ignore_errors=True)


class Pool:
    """Up to size QEMUs of one template started and waiting; take() restores one."""

    def __init__(self, template: Template, size: int = 1) -> None:
        self.template, self.size = template, size
        self._waiting: collections.deque[Clone] = collections.deque()
        self._lock = threading.Lock()
        self._closed = False
        self._filler: threading.Thread | None = None

    @property
    def waiting(self) -> int:
        """QEMUs started and waiting now."""
        with self._lock:
            return len(self._waiting)

    def fill(self) -> None:
        """Starts waiting QEMUs until size wait (a failed start is left for take())."""
        while True:
            with self._lock:
                if self._closed or len(self._waiting) >= self.size:
                    return
            c = Clone(self.template)
            try:
                c.start_waiting()
            except GuestError:
                return
            with self._lock:
                if self._closed:
                    c.close()
                    return
                self._waiting.append(c)

    def _refill(self) -> None:
        """fill() in a thread of its own (one at a time)."""
        if self._filler is None or not self._filler.is_alive():
            self._filler = threading.Thread(target=self.fill, name="clone-pool", daemon=True)
            self._filler.start()

    def take(self, timeout: float = RESTORE_SECONDS) -> Clone:
        """A running clone: a waiting QEMU restored (a fresh one when none waits); then
        the pool refills in the background. GuestError when the restore fails."""
        with self._lock:
            c = self._waiting.popleft() if self._waiting else None
        if c is not None and c.child is not None and c.child.isalive():
            c.phases.pop("qemu", None)  # started beforehand: not part of this start
        else:
            if c is not None:
                c.close()
            c = Clone(self.template)
            c.start_waiting()
        c.restore(timeout)
        self._refill()
        return c

    def close(self) -> None:
        """Stops the waiting QEMUs."""
        with self._lock:
            self._closed = True
            waiting, self._waiting = list(self._waiting), collections.deque()
        for c in waiting:
            c.close()
        if self._filler is not None:
            self._filler.join(timeout=30)


def start_clone(template: Template, pool: Pool | None = None,
                timeout: float = RESTORE_SECONDS) -> Clone:
    """A running guest restored from template (from pool's waiting QEMUs when given);
    GuestError when QEMU cannot start or refuses the state (the clone is closed)."""
    if pool is not None:
        return pool.take(timeout)
    c = Clone(template)
    c.boot(timeout)
    return c
