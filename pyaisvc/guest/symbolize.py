"""Addresses in the kernel's fault lines, turned into function and file:line.

The kernel names a fault with hex addresses only: a user process killed by a
trap (``pid 3 fault: killed: load page fault at 0x0 (pc 0x2c)``, printed by
usertrap in kernel/core/trap.c) or a trap in the kernel itself
(``kerneltrap: scause 0xd sepc 0x80001a2c stval 0x0``, then ``panic:``).
``explain()`` finds every such line in console text and says where each
code address lies, from the ELF's symbol table (the function) and its DWARF
line table (file and line), read with pyelftools::

    pid 3 fault: pc 0x2c is main (tests/progs/fault.c:27)
    kernel: sepc 0x80001a2c is kerneltrap (kernel/core/trap.c:213)

A user pc is looked up in the program the process runs: ``elf_for(name)``
maps the process name to its ELF (the guest driver knows where the build
puts them); kernel addresses (sepc, ra, pc in a line that names the kernel
or a panic) in the kernel's ELF. Paths are shown relative to the directory
the program was compiled in (the repository root).
"""

from __future__ import annotations

import bisect
import functools
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

USER_FAULT = re.compile(r"pid (\d+) (\S+): killed: .*\bpc (0x[0-9a-f]+)\)")
KERNEL_LINE = re.compile(r"kerneltrap|panic|kernel")
KERNEL_ADDR = re.compile(r"\b(sepc|ra|pc)[= ](0x[0-9a-f]+)")


@dataclass(frozen=True)
class Location:
    function: str | None  # None: the address is in no function symbol
    file: str | None  # None: no line information there
    line: int = 0

    def __str__(self) -> str:
        """"function (file:line)", with ?? and "no line information" for what is not known."""
        where = f"{self.file}:{self.line}" if self.file else "no line information"
        return f"{self.function or '??'} ({where})"


class Symbols:
    """An ELF's function symbols and DWARF line table, for address lookups."""

    def __init__(self, elf: Path) -> None:
        """The function symbols and line rows of the ELF at elf, sorted by address for lookup."""
        with open(elf, "rb") as f:
            e = ELFFile(f)
            self._funcs = sorted(_functions(e))
            self._starts = [a for a, _, _ in self._funcs]
            # By address; rows at one address keep their order (the last is the one
            # that covers the code after it) after a sequence's end there.
            rows = _line_rows(e) if e.has_dwarf_info() else []
            self._lines = sorted(rows, key=lambda r: (r[0], bool(r[1])))
            self._line_addrs = [a for a, _, _ in self._lines]

    def function(self, addr: int) -> str | None:
        """The function symbol whose [start, start + size) holds addr."""
        i = bisect.bisect_right(self._starts, addr) - 1
        if i >= 0:
            start, size, name = self._funcs[i]
            if start <= addr < start + max(size, 1):
                return name
        return None

    def line(self, addr: int) -> tuple[str, int] | None:
        """(file, line) of the line-table row that covers addr."""
        i = bisect.bisect_right(self._line_addrs, addr) - 1
        if i < 0:
            return None
        _, file, line = self._lines[i]
        return (file, line) if file else None

    def lookup(self, addr: int) -> Location | None:
        """Function and file:line of addr; None when it lies in no function."""
        func = self.function(addr)
        if func is None:
            return None
        where = self.line(addr)
        return Location(func, *where) if where else Location(func, None)


def _functions(e: ELFFile) -> list[tuple[int, int, str]]:
    """(address, size, name) of every function symbol of e that has an address."""
    out = []
    for sec in e.iter_sections():
        if isinstance(sec, SymbolTableSection):
            for s in sec.iter_symbols():
                if s["st_info"]["type"] == "STT_FUNC" and s["st_value"]:
                    out.append((s["st_value"], s["st_size"], s.name))
    return out


def _line_rows(e: ELFFile) -> list[tuple[int, str, int]]:
    """(address, file, line) for every row of every compilation unit's line program;
    end_sequence rows map to no file, so addresses past a sequence find nothing."""
    rows = []
    dwarf = e.get_dwarf_info()
    for cu in dwarf.iter_CUs():
        prog = dwarf.line_program_for_CU(cu)
        if prog is None:
            continue
        v5 = prog.header["version"] >= 5
        files = prog.header["file_entry"]
        dirs = prog.header["include_directory"]
        comp_dir = cu.get_top_DIE().attributes.get("DW_AT_comp_dir")
        base = comp_dir.value.decode() if comp_dir else ""
        for entry in prog.get_entries():
            st = entry.state
            if st is None:
                continue
            if st.end_sequence:
                rows.append((st.address, "", 0))
                continue
            rows.append((st.address, _file_name(files, dirs, st.file, v5, base), st.line))
    return rows


def _file_name(files, dirs, index: int, v5: bool, base: str) -> str:
    """The path of line-table file `index`, relative to the compilation directory."""
    i = index if v5 else index - 1
    if not 0 <= i < len(files):
        return "?"
    entry = files[i]
    name = entry.name.decode()
    d = entry.dir_index if v5 else entry.dir_index - 1
    if 0 <= d < len(dirs) and not (v5 and d == 0):
        name = os.path.join(dirs[d].decode(), name)
    if base and os.path.isabs(name):
        rel = os.path.relpath(name, base)
        name = name if rel.startswith("..") else rel
    return name


@functools.cache
def _load(path: str, mtime_ns: int) -> Symbols | None:
    """The symbols of the ELF at path, cached per modification time (a rebuilt file is read
    again); None when it cannot be read."""
    try:
        return Symbols(Path(path))
    except (OSError, ELFError):
        return None


def symbols(elf: Path) -> Symbols | None:
    """The ELF's symbols, read once per file version; None for a missing or bad file."""
    try:
        return _load(str(elf), elf.stat().st_mtime_ns)
    except OSError:
        return None


def explain(text: str, kernel: Path, elf_for: Callable[[str], Path | None]) -> list[str]:
    """One line per code address in text's fault lines that lies in a known function."""
    out = []
    for line in text.splitlines():
        m = USER_FAULT.search(line)
        if m:
            pid, name, pc = m.group(1), m.group(2), int(m.group(3), 16)
            elf = elf_for(name)
            loc = symbols(elf).lookup(pc) if elf and symbols(elf) else None
            if loc:
                out.append(f"pid {pid} {name}: pc {pc:#x} is {loc}")
            continue
        if KERNEL_LINE.search(line):
            ksyms = symbols(kernel)
            for reg, value in KERNEL_ADDR.findall(line):
                loc = ksyms.lookup(int(value, 16)) if ksyms else None
                if loc:
                    out.append(f"kernel: {reg} {value} is {loc}")
    return out
