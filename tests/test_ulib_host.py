"""Unit tests of the guest C library on the host: printf formats and malloc.

user/lib/printf.c, user/lib/umalloc.c and user/lib/ulib.c are compiled with the host C
compiler and their symbols renamed with a u_ prefix by objcopy, so they do not
clash with the host libc (tests/host/ulib_harness.c supplies write and sbrk).
printf's output is compared with Python's % formatting, an independent
implementation of the same conversions.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

CC = shutil.which("cc") or shutil.which("gcc")
OBJCOPY = shutil.which("objcopy")
LIB_SOURCES = ["user/lib/printf.c", "user/lib/umalloc.c", "user/lib/ulib.c"]
# Every function user.h declares that the library defines or calls.
RENAMED = ["printf", "fprintf", "snprintf", "malloc", "calloc", "free", "write", "read",
           "open", "close", "fstat", "sbrk", "stat", "strcpy", "strncpy", "strcmp", "strncmp",
           "strlen", "strchr", "gets", "memset", "memmove", "memcpy", "memcmp", "atoi",
           "strtol", "parse_u64", "strerror", "exit", "mutex_lock", "mutex_unlock"]

# (format, C arguments, Python arguments); Python's % has no length modifiers,
# so "l" and "ll" are dropped for it.
CASES = [
    ("%d|%i|%u", "-42, 17, 4000000000U", (-42, 17, 4000000000)),
    ("%5d|%-5d|%05d|%-05d", "42, 42, -42, 7", (42, 42, -42, 7)),
    ("%x|%X|%08x|%lx", "255, 48879, 0xbeef, 0xdeadbeefcafeUL",
     (255, 48879, 0xBEEF, 0xDEADBEEFCAFE)),
    ("%ld|%lu|%lld|%llu", "-9000000000L, 18446744073709551615UL, -1LL, 1ULL << 63",
     (-9000000000, 18446744073709551615, -1, 1 << 63)),
    ("%d|%d", "-2147483647 - 1, 2147483647", (-2147483648, 2147483647)),
    ("%ld", "-9223372036854775807L - 1", (-9223372036854775808,)),
    ("[%s] [%8s] [%-8s] [%.3s] [%c%c]", '"abc", "right", "left", "truncate", \'o\', \'k\'',
     ("abc", "right", "left", "truncate", "o", "k")),
    ("100%% %s", '""', ("",)),
    ("%f|%.3f|%.0f|%.1f", "3.14159265, -2.0005, 2.5, 0.05", (3.14159265, -2.0005, 2.5, 0.05)),
    ("%.2f|%.2f|%.9f", "0.999, -0.004, 1.0 / 3", (0.999, -0.004, 1.0 / 3)),
    ("%10.4f|%-10.2f|%010.3f", "3.14159, 2.5, -1.5", (3.14159, 2.5, -1.5)),
    ("%.3f|%f", "123456789.125, 1e15", (123456789.125, 1e15)),
    ("%.0f|%.0f|%.2f|%.2f|%.1f", "3.5, 0.5, 0.125, 0.375, 0.25", (3.5, 0.5, 0.125, 0.375, 0.25)),
    ("%.1f|%.2f|%.3f|%.2f", "0.15, 2.675, 1.0005, -0.0", (0.15, 2.675, 1.0005, -0.0)),
    ("%d %s %x", "0, \"zero\", 0", (0, "zero", 0)),
]


def py_format(fmt: str, args: tuple) -> str:
    return fmt.replace("%ll", "%").replace("%l", "%") % args


@pytest.fixture(scope="module")
def harness(repo_root: Path, tmp_path_factory) -> Path:
    if CC is None or OBJCOPY is None:
        pytest.skip("no host C compiler (cc or gcc) or objcopy")
    out = tmp_path_factory.mktemp("ulib")
    cases = out / "ulib_cases.c"
    body = "".join(f'  u_snprintf(buf, sizeof(buf), "{fmt}", {cargs}); puts(buf);\n'
                   for fmt, cargs, _ in CASES)
    cases.write_text("#include <stdio.h>\nint u_snprintf(char *, int, const char *, ...);\n"
                     f"void\nrun_printf_cases(void)\n{{\n  char buf[512];\n\n{body}}}\n")
    lib = [str(repo_root / s) for s in LIB_SOURCES]
    proc = subprocess.run(
        [CC, "-O2", "-Wall", "-Werror", "-fno-builtin", "-ffreestanding", "-c",
         "-I", str(repo_root), *lib], cwd=out, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    renames = out / "renames.txt"
    renames.write_text("".join(f"{name} u_{name}\n" for name in RENAMED))
    objs = [str(out / (Path(s).stem + ".o")) for s in LIB_SOURCES]
    for obj in objs:
        subprocess.run([OBJCOPY, f"--redefine-syms={renames}", obj], check=True)
    exe = out / "ulib_test"
    proc = subprocess.run(
        [CC, "-O1", "-Wall", "-Werror", "-o", str(exe),
         str(repo_root / "tests/host/ulib_harness.c"), str(cases), *objs, "-lm"],
        capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return exe


def test_printf_matches_python(harness: Path) -> None:
    out = subprocess.run([str(harness), "printf"], capture_output=True, text=True,
                         check=True, timeout=30).stdout.splitlines()
    for (fmt, _, args), got in zip(CASES, out, strict=False):
        assert got == py_format(fmt, args), f"format {fmt!r}"
    assert out[len(CASES)] == "[" + "L" * 1199 + "|7]"
    assert out[len(CASES) + 1:] == ["6 123 z", "3 1"], "snprintf truncation"


def test_malloc_calloc_free(harness: Path) -> None:
    proc = subprocess.run([str(harness), "malloc"], capture_output=True, text=True, timeout=120)
    assert proc.stdout == "malloc ok\n", proc.stdout + proc.stderr
