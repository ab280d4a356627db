"""What log-probabilities cost per token: llmrun with --logprobs 5 against none, one boot.

    .venv/bin/python tests/host/bench_logprobs.py [--model smol|qwen] [--assets DIR]
        [--ram 512M] [--cpus 1] [--reps 3] [--prompt 32] [--gen 32]

Each id's record needs the whole vocabulary's exp once (the normaliser, our exp:
docs/ARITHMETIC.md, "Log-probabilities") and one pass for the top 5. One guest
boots; the same request (PROMPT ids of the held-out English text, GEN ids, greedy)
runs REPS times without and with --logprobs 5, alternating, so a drift of the
host's speed reaches both. Prints the median and minimum TPOT of each, their
difference per token and ratio, and whether both gave the same ids. Figures, not
a test.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests/host"))

from bench_llmrun import add_model_args, add_run_args, model_image, prompt_ids, qemu_label  # noqa: E402

from pyaisvc.guest.llmguest import KERNEL, MODELS, timings  # noqa: E402
from pyaisvc.guest.qemu import Guest, QemuConfig  # noqa: E402

MODES = {"none": "", "logprobs 5": "--logprobs 5"}


def measure(args: argparse.Namespace, image: Path, ids: list[int]) -> dict[str, list]:
    """Mode -> (TPOT ms, ids line) of each run."""
    got: dict[str, list] = {m: [] for m in MODES}
    prog = MODELS[args.model].program
    cfg = QemuConfig(kernel=ROOT / KERNEL, image=image, ram=args.ram, cpus=args.cpus,
                     snapshot=True)
    with Guest(cfg) as g:
        for rep in range(args.reps):
            for mode, flag in MODES.items():
                out = g.run(f"{prog} --predict {args.gen} {flag} "
                            f"{' '.join(map(str, ids))} > /ids.txt", timeout=7200)
                t = timings(out)
                if len(t) != 1:
                    raise SystemExit(f"bench: no timing line:\n{out}")
                got[mode].append((t[0]["tpot_us"] / 1000, g.run("cat /ids.txt").strip()))
                print(f"  rep {rep + 1}/{args.reps} {mode}: TPOT {got[mode][-1][0]:.1f} ms",
                      flush=True)
    return got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_args(ap)
    add_run_args(ap, gen=32)
    ap.add_argument("--cpus", type=int, default=1)
    args = ap.parse_args()
    image = model_image(args, f"logprobs-{args.model}")
    ids = prompt_ids(args.model, args.prompt)
    print(f"{qemu_label()}, {args.model}, {args.cpus} hart(s), prompt {len(ids)}, "
          f"gen {args.gen}, {args.reps} run(s) per mode, greedy")
    got = measure(args, image, ids)
    med = {m: statistics.median(r[0] for r in runs) for m, runs in got.items()}
    for m, runs in got.items():
        print(f"{m:11s} TPOT median {med[m]:7.1f} ms  min {min(r[0] for r in runs):7.1f} ms")
    base, lp = med["none"], med["logprobs 5"]
    print(f"logprobs 5 costs {lp - base:+.1f} ms per token ({lp / base:.3f}x the TPOT)")
    same = len({r[1] for runs in got.values() for r in runs}) == 1
    print(f"same ids in every run: {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
