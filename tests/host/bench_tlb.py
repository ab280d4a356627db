"""What a TLB miss costs in the guest, and what empties the TLB.

    .venv/bin/python tests/host/bench_tlb.py [--mib 96] [--passes 40] [--cpus 1]
        [--kernel build/kernel/kernel]

Boots a guest with tests/progs/tlbprobe.c and runs `tlbprobe MIB PASSES`: it
writes every page of MIB MiB once, then reads one byte per page PASSES times,
after a system call each time and after a process switch (a one-tick sleep)
every fifth time. Prints each pass's ns per page, then the medians of the
passes after a system call in the second half (in the first, QEMU is still
growing the TLB) and of those after a process switch. A pass that misses on every page
costs one TLB refill per page (about 0.35 us under QEMU); one that hits, a few
ns. With this kernel a system call keeps the TLB and a process switch empties
it (kernel/core/vm.c; docs/PERF_NOTES.md, fact 32 (a trap must not empty the
TLB)). --kernel boots another
kernel build on the same image, to compare. Figures, not a test.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests/host"))

from bench_llmrun import probe_image, qemu_label  # noqa: E402

from pyaisvc.guest.llmguest import KERNEL  # noqa: E402
from pyaisvc.guest.qemu import Guest, GuestError, QemuConfig  # noqa: E402

PASS = re.compile(r"tlbprobe: pass (\d+) at (\d+) ms after (a system call|a process switch): "
                  r"(\d+) ns/page")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=96)
    ap.add_argument("--passes", type=int, default=40)
    ap.add_argument("--cpus", type=int, default=1)
    ap.add_argument("--kernel", type=Path, default=ROOT / KERNEL)
    args = ap.parse_args()
    image = probe_image("tlbprobe")
    ram = f"{args.mib + 256}M"
    cfg = QemuConfig(kernel=args.kernel, image=image, ram=ram, cpus=args.cpus, snapshot=True)
    with Guest(cfg) as g:
        out = g.run(f"tlbprobe {args.mib} {args.passes}", timeout=3600)
    passes = [(int(ms), after, int(ns)) for _, ms, after, ns in PASS.findall(out)]
    if len(passes) != args.passes:
        raise GuestError(f"tlbprobe printed {len(passes)} of {args.passes} passes "
                         f"({out[-200:]!r}): run `tlbprobe {args.mib} {args.passes}` by hand "
                         "in `make qemu`")
    print(f"{qemu_label()}, {args.cpus} hart(s), {args.mib} MiB ({args.mib * 256} pages), "
          f"kernel {args.kernel}")
    for k, (ms, after, ns) in enumerate(passes):
        print(f"pass {k:3} at {ms:6} ms after {after:16}: {ns:5} ns/page")
    calls = [ns for _, after, ns in passes[len(passes) // 2:] if after == "a system call"]
    switches = [ns for _, after, ns in passes if after == "a process switch"]
    print(f"median ns/page: after a system call (second half) "
          f"{statistics.median(calls) if calls else float('nan'):.0f}, "
          f"after a process switch {statistics.median(switches) if switches else float('nan'):.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
