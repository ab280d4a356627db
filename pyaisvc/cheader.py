"""Reading the kernel's C headers on the host: integer and string #defines, structs.

The kernel's headers are the one source of the facts the host shares with the
guest (the file system's layout, the AI service's limits, the gateway's
framing): the host reads them here rather than copying the numbers.
"""

from __future__ import annotations

import ast
import functools
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyaisvc.errors import AisvcError

INCLUDE_DIR = Path(__file__).resolve().parent.parent / "kernel" / "include"
SOURCE_ROOT = INCLUDE_DIR.parent.parent  # where #include "kernel/include/aisvc.h" starts
_INCLUDE = re.compile(r'^#include[ \t]+"([^"\n]+)"', re.M)


class CHeaderError(AisvcError):
    """A header or one of its definitions is missing; the message says which."""


_CTYPES = {"char": "b", "uchar": "B", "short": "h", "ushort": "H",
           "uint32": "I", "uint": "I", "int": "i", "uint64": "Q"}


@dataclass(frozen=True)
class CStruct:
    """A C struct from a header: its fields and the matching struct.Struct."""

    name: str
    fields: tuple[tuple[str, str, int], ...]  # (C type, name, array length or 0)
    codec: struct.Struct

    def unpack(self, data: bytes, offset: int = 0) -> dict[str, Any]:
        """The struct's fields from data at offset (an array field as a list, a char array as
        bytes)."""
        values = list(self.codec.unpack_from(data, offset))
        out: dict[str, Any] = {}
        for ctype, fname, count in self.fields:
            if count and ctype != "char":
                out[fname], values = values[:count], values[count:]
            else:
                out[fname] = values.pop(0)
        return out

    def pack(self, **values: Any) -> bytes:
        """The struct's bytes from the field values given (missing ones zero, arrays zero-
        padded)."""
        flat: list[Any] = []
        for ctype, fname, count in self.fields:
            v = values.get(fname, b"" if ctype == "char" and count else 0)
            if count and ctype != "char":
                seq = list(v)
                flat.extend(seq + [0] * (count - len(seq)))
            else:
                flat.append(v)
        return self.codec.pack(*flat)


def strip_comments(text: str) -> str:
    """The text without its // and /* */ comments."""
    return re.sub(r"//[^\n]*|/\*.*?\*/", "", text, flags=re.S)


def parse_structs(text: str, defines: dict[str, int]) -> dict[str, CStruct]:
    """Every ``struct NAME { ... };`` of text whose fields are of the base types
    in _CTYPES, arrays sized by numbers or names of ``defines``."""
    structs = {}
    for m in re.finditer(r"struct\s+(\w+)\s*\{(.*?)\};", text, re.S):
        fields = []
        fmt = "<"
        for decl in m.group(2).split(";"):
            d = re.fullmatch(r"\s*(\w+)\s+(\w+)\s*(?:\[(.+?)\])?\s*", decl)
            if not d:
                continue
            ctype, fname, dim = d.groups()
            count = eval_int(dim, defines) if dim else 0
            if ctype not in _CTYPES:
                raise CHeaderError(f"unknown field type {ctype!r} in struct {m.group(1)}")
            fields.append((ctype, fname, count))
            if ctype == "char" and count:
                fmt += f"{count}s"
            else:
                fmt += f"{count or ''}{_CTYPES[ctype]}"
        structs[m.group(1)] = CStruct(m.group(1), tuple(fields), struct.Struct(fmt))
    return structs


_BINOPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
           ast.Mult: lambda a, b: a * b, ast.Div: lambda a, b: a // b}


def eval_int(expr: str, defines: dict[str, int]) -> int:
    """Evaluates a #define's integer expression: numbers, earlier names,
    + - * / and parentheses, sizeof of a base type. ValueError otherwise."""
    expr = re.sub(r"sizeof\((\w+)\)",
                  lambda m: str(struct.calcsize(_CTYPES[m.group(1)])), expr)

    def ev(node: ast.expr) -> int:
        """The value of the expression node; ValueError for anything but numbers, known names
        and the operators of _BINOPS."""
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name) and node.id in defines:
            return defines[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](ev(node.left), ev(node.right))
        raise ValueError(expr)

    return ev(ast.parse(expr, mode="eval").body)


def read_header(path: Path) -> str:
    """The header's text without comments; CHeaderError if it cannot be read."""
    try:
        return strip_comments(path.read_text())
    except OSError as e:
        raise CHeaderError(f"cannot read {path}: {e.strerror}; run from a source tree") from e


def add_defines(body: str, defines: dict[str, int]) -> None:
    """Adds body's integer ``#define``s to defines, in order (later ones may use earlier ones)."""
    for m in re.finditer(r"^#define[ \t]+(\w+)[ \t]+([^\n]+)$", body, re.M):
        try:
            defines[m.group(1)] = eval_int(m.group(2).strip(), defines)
        except (KeyError, ValueError, SyntaxError):
            pass  # macros with arguments (IBLOCK) and non-numbers are not needed


def header_defines(path: Path) -> dict[str, int]:
    """The integer ``#define``s of the header at path, after those of the headers it
    includes by their place in the source tree (``#include "kernel/include/aisvc.h"``),
    so that a definition may name another header's."""
    body = read_header(path)
    defines: dict[str, int] = {}
    for name in _INCLUDE.findall(body):
        if (SOURCE_ROOT / name).is_file():
            defines.update(header_defines(SOURCE_ROOT / name))
    add_defines(body, defines)
    return defines


@functools.cache
def header_define(header: str, name: str, include_dir: Path = INCLUDE_DIR) -> int:
    """The integer value of ``#define name`` in kernel/include/<header> (or the headers
    it includes), e.g. header_define("aisvc.h", "AI_MAX_PROMPT"); CHeaderError if it is
    not there."""
    defines = header_defines(include_dir / header)
    if name not in defines:
        raise CHeaderError(f"{include_dir / header}: no integer #define {name}; "
                           "run from an unmodified source tree")
    return defines[name]


def header_string(header: str, name: str, include_dir: Path = INCLUDE_DIR) -> str:
    """The string of ``#define name "..."`` in kernel/include/<header>, e.g.
    header_string("aisvc.h", "AI_SMOL_DIR"); CHeaderError if it is not there."""
    body = read_header(include_dir / header)
    m = re.search(rf'^#define[ \t]+{re.escape(name)}[ \t]+"([^"\n]*)"', body, re.M)
    if m is None:
        raise CHeaderError(f"{include_dir / header}: no string #define {name}; "
                           "run from an unmodified source tree")
    return m.group(1)


def header_strings(header: str, prefix: str, include_dir: Path = INCLUDE_DIR) -> tuple[str, ...]:
    """The strings of every ``#define PREFIX... "..."`` in kernel/include/<header>, in
    their order, e.g. header_strings("aisvc.h", "AI_SCHED_"); CHeaderError if there are
    none."""
    body = read_header(include_dir / header)
    found = re.findall(rf'^#define[ \t]+{re.escape(prefix)}\w*[ \t]+"([^"\n]*)"', body, re.M)
    if not found:
        raise CHeaderError(f"{include_dir / header}: no string #define {prefix}...; "
                           "run from an unmodified source tree")
    return tuple(found)
