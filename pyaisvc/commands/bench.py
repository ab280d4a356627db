"""`pyaisvc bench`: model loading time, TTFT and TPOT over a matrix of lengths.

    pyaisvc bench --model smol                       # 3 x 3 cells, 3 repeats, cold
    pyaisvc bench --model both --mode both --out results/
    pyaisvc bench --model qwen --assets-qwen build/assets/qwen08/QWEN --repeat 1
    pyaisvc bench --config docs/bench-example.toml  # a whole plan in one file
    pyaisvc bench --cpus 1,2 --prompt-lens 32 --gen-lens 32   # harts as a series
    pyaisvc bench --mode service --burst --prompt-lens 5 --gen-lens 32 --batch 1,8
    pyaisvc bench --cluster tcp://lab01:8786 --cpus 1,2    # the cells as Dask tasks
    pyaisvc bench --cluster tcp://lab01:8786 --cpus 1,2 --resume OUT/journal.jsonl
    pyaisvc bench --mode load --policies fifo,fair --load 0.8   # commands/bench_load.py
    pyaisvc bench --mode coldstart --repeat 5   # boot, clone, clone from the pool by phase

Builds what is missing (kernel, guest programs, image), boots the guest once
per model, runs every (prompt length, generated length) cell --repeat times
with a fixed English prompt cut to length, and writes results.csv,
results.json, results.md and three PNG plots into --out. --out is checked
(created and written to) before anything is measured; a run that fails or
is interrupted part-way writes the runs measured so far (csv, json, md). docs/MEASURE.md
says where each number comes from and how to read the plots. With --cluster
each cell is a task on a Dask cluster (pyaisvc.bench.cluster), journaled in
--out as it arrives so that --resume can finish an interrupted sweep.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path

from tqdm import tqdm

from pyaisvc.bench import burst, coldstart, plots, report
from pyaisvc.bench.load.plan import is_load_plan
from pyaisvc.bench.matrix import BenchError, parse_lengths
from pyaisvc.bench.plan import load_plan
from pyaisvc.bench.runner import BenchConfig, BenchIncomplete, BenchResult, Progress, run_bench
from pyaisvc.commands import bench_load
from pyaisvc.errors import AisvcError, CommandError
from pyaisvc.guest.llmguest import MODELS, max_batch, prepare
from pyaisvc.guest.qemu import QemuConfig, default_cpus
from pyaisvc.guest.template import store as template_store

# Each matrix flag's default; a flag left out takes the --config file's value, then this.
DEFAULTS: dict[str, object] = {
    "model": "smol", "mode": "cold", "prompt_lens": "8,16,32", "gen_lens": "8,16,32",
    "repeat": 3, "cpus": str(default_cpus()), "ram": None, "out": None, "assets_smol": None,
    "assets_qwen": None, "profile": False,
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The bench's flags: the matrix (models, modes, lengths, repeats, harts), --config,
    --out, --burst, --cluster and --resume."""
    parser.add_argument("--config", type=Path, metavar="FILE.toml",
                        help="a measurement plan: any of the flags below as TOML keys "
                             "(docs/bench-example.toml); flags given here win")
    parser.add_argument("--model", choices=(*MODELS, "both"),
                        help="which model(s) to measure (default smol)")
    parser.add_argument("--mode", choices=("cold", "service", "both", "load", "coldstart"),
                        help="cold: a fresh llmrun process per run (loads every time); "
                             "service: the resident AI worker; both: side by side "
                             "(default cold); load: scheduling policies under a seeded "
                             "mixed workload over HTTP (the options below); coldstart: a "
                             "guest's start by phase, booted and cloned from its template "
                             "(docs/COLDSTART.md)")
    parser.add_argument("--prompt-lens", metavar="N,N,...",
                        help="prompt lengths in tokens (default 8,16,32)")
    parser.add_argument("--gen-lens", metavar="N,N,...",
                        help="generated lengths in tokens (default 8,16,32)")
    parser.add_argument("--repeat", type=int, help="runs per cell (default 3)")
    parser.add_argument("--cpus", metavar="N,N,...",
                        help="guest harts; several (e.g. 1,2) boot one guest per value and "
                             "report each cell per harts with the speed-up (default: the host's "
                             f"cores, at most 4; {default_cpus()} here)")
    parser.add_argument("--ram", help="guest RAM, e.g. 512M or 2G (default: " + ", ".join(
        f"{m.ram} for {m.name}" for m in MODELS.values()) + ")")
    parser.add_argument("--out", type=Path,
                        help="output directory (default build/bench/results-UTCTIME)")
    parser.add_argument("--assets-smol", type=Path, metavar="DIR",
                        help="SmolLM2 asset directory (default models/SMOL)")
    parser.add_argument("--assets-qwen", type=Path, metavar="DIR",
                        help="Qwen3.5 asset directory (default models/QWEN), e.g. "
                             "build/assets/qwen08/QWEN")
    parser.add_argument("--profile", action="store_true", default=None,
                        help="cold runs also split prefill and decode into matmul, attention "
                             "and other time (adds a little overhead)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--cluster", metavar="ADDRESS",
                        help="run each cell as a task on the Dask scheduler at ADDRESS (e.g. "
                             "tcp://lab01:8786; workers started with --resources guest=1 in a "
                             "checkout at this commit); cells are journaled in --out")
    parser.add_argument("--resume", type=Path, metavar="JOURNAL",
                        help="with --cluster: continue the sweep of this journal.jsonl, "
                             "running only the cells it does not hold (--out defaults to "
                             "its directory)")
    parser.add_argument("--burst", action="store_true",
                        help="with --mode service: instead of the matrix, submit 8 requests at "
                             "once (aistress --bench; the first --prompt-lens and --gen-lens "
                             "values) on one guest per --batch and --cpus value, --repeat "
                             "rounds over them all; writes burst.md, burst.json and "
                             "burst_ttft.png (TTFT by arrival order, each configuration's "
                             "median round)")
    parser.add_argument("--batch", default="1,8", metavar="B,B,...",
                        help="--burst: the worker's batch sizes to compare (1 = "
                             "one-at-a-time service; default 1,8)")
    bench_load.add_arguments(parser)


def apply_plan(args: argparse.Namespace) -> None:
    """Fills each matrix flag left out from the --config file, then from DEFAULTS."""
    try:
        plan = load_plan(args.config) if args.config is not None else {}
    except BenchError as e:
        raise CommandError(f"bench: {e}") from e
    for key, default in DEFAULTS.items():
        if getattr(args, key) is None:
            setattr(args, key, plan.get(key, default))
    if args.cluster is None:  # not a matrix flag: no cluster unless one is named
        args.cluster = plan.get("cluster")


def _config(args: argparse.Namespace):
    """The BenchConfig of the matrix flags; CommandError for a bad length list or --repeat.
    The BenchConfig of the matrix flags; CommandError for a bad length list or --repeat."""
    if args.repeat < 1:
        raise CommandError("bench: --repeat must be at least 1")
    try:
        cpus = parse_lengths(args.cpus, "--cpus")
        prompt_lens = parse_lengths(args.prompt_lens, "--prompt-lens")
        gen_lens = parse_lengths(args.gen_lens, "--gen-lens")
    except BenchError as e:
        raise CommandError(f"bench: {e}") from e
    models = list(MODELS) if args.model == "both" else [args.model]
    modes = ["cold", "service"] if args.mode == "both" else [args.mode]
    return BenchConfig(models, modes, prompt_lens, gen_lens, args.repeat, cpus, args.ram,
                       {"smol": args.assets_smol, "qwen": args.assets_qwen}, Path("."),
                       profile=args.profile)


def check_out(out: Path) -> None:
    """Creates out and proves a file can be written there, before anything is measured."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".bench-write-check-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise CommandError(f"bench: --out {out}: cannot write there ({e.strerror or e}); "
                           "pass --out with a directory you can write") from e


def _run_burst(args: argparse.Namespace, out: Path) -> int:
    """bench --burst: bursts of concurrent requests at each --batch (pyaisvc.bench.burst),
    written as burst.md, burst.json and burst_ttft.png into out; CommandError for flags
    the burst cannot take or a failed run."""
    if args.mode != "service" or args.model == "both":
        raise CommandError("bench: --burst needs --mode service and one --model")
    try:
        batches = parse_lengths(args.batch, "--batch")
        prompt_len = parse_lengths(args.prompt_lens, "--prompt-lens")[0]
        gen = parse_lengths(args.gen_lens, "--gen-lens")[0]
        cpus = parse_lengths(args.cpus, "--cpus")
    except BenchError as e:
        raise CommandError(f"bench: {e}") from e
    if any(b > max_batch() for b in batches):
        raise CommandError(f"bench: --batch values must be 1..{max_batch()} (ai_daemon's "
                           "AI_BATCH)")
    if args.repeat < 1:
        raise CommandError("bench: --repeat must be at least 1")
    check_out(out)
    try:
        bursts = burst.run_bursts(Path("."), args.model, prompt_len, gen, batches, cpus,
                                  args.repeat, args.ram, getattr(args, f"assets_{args.model}"),
                                  lambda t: print(f"bench: {t}", file=sys.stderr))
    except AisvcError as e:
        raise CommandError(f"bench: {e}") from e
    command = "pyaisvc bench " + shlex.join(sys.argv[2:] if sys.argv[1:2] == ["bench"] else [])
    text = burst.markdown(bursts, command.strip())
    (out / "burst.md").write_text(text)
    (out / "burst.json").write_text(json.dumps(burst.to_json(bursts, command.strip()), indent=1))
    burst.plot_ttft(bursts, out / "burst_ttft.png")
    sys.stdout.write(text)
    print(f"bench: wrote burst.md, burst.json, burst_ttft.png to {out}/", file=sys.stderr)
    return 0


def _run_coldstart(args: argparse.Namespace, out: Path) -> int:
    """bench --mode coldstart: each way of starting the SmolLM2 guest --repeat times
    (pyaisvc.bench.coldstart), written as coldstart.md, coldstart.json and
    coldstart.png into out; the table on stdout."""
    if args.repeat < 1:
        raise CommandError("bench: --repeat must be at least 1")
    check_out(out)
    spec = MODELS["smol"]
    try:
        cpus = parse_lengths(args.cpus, "--cpus")[0] if args.cpus else default_cpus()
        p = prepare(Path("."), spec, args.assets_smol)
        cfg = QemuConfig(kernel=p.kernel, image=p.image, ram=args.ram or spec.ram, cpus=cpus)
        starts, mem = coldstart.run(cfg, args.repeat, template_store.ROOT,
                                    lambda t: print(f"bench: {t}", file=sys.stderr))
    except (AisvcError, BenchError) as e:
        raise CommandError(f"bench: {e}") from e
    text = coldstart.markdown(starts, mem, f"{cpus} hart(s), {cfg.ram}, shared host")
    (out / "coldstart.md").write_text(text)
    (out / "coldstart.json").write_text(json.dumps(
        {"starts": [{"way": s.way, "phases_ms": s.phases} for s in starts], "memory_kib": mem},
        indent=1))
    coldstart.plot(starts, out / "coldstart.png")
    sys.stdout.write(text)
    print(f"bench: wrote coldstart.md, coldstart.json, coldstart.png to {out}/", file=sys.stderr)
    return 0


def _out_dir(args: argparse.Namespace) -> Path:
    """Where the results go: --out, the resumed journal's directory, or a fresh
    build/bench/results-TIME; CommandError for --resume without a cluster."""
    if args.resume is not None and args.cluster is None:
        raise CommandError("bench: --resume continues a sweep on a cluster: pass --cluster "
                           "ADDRESS too (or the plan's cluster key)")
    return args.out or (args.resume.parent if args.resume is not None else Path("build/bench")
                        / time.strftime("results-%Y%m%d-%H%M%S", time.gmtime()))


def run(args: argparse.Namespace) -> int:
    """pyaisvc bench: the matrix (here, or on --cluster), written into --out with its plots,
    the markdown table on stdout; 0, or CommandError (after writing what was measured)
    when it fails part-way; --mode load (or a load plan) goes to bench_load."""
    if args.mode == "load" or (args.mode is None and args.config is not None
                               and is_load_plan(args.config)):
        return bench_load.run_load_mode(args, check_out)
    apply_plan(args)
    out = _out_dir(args)
    if args.mode == "coldstart":
        return _run_coldstart(args, out)
    if args.burst:
        if args.cluster is not None:
            raise CommandError("bench: --burst runs on this machine only; leave out --cluster")
        return _run_burst(args, out)
    return _run_matrix(args, out)


def _run_matrix(args: argparse.Namespace, out: Path) -> int:
    """The matrix of cells (here, or on --cluster) with a progress bar, written into out;
    0, or CommandError (after writing what was measured) when it fails part-way."""
    cfg = _config(args)
    check_out(out)
    bar = None

    def note(text: str) -> None:
        """Prints text on stderr (above the progress bar when there is one)."""
        (bar.write if bar is not None else lambda t: print(t, file=sys.stderr))(f"bench: {text}")

    def progress(p: Progress) -> None:
        """Draws the sweep's bar (made at the first call; none with --no-progress)."""
        nonlocal bar
        if args.no_progress:
            return
        if bar is None:
            # disable=None: no bar when stderr is not a terminal (a pipe or a log file).
            bar = tqdm(total=round(p.total_weight), file=sys.stderr, disable=None,
                       bar_format="{l_bar}{bar}| [{elapsed}<{remaining}]")
        bar.set_description(f"{p.label} ({p.done}/{p.total} runs)", refresh=False)
        bar.update(round(p.done_weight) - bar.n)

    command = "pyaisvc bench " + shlex.join(sys.argv[2:] if sys.argv[1:2] == ["bench"] else [])
    failures: list = []
    journal = args.resume or out / "journal.jsonl"
    try:
        if args.cluster is not None:
            from pyaisvc.bench.cluster import run_cluster

            result, failures = run_cluster(cfg, args.cluster, journal, args.resume is not None,
                                           progress, note)
        else:
            result = run_bench(cfg, progress, note)
    except BenchIncomplete as e:
        if bar is not None:
            bar.close()
        raise _incomplete(e, out, command) from e
    except AisvcError as e:
        raise CommandError(f"bench: {e}") from e
    finally:
        if bar is not None:
            bar.close()
    if failures:
        if result.samples:
            report.write_all(out, result, command.strip() + "  # incomplete")
        _report_failures(failures, out, len(result.samples), journal)
    _write_results(out, result, command.strip())
    return 0


def _write_results(out: Path, result: BenchResult, command: str) -> None:
    """The sweep's files and plots into out, its markdown table on stdout."""
    paths = report.write_all(out, result, command)
    paths.update(plots.write_plots(out, result))
    sys.stdout.write(report.markdown(result, command))
    print(f"bench: wrote {', '.join(p.name for p in paths.values())} to {out}/", file=sys.stderr)


def _incomplete(e: BenchIncomplete, out: Path, command: str) -> CommandError:
    """Writes the runs measured before the sweep stopped (if any) into out; the
    CommandError that says what was written."""
    if not e.partial.samples:
        return CommandError(f"bench: {e}; nothing was measured, so nothing was written")
    paths = report.write_all(out, e.partial, command.strip() + "  # incomplete")
    return CommandError(f"bench: {e}; wrote the {len(e.partial.samples)} runs measured so far "
                        f"to {out}/ ({', '.join(p.name for p in paths.values())})")


def _report_failures(failures: list, out: Path, n_runs: int, journal: Path) -> None:
    """Prints each cell that failed twice with its console's tail and raises the
    CommandError that says how to measure them again."""
    for f in failures:
        print(f"bench: {f.cell.label} failed twice: {f.error}", file=sys.stderr)
        if f.tail:
            print("  " + f.tail.replace("\n", "\n  "), file=sys.stderr)
    raise CommandError(f"bench: {len(failures)} cell(s) failed twice (above); "
                       + (f"the {n_runs} runs of the others are in {out}/ and " if n_runs
                          else "")
                       + f"{journal} keeps every finished cell: fix the cause, then run the "
                       f"same command with --resume {journal} to measure only those")
