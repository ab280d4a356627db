"""Run a benchmark plan in the guest and collect one Sample per run.

Each model gets one booted guest per --cpus value (its own image, booted
once; with several values the guests stay up together and every run goes
to each in turn); every run of that model is one shell command in it:

- cold: ``llmrun_smol --predict G "ID ID ..."`` - a fresh process that loads
  the model, serves one request and exits, as students run it. The timing
  line it prints on stderr (user/llm/session.c llm_session_run) gives
  load_us, init_us, ttft_us and tpot_us.
- service: the request goes through the kernel AI service (pyaisvc.bench.service).

Images, request arguments and the timing line come from pyaisvc.guest.llmguest.

The library draws nothing: progress goes to a callback and notes about
set-up steps to another, and the CLI decides how to show them.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import re
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from pyaisvc.bench.matrix import BenchError, Run, check_lengths, plan_runs, prompt_ids
from pyaisvc.bench.sample import PROFILE_PARTS, Note, Sample
from pyaisvc.bench.service import ServiceClient
from pyaisvc.errors import AisvcError
from pyaisvc.guest.llmguest import MODELS, Prepared, id_args, kernels_ran, parse_output, prepare
from pyaisvc.guest.qemu import Guest, QemuConfig, cpu_option, default_qemu
from pyaisvc.model.assets import load_config
from pyaisvc.model.tokenizer import load_tokenizer

PROFILE = re.compile(r"^(\S+): profile phase=(prefill|decode) matmul_us=(\d+) attn_us=(\d+) "
                     r"other_us=(\d+) tokens=(\d+)\s*$", re.M)
POOL_PROFILE = re.compile(r"^(\S+): profile phase=(prefill|decode) threads=(\d+) .* "
                          r"serial_us=(\d+)\s*$", re.M)


@dataclass(frozen=True)
class Machine:
    """What a model was measured on."""

    qemu: str  # QEMU's version line
    harts: int
    ram_mib: int
    boot_s: float


@dataclass
class Progress:
    """Where a benchmark is; passed to the progress callback after each run."""

    done: int
    total: int
    done_weight: float
    total_weight: float
    label: str  # the run just finished, or about to start


@dataclass
class BenchConfig:
    models: list[str]
    modes: list[str]
    prompt_lens: list[int]
    gen_lens: list[int]
    repeat: int = 3
    cpus: list[int] = field(default_factory=lambda: [1])  # one guest per value, in order
    ram: str | None = None  # None: each model's default (ModelSpec.ram)
    assets: dict[str, Path | None] = field(default_factory=dict)
    root: Path = Path(".")
    qemu: str = field(default_factory=default_qemu)
    profile: bool = False  # cold runs with --profile: matmul / attention / other split
    host: str = ""  # the name the rows give their host ("": this machine's host name)


@dataclass
class BenchResult:
    config: BenchConfig
    samples: list[Sample]
    machines: dict[str, Machine]  # model -> machine (its first harts value)
    prompts: dict[str, dict[int, list[int]]]  # model -> prompt length -> ids
    assets: dict[str, str]  # model -> asset directory used
    titles: dict[str, str]  # model -> what the assets hold (INFO.TXT)
    started: str  # UTC, ISO 8601
    seconds: float
    host: dict[str, object] = field(default_factory=dict)  # cpus, load averages


def booted_machine(guest: Guest, version: str) -> Machine:
    """What a booted guest runs on; version is qemu_version()'s line for its QEMU."""
    assert guest.harts is not None and guest.ram_mib is not None
    return Machine(f"{version}, -cpu {cpu_option(guest.cfg)}", guest.harts, guest.ram_mib,
                   guest.boot_seconds or 0.0)


def qemu_version(qemu: str) -> str:
    """E.g. "QEMU 7.2.22"; raises BenchError when QEMU cannot run."""
    try:
        out = subprocess.run([qemu, "--version"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        raise BenchError(f"{qemu} --version failed ({e}); run 'make deps'") from e
    m = re.search(r"version (\S+)", out.stdout)
    return f"QEMU {m.group(1)}" if m else out.stdout.splitlines()[0]


def parse_profile(output: str, prog: str) -> dict[str, int]:
    """PROFILE_FIELDS from the --profile lines of a run (empty without them; no
    serial time from a run of one thread)."""
    out = {}
    for m in PROFILE.finditer(output):
        if m.group(1) == prog:
            for part, value in zip(PROFILE_PARTS, m.groups()[2:5], strict=True):
                out[f"{m.group(2)}_{part}_us"] = int(value)
    for m in POOL_PROFILE.finditer(output):
        if m.group(1) == prog and int(m.group(3)) > 1:
            out[f"{m.group(2)}_serial_us"] = int(m.group(4))
    return out


def cpu_model() -> str:
    """This machine's CPU model: /proc/cpuinfo's "model name" (or "uarch", "isa" on RISC-V),
    else what the platform module says."""
    try:
        info = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        info = ""
    for key in ("model name", "uarch", "isa"):
        m = re.search(rf"^{key}\s*:\s*(.+)$", info, re.M)
        if m:
            return " ".join(m.group(1).split())
    return platform.processor() or platform.machine()


def run_cold(guest: Guest, run: Run, timeout: float, profile: bool = False) -> Sample:
    """One fresh llmrun process: load, prefill, decode, exit."""
    c = run.cell
    prog = MODELS[c.model].program
    flags = " --profile" if profile else ""
    t0 = time.monotonic()
    out = guest.run(f"{prog}{flags} --predict {c.gen_len} {id_args(run.prompt)}",
                    timeout=timeout)
    wall = time.monotonic() - t0
    f, ids = parse_output(out, prog, c.gen_len)
    if f["prompt"] != c.prompt_len:
        raise BenchError(f"{prog}: sent {c.prompt_len} prompt ids, it counted {f['prompt']}")
    return Sample(c.model, c.mode, c.prompt_len, c.gen_len, run.repeat, f["load_us"],
                  f["init_us"], f["ttft_us"], f["tpot_us"], wall, ids, parse_profile(out, prog),
                  ran=",".join(kernels_ran(out, prog)))


def ram_mib(ram: str) -> int:
    """MiB of a QEMU -m value: "512M", "3G", "2048" (QEMU's default unit is MiB)."""
    m = re.fullmatch(r"(\d+)([MmGg]?)", ram.strip())
    if not m:
        raise BenchError(f"--ram {ram}: give MiB or GiB, e.g. 512M or 2G")
    return int(m.group(1)) * (1024 if m.group(2) in ("G", "g") else 1)


def available_mib() -> int | None:
    """The host's available memory (MemAvailable of /proc/meminfo), None if unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def check_guests_fit(rams: list[str], avail: int | None = None) -> None:
    """BenchError if guests of these RAM sizes, booted together, need more memory than the
    host has available (a sweep keeps its guests up at once)."""
    need = sum(ram_mib(r) for r in rams)
    avail = available_mib() if avail is None else avail
    if len(rams) > 1 and avail is not None and need > avail:
        raise BenchError(f"{len(rams)} guests up together need {need} MiB of RAM and the host "
                         f"has {avail} MiB available: pass fewer --cpus (or --batch) values, "
                         "or a smaller --ram")


def run_timeout(run: Run, size_mb: float) -> float:
    """A generous deadline for one run: 2 s per token per 135 MB of model, plus a minute."""
    tokens = run.cell.prompt_len + run.cell.gen_len + 10
    return 60.0 + 2.0 * tokens * max(1.0, size_mb / 135.0)


def _prepare_all(cfg: BenchConfig, note: Note) -> tuple[dict[str, Prepared], dict]:
    """Images and prompts for every model; checks the lengths against each model."""
    prepared, prompts = {}, {}
    for model in cfg.models:
        spec = MODELS[model]
        note(f"{model}: building kernel, programs and image")
        p = prepare(cfg.root, spec, cfg.assets.get(model), flag=f"--assets-{model}")
        seq_len = load_config((p.assets / "CFG.BIN").read_bytes()).runtime_seq_len
        check_lengths(cfg.prompt_lens, cfg.gen_lens, seq_len, model)
        tok = load_tokenizer(model)
        prompts[model] = {n: prompt_ids(tok.encode, n) for n in cfg.prompt_lens}
        prepared[model] = p
    return prepared, prompts


def _measure_model(cfg: BenchConfig, model: str, p: Prepared, runs: list[Run], version: str,
                   state: Progress, progress: Callable[[Progress], None] | None, note: Note,
                   samples: list[Sample], machines: dict[str, Machine],
                   consoles: list[str] | None = None) -> None:
    """Boots one guest per --cpus value for model and keeps them all up while it runs
    its part of the plan: every run goes to each guest in turn (harts in --cpus order),
    so that a change in the host's load falls on every hart count alike and the
    speed-up ratios compare runs made minutes, not a whole sweep, apart. Appends each
    sample as it is measured (so a failure later keeps it) and the first guest's machine
    to machines; when a run fails, each guest's console so far goes to consoles. An idle
    guest's harts sleep in wfi and cost the others nothing. Every sample names its host
    (cfg.host, else this machine's name) and CPU model."""
    spec = MODELS[model]
    host, cpu = cfg.host or socket.gethostname(), cpu_model()
    guests: list[tuple[int, Guest, ServiceClient | None]] = []
    try:  # not `with`: a failed boot must close every QEMU started so far
        for harts in cfg.cpus:
            qc = QemuConfig(kernel=p.kernel, image=p.image, ram=cfg.ram or spec.ram, cpus=harts,
                            snapshot=True, qemu=cfg.qemu)
            note(f"{model}: booting the guest ({harts} harts, {qc.ram})")
            state.label = f"{model}: boot with {harts} harts"
            guest = Guest(qc)
            guests.append((harts, guest, None))
            guest.boot()
            machines.setdefault(model, booted_machine(guest, version))
            if "service" in cfg.modes:
                guests[-1] = (harts, guest, ServiceClient(guest, spec, note))
        for run in runs:
            for harts, guest, service in guests:
                state.label = (run.cell.label + f" #{run.repeat + 1}"
                               + (f" {harts}h" if len(guests) > 1 else ""))
                if progress:
                    progress(state)
                timeout = run_timeout(run, p.size_mb)
                if service is not None and run.cell.mode == "service":
                    sample = service.run(run, timeout)
                else:
                    sample = run_cold(guest, run, timeout, cfg.profile)
                samples.append(replace(sample, harts=harts, host=host, cpu=cpu))
                state.done += 1
                state.done_weight += run.weight
                if progress:
                    progress(state)
    except BaseException:
        if consoles is not None:
            consoles.extend(guest.transcript for _, guest, _ in guests)
        raise
    finally:
        for _, guest, _ in guests:
            guest.close()


class BenchIncomplete(BenchError):
    """The benchmark stopped part-way (an error or Ctrl-C); ``partial`` holds what was
    measured until then (its config lists only the models with a booted guest), and
    ``interrupted`` says whether it was Ctrl-C."""

    def __init__(self, message: str, partial: BenchResult, interrupted: bool) -> None:
        """The error message; partial holds what was measured, interrupted says whether Ctrl-C
        ended it."""
        super().__init__(message)
        self.partial, self.interrupted = partial, interrupted


def run_bench(cfg: BenchConfig, progress: Callable[[Progress], None] | None = None,
              note: Note | None = None) -> BenchResult:
    """Builds what is missing, boots one guest per model and runs the whole plan."""
    note = note or (lambda _: None)
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    load_start = os.getloadavg()[0]
    t_start = time.monotonic()
    version = qemu_version(cfg.qemu)
    prepared, prompts = _prepare_all(cfg, note)
    for model in cfg.models:  # each model's guests are up together
        check_guests_fit([cfg.ram or MODELS[model].ram] * len(cfg.cpus))
    runs = plan_runs(cfg.models, cfg.modes, cfg.prompt_lens, cfg.gen_lens, cfg.repeat, prompts,
                     {m: p.size_mb for m, p in prepared.items()})
    n = len(cfg.cpus)
    state = Progress(0, n * len(runs), 0.0, n * sum(r.weight for r in runs), "")
    samples: list[Sample] = []
    machines: dict[str, Machine] = {}

    def result(models: list[str]) -> BenchResult:
        """The result so far for models, with the host's name, CPU and load averages."""
        host = {"name": cfg.host or socket.gethostname(), "cpu": cpu_model(),
                "cpus": os.cpu_count(), "loadavg_start": round(load_start, 2),
                "loadavg_end": round(os.getloadavg()[0], 2)}
        return BenchResult(dataclasses.replace(cfg, models=models), samples, machines, prompts,
                           {m: str(prepared[m].assets) for m in models},
                           {m: prepared[m].title for m in models}, started,
                           time.monotonic() - t_start, host)

    for model in cfg.models:
        mine = [r for r in runs if r.cell.model == model]
        try:
            _measure_model(cfg, model, prepared[model], mine, version, state, progress, note,
                           samples, machines)
        except (AisvcError, KeyboardInterrupt) as e:
            done = result([m for m in cfg.models if m in machines])
            why = ("interrupted" if isinstance(e, KeyboardInterrupt)
                   else f"{model}: the guest failed during the benchmark ({state.label}): {e}")
            raise BenchIncomplete(f"{why} (after {state.done} of {state.total} runs)", done,
                                  isinstance(e, KeyboardInterrupt)) from e
    return result(cfg.models)
