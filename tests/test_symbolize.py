"""Fault lines with their addresses as function and file:line (pyaisvc.guest.symbolize, pyelftools).

A planted fault: tests/progs/fault.c dereferences 0 in main; the kernel kills
it naming only the pc, and `pyaisvc run` adds where that pc lies, which must
be the source line of the faulting statement. Kernel addresses (a
kerneltrap line before a panic) are checked against binutils' addr2line.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pyaisvc.guest.symbolize import explain, symbols

ROOT = Path(__file__).resolve().parent.parent
ADDR2LINE = shutil.which("riscv64-unknown-elf-addr2line") or shutil.which(
    "riscv64-linux-gnu-addr2line")


def _line_of(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


@pytest.mark.guest
def test_planted_user_fault_is_shown_as_function_and_line(build, make_image):
    image = make_image({"fault": build.testprogs["fault"]})
    proc = subprocess.run([sys.executable, "-m", "pyaisvc", "run", "--cpus", "1", "--kernel",
                           str(build.kernel), "--image", str(image), "--", "fault", "load0"],
                          cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr  # the killed program's status (-1), out of 0-255
    assert re.fullmatch(r"pid \d+ fault: killed: load page fault at 0x0 \(pc 0x[0-9a-f]+\)\n",
                        proc.stdout), proc.stdout
    line = _line_of(ROOT / "tests/progs/fault.c", "return *(volatile int *)0;")
    pc = re.search(r"pc (0x[0-9a-f]+)", proc.stdout).group(1)
    assert "pyaisvc run: pid " in proc.stderr
    assert f"fault: pc {pc} is main (tests/progs/fault.c:{line})\n" in proc.stderr, proc.stderr


@pytest.mark.skipif(ADDR2LINE is None, reason="no RISC-V addr2line")
def test_kernel_trap_addresses_agree_with_addr2line(build):
    ksyms = symbols(build.kernel)
    assert ksyms is not None
    start = next(a for a, _, n in ksyms._funcs if n == "kerneltrap")
    sepc, ra = start + 8, next(a for a, _, n in ksyms._funcs if n == "usertrap") + 12
    console = (f"kerneltrap: scause 0xd sepc {sepc:#x} stval 0x0\n"
               f"panic: kerneltrap: exception in the kernel ra={ra:#x}\n")
    got = explain(console, build.kernel, lambda name: None)
    want = []
    for reg, addr in (("sepc", sepc), ("ra", ra)):
        out = subprocess.run([ADDR2LINE, "-f", "-e", str(build.kernel), hex(addr)],
                             capture_output=True, text=True, check=True).stdout.split()
        func, where = out[0], Path(out[1].split(" ")[0])
        want.append(f"kernel: {reg} {addr:#x} is {func} ({where.relative_to(ROOT)})")
    assert got == want


def test_addresses_outside_any_function_are_not_explained(build):
    assert explain("pid 3 fault: killed: instruction page fault at 0x0 (pc 0x0)", build.kernel,
                   lambda name: build.testprogs["fault"]) == []
    assert explain("nothing to see here (pc 0x2000)", build.kernel, lambda n: None) == []


def test_check_hot_reads_the_elf_with_pyelftools(build):
    """make llm-check-hot: each hot section's kernels lie in one 4 KiB page of llmrun."""
    sys.path.insert(0, str(ROOT / "tests/host"))
    try:
        import check_hot
    finally:
        sys.path.pop(0)
    groups = check_hot.hot_names(ROOT / "build/user/llm/kernels.o")
    assert "matmul1" in groups[".text.hot"] and "matmul8" in groups[".text.hot.batch"]
    assert "nm" not in check_hot.__dict__ and "subprocess" not in check_hot.__dict__
    elf = build.uprogs["llmrun_smol"]
    for sec, names in groups.items():
        found = check_hot.extents(elf, names)
        assert set(found) == names and all(size > 0 for _, size in found.values())
        assert check_hot.check_section(elf, sec, names)
