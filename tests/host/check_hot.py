"""Check that the LLM runtime's hot kernels lie in 4 KiB pages of their own in a guest ELF.

Code crossing a page boundary runs 3-5x slower under QEMU's TCG
(docs/PERF_NOTES.md, facts 4 (hot code in one 4 KiB page) and 37 (a call or
return across pages costs a lookup)). The kernels are the functions that the
objects (user/llm/kernels.o, kernels_rvv.o, kernels_vec.o, layers.o) put in
section .text.hot and in .text.hot.NAME sections, each page-aligned; this
reads the objects' and the linked program's symbol tables with pyelftools
and fails unless each section's kernels lie in a single page of the program.

    python tests/host/check_hot.py OBJECT... ELF
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


def hot_names(obj: Path) -> dict[str, set[str]]:
    """Hot section name -> the function symbols the object file defines in it."""
    with open(obj, "rb") as f:
        e = ELFFile(f)
        hot = {i: sec.name for i, sec in enumerate(e.iter_sections())
               if sec.name == HOT or sec.name.startswith(HOT + ".")}
        groups: dict[str, set[str]] = {}
        for s in _symbols(e):
            if s["st_info"]["type"] == "STT_FUNC" and s["st_shndx"] in hot:
                groups.setdefault(hot[s["st_shndx"]], set()).add(s.name)
        return groups


def extents(elf: Path, names: set[str]) -> dict[str, tuple[int, int]]:
    """name -> (address, size) in the linked program."""
    with open(elf, "rb") as f:
        return {s.name: (s["st_value"], s["st_size"]) for s in _symbols(ELFFile(f))
                if s.name in names and s["st_info"]["type"] == "STT_FUNC"}


def check_section(elf: Path, section: str, names: set[str]) -> bool:
    """Print the section's kernels; True when they lie in one page."""
    found = extents(elf, names)
    if set(found) != names:
        print(f"check_hot: {elf}: hot kernels missing: {sorted(names - set(found))}")
        return False
    lo = min(a for a, _ in found.values())
    hi = max(a + s for a, s in found.values())
    for name, (a, s) in sorted(found.items(), key=lambda kv: kv[1]):
        print(f"  {a:#08x} {s:5d} {name}")
    if lo // PAGE != (hi - 1) // PAGE:
        print(f"check_hot: {elf}: {section} spans {lo:#x}..{hi:#x}, more than one page; "
              "make it smaller, or move a kernel to a .text.hot.NAME section of its own "
              "whose first function is aligned(4096) (as HOT_BATCH in user/llm/kernels.c)")
        return False
    print(f"check_hot: {elf}: {section}: {len(found)} kernels, {hi - lo} bytes in page "
          f"{lo // PAGE:#x}")
    return True


def main(argv: list[str]) -> int:
    *objs, elf = argv
    groups: dict[str, set[str]] = {}
    for obj in objs:
        for sec, names in hot_names(Path(obj)).items():
            groups.setdefault(sec, set()).update(names)
    if HOT not in groups:
        print(f"check_hot: {', '.join(objs)}: no functions in {HOT}; "
              "is the object list right (OBJECT... ELF)?")
        return 1
    ok = [check_section(Path(elf), sec, names) for sec, names in sorted(groups.items())]
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
