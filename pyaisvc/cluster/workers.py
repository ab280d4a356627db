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

``run_on_workers`` is the client's side every cluster run shares: connect,
check the workers' commit, submit one task per item still to do (each
holding one unit of the resource) and hand each back as it ends; what the
items are, how they are journaled and what a failure means stays with the
caller.

Dask is imported inside the functions that need it, so importing this
module costs nothing where no cluster is used.
"""

from __future__ import annotations

import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pyaisvc
from pyaisvc.errors import AisvcError

RESOURCE = "guest"  # the worker resource a task holds: one guest per worker at a time
WORKER_WAIT_S = 60.0  # how long a client waits for a first worker with the resource
T = TypeVar("T")


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


def client_commit(root: Path, note: Callable[[str], None]) -> str:
    """The commit the workers must run: HEAD of the checkout at root (ClusterError when it
    is none); notes when the checkout has changes the workers will not see."""
    commit = git_commit(root.resolve())
    if uncommitted(root.resolve()):
        note(f"this checkout has uncommitted changes; the workers run their checkouts at "
             f"commit {commit[:12]} without them (commit first to measure them)")
    return commit


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


def submit_task(client, fn: Callable[[Any], Any], arg: object, key: str, retries: int = 0):
    """The future of fn(arg) run on one worker holding one unit of RESOURCE, under a key
    that starts with key and is unique; a failed try is run again up to retries times."""
    return client.submit(fn, arg, key=f"{key}-{uuid.uuid4().hex[:8]}",
                         resources={RESOURCE: 1}, retries=retries, pure=False)


def run_on_workers(address: str, commit: str, todo: Sequence[T],
                   task: Callable[[T], tuple[Callable[[Any], Any], object, str]],
                   finished: Callable[[T, Any], None], what: str,
                   note: Callable[[str], None], start: Callable[[Any], None] | None = None,
                   retries: int = 0) -> None:
    """Runs one task per item of todo on the cluster at address; nothing when todo is empty.
    Connects (ClusterError), refuses workers not at commit (WrongCode), then calls
    start(client) (a journal to create, a first task to wait for), notes how many `what`
    go to how many workers, submits task(item) = (function, argument, key prefix) for each
    item and calls finished(item, future) as each future ends, finished or not, in the
    order they end. The client is closed on every way out."""
    if not todo:
        return
    from distributed import as_completed

    client = connect(address)
    try:
        check_workers(client, commit)
        if start is not None:
            start(client)
        note(f"{len(todo)} {what} to {len(guest_workers(client))} worker(s) at {address}")
        futures = {submit_task(client, *task(item), retries=retries): item for item in todo}
        for fut in as_completed(futures, loop=client.loop):
            finished(futures[fut], fut)
    finally:
        client.close(timeout=10)
