"""Work spread over a Dask cluster: reaching it, and the same code on every worker.

``pyaisvc bench --cluster`` (pyaisvc.bench.cluster) and the fuzzers'
``CLUSTER=`` (pyaisvc.cluster.fuzz) send tasks to workers started in clones
of the repository with one unit of the ``guest`` resource each
(``python -m dask worker ADDRESS --resources guest=1 --nthreads 1``): a
task holds it while its guest runs, so one worker runs one guest at a time.

A worker's code is the checkout its pyaisvc was imported from. Before any
task is submitted, ``check_workers`` asks every worker for that checkout's
commit (``git rev-parse HEAD``) and refuses the work with one line per
worker at another commit, or unable to load this code, naming it and both
commits; each task checks again (``mismatch``) on the worker itself.

Dask is imported inside the functions that need it, so importing this
module costs nothing where no cluster is used.
"""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import pyaisvc
from pyaisvc.errors import AisvcError

RESOURCE = "guest"  # the worker resource a task holds: one guest per worker at a time
WORKER_WAIT_S = 60.0  # how long a client waits for a first worker with the resource


class ClusterError(AisvcError):
    """A cluster cannot be reached or used; the message says what to do."""


class WrongCode(ClusterError):
    """A worker's checkout or image is not the client's; the message names the worker."""


def checkout() -> Path:
    """The checkout this process runs: the directory its pyaisvc package lies in."""
    return Path(pyaisvc.__file__).resolve().parent.parent


def git_commit(root: Path) -> str:
    """HEAD of the git checkout at root; ClusterError when it is none."""
    proc = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        raise ClusterError(f"{root} is not a git checkout ({proc.stderr.strip()}); work on a "
                           "cluster runs the same commit everywhere and needs a clone of the "
                           "repository")
    return proc.stdout.strip()


def uncommitted(root: Path) -> bool:
    """Whether the checkout at root has changes to tracked files that HEAD does not hold."""
    proc = subprocess.run(["git", "-C", str(root), "status", "--porcelain",
                           "--untracked-files=no"], capture_output=True, text=True)
    return proc.returncode == 0 and bool(proc.stdout.strip())


def worker_name() -> str:
    """The Dask worker's name (its --name) when called in a worker, else the host name."""
    try:
        from distributed import get_worker

        return str(get_worker().name)
    except (ImportError, ValueError):
        return socket.gethostname()


def worker_code(dask_worker=None) -> dict[str, str]:
    """The worker's name, checkout and commit. client.run calls it on every worker and
    passes the worker as dask_worker (get_worker() answers only inside a task)."""
    root = checkout()
    try:
        commit = git_commit(root)
    except ClusterError as e:
        commit = f"none ({e})"
    name = str(dask_worker.name) if dask_worker is not None else worker_name()
    return {"name": name, "root": str(root), "commit": commit}


def mismatch(code: dict[str, str], commit: str) -> str | None:
    """Why a worker that reported code cannot measure for a client at commit, or None."""
    if code["commit"] == commit:
        return None
    return (f"worker {code['name']} runs {code['root']} at commit {code['commit'][:12]}, "
            f"this client is at {commit[:12]}: check out {commit[:12]} there (and run "
            "`make deps` if it changed what to install), then restart that worker")


def connect(address: str, wait: float = WORKER_WAIT_S):
    """A Dask client of the scheduler at address, once a worker offers the guest
    resource; ClusterError saying how to start what is missing."""
    from distributed import Client

    try:
        client = Client(address, timeout=30, set_as_default=False)
    except (OSError, ValueError, TypeError) as e:
        raise ClusterError(f"cluster {address}: no Dask scheduler answers there ({e}); start "
                         "one with `dask scheduler` (docs/MEASURE.md, \"On a cluster\")") from e
    deadline = time.monotonic() + wait
    while not guest_workers(client):
        if time.monotonic() > deadline:
            client.close()
            raise ClusterError(f"cluster {address}: no worker offers the {RESOURCE!r} "
                             f"resource after {wait:.0f} s; start workers in a checkout with "
                             f"`python -m dask worker {address} --resources {RESOURCE}=1 "
                             "--nthreads 1`")
        time.sleep(0.5)
    return client


def guest_workers(client) -> dict[str, str]:
    """Address -> name of every worker that offers the guest resource."""
    workers = client.scheduler_info(n_workers=-1)["workers"]
    return {addr: str(w.get("name", addr)) for addr, w in workers.items()
            if w.get("resources", {}).get(RESOURCE, 0) >= 1}


def check_workers(client, commit: str) -> None:
    """ClusterError naming every worker whose checkout is not at commit (or that cannot run
    this code at all), before any cell is submitted."""
    workers = guest_workers(client)
    found = client.run(worker_code, workers=list(workers), on_error="return")
    bad = []
    for addr, code in sorted(found.items()):
        if isinstance(code, BaseException):
            # Its pyaisvc lacks worker_code (an older checkout): ask git with the standard
            # library alone, in the directory the worker was started in.
            head = client.run(subprocess.check_output, ["git", "rev-parse", "HEAD"],
                              workers=[addr], on_error="return", text=True,
                              stderr=subprocess.DEVNULL).get(addr)
            at = f" is at commit {head.strip()[:12]} and" if isinstance(head, str) else ""
            bad.append(f"worker {workers.get(addr, addr)}{at} cannot run this client's code "
                       f"({code}), this client is at {commit[:12]}: check out {commit[:12]} "
                       "there and restart it")
        elif (why := mismatch(code, commit)) is not None:
            bad.append(why)
    if bad:
        raise WrongCode("; ".join(bad))
