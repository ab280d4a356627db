"""One request at a time through the AI service: the batching worker against B=1.

    .venv/bin/python tests/host/bench_single.py [--model smol|qwen] [--assets DIR]
        [--ram 512M] [--cpus 1] [--rounds 2] [--reps 3] [--prompt 32] [--gen 32]
        [--batches 1,8]

A request alone must not pay for the batching: its TTFT and TPOT should be
no worse than the one-at-a-time service's by more than 5%. For each
round and each worker batch size B, one guest boots with `aibatch=B` (init
then starts `ai_daemon --batch B`; B=1 serves one request at a time) and
runs REPS requests one after the other through the `ai` tool, each a
PROMPT-token prompt of the held-out English text and GEN tokens. Boots of the
batch sizes alternate, so a drift of the host's speed reaches both. Prints
the median and the minimum TTFT and TPOT of each batch size (the kernel's own
timestamps), their ratios to the first batch size, and whether every request
gave the same ids. Figures, not a test.
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

from pyaisvc.bench.matrix import Cell, Run  # noqa: E402
from pyaisvc.bench.service import ServiceClient  # noqa: E402
from pyaisvc.guest.llmguest import KERNEL, MODELS  # noqa: E402
from pyaisvc.guest.qemu import Guest, QemuConfig  # noqa: E402


def quiet(_: str) -> None:
    """ServiceClient's progress notes: not printed here."""


def measure(args: argparse.Namespace, image: Path, ids: list[int]) -> dict[int, list]:
    """Batch size -> the (TTFT, TPOT, ids, ran) of every request, times in ms."""
    got: dict[int, list] = {b: [] for b in args.batches}
    run = Run(Cell(args.model, "service", len(ids), args.gen), 0, tuple(ids), 1.0)
    for _ in range(args.rounds):
        for b in args.batches:
            cfg = QemuConfig(kernel=ROOT / KERNEL, image=image, ram=args.ram, cpus=args.cpus,
                             snapshot=True, append=f"aibatch={b}")
            with Guest(cfg) as g:
                client = ServiceClient(g, MODELS[args.model], quiet)
                for _ in range(args.reps):
                    s = client.run(run, timeout=7200)
                    got[b].append((s.ttft_us / 1000, s.tpot_us / 1000, s.ids, s.ran))
    return got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_args(ap)
    add_run_args(ap, gen=32)
    ap.add_argument("--cpus", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--batches", default="1,8")
    args = ap.parse_args()
    args.batches = [int(b) for b in args.batches.split(",")]
    image = model_image(args, f"single-{args.model}")
    ids = prompt_ids(args.model, args.prompt)
    print(f"{qemu_label()}, {args.model}, {args.cpus} hart(s), prompt {len(ids)}, "
          f"gen {args.gen}, {args.rounds} round(s) x {args.reps} request(s) per batch size")
    got = measure(args, image, ids)
    print(" B  ran        TTFT med   min | TPOT med   min | TTFT ratio TPOT ratio (medians)")
    base = None
    for b, runs in got.items():
        ttft = statistics.median(r[0] for r in runs)
        tpot = statistics.median(r[1] for r in runs)
        base = base or (ttft, tpot)
        ran = ",".join(sorted({r[3] for r in runs}))
        print(f"{b:2d}  {ran:9s} {ttft:9.0f} {min(r[0] for r in runs):5.0f} | "
              f"{tpot:8.1f} {min(r[1] for r in runs):5.1f} | "
              f"{ttft / base[0]:10.3f} {tpot / base[1]:10.3f}")
    same = len({r[2] for runs in got.values() for r in runs}) == 1
    print(f"same ids in every request: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
