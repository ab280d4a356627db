"""`pyaisvc bench --mode load`: policies compared under one seeded mixed workload over HTTP.

    pyaisvc bench --mode load                                 # fifo, load 0.8, 40 requests
    pyaisvc bench --mode load --policies fifo,priority,shortest,fair --load 0.8 --duration 120
    pyaisvc bench --mode load --rate 0.5 --requests 20 --slo-ttft 2s --slo-tbt 200ms
    pyaisvc bench --mode load --users 8 --requests 40          # closed loop
    pyaisvc bench --mode load --config docs/load-example.toml
    pyaisvc bench --mode load --url http://127.0.0.1:8080 --policies fifo   # a running server

For each policy a fresh `pyaisvc serve --sched POLICY` boots the guest and
the same seeded workload (pyaisvc.bench.load.workload) is replayed against it
with streaming HTTP clients; the tables are printed and written to --out
with one row per request, three plots and the run's journal (--resume
OUT/journal.jsonl measures only the policies it lacks). docs/MEASURE.md
("Load") explains every number and plot.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tqdm import tqdm

from pyaisvc.bench.load import report as loadreport
from pyaisvc.bench.load.plan import load_plan_file, seconds
from pyaisvc.bench.load.run import Setup, run_load
from pyaisvc.bench.load.workload import DEFAULT_LOAD, DEFAULT_REQUESTS, LoadPlan, check_plan
from pyaisvc.bench.matrix import TEXT, BenchError
from pyaisvc.errors import AisvcError, CommandError
from pyaisvc.guest.llmguest import MODELS, max_prompt
from pyaisvc.model.assets import AssetError, load_config
from pyaisvc.model.tokenizer import load_tokenizer

# flag -> TOML key of the plan; the flags are added by add_arguments
KEYS = ("policies", "prefill_chunk", "prefill_budget", "seed", "rate", "load", "users",
        "duration", "requests", "slo_ttft", "slo_tbt", "url")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The load mode's flags of `pyaisvc bench`: the policies, the scheduling budgets, the
    arrivals (rate, load or users), how many or how long, the seed, the SLOs and a running
    server's --url."""
    g = parser.add_argument_group("--mode load (docs/MEASURE.md, \"Load\")")
    g.add_argument("--policies", metavar="P,P,...",
                   help="the kernel's scheduling policies to compare, each on a fresh server "
                        "under the same workload: fifo, priority, shortest, fair (default fifo)")
    g.add_argument("--prefill-chunk", type=int, metavar="N",
                   help="positions per scheduling step (serve --chunk N)")
    g.add_argument("--prefill-budget", type=int, metavar="N",
                   help="prompt positions of a step in which a request decodes "
                        "(serve --prefill N)")
    g.add_argument("--rate", type=float, metavar="R", help="open loop: Poisson arrivals at R "
                   "requests/s")
    g.add_argument("--load", type=float, metavar="F", help="open loop at F times the capacity, "
                   f"measured first (default {DEFAULT_LOAD})")
    g.add_argument("--users", type=int, metavar="N", help="closed loop: N users, each sending "
                   "its next request when its reply ends")
    g.add_argument("--seed", type=int, help="the workload's seed (default 1)")
    g.add_argument("--duration", type=float, metavar="S", help="seconds of arrivals")
    g.add_argument("--requests", type=int, metavar="N",
                   help=f"requests in all (default {DEFAULT_REQUESTS})")
    g.add_argument("--slo-ttft", metavar="T", help="TTFT target for goodput (default 2s)")
    g.add_argument("--slo-tbt", metavar="T",
                   help="mean time between tokens target for goodput (default 200ms)")
    g.add_argument("--url", help="measure the running server at this address (one policy: "
                   "the one it runs) instead of booting one per policy")


def _merged(args: argparse.Namespace) -> tuple[LoadPlan, dict[str, object]]:
    """The plan from the flags over the --config file over the defaults, and the file's
    other keys (cpus, ram, out, cluster)."""
    try:
        file = load_plan_file(args.config) if args.config is not None else {}
        flags = {k: getattr(args, k) for k in KEYS if getattr(args, k) is not None}
        if "policies" in flags:
            flags["policies"] = tuple(p.strip() for p in str(flags["policies"]).split(","))
        for k in ("slo_ttft", "slo_tbt"):
            if k in flags:
                flags[k] = seconds(flags[k], f"--{k.replace('_', '-')}")
    except BenchError as e:
        raise CommandError(f"bench: {e}") from e
    given = {**{k: v for k, v in file.items() if k in KEYS or k in ("classes", "tenants")},
             **flags}
    given.pop("url", None)
    if not any(k in given for k in ("rate", "load", "users")):
        given["load"] = DEFAULT_LOAD
    if not any(k in given for k in ("duration", "requests")):
        given["requests"] = DEFAULT_REQUESTS
    return LoadPlan(**given), file


def _setting(args: argparse.Namespace, file: dict[str, object], key: str) -> object:
    """A flag shared with the other modes: the command line's, else the file's."""
    v = getattr(args, key)
    return v if v is not None else file.get(key)


def _setup(args: argparse.Namespace, plan: LoadPlan, file: dict[str, object],
           out: Path) -> Setup:
    """The run's Setup: SmolLM2's prompt text and runtime_seq_len, one hart count, the RAM and
    --url (the command line's, else the plan file's); CommandError when the plan does not fit
    the model or a setting is bad."""
    spec = MODELS["smol"]
    try:
        seq_len = load_config((spec.assets / "CFG.BIN").read_bytes()).runtime_seq_len
        text = load_tokenizer("smol").encode(TEXT)
    except (OSError, AssetError) as e:
        raise CommandError(f"bench: {spec.assets}/CFG.BIN: {e}; run `make smol-assets`") from e
    try:
        check_plan(plan, seq_len, max_prompt(), len(text))
    except BenchError as e:
        raise CommandError(f"bench: {e}") from e
    cpus = _setting(args, file, "cpus")
    if isinstance(cpus, str):
        if not cpus.isdigit() or int(cpus) < 1:
            raise CommandError(f"bench: --mode load boots one guest per policy: --cpus takes "
                               f"one number of harts, not {cpus!r}")
        cpus = int(cpus)
    url = args.url if args.url is not None else file.get("url")
    if url is not None and len(plan.policies) != 1:
        raise CommandError("bench: --url measures the one server it names: give the one policy "
                           "it runs, e.g. --policies fifo")
    return Setup(Path("."), out, text, seq_len, cpus, _setting(args, file, "ram"), url)


def run_load_mode(args: argparse.Namespace, check_out: Callable[[Path], None]) -> int:
    """Runs the load mode; check_out(out) proves --out writable (as the other modes do)."""
    if args.model not in (None, "smol") or args.burst:
        raise CommandError("bench: --mode load serves SmolLM2 through `pyaisvc serve`: leave "
                           "out --model and --burst")
    plan, file = _merged(args)
    out = args.out or (args.resume.parent if args.resume is not None else None) or \
        (Path(str(file["out"])) if "out" in file else
         Path("build/bench") / time.strftime("load-%Y%m%d-%H%M%S", time.gmtime()))
    setup = _setup(args, plan, file, out)
    cluster = args.cluster if args.cluster is not None else file.get("cluster")
    check_out(out)
    command = "pyaisvc bench " + shlex.join(sys.argv[2:] if sys.argv[1:2] == ["bench"] else [])
    journal = args.resume or out / "journal.jsonl"
    total = plan.requests * len(plan.policies) if plan.requests is not None else None
    bar = tqdm(total=total, file=sys.stderr, disable=True if args.no_progress else None,
               unit="req", desc="load")

    def note(text: str) -> None:
        """Prints text on stderr above the progress bar."""
        bar.write(f"bench: {text}", file=sys.stderr)

    def done(o) -> None:
        """Counts the finished request o on the progress bar."""
        bar.set_description(f"load {o.policy}", refresh=False)
        bar.update(1)

    try:
        if cluster is not None:
            from pyaisvc.bench.load.cluster import run_load_cluster

            result = run_load_cluster(setup, plan, str(cluster), journal,
                                      args.resume is not None, done, note)
        else:
            result = run_load(setup, plan, journal, args.resume is not None, done, note)
    except KeyboardInterrupt as e:
        raise CommandError(f"bench: interrupted; {journal} keeps every finished policy: run the "
                           f"same command with --resume {journal} to measure only the rest") from e
    except AisvcError as e:
        raise CommandError(f"bench: {e}") from e
    finally:
        bar.close()
    paths = loadreport.write_all(out, result, command.strip())
    paths.update(loadreport.write_plots(out, result))
    sys.stdout.write(loadreport.markdown(result, command.strip()))
    print(f"bench: wrote {', '.join(paths)} to {out}/", file=sys.stderr)
    return 0
