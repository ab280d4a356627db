"""A load run: the same seeded workload against each policy, one after the other.

For each policy a fresh `pyaisvc serve --sched POLICY` boots
(pyaisvc.bench.load.server), or the one server at ``url`` is used, and the
workload (pyaisvc.bench.load.workload) is replayed over HTTP
(pyaisvc.bench.load.client). With ``load`` instead of a rate, the capacity
is measured first, on the first policy's server: CAPACITY_USERS users in a
closed loop send CAPACITY_REQUESTS requests of the same mix (their own
seeded stream); the capacity is the requests served per second, and the
open loop's rate is load times it, the same for every policy.

The run's journal (pyaisvc.bench.journal, ``OUT/journal.jsonl``) holds the
plan, the measured capacity and each finished policy's outcomes, appended
as each ends; ``--resume`` reruns only the policies it does not hold, at
the rate it recorded.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pyaisvc.bench.journal import Journal
from pyaisvc.bench.load.client import Done, Outcome, run_closed, run_open, server_model
from pyaisvc.bench.load.server import Server, serve_options
from pyaisvc.bench.load.workload import LoadPlan, Request, open_loop
from pyaisvc.bench.matrix import BenchError
from pyaisvc.bench.runner import cpu_model
from pyaisvc.bench.sample import Note

CAPACITY_USERS = 8  # the gateway's window: the worker's batch kept full
CAPACITY_REQUESTS = 16
CAPACITY_SEED_OFFSET = 1_000_003  # the capacity's requests are not the workload's


@dataclass(frozen=True)
class Setup:
    """Where and how to measure: the checkout, the guest, the benchmark text's ids."""

    root: Path
    out: Path  # the servers' logs go here
    text: list[int]
    seq_len: int
    cpus: int | None = None
    ram: str | None = None
    url: str | None = None  # a running server instead of fresh ones


@dataclass
class PolicyRun:
    policy: str
    outcomes: list[Outcome]
    server: str  # the serve command, or the url
    started: str
    host: str


@dataclass
class LoadResult:
    plan: LoadPlan
    rate: float | None  # the open loop's requests/s (None: closed loop)
    capacity: float | None  # requests/s measured first (with --load)
    runs: list[PolicyRun] = field(default_factory=list)


def plan_record(plan: LoadPlan) -> dict[str, object]:
    """What a journal's first line records of plan (a resumed run must match it)."""
    d = asdict(plan)
    d.pop("extra")
    return json.loads(json.dumps(d))  # as the journal gives it back: lists, not tuples


def _outcome(d: dict) -> Outcome:
    """An Outcome from its journal record."""
    return Outcome(**d)


def measure(setup: Setup, url: str, policy: str, plan: LoadPlan, requests: list[Request] | None,
            done: Done) -> list[Outcome]:
    """Replays the workload against the server at url: requests in an open loop, or
    plan's users in a closed loop when requests is None."""
    model, priority = server_model(url)
    if requests is not None:
        return asyncio.run(run_open(url, model, policy, requests, priority, done))
    return asyncio.run(run_closed(url, model, policy, plan, setup.text, setup.seq_len,
                                  priority, done))


def measure_capacity(setup: Setup, url: str, plan: LoadPlan, note: Note) -> float:
    """Requests/s the server serves of plan's mix with its batch kept full."""
    probe = dataclasses.replace(plan, users=CAPACITY_USERS, requests=CAPACITY_REQUESTS,
                                duration=None, rate=None, load=None,
                                seed=plan.seed + CAPACITY_SEED_OFFSET)
    note(f"measuring the capacity: {CAPACITY_REQUESTS} requests of the mix, "
         f"{CAPACITY_USERS} users in a closed loop")
    outs = measure(setup, url, "capacity", probe, None, lambda _: None)
    ok = [o for o in outs if o.status == "ok"]
    if not ok:
        raise BenchError(f"measuring the capacity: no request succeeded ({outs[0].status})")
    span = max(o.end or 0.0 for o in ok) - min(o.sent for o in ok)
    return len(ok) / span


def policy_run(setup: Setup, plan: LoadPlan, policy: str, rate: float | None,
               capacity: Callable[[str], float] | None, done: Done,
               note: Note) -> tuple[PolicyRun, float | None]:
    """One policy: boots its server (or uses setup.url), measures the capacity first when
    asked (capacity(url) -> requests/s), then replays the workload; the run and the
    open loop's rate."""
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    def run_at(url: str) -> tuple[list[Outcome], float | None]:
        """The outcomes of the policy's run on the server at url and the rate it ran at (asking
        the capacity first when the plan gives a load)."""
        at = rate
        if capacity is not None:
            at = plan.load * capacity(url)
            note(f"open loop at {at:.3f} requests/s ({plan.load} of the capacity)")
        requests = open_loop(dataclasses.replace(plan, rate=at), setup.text,
                             setup.seq_len) if plan.open_loop else None
        return measure(setup, url, policy, plan, requests, done), at

    if setup.url is not None:
        outs, used = run_at(setup.url)
        server = setup.url
    else:
        options = serve_options(setup.root, policy, plan.prefill_chunk,
                                plan.prefill_budget)
        with Server(setup.root, options, setup.cpus, setup.ram,
                    setup.out / f"serve-{policy}.log") as srv:
            note(f"{policy}: booting `{' '.join(srv.command)}`")
            srv.wait_healthy()
            outs, used = run_at(srv.url)
            server = " ".join(srv.command)
    return PolicyRun(policy, outs, server, started, cpu_model()), used


def open_journal(path: Path, plan: LoadPlan, resume: bool) -> tuple[Journal, LoadResult]:
    """The run's journal (a new one, or the one to resume) and what it holds: the plan,
    the capacity and rate it recorded, the policies it finished."""
    record = plan_record(plan)
    if not resume:
        return Journal.create(path, record), LoadResult(plan, plan.rate, None)
    journal, _ = Journal.resume(path, record)
    result = LoadResult(plan, plan.rate, None)
    for line in path.read_text().splitlines():
        d = json.loads(line) if line.strip() else {}
        if d.get("kind") == "capacity":
            result.capacity = d["capacity"]
            result.rate = plan.load * d["capacity"]
        elif d.get("kind") == "policy" and d["policy"] in plan.policies:
            result.runs.append(PolicyRun(d["policy"], [_outcome(o) for o in d["outcomes"]],
                                         d["server"], d["started"], d["host"]))
    return journal, result


def journal_policy(journal: Journal, run: PolicyRun, rate: float | None) -> None:
    """Journals one finished policy: its server, start, host, the rate it ran at and every
    request's outcome."""
    journal.append({"kind": "policy", "policy": run.policy, "rate": rate, "server": run.server,
                    "started": run.started, "host": run.host,
                    "outcomes": [asdict(o) for o in run.outcomes]})


def in_plan_order(result: LoadResult) -> None:
    """Puts result's runs in the plan's order of policies."""
    result.runs.sort(key=lambda r: result.plan.policies.index(r.policy))


def check_policies(setup: Setup, plan: LoadPlan, journal_path: Path, resume: bool) -> None:
    """Refuses, before anything boots, a journal in the way or a policy serve lacks."""
    if not resume:
        Journal.check_new(journal_path)
    for p in plan.policies:
        if setup.url is None:
            serve_options(setup.root, p, plan.prefill_chunk, plan.prefill_budget)


def run_load(setup: Setup, plan: LoadPlan, journal_path: Path, resume: bool, done: Done,
             note: Note) -> LoadResult:
    """Every policy of plan that the journal does not hold yet, in order; returns them all
    (the journal's and the new ones). Each finished policy is journaled at once."""
    check_policies(setup, plan, journal_path, resume)
    journal, result = open_journal(journal_path, plan, resume)
    held = {r.policy for r in result.runs}
    for p in plan.policies:
        if p in held:
            note(f"{p}: in the journal, not measured again")
            continue
        ask = None
        if plan.load is not None and result.capacity is None:
            def ask(url: str) -> float:
                """The capacity measured on the server at url, journaled."""
                result.capacity = measure_capacity(setup, url, plan, note)
                journal.append({"kind": "capacity", "capacity": result.capacity})
                note(f"capacity {result.capacity:.3f} requests/s")
                return result.capacity
        run, result.rate = policy_run(setup, plan, p, result.rate, ask, done, note)
        journal_policy(journal, run, result.rate)
        result.runs.append(run)
    in_plan_order(result)
    return result
