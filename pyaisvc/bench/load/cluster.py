"""A load run on a Dask cluster: ``pyaisvc bench --mode load --cluster ADDRESS``.

Each policy is one Dask task holding one unit of the workers' ``guest``
resource (as the matrix's cells do, pyaisvc.bench.cluster): the worker
boots its own `pyaisvc serve --sched POLICY` from its checkout and replays
the same seeded workload on loopback, so the policies run side by side on
different machines and never share cores. With ``load``, one task measures
the capacity first (on a fifo server) and every policy then runs at the
same rate. Every worker must be at the client's commit (pyaisvc.cluster.workers);
each task checks again. Finished policies are journaled as they arrive, so
``--resume`` runs only the rest.

Dask is imported only inside the functions that use it.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from pyaisvc.bench.load.client import Done
from pyaisvc.bench.load.run import (
    LoadResult,
    PolicyRun,
    Setup,
    check_policies,
    in_plan_order,
    journal_policy,
    measure_capacity,
    open_journal,
    policy_run,
)
from pyaisvc.bench.load.server import DEFAULT_POLICY, Server, serve_options
from pyaisvc.bench.load.workload import LoadPlan
from pyaisvc.bench.matrix import BenchError
from pyaisvc.bench.sample import Note
from pyaisvc.cluster.workers import (
    WrongCode,
    client_commit,
    mismatch,
    run_on_workers,
    submit_task,
    worker_code,
)


@dataclass(frozen=True)
class PolicyTask:
    """What a worker needs to measure one policy (policy "capacity": the capacity)."""

    policy: str
    plan: LoadPlan
    rate: float | None
    commit: str
    text: tuple[int, ...]
    seq_len: int
    cpus: int | None
    ram: str | None


def _worker_setup(task: PolicyTask) -> Setup:
    """The worker's checkout (at the client's commit, else WrongCode) as a Setup."""
    code = worker_code()
    if (why := mismatch(code, task.commit)) is not None:
        raise WrongCode(why)
    logs = Path(tempfile.mkdtemp(prefix="aisvc-load-"))
    return Setup(Path(code["root"]), logs, list(task.text), task.seq_len, task.cpus, task.ram)


def run_policy_task(task: PolicyTask) -> PolicyRun:
    """On a worker: one policy's run on a server of its own."""
    setup = _worker_setup(task)
    run, _ = policy_run(setup, task.plan, task.policy, task.rate, None, lambda _: None,
                        lambda _: None)
    run.host = worker_code()["name"]
    return run


def run_capacity_task(task: PolicyTask) -> float:
    """On a worker: the capacity (requests/s) of a fifo server for the plan's mix."""
    setup = _worker_setup(task)
    options = serve_options(setup.root, DEFAULT_POLICY, task.plan.prefill_chunk,
                            task.plan.prefill_budget)
    with Server(setup.root, options, setup.cpus, setup.ram, setup.out / "serve.log") as srv:
        srv.wait_healthy()
        return measure_capacity(setup, srv.url, task.plan, lambda _: None)


def _measure_capacity_first(client, task: PolicyTask, result: LoadResult, journal,
                            note: Note) -> None:
    """The plan's capacity measured on a worker (task names no policy) when the journal
    holds none: the rate every policy then runs at, journaled."""
    if task.plan.load is None or result.capacity is not None:
        return
    note("measuring the capacity on a worker")
    result.capacity = submit_task(client, run_capacity_task, task, "load-capacity").result()
    result.rate = task.plan.load * result.capacity
    journal.append({"kind": "capacity", "capacity": result.capacity})
    note(f"capacity {result.capacity:.3f} requests/s")


def run_load_cluster(setup: Setup, plan: LoadPlan, address: str, journal_path: Path,
                     resume: bool, done: Done, note: Note) -> LoadResult:
    """The policies the journal does not hold, one task each on the cluster at address;
    returns them all in the plan's order."""
    if setup.url is not None:
        raise BenchError("--url and --cluster exclude each other: the workers boot their own "
                         "servers")
    check_policies(setup, plan, journal_path, resume)
    commit = client_commit(setup.root, note)
    journal, result = open_journal(journal_path, plan, resume)
    todo = [p for p in plan.policies if p not in {r.policy for r in result.runs}]

    def task(policy: str) -> PolicyTask:
        """The worker's task for policy at the rate known now."""
        return PolicyTask(policy, plan, result.rate, commit, tuple(setup.text),
                          setup.seq_len, setup.cpus, setup.ram)

    def finished(_policy: str, fut) -> None:
        """Journals the measured policy and counts its requests."""
        run: PolicyRun = fut.result()
        journal_policy(journal, run, result.rate)
        result.runs.append(run)
        for o in run.outcomes:
            done(o)
        note(f"{run.policy}: measured on {run.host}")

    run_on_workers(address, commit, todo,
                   lambda p: (run_policy_task, task(p), f"load-{p}"), finished, "policies",
                   note, lambda client: _measure_capacity_first(client, task("capacity"),
                                                                result, journal, note))
    in_plan_order(result)
    return result
