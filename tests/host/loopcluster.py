"""A Dask scheduler and named workers on loopback, for the tests of work on a cluster
(test_bench_cluster.py, test_fuzz_cluster.py).

Every process is bound to 127.0.0.1 (the dashboards too: `--no-dashboard` would
still open ports on every address) and started in a session of its own, so a
test can kill one worker with everything below it (its nanny, its worker
process, the QEMU it runs, which pexpect puts in a session of its own) by their
ids. Workers are stopped before the scheduler.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from host.loopback import free_port

ROOT = Path(__file__).resolve().parents[2]
OWN_CHECKOUT = Path(__file__).resolve().parent / "owncheckout"


def descendants(pid: int) -> list[int]:
    """Every process below pid (QEMU runs in a session of its own under its worker)."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    """Stops proc's process group and every process below it (its guests), by their ids."""
    below = descendants(proc.pid)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=20)
    for pid in below:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


class LoopbackCluster:
    """A dask scheduler and named workers on 127.0.0.1, each worker in a checkout."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        port = free_port()
        self.address = f"tcp://127.0.0.1:{port}"
        self.scheduler = self._spawn("scheduler", ROOT, ["scheduler", "--host", "127.0.0.1",
                                     "--port", str(port), "--dashboard-address",
                                     f"127.0.0.1:{free_port()}"])
        self.workers: dict[str, subprocess.Popen] = {}
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            assert time.monotonic() < deadline and self.scheduler.poll() is None, \
                (logs / "scheduler.log").read_text()[-2000:]
            time.sleep(0.2)

    def _spawn(self, name: str, cwd: Path, args: list[str]) -> subprocess.Popen:
        log = (self.logs / f"{name}.log").open("w")
        # The checkout's pyaisvc and nothing of another tree's (owncheckout/sitecustomize.py).
        env = {**os.environ, "PYTHONPATH": f"{cwd}{os.pathsep}{OWN_CHECKOUT}"}
        return subprocess.Popen([sys.executable, "-m", "dask", *args], cwd=cwd, env=env,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def add_worker(self, name: str, checkout: Path = ROOT) -> None:
        self.workers[name] = self._spawn(name, checkout, [
            "worker", self.address, "--resources", "guest=1", "--nthreads", "1",
            "--host", "127.0.0.1", "--name", name,
            "--dashboard-address", f"127.0.0.1:{free_port()}"])

    def wait_for(self, n: int) -> None:
        from distributed import Client

        with Client(self.address, timeout=30, set_as_default=False) as c:
            c.wait_for_workers(n, timeout=120)

    def running_on(self) -> dict[str, list[str]]:
        """Worker name -> the task keys it is running now."""
        from distributed import Client

        with Client(self.address, timeout=30, set_as_default=False) as c:
            names = {a: w["name"] for a, w in c.scheduler_info(n_workers=-1)["workers"].items()}
            return {names[a]: list(keys) for a, keys in c.processing().items() if a in names}

    def close(self) -> None:
        for proc in self.workers.values():  # workers before the scheduler
            stop(proc)
        stop(self.scheduler)


@contextlib.contextmanager
def loopback_cluster(logs: Path) -> Iterator[LoopbackCluster]:
    """A scheduler (workers are added by the caller); everything stopped at the end."""
    logs.mkdir(parents=True, exist_ok=True)
    c = LoopbackCluster(logs)
    try:
        yield c
    finally:
        c.close()
