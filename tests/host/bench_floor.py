"""Measure what two harts can give on this host: the floor of a 2-thread ratio.

    .venv/bin/python tests/host/bench_floor.py [--model smol|qwen] [--assets DIR]
        [--reps 3] [--prompt 32] [--gen 32] [--kernels scalar|vector]

Boots one guest with 2 harts (and, unless --ram says otherwise, twice the RAM
one run of the model needs) and runs, alternately, REPS times each:

- alone: one `llmrun_X --threads 1` (the other hart idles);
- pair:  two such processes at once (`A > /floor.out | B`: the shell runs
  both and waits for both), which share nothing but the machine;
- threads: one `llmrun_X --threads 2`.

Prints the minimum TTFT and TPOT of each (for the pair, of its faster and of
its slower process) and the ratios to `alone`. The pair's processes show what
the host gives two busy vCPUs: 1.00 each if both run as fast as one alone;
more when the host cores slow each other down (shared caches and memory,
clock) or one of them is slower (another tenant on its physical core). Two
threads that shared the work perfectly would take 1 / (1/a + 1/b) where the
pair's processes took a and b: that over `alone` is the best 2-thread ratio
this host allows, whatever the runtime does; `threads / alone` against it
shows what the thread pool itself costs (docs/THREADS.md, "Measured").
Figures, not a test.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests/host"))

from bench_llmrun import add_model_args, add_run_args, model_image, prompt_ids, qemu_label  # noqa: E402

from pyaisvc.bench.runner import ram_mib  # noqa: E402
from pyaisvc.guest.llmguest import KERNEL, MODELS, timings  # noqa: E402
from pyaisvc.guest.qemu import Guest, GuestError, QemuConfig  # noqa: E402

RUNS = ("alone", "pair", "threads")


def commands(args: argparse.Namespace, ids: list[int]) -> dict[str, tuple[str, int]]:
    """Run name -> (shell line, timing lines it prints)."""
    prog = MODELS[args.model].program
    one = f"{prog} --kernels {args.kernels} --predict {args.gen} " + " ".join(map(str, ids))
    single = one.replace(f"{prog} ", f"{prog} --threads 1 ", 1)
    return {"alone": (single, 1),
            "pair": (f"{single} > /floor.out | {single}", 2),
            "threads": (one.replace(f"{prog} ", f"{prog} --threads 2 ", 1), 1)}


Timing = tuple[float, float]  # TTFT, TPOT in ms


def measure(args: argparse.Namespace, image: Path, ids: list[int]) -> dict[str, list[list[Timing]]]:
    """Run name -> for each repetition, the (TTFT, TPOT) of each of its processes."""
    prog = MODELS[args.model].program
    cfg = QemuConfig(kernel=ROOT / KERNEL, image=image, ram=args.ram, cpus=2, snapshot=True)
    got: dict[str, list[list[Timing]]] = {r: [] for r in RUNS}
    with Guest(cfg) as g:
        for _ in range(args.reps):
            for run, (line, lines) in commands(args, ids).items():
                found = timings(g.run(line, timeout=7200), prog)
                if len(found) != lines:
                    raise GuestError(f"{run}: expected {lines} timing line(s) from {prog}, "
                                     f"got {len(found)}: run the line by hand in `make qemu`")
                got[run].append([(t["ttft_us"] / 1000, t["tpot_us"] / 1000) for t in found])
        g.run("rm /floor.out")
    return got


def best(reps: list[Timing]) -> Timing:
    """The minimum TTFT and the minimum TPOT over reps."""
    return min(t[0] for t in reps), min(t[1] for t in reps)


def together(a: float, b: float) -> float:
    """The time of work that one process did in a and another in b, shared by both."""
    return 1 / (1 / a + 1 / b)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_args(ap)
    ap.add_argument("--kernels", choices=("scalar", "vector"), default="scalar")
    add_run_args(ap, gen=32)
    args = ap.parse_args()
    # The pair holds two copies of the model: twice the RAM one run needs.
    args.ram = args.ram or f"{2 * ram_mib(MODELS[args.model].ram)}M"
    image = model_image(args, f"floor-{args.model}")
    ids = prompt_ids(args.model, args.prompt)
    print(f"{qemu_label()}, {args.model}, 2 harts, {args.kernels} kernels, "
          f"prompt {len(ids)}, gen {args.gen}, min of {args.reps}")
    got = measure(args, image, ids)
    rows = {"alone": best([r[0] for r in got["alone"]]),
            "pair, faster": best([(min(a[0], b[0]), min(a[1], b[1])) for a, b in got["pair"]]),
            "pair, slower": best([(max(a[0], b[0]), max(a[1], b[1])) for a, b in got["pair"]]),
            "threads": best([r[0] for r in got["threads"]])}
    a_ttft, a_tpot = rows["alone"]
    print("run            TTFT ms   TPOT ms | TTFT ratio TPOT ratio (to alone)")
    for run, (ttft, tpot) in rows.items():
        print(f"{run:13} {ttft:8.0f} {tpot:9.1f} | {ttft / a_ttft:10.3f} {tpot / a_tpot:10.3f}")
    f_ttft = min(together(a[0], b[0]) for a, b in got["pair"])
    f_tpot = min(together(a[1], b[1]) for a, b in got["pair"])
    print(f"floor of a 2-thread ratio on this host (the pair's work shared / alone): TTFT "
          f"{f_ttft / a_ttft:.3f}, TPOT {f_tpot / a_tpot:.3f}")
    return 0

if __name__ == "__main__":
    sys.exit(main())
