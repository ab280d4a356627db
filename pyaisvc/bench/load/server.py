"""A fresh `pyaisvc serve` for one policy of a load run, as a child process.

The load generator is only an HTTP client; the server it measures is the
real `pyaisvc serve` (``python -m pyaisvc serve --port P --sched POLICY
[--chunk N]``) started in the checkout at root, its output in a log file.
It is healthy when GET /health answers 200 (the guest booted, the worker and
the gateway ready). Stopped with SIGINT, as Ctrl-C stops it (it then stops
its guest), killed if it has not exited after a minute.

The scheduling policies and the prefill chunk are options of `serve`
(``--sched``, ``--chunk``); a checkout whose `serve --help` lacks them can
only measure the kernel's default order, fifo, and any other policy is
refused before anything boots.
"""

from __future__ import annotations

import functools
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from pyaisvc.bench.matrix import BenchError

BOOT_TIMEOUT = 900.0  # build what is missing, boot, load the model: generous on a busy host
QUEUE = 4096  # the server's host queue: an open loop is never refused for want of room
DEFAULT_POLICY = "fifo"


@functools.cache
def serve_help(root: Path) -> str:
    """`pyaisvc serve --help` of the checkout at root."""
    proc = subprocess.run([sys.executable, "-m", "pyaisvc", "serve", "--help"], cwd=root,
                          capture_output=True, text=True)
    return proc.stdout


def serve_options(root: Path, policy: str, chunk: int | None,
                  prefill: int | None = None) -> list[str]:
    """The serve options that select the policy, the step budget (chunk) and the prompt
    budget (prefill); BenchError, saying what to do, when this checkout's serve cannot."""
    usage = serve_help(root)
    if "--sched" not in usage and policy != DEFAULT_POLICY:
        raise BenchError(f"policy {policy}: this checkout's `pyaisvc serve` has no --sched "
                         f"option (the kernel's policies are not in it): measure --policies "
                         f"{DEFAULT_POLICY}, or update the checkout")
    options = ["--sched", policy] if "--sched" in usage else []
    for ours, theirs, n in (("--prefill-chunk", "--chunk", chunk),
                            ("--prefill-budget", "--prefill", prefill)):
        if n is None:
            continue
        if theirs not in usage:
            raise BenchError(f"{ours}: this checkout's `pyaisvc serve` has no {theirs} "
                             f"option: leave out {ours}, or update the checkout")
        options += [theirs, str(n)]
    return options


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A running `pyaisvc serve`; use as a context manager (stopped on exit)."""

    def __init__(self, root: Path, options: list[str], cpus: int | None, ram: str | None,
                 log: Path) -> None:
        """Starts `pyaisvc serve` for SmolLM2 in root on a free port with options (and cpus and
        ram when given), its output going to log."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        cmd = [sys.executable, "-m", "pyaisvc", "serve", "--model", "smol", "--port",
               str(self.port), "--queue", str(QUEUE), *options]
        cmd += ["--cpus", str(cpus)] if cpus is not None else []
        cmd += ["--ram", ram] if ram is not None else []
        self.command = cmd[2:]
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(cmd, cwd=root, stdout=out, stderr=subprocess.STDOUT)

    def tail(self) -> str:
        """The last 15 lines of the server's log."""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-15:])

    def wait_healthy(self, timeout: float = BOOT_TIMEOUT) -> None:
        """Returns once /health answers 200; BenchError with the log's tail if the server
        exits or is not healthy within timeout seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BenchError(f"`{' '.join(self.command)}` exited with status "
                                 f"{self.proc.returncode}:\n{self.tail()}")
            try:
                if httpx.get(self.url + "/health", timeout=10).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        raise BenchError(f"`{' '.join(self.command)}` was not healthy after {timeout:.0f} s "
                         f"(log {self.log}):\n{self.tail()}")

    def stop(self) -> None:
        """Stops the server as Ctrl-C does, killing it when it has not stopped in 60 s."""
        if self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> Server:
        """The running server (stopped on leaving the block)."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Stops the server."""
        self.stop()
