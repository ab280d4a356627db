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
from collections.abc import Callable
from dataclasses import dataclass, field
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
    WrongCode,
    client_commit,
    mismatch,
    run_on_workers,
    worker_code,
)
from pyaisvc.errors import AisvcError
from pyaisvc.guest.llmguest import MODELS, Prepared, prepare
from pyaisvc.image.modelimage import stored_digest

TAIL_LINES = 25  # console lines kept of a failed cell, per guest


class CellFailed(BenchError):
    """A cell failed in the guest; ``tail`` is the end of each guest's console."""

    def __init__(self, message: str, tail: str = "") -> None:
        """The error message, with tail the end of each guest's console."""
        super().__init__(message)
        self.tail = tail

    def __reduce__(self):  # crosses from the worker to the client by pickle
        """How pickle rebuilds the error on the client, its tail included."""
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
    """The last TAIL_LINES lines of each guest's console, the guests one after the other."""
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


@dataclass
class _Sweep:
    """A sweep as the client keeps it: its plan, the runs of every cell in a local run's
    order, what is done (the journal's cells and those that arrive) and what failed."""

    cfg: BenchConfig
    address: str
    commit: str
    prepared: dict[str, Prepared]
    prompts: dict[str, dict[int, list[int]]]
    runs: list[Run]
    done: Done
    started: str  # UTC, ISO 8601
    t_start: float  # time.monotonic() at the start
    failures: list[Failure] = field(default_factory=list)
    journal: Journal | None = None

    def cells(self) -> list[Cell]:
        """Every cell of the plan, in a local run's order."""
        return list(dict.fromkeys(r.cell for r in self.runs))

    def weight(self, cell: Cell) -> float:
        """The cell's share of the whole sweep's time (its runs' weights)."""
        return sum(r.weight for r in self.runs if r.cell == cell)

    def progress(self, todo: list[Cell]) -> Progress:
        """The progress before the cells of todo run."""
        cells = self.cells()
        return Progress(len(cells) - len(todo), len(cells),
                        sum(self.weight(c) for c in cells if c not in todo),
                        sum(self.weight(c) for c in cells), "")

    def task(self, cell: Cell) -> tuple[Callable[[CellTask], CellDone], CellTask, str]:
        """run_cell, the cell's task and its key prefix (for run_on_workers)."""
        cfg = self.cfg
        task = CellTask(cell, tuple(r for r in self.runs if r.cell == cell), self.commit,
                        stored_digest(self.prepared[cell.model].image) or "none",
                        _assets_for_workers(cfg.assets.get(cell.model), cfg.root),
                        tuple(cfg.cpus), cfg.ram, cfg.profile)
        return run_cell, task, f"bench-{cell.label.replace(' ', '-')}"

    def record(self, cell: Cell, fut, note: Note) -> str:
        """Journals the cell's ended future: its samples, or its failure (noted, kept in
        failures); returns the progress label."""
        assert self.journal is not None
        if fut.status != "finished":
            exc = fut.exception() if fut.status == "error" else None
            failure = Failure(cell, str(exc) if exc else f"the task was {fut.status}",
                              getattr(exc, "tail", ""))
            self.journal.failed(cell, failure.error, failure.tail)
            self.failures.append(failure)
            note(f"{cell.label}: failed twice; the other cells go on (its error and "
                 "console follow at the end)")
            return f"{cell.label} failed"
        got: CellDone = fut.result()
        self.journal.cell(cell, got.worker, got.cpu, list(got.samples), got.machine)
        self.done.samples.extend(got.samples)
        self.done.machines.setdefault(cell.model, got.machine)
        self.done.workers[got.worker] = got.cpu
        return f"{cell.label} on {got.worker}"

    def result(self) -> BenchResult:
        """Every sample so far in a local run's order, for the models that have any."""
        cfg = self.cfg
        order = {(r.cell, r.repeat): i for i, r in enumerate(self.runs)}
        ordered = sorted(self.done.samples, key=lambda s: (
            order[(Cell(s.model, s.mode, s.prompt_len, s.gen_len), s.repeat)],
            cfg.cpus.index(s.harts)))
        models = [m for m in cfg.models if m in self.done.machines]
        return BenchResult(
            BenchConfig(models, cfg.modes, cfg.prompt_lens, cfg.gen_lens, cfg.repeat, cfg.cpus,
                        cfg.ram, cfg.assets, cfg.root, cfg.qemu, cfg.profile),
            ordered, self.done.machines, self.prompts,
            {m: str(self.prepared[m].assets) for m in models},
            {m: self.prepared[m].title for m in models}, self.started,
            time.monotonic() - self.t_start,
            {"cluster": self.address, "commit": self.commit, "workers": self.done.workers})


def _open_sweep(cfg: BenchConfig, address: str, journal_path: Path, resume: bool,
                note: Note) -> tuple[_Sweep, list[Cell]]:
    """The sweep (its images prepared, the journal to resume opened) and its cells still to
    run; a new journal is only checked for, so that a refusal leaves none behind."""
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    t_start = time.monotonic()
    commit = client_commit(cfg.root, note)
    prepared, prompts = _prepare_all(cfg, note)
    journal = None
    if resume:
        journal, done = Journal.resume(journal_path, sweep_plan(cfg, commit))
    else:
        Journal.check_new(journal_path)
        done = Done()
    runs = plan_runs(cfg.models, cfg.modes, cfg.prompt_lens, cfg.gen_lens, cfg.repeat, prompts,
                     {m: p.size_mb for m, p in prepared.items()})
    sweep = _Sweep(cfg, address, commit, prepared, prompts, runs, done, started, t_start,
                   journal=journal)
    cells = sweep.cells()
    todo = [c for c in cells if c not in done.cells]
    if resume:
        note(f"resuming {journal_path}: {len(cells) - len(todo)} of {len(cells)} cells done, "
             f"{len(todo)} to run")
    return sweep, todo


def run_cluster(cfg: BenchConfig, address: str, journal_path: Path, resume: bool = False,
                progress: Callable[[Progress], None] | None = None,
                note: Note | None = None) -> tuple[BenchResult, list[Failure]]:
    """Runs the cells of cfg that journal_path does not hold yet (all of them unless
    resume) as tasks on the cluster at address, appending each to the journal; returns
    every cell's samples (the journal's and the new ones, in a local run's order) and
    the cells that failed twice. Ctrl-C: BenchIncomplete with what the journal holds."""
    note = note or (lambda _: None)
    sweep, todo = _open_sweep(cfg, address, journal_path, resume, note)
    state = sweep.progress(todo)

    def start(_client) -> None:
        """Creates the journal once the workers passed their checks (a resumed one is open)."""
        if sweep.journal is None:
            sweep.journal = Journal.create(journal_path, sweep_plan(cfg, sweep.commit))

    def finished(cell: Cell, fut) -> None:
        """Journals the ended cell and reports the progress."""
        state.label = sweep.record(cell, fut, note)
        state.done += 1
        state.done_weight += sweep.weight(cell)
        if progress:
            progress(state)

    try:
        run_on_workers(address, sweep.commit, todo, sweep.task, finished, "cell(s)", note,
                       start, retries=1)
    except KeyboardInterrupt as e:
        raise BenchIncomplete(f"interrupted (after {state.done} of {state.total} cells); "
                              f"{journal_path} keeps them: run the same command with "
                              f"--resume {journal_path} to measure only the rest",
                              sweep.result(), True) from e
    return sweep.result(), sweep.failures
