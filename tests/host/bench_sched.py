"""Compare the AI service's scheduling policies on the cases of docs/SCHEDULING.md.

    .venv/bin/python tests/host/bench_sched.py [--model smol|qwen] [--assets DIR]
        [--ram R] [--cpus 2] [--chunk N] [--prefill N]
        [--policies fifo,priority,shortest,fair]

Boots one guest per policy (boot arguments aisched=NAME aichunk=N) with the model
and runs `aibench all` (user/tests/aibench.c) in it: in-guest clients of the kernel
AI service, times from the kernel's table and time_us(). Prints, per policy:

- short behind long: a 5-id request sent once a 200-id prompt runs, its TTFT over
  its TTFT alone;
- second tenant: the same request from another process while one process has 8
  requests of 48 ids running, its TTFT over alone;
- decode gaps: a decoding request's largest gap between two ids over its median
  while a 200-id prompt arrives, over its median gap before (alone), and the
  prompt's TTFT;
- mixed: 4 processes x 6 requests of random sizes and priorities, positions per
  second, and that over fifo's.

One run of each; figures, not a test (timing under load varies 2-4x).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests/host"))

from bench_llmrun import add_model_args, model_image, qemu_label  # noqa: E402

from pyaisvc.guest.llmguest import KERNEL  # noqa: E402
from pyaisvc.guest.qemu import Guest, QemuConfig  # noqa: E402

LINE = re.compile(r"^aibench (\w+) (.*)$", re.M)


def run_policy(args: argparse.Namespace, image: Path, policy: str) -> dict[str, dict[str, int]]:
    """Case -> its figures (name -> integer), under one policy."""
    boot = f"aisched={policy} aichunk={args.chunk}" + (
        f" aiprefill={args.prefill}" if args.prefill else "")
    cfg = QemuConfig(kernel=ROOT / KERNEL, image=image, ram=args.ram, cpus=args.cpus,
                     snapshot=True, append=boot)
    with Guest(cfg) as g:
        out = g.run("aibench all", timeout=3600)
    got = {m.group(1): {k: int(v) for k, v in (kv.split("=") for kv in m.group(2).split())}
           for m in LINE.finditer(out)}
    if set(got) != {"alone", "behind", "tenant", "gaps", "mixed"}:
        raise SystemExit(f"bench_sched: aibench under {policy} printed:\n{out}")
    return got


def report(results: dict[str, dict[str, dict[str, int]]]) -> None:
    print(f"{'policy':10} {'alone ms':>9} {'behind ms':>10} {'x alone':>8} {'tenant ms':>10} "
          f"{'x alone':>8} {'gap max/med':>12} {'max/alone':>10} {'long ms':>8} "
          f"{'mixed pos/s':>12} {'x fifo':>7}")
    base = None
    for policy, r in results.items():
        alone = r["alone"]["ttft_us"] / 1000
        behind = r["behind"]["ttft_us"] / 1000
        tenant = r["tenant"]["ttft_us"] / 1000
        g = r["gaps"]
        gaps = g["max_us"] / max(g["median_us"], 1)
        rate = r["mixed"]["positions"] / (r["mixed"]["ms"] / 1000)
        base = base or rate
        print(f"{policy:10} {alone:9.0f} {behind:10.0f} {behind / alone:8.1f} {tenant:10.0f} "
              f"{tenant / alone:8.1f} {gaps:12.2f} {g['max_us'] / max(g['alone_us'], 1):10.2f} "
              f"{g['long_ttft_us'] / 1000:8.0f} {rate:12.1f} {rate / base:7.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_args(ap)
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--chunk", type=int, default=8)
    ap.add_argument("--prefill", type=int, default=0,
                    help="aiprefill=N: prompt positions of a step beside a decoder")
    ap.add_argument("--policies", default="fifo,priority,shortest,fair")
    args = ap.parse_args()
    image = model_image(args, f"sched-{args.model}")
    print(f"bench_sched: {args.model}, {args.cpus} harts, {args.ram} RAM, chunk {args.chunk}, "
          f"prefill {args.prefill or args.chunk}, {qemu_label()}")
    results = {}
    for policy in args.policies.split(","):
        print(f"  {policy} ...", flush=True)
        results[policy] = run_policy(args, image, policy)
    report(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
