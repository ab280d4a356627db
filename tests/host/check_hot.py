"""Check that the LLM runtime's hot kernels share one 4 KiB page of a guest ELF.

Code crossing a page boundary runs 3-5x slower under QEMU's TCG
(docs/PERF_NOTES.md, fact 4). The kernels are the functions that
user/llm/kernels.o puts in section .text.hot; this reads the object's and the
linked program's symbol tables with pyelftools and fails unless the kernels'
bytes lie in a single page of the program.

    python tests/host/check_hot.py OBJECT ELF
"""

from __future__ import annotations

import sys
from pathlib import Path

from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

PAGE = 4096
HOT = ".text.hot"


def _symbols(e: ELFFile):
    for sec in e.iter_sections():
        if isinstance(sec, SymbolTableSection):
            yield from sec.iter_symbols()


def hot_names(obj: Path) -> set[str]:
    """Function symbols defined in .text.hot of the object file."""
    with open(obj, "rb") as f:
        e = ELFFile(f)
        hot = {i for i, sec in enumerate(e.iter_sections()) if sec.name == HOT}
        return {s.name for s in _symbols(e)
                if s["st_info"]["type"] == "STT_FUNC" and s["st_shndx"] in hot}


def extents(elf: Path, names: set[str]) -> dict[str, tuple[int, int]]:
    """name -> (address, size) in the linked program."""
    with open(elf, "rb") as f:
        return {s.name: (s["st_value"], s["st_size"]) for s in _symbols(ELFFile(f))
                if s.name in names and s["st_info"]["type"] == "STT_FUNC"}


def main(argv: list[str]) -> int:
    obj, elf = argv
    names = hot_names(Path(obj))
    found = extents(Path(elf), names)
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
