"""Benchmark the RVV matmul kernels against the scalar ones, in one run.

    AISVC_QEMU=/path/to/qemu-10 .venv/bin/python tests/host/bench_vector.py \
        [--model smol|qwen] [--assets DIR] [--vlens 256,512] [--reps 3]
        [--prompt 32] [--gen 16] [--cpus 1] [--threads N]

For each vlen: boots the guest with `-cpu rv64,v=true,vlen=N` and runs
`llmrun_X --kernels scalar` and `--kernels vector` alternately, REPS times
each, every run a fresh process with one request (a PROMPT-token prompt of
the held-out English text, GEN tokens; `--threads N` when given, else the
runtime's default). Prints the minimum load time, TTFT and TPOT of each, the
thread counts and kernels the timing lines reported (a run that fell back to
one thread or to scalar kernels shows), the vector / scalar ratios, and
whether the ids were the same. Needs QEMU 10 or later for meaningful figures (docs/PERF_NOTES.md,
facts 8 (no RVV on QEMU 7.2), 9 (RVV written for TCG is 2-3x scalar on QEMU 10) and
17 (the RVV kernels on QEMU 10, vlen 256)). Figures, not a test.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests/host"))

from bench_llmrun import add_model_args, add_run_args, model_image, prompt_ids, qemu_label  # noqa: E402

from pyaisvc.guest.llmguest import KERNEL, MODELS, kernels_ran, parse_output  # noqa: E402
from pyaisvc.guest.qemu import Guest, QemuConfig  # noqa: E402

KERNELS = ("scalar", "vector")


def measure(args: argparse.Namespace, image: Path, vlen: int, ids: list[int]) -> dict:
    """kernels -> (min load, min TTFT, min TPOT) in ms, the kernels and thread counts
    the runs reported, and whether every run gave the same ids."""
    prog = MODELS[args.model].program
    cfg = QemuConfig(kernel=ROOT / KERNEL, image=image, ram=args.ram, cpus=args.cpus,
                     snapshot=True, cpu=f"rv64,v=true,vlen={vlen}")
    runs: dict[str, list[dict[str, int]]] = {k: [] for k in KERNELS}
    ran: dict[str, set[str]] = {k: set() for k in KERNELS}
    outs: set[tuple[int, ...]] = set()
    threads = f"--threads {args.threads} " if args.threads else ""
    with Guest(cfg) as g:
        for _ in range(args.reps):
            for k in KERNELS:
                out = g.run(f"{prog} --kernels {k} {threads}--predict {args.gen} "
                            + " ".join(map(str, ids)), timeout=7200)
                fields, got = parse_output(out, prog, args.gen)
                runs[k].append(fields)
                ran[k].update(kernels_ran(out, prog))
                outs.add(got)
    best = {k: tuple(min(r[f] for r in v) / 1000 for f in ("load_us", "ttft_us", "tpot_us"))
            for k, v in runs.items()}
    return {"best": best, "ran": {k: ",".join(sorted(v)) for k, v in ran.items()},
            "same": len(outs) == 1}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_args(ap)
    ap.add_argument("--cpus", type=int, default=1)
    ap.add_argument("--threads", type=int, default=0, help="llmrun --threads (default: its own)")
    ap.add_argument("--vlens", default="256")
    add_run_args(ap, gen=16)
    args = ap.parse_args()
    image = model_image(args, f"vec-{args.model}")
    ids = prompt_ids(args.model, args.prompt)
    print(f"{qemu_label()}, {args.model}, {args.cpus} hart(s), prompt "
          f"{len(ids)}, gen {args.gen}, min of {args.reps}")
    print(" vlen kernels   load ms   TTFT ms   TPOT ms  ran (kernels/threads) | TTFT ratio "
          "TPOT ratio  same ids")
    for vlen in (int(v) for v in args.vlens.split(",")):
        r = measure(args, image, vlen, ids)
        s, v = r["best"]["scalar"], r["best"]["vector"]
        for k, b in r["best"].items():
            print(f"{vlen:5} {k:7} {b[0]:9.0f} {b[1]:9.0f} {b[2]:9.1f}  {r['ran'][k]:21}",
                  end="")
            print(f" | {v[1] / s[1]:10.3f} {v[2] / s[2]:10.3f}  {r['same']}" if k == "vector"
                  else "")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
