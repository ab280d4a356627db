"""Measure what two harts can give on this host: the floor of a 2-thread ratio.

    .venv/bin/python tests/host/bench_floor.py [--model smol|qwen] [--assets DIR]
        [--reps 3] [--prompt 32] [--gen 32] [--kernels scalar|vector]

Boots one guest with 2 harts and runs, alternately, REPS times each:

- alone: one `llmrun_X --threads 1` (the other hart idles);
- pair:  two such processes at once (`A > /floor.out | B`: the shell runs
  both and waits for both), which share nothing but the machine;
- threads: one `llmrun_X --threads 2`.

Prints the minimum TTFT and TPOT of each and the ratios to `alone`. The
pair's ratio is what the host gives two busy vCPUs: 1.00 if each runs as
fast as one alone; more when the two host cores slow each other down
(shared caches and memory, clock). Half of it is the best 2-thread ratio
this host allows, whatever the runtime does; `threads / alone` against
that shows what the thread pool itself costs (docs/THREADS.md,
"Measured"). Figures, not a test.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests/host"))

from bench_llmrun import add_model_args, add_run_args, model_image, prompt_ids, qemu_label  # noqa: E402

from pyaisvc.llmguest import KERNEL, MODELS, timings  # noqa: E402
from pyaisvc.qemu import Guest, GuestError, QemuConfig  # noqa: E402

RUNS = ("alone", "pair", "threads")


def commands(args: argparse.Namespace, ids: list[int]) -> dict[str, tuple[str, int]]:
    """Run name -> (shell line, timing lines it prints)."""
    prog = MODELS[args.model].program
    one = f"{prog} --kernels {args.kernels} --predict {args.gen} " + " ".join(map(str, ids))
    single = one.replace(f"{prog} ", f"{prog} --threads 1 ", 1)
    return {"alone": (single, 1),
            "pair": (f"{single} > /floor.out | {single}", 2),
            "threads": (one.replace(f"{prog} ", f"{prog} --threads 2 ", 1), 1)}


Best = dict[str, tuple[float, float]]


def measure(args: argparse.Namespace, image: Path, ids: list[int]) -> Best:
    """Run name -> (min TTFT, min TPOT) in ms, every process of a run counted."""
    prog = MODELS[args.model].program
    cfg = QemuConfig(kernel=ROOT / KERNEL, image=image, ram=args.ram, cpus=2, snapshot=True)
    got: dict[str, list[dict[str, int]]] = {r: [] for r in RUNS}
    with Guest(cfg) as g:
        for _ in range(args.reps):
            for run, (line, lines) in commands(args, ids).items():
                found = timings(g.run(line, timeout=7200), prog)
                if len(found) != lines:
                    raise GuestError(f"{run}: expected {lines} timing line(s) from {prog}, "
                                     f"got {len(found)}: run the line by hand in `make qemu`")
                got[run].extend(found)
        g.run("rm /floor.out")
    return {r: (min(t["ttft_us"] for t in v) / 1000, min(t["tpot_us"] for t in v) / 1000)
            for r, v in got.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_args(ap)
    ap.add_argument("--kernels", choices=("scalar", "vector"), default="scalar")
    add_run_args(ap, gen=32)
    args = ap.parse_args()
    image = model_image(args, f"floor-{args.model}")
    ids = prompt_ids(args.model, args.prompt)
    print(f"{qemu_label()}, {args.model}, 2 harts, {args.kernels} kernels, "
          f"prompt {len(ids)}, gen {args.gen}, min of {args.reps}")
    best = measure(args, image, ids)
    a_ttft, a_tpot = best["alone"]
    print("run       TTFT ms   TPOT ms | TTFT ratio TPOT ratio (to alone)")
    for run, (ttft, tpot) in best.items():
        print(f"{run:8} {ttft:8.0f} {tpot:9.1f} | {ttft / a_ttft:10.3f} {tpot / a_tpot:10.3f}")
    p_ttft, p_tpot = best["pair"]
    print(f"floor of a 2-thread ratio on this host (pair / alone / 2): TTFT "
          f"{p_ttft / a_ttft / 2:.3f}, TPOT {p_tpot / a_tpot / 2:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
