"""Mapped weights against the read path (docs/VM.md): printed figures, no asserts.

    .venv/bin/python tests/host/bench_mmap.py [--cpus N] [--ram R] [--assets DIR] [--rounds K]

Needs SmolLM2 in asset format version 4 (the export's default; --assets DIR for
another directory). One run prints:

1. llmrun_smol while the worker holds SmolLM2 (it has served a request, so the
   page cache holds the weights it mapped): llmrun_smol --kv-blocks 16 --predict 4
   mapped and with --no-mmap, in one boot: Model Loading Time (load_us), the first
   request's faults and TTFT, and the growth of the guest's used memory (RAM less
   free pages and page cache, sampled by vmstat every 0.1 s while it runs) against the
   model's size. Then the same boot with the worker reading its weights (boot
   argument aimmap=0) and llmrun_smol --no-mmap: the read path everywhere.
2. The first process after boot (the model at /M/SMOL, where init starts no worker):
   load_us + ttft_us mapped and read, one boot each, K rounds alternating.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pyaisvc.guest.llmguest import MODELS, prepare, timings, uprogs  # noqa: E402
from pyaisvc.guest.qemu import Guest, QemuConfig, default_cpus  # noqa: E402
from pyaisvc.image.modelimage import build_model_image  # noqa: E402

PROMPT = "504 3575 282 4649 314"  # "The capital of France is"
RUN = "llmrun_smol --kv-blocks 16 --predict 4"
VMSTAT = re.compile(r"^free (\d+) KiB, page cache (\d+) KiB \((\d+) KiB idle\)", re.M)
FAULTS = re.compile(r" faults=(\d+) ")


def used_kib(line: re.Match[str], ram_kib: int) -> int:
    """RAM that is neither free nor page cache, from one vmstat line."""
    free, cache, idle = (int(v) for v in line.groups())
    return ram_kib - (free - idle) - cache


def run_sampled(g: Guest, cmd: str, ram_kib: int) -> tuple[dict[str, int], int, int]:
    """cmd with vmstat sampling beside it: (its timing fields, its faults, the most used
    memory seen above the level before it, KiB)."""
    before = used_kib(VMSTAT.search(g.run("vmstat")), ram_kib)
    out = g.run(f"vmstat 1 150 > /vm.txt & {cmd} ; sleep 2", timeout=600)
    samples = g.run("cat /vm.txt", timeout=60)
    peak = max(used_kib(m, ram_kib) for m in VMSTAT.finditer(samples))
    t = timings(out, "llmrun_smol")[0]
    return t, int(FAULTS.search(out)[1]), peak - before


def worker_boot(cfg: QemuConfig, model_kib: int, append: str, modes: list[str]) -> None:
    """Part 1 in one boot with boot arguments append: each llmrun mode in turn."""
    with Guest(QemuConfig(**{**cfg.__dict__, "append": append})) as g:
        ram_kib = (g.ram_mib or 0) * 1024
        g.run(f"ai gen 1 {PROMPT}", timeout=600)  # the worker touches its weights
        for mode in modes:
            t, faults, grown = run_sampled(g, f"{RUN} {mode} {PROMPT}", ram_kib)
            print(f"  worker {'reads' if append else 'maps'}, llmrun_smol {mode or 'mapped':9}"
                  f" load_us {t['load_us']:>8}  ttft_us {t['ttft_us']:>8}  faults {faults:>5}"
                  f"  used memory +{grown / 1024:7.1f} MiB"
                  f" ({100 * grown / model_kib:5.1f}% of the model)")


def first_process(cfg: QemuConfig, mode: str) -> tuple[int, int]:
    """Part 2: one fresh boot, llmrun_smol first; (load_us, ttft_us)."""
    with Guest(cfg) as g:
        t = timings(g.run(f"{RUN} --asset-dir /M/SMOL {mode} {PROMPT}", timeout=600))[0]
    return t["load_us"], t["ttft_us"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpus", type=int, default=default_cpus())
    ap.add_argument("--ram", default="512M")
    ap.add_argument("--assets", type=Path, default=None)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    p = prepare(ROOT, MODELS["smol"], args.assets)
    version = int.from_bytes((p.assets / "CFG.BIN").read_bytes()[4:8], "little")
    if version != 4:
        sys.exit(f"bench_mmap: {p.assets} is format version {version}; the guest maps version "
                 "4 only: re-export it (pyaisvc export smol) or pass --assets DIR")
    model_kib = sum(f.stat().st_size for f in p.assets.glob("*.BIN")) // 1024
    cfg = QemuConfig(kernel=p.kernel, image=p.image, ram=args.ram, cpus=args.cpus, snapshot=True)
    print(f"SmolLM2 v4, {model_kib / 1024:.1f} MiB; {args.cpus} harts, {args.ram}; one run on "
          "this host (shared hosts move every figure: compare within the run)")
    print("1. llmrun_smol while the worker holds SmolLM2")
    worker_boot(cfg, model_kib, "", ["", "--no-mmap"])
    worker_boot(cfg, model_kib, "aimmap=0", ["--no-mmap"])
    bare = ROOT / "build/bench/fs-smol-bare.img"
    build_model_image(bare, uprogs(ROOT), {"M/SMOL": p.assets})
    cfg2 = QemuConfig(**{**cfg.__dict__, "image": bare})
    print("2. the first process after boot: load_us + ttft_us")
    for r in range(args.rounds):
        for mode in ("", "--no-mmap"):
            load, ttft = first_process(cfg2, mode)
            print(f"  round {r + 1} {mode or 'mapped':9} load_us {load:>8}  ttft_us {ttft:>8}"
                  f"  sum {load + ttft:>8}")


if __name__ == "__main__":
    main()
