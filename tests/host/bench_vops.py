"""What one vector instruction costs under QEMU's TCG, by kind and vector length.

    .venv/bin/python tests/host/bench_vops.py [--vlens 128,256,512] [--boots 2]

Boots a guest with `-cpu rv64,v=true,vlen=N` for each N (--boots times) and
runs tests/progs/vprobe.c, which times 16 x 100,000 of one instruction per
probe (the fastest of 5 runs). Prints picoseconds per instruction, the
fastest of the boots: which ops QEMU turns into inline host code (their cost
grows with the register group's bytes), which it calls a helper for (a cost
per element), and what a vector load or a vtype change costs. The runtime's
RVV kernels are shaped by these figures (docs/PERF_NOTES.md, facts 9 (RVV written
for TCG is 2-3x scalar on QEMU 10), 25 (vector loads of bytes, not words), 33 (what
one vector instruction costs) and 35 (float and 64-bit vector costs)). Needs QEMU >= 10
(`make deps`). Figures, not a test.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests/host"))

from bench_llmrun import probe_image, qemu_label  # noqa: E402

from pyaisvc.guest.llmguest import KERNEL  # noqa: E402
from pyaisvc.guest.qemu import Guest, GuestError, QemuConfig  # noqa: E402

LINE = re.compile(r"vprobe: (.+): (\d+) ps")


def probe(image: Path, vlen: int) -> dict[str, int]:
    """One boot at vlen: probe name -> ps per instruction."""
    cfg = QemuConfig(kernel=ROOT / KERNEL, image=image, ram="256M", cpus=1, snapshot=True,
                     cpu=f"rv64,v=true,vlen={vlen}")
    with Guest(cfg) as g:
        out = g.run("vprobe", timeout=1800)
    found = {name: int(ps) for name, ps in LINE.findall(out)}
    if not found:
        raise GuestError(f"vprobe printed no figures at vlen {vlen} ({out[-200:]!r}): "
                         "is this QEMU >= 10? (`make deps`)")
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vlens", default="128,256,512")
    ap.add_argument("--boots", type=int, default=2)
    args = ap.parse_args()
    image = probe_image("vprobe")
    vlens = [int(v) for v in args.vlens.split(",")]
    best: dict[int, dict[str, int]] = {}
    for vlen in vlens:
        for _ in range(args.boots):
            for name, ps in probe(image, vlen).items():
                best.setdefault(vlen, {})[name] = min(ps, best.get(vlen, {}).get(name, ps))
    print(f"{qemu_label()}, 1 hart, fastest of {args.boots} boot(s); ps per instruction")
    print(f"{'instruction':24}" + "".join(f"{f'vlen {v}':>12}" for v in vlens))
    for name in best[vlens[0]]:
        print(f"{name:24}" + "".join(f"{best[v].get(name, 0):12}" for v in vlens))
    return 0


if __name__ == "__main__":
    sys.exit(main())
