"""A benchmark sweep on a Dask cluster: ``pyaisvc bench ... --cluster ADDRESS``.

Every cell of the plan (model, mode, prompt length, generated length, with
all its repeats and --cpus values) is one Dask task that holds one unit of
the workers' ``guest`` resource (``dask worker ADDRESS --resources guest=1``),
so a worker measures one cell at a time and two cells never share its cores.
The task runs in the worker's process, from the worker's own checkout (the
directory its pyaisvc was imported from), and measures exactly as a local
run does (pyaisvc.bench.runner boots one guest per --cpus value and sends
each repeat to each in turn); its samples name the worker and its CPU model.

Same code everywhere: before anything is submitted every worker reports its
checkout's commit and the sweep is refused, naming each worker at another
commit or unable to load this code (pyaisvc.cluster.workers); each task checks the
commit again and that its image's content hash (pyaisvc.image.modelimage) equals
the client's.

Nothing lost: the client appends each cell to the journal
(pyaisvc.bench.journal) as it arrives. A worker that dies mid-cell has its
cell run again on another (the scheduler reschedules it, at most
``distributed.scheduler.allowed-failures`` times); a cell that raises is
tried once more (``retries=1``), and a cell that fails twice is reported
with its console's tail while the sweep goes on with the rest.

This module imports Dask only inside its functions: a local run never loads it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pyaisvc.bench.journal import Done, Journal
from pyaisvc.bench.matrix import BenchError, Cell, Run, plan_runs
from pyaisvc.bench.runner import (
    BenchConfig,
    BenchIncomplete,
    BenchResult,
    Machine,
    Progress,
    _measure_model,
    _prepare_all,
    check_guests_fit,
    cpu_model,
    qemu_version,
)
from pyaisvc.bench.sample import Note, Sample
from pyaisvc.cluster.workers import (
    RESOURCE,
    WrongCode,
    check_workers,
    connect,
    git_commit,
    guest_workers,
    mismatch,
    uncommitted,
    worker_code,
)
from pyaisvc.errors import AisvcError
from pyaisvc.guest.llmguest import MODELS, prepare
from pyaisvc.image.modelimage import stored_digest

TAIL_LINES = 25  # console lines kept of a failed cell, per guest


class CellFailed(BenchError):
    """A cell failed in the guest; ``tail`` is the end of each guest's console."""

    def __init__(self, message: str, tail: str = "") -> None:
        super().__init__(message)
        self.tail = tail

    def __reduce__(self):  # crosses from the worker to the client by pickle
        return (CellFailed, (str(self), self.tail))


@dataclass(frozen=True)
class CellTask:
    """What a worker needs to measure one cell as the client planned it."""

    cell: Cell
    runs: tuple[Run, ...]  # its repeats, in order, with the prompt ids
    commit: str  # the client's checkout
    digest: str  # the content hash of the client's image for cell.model
    assets: str | None  # relative to the checkout, or absolute; None: the model's default
    cpus: tuple[int, ...]
    ram: str | None
    profile: bool


@dataclass(frozen=True)
class CellDone:
    cell: Cell
    worker: str
    cpu: str
    samples: tuple[Sample, ...]
    machine: Machine


@dataclass(frozen=True)
class Failure:
    """A cell that failed on its last try."""

    cell: Cell
    error: str
    tail: str


# ---------------------------------------------------------------- on the worker

def _tail(consoles: list[str]) -> str:
    return "\n".join("\n".join(c.rstrip().splitlines()[-TAIL_LINES:]) for c in consoles if c)


def run_cell(task: CellTask) -> CellDone:
    """Measures one cell in this worker's checkout: checks its commit and its image
    against the client's (WrongCode), then runs every repeat on one guest per --cpus
    value; CellFailed, with the consoles' tails, when the guest fails."""
    code = worker_code()
    name, root = code["name"], Path(code["root"])
    if (why := mismatch(code, task.commit)) is not None:
        raise WrongCode(why)
    model = task.cell.model
    spec = MODELS[model]
    try:
        p = prepare(root, spec, None if task.assets is None else root / task.assets,
                    flag=f"--assets-{model}")
    except AisvcError as e:
        raise CellFailed(f"worker {name}: {task.cell.label}: {e}") from None
    digest = stored_digest(p.image) or "none"
    if digest != task.digest:
        raise WrongCode(f"worker {name}: its {model} image {p.image} has content hash "
                        f"{digest[:12]}, the client's has {task.digest[:12]} at the same "
                        f"commit {task.commit[:12]}: its assets or its RISC-V toolchain "
                        "differ; give it the same assets (or `make deps` on the same Debian "
                        "release)")
    cfg = BenchConfig([model], [task.cell.mode], [task.cell.prompt_len], [task.cell.gen_len],
                      len(task.runs), list(task.cpus), task.ram, {}, root,
                      profile=task.profile, host=name)
    samples: list[Sample] = []
    machines: dict[str, Machine] = {}
    consoles: list[str] = []
    try:
        check_guests_fit([cfg.ram or spec.ram] * len(cfg.cpus))
        _measure_model(cfg, model, p, list(task.runs), qemu_version(cfg.qemu),
                       Progress(0, 0, 0.0, 0.0, ""), None, lambda _: None, samples, machines,
                       consoles)
    except AisvcError as e:
        raise CellFailed(f"worker {name}: {task.cell.label}: {e}", _tail(consoles)) from None
    return CellDone(task.cell, name, cpu_model(), tuple(samples), machines[model])


# ---------------------------------------------------------------- on the client

def sweep_plan(cfg: BenchConfig, commit: str) -> dict[str, object]:
    """What a journal's first line records, and a resumed sweep must repeat."""
    return {"commit": commit, "models": cfg.models, "modes": cfg.modes,
            "prompt_lens": cfg.prompt_lens, "gen_lens": cfg.gen_lens, "repeat": cfg.repeat,
            "cpus": cfg.cpus, "ram": cfg.ram, "profile": cfg.profile,
            "assets": {m: str(a) for m, a in sorted(cfg.assets.items()) if a is not None}}


def _assets_for_workers(assets: Path | None, root: Path) -> str | None:
    """An asset directory as the workers find it: relative to the checkout when it lies
    inside the client's, else as given (then it must exist at that path on every worker)."""
    if assets is None:
        return None
    try:
        return str(assets.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(assets)


def run_cluster(cfg: BenchConfig, address: str, journal_path: Path, resume: bool = False,
                progress: Callable[[Progress], None] | None = None,
                note: Note | None = None) -> tuple[BenchResult, list[Failure]]:
    """Runs the cells of cfg that journal_path does not hold yet (all of them unless
    resume) as tasks on the cluster at address, appending each to the journal; returns
    every cell's samples (the journal's and the new ones, in a local run's order) and
    the cells that failed twice. Ctrl-C: BenchIncomplete with what the journal holds."""
    note = note or (lambda _: None)
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    t_start = time.monotonic()
    commit = git_commit(cfg.root.resolve())
    if uncommitted(cfg.root.resolve()):
        note(f"this checkout has uncommitted changes; the workers run their checkouts at "
             f"commit {commit[:12]} without them (commit first to measure them)")
    prepared, prompts = _prepare_all(cfg, note)
    plan = sweep_plan(cfg, commit)
    if resume:
        journal, done = Journal.resume(journal_path, plan)
    else:  # created once the workers passed their checks, so a refusal leaves none behind
        Journal.check_new(journal_path)
        done = Done()
    runs = plan_runs(cfg.models, cfg.modes, cfg.prompt_lens, cfg.gen_lens, cfg.repeat, prompts,
                     {m: p.size_mb for m, p in prepared.items()})
    order = {(r.cell, r.repeat): i for i, r in enumerate(runs)}
    cells = list(dict.fromkeys(r.cell for r in runs))
    todo = [c for c in cells if c not in done.cells]
    if resume:
        note(f"resuming {journal_path}: {len(cells) - len(todo)} of {len(cells)} cells done, "
             f"{len(todo)} to run")
    weight = {c: sum(r.weight for r in runs if r.cell == c) for c in cells}
    state = Progress(len(cells) - len(todo), len(cells),
                     sum(weight[c] for c in cells if c in done.cells),
                     sum(weight.values()), "")
    samples, machines, workers = list(done.samples), dict(done.machines), dict(done.workers)
    failures: list[Failure] = []

    def result() -> BenchResult:
        ordered = sorted(samples, key=lambda s: (
            order[(Cell(s.model, s.mode, s.prompt_len, s.gen_len), s.repeat)],
            cfg.cpus.index(s.harts)))
        models = [m for m in cfg.models if m in machines]
        return BenchResult(
            BenchConfig(models, cfg.modes, cfg.prompt_lens, cfg.gen_lens, cfg.repeat, cfg.cpus,
                        cfg.ram, cfg.assets, cfg.root, cfg.qemu, cfg.profile),
            ordered, machines, prompts, {m: str(prepared[m].assets) for m in models},
            {m: prepared[m].title for m in models}, started, time.monotonic() - t_start,
            {"cluster": address, "commit": commit, "workers": workers})

    if not todo:
        return result(), failures
    from distributed import as_completed

    client = connect(address)
    try:
        check_workers(client, commit)
        if not resume:
            journal = Journal.create(journal_path, plan)
        note(f"{len(todo)} cell(s) to {len(guest_workers(client))} worker(s) at {address}")
        futures = {}
        for cell in todo:
            task = CellTask(cell, tuple(r for r in runs if r.cell == cell), commit,
                            stored_digest(prepared[cell.model].image) or "none",
                            _assets_for_workers(cfg.assets.get(cell.model), cfg.root),
                            tuple(cfg.cpus), cfg.ram, cfg.profile)
            key = f"bench-{cell.label.replace(' ', '-')}-{uuid.uuid4().hex[:8]}"
            fut = client.submit(run_cell, task, key=key, resources={RESOURCE: 1}, retries=1,
                                pure=False)
            futures[fut] = cell
        for fut in as_completed(futures, loop=client.loop):
            cell = futures[fut]
            if fut.status != "finished":
                exc = fut.exception() if fut.status == "error" else None
                failure = Failure(cell, str(exc) if exc else f"the task was {fut.status}",
                                  getattr(exc, "tail", ""))
                journal.failed(cell, failure.error, failure.tail)
                failures.append(failure)
                note(f"{cell.label}: failed twice; the other cells go on (its error and "
                     "console follow at the end)")
                state.label = f"{cell.label} failed"
            else:
                got: CellDone = fut.result()
                journal.cell(cell, got.worker, got.cpu, list(got.samples), got.machine)
                samples.extend(got.samples)
                machines.setdefault(cell.model, got.machine)
                workers[got.worker] = got.cpu
                state.label = f"{cell.label} on {got.worker}"
            state.done += 1
            state.done_weight += weight[cell]
            if progress:
                progress(state)
    except KeyboardInterrupt as e:
        raise BenchIncomplete(f"interrupted (after {state.done} of {state.total} cells); "
                              f"{journal_path} keeps them: run the same command with "
                              f"--resume {journal_path} to measure only the rest", result(),
                              True) from e
    finally:
        client.close(timeout=10)
    return result(), failures
