"""Check that the LLM runtime's hot kernels share one 4 KiB page of a guest ELF.

Code crossing a page boundary runs 3-5x slower under QEMU's TCG
(docs/PERF_NOTES.md). The kernels are the functions that
user/llm/kernels.o puts in section .text.hot; this finds them in the linked
program with `nm -S` and fails unless their bytes lie in a single page.

    python3 tests/host/check_hot.py TOOLPREFIX OBJECT ELF
"""

from __future__ import annotations

import subprocess
import sys

PAGE = 4096


def hot_names(objdump: str, obj: str) -> set[str]:
    """Function symbols defined in .text.hot of the object file."""
    out = subprocess.run([objdump, "-t", obj], check=True, capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 6 and parts[-3] == ".text.hot" and "F" in parts[2:-3]:
            names.add(parts[-1])
    return names


def extents(nm: str, elf: str, names: set[str]) -> dict[str, tuple[int, int]]:
    """name -> (address, size) in the linked program."""
    out = subprocess.run([nm, "-S", elf], check=True, capture_output=True, text=True).stdout
    found = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[3] in names:
            found[parts[3]] = (int(parts[0], 16), int(parts[1], 16))
    return found


def main(argv: list[str]) -> int:
    prefix, obj, elf = argv
    names = hot_names(prefix + "objdump", obj)
    found = extents(prefix + "nm", elf, names)
    if not names or set(found) != names:
        print(f"check_hot: {elf}: hot kernels missing: {sorted(names - set(found))}")
        return 1
    lo = min(a for a, _ in found.values())
    hi = max(a + s for a, s in found.values())
    for name, (a, s) in sorted(found.items(), key=lambda kv: kv[1]):
        print(f"  {a:#08x} {s:5d} {name}")
    if lo // PAGE != (hi - 1) // PAGE:
        print(f"check_hot: {elf}: hot kernels span {lo:#x}..{hi:#x}, more than one page")
        return 1
    print(f"check_hot: {elf}: {len(found)} kernels, {hi - lo} bytes in page {lo // PAGE:#x}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
