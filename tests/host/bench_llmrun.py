"""Benchmark llmrun_smol / llmrun_qwen in the guest: load, TTFT and TPOT.

    .venv/bin/python tests/host/bench_llmrun.py [--model smol|qwen] [--assets DIR]
        [--ram 512M] [--cpus 1] [--prompts 8,16,32] [--gens 8,16,32] [--host]

Builds an image with every UPROG, the model at /AI/SMOL (or /AI/QWEN) and a
request file, boots QEMU, runs `llmrun_X --profile --stdin < /bench.txt` (one
process: the model is loaded once) and prints one row per request: prompt
and generated counts, TTFT, TPOT and the split of the prefill and of the
decode time into matmuls, attention (for Qwen also the Gated DeltaNet
recurrence) and the rest, then per phase the matmuls' time over attention's,
summed over the requests (the matmuls dominate: several times the attention).
Prompts are the first N tokens of the held-out
English text (tests/data/heldout_en.txt). --host runs the host build
(build/host/llmrun_X) on the same requests instead. Figures, not a test.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pyaisvc.guest.llmguest import KERNEL, MODELS, timings, uprogs  # noqa: E402
from pyaisvc.guest.qemu import Guest, QemuConfig, default_qemu, qemu_version  # noqa: E402
from pyaisvc.image.modelimage import build_model_image  # noqa: E402

PROFILE = re.compile(r"profile phase=(\w+) matmul_us=(\d+) attn_us=(\d+) other_us=(\d+) "
                     r"tokens=(\d+)")


def prompt_ids(model: str, n: int) -> list[int]:
    from pyaisvc.model.tokenizer import load_tokenizer

    text = (ROOT / "tests/data/heldout_en.txt").read_text()[:4000]
    return load_tokenizer(model).encode(text)[:n]


def add_model_args(ap: argparse.ArgumentParser) -> None:
    """--model, --assets and --ram, as every guest benchmark takes them."""
    ap.add_argument("--model", choices=sorted(MODELS), default="smol")
    ap.add_argument("--assets", type=Path, default=None)
    ap.add_argument("--ram", default=None)


def add_run_args(ap: argparse.ArgumentParser, gen: int) -> None:
    """--reps, --prompt and --gen (default gen), for benchmarks of one request shape."""
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--prompt", type=int, default=32)
    ap.add_argument("--gen", type=int, default=gen)


def model_image(args: argparse.Namespace, name: str) -> Path:
    """Fills in args.assets and args.ram for args.model, builds the kernel and the
    programs, and returns build/llmbench/NAME.img: every program and the model."""
    args.assets = args.assets or ROOT / MODELS[args.model].assets
    args.ram = args.ram or MODELS[args.model].ram
    subprocess.run(["make", "-s", "kernel", "uprogs"], cwd=ROOT, check=True)
    image = ROOT / "build/llmbench" / f"{name}.img"
    build_model_image(image, uprogs(ROOT),
                      {MODELS[args.model].guest_dir.lstrip("/"): args.assets})
    return image


def probe_image(name: str) -> Path:
    """Builds the kernel, the programs and tests/progs/NAME.c, and returns
    build/llmbench/NAME.img: every program and NAME, no model."""
    exe = ROOT / f"build/tests/_{name}"
    subprocess.run(["make", "-s", "kernel", "uprogs", str(exe.relative_to(ROOT))], cwd=ROOT,
                   check=True)
    image = ROOT / "build/llmbench" / f"{name}.img"
    build_model_image(image, {**uprogs(ROOT), name: exe}, {})
    return image


def qemu_label() -> str:
    """The QEMU binary the guests use and its version, for a report's first line."""
    version = qemu_version(default_qemu())
    have = "unknown" if version is None else f"{version[0]}.{version[1]}"
    return f"{default_qemu()} (QEMU {have})"


def requests(model: str, prompts: list[int], gens: list[int]) -> str:
    ids = prompt_ids(model, max(prompts))
    lines = [" ".join(map(str, [g] + ids[:p])) for p in prompts for g in gens]
    return "\n".join(lines) + "\nquit\n"


def run_guest(args: argparse.Namespace, bench: Path) -> str:
    subprocess.run(["make", "-s", "kernel", "uprogs"], cwd=ROOT, check=True)
    image = ROOT / "build/llmbench" / f"{args.model}.img"
    spec = MODELS[args.model]
    build_model_image(image, {**uprogs(ROOT), "bench.txt": bench},
                      {spec.guest_dir.lstrip("/"): args.assets})
    cfg = QemuConfig(kernel=ROOT / KERNEL, image=image, ram=args.ram,
                     cpus=args.cpus, snapshot=True)
    with Guest(cfg) as g:
        return g.run(f"llmrun_{args.model} --profile --stdin < /bench.txt", timeout=7200)


def run_host(args: argparse.Namespace, bench: Path) -> str:
    subprocess.run(["make", "-s", "llm-host"], cwd=ROOT, check=True)
    prog = ROOT / f"build/host/llmrun_{args.model}"
    with open(bench) as f:
        p = subprocess.run([str(prog), "--asset-dir", str(args.assets), "--profile", "--stdin"],
                           stdin=f, capture_output=True, text=True, check=True)
    return p.stdout + p.stderr


def report(out: str) -> None:
    found = timings(out)
    profiles = PROFILE.findall(out)
    if not found:
        print(out)
        raise SystemExit("bench: no timing lines in the output")
    load, init = found[0]["load_us"], found[0]["init_us"]
    print(f"load {load / 1e6:.3f} s, init {init / 1e6:.3f} s")
    print("prompt gen   TTFT s  TPOT s | prefill matmul/attn/other s | decode/token "
          "matmul/attn/other s")
    for i, t in enumerate(found):
        pre, dec = profiles[2 * i], profiles[2 * i + 1]
        ntok = max(int(dec[4]), 1)
        pm, pa, po = (int(v) / 1e6 for v in pre[1:4])
        dm, da, do = (int(v) / 1e6 / ntok for v in dec[1:4])
        ttft, tpot = t["ttft_us"] / 1e6, t["tpot_us"] / 1e6
        print(f"{t['prompt']:>6} {t['gen']:>3} {ttft:8.3f} {tpot:7.3f} | "
              f"{pm:7.3f} {pa:6.3f} {po:6.3f}            | {dm:6.3f} {da:6.3f} {do:6.3f}")
    for phase in ("prefill", "decode"):
        rows = [p for p in profiles if p[0] == phase]
        matmul, attn = (sum(int(p[k]) for p in rows) for k in (1, 2))
        share = f"{matmul / attn:.1f}x" if attn else "no attention time"
        print(f"{phase}: matmul {matmul / 1e6:.3f} s / attention {attn / 1e6:.3f} s = {share}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_args(ap)
    ap.add_argument("--cpus", type=int, default=1)
    ap.add_argument("--prompts", default="8,16,32")
    ap.add_argument("--gens", default="8,16,32")
    ap.add_argument("--host", action="store_true")
    args = ap.parse_args()
    args.assets = args.assets or ROOT / MODELS[args.model].assets
    args.ram = args.ram or MODELS[args.model].ram
    bench = ROOT / "build/llmbench/bench.txt"
    bench.parent.mkdir(parents=True, exist_ok=True)
    bench.write_text(requests(args.model, [int(v) for v in args.prompts.split(",")],
                              [int(v) for v in args.gens.split(",")]))
    report(run_host(args, bench) if args.host else run_guest(args, bench))
    return 0


if __name__ == "__main__":
    sys.exit(main())
