"""Run the file mappings' self-test, user/tests/mmaptests.c, under QEMU on one and two harts.

mmaptests prints one line per case, "test NAME: OK" or "test NAME: FAILED (why)", then the
leak checks (free pages, open-file slots, the page cache's pages in use by mappings), "N
passed, N failed" and, when nothing failed, "ALL TESTS PASSED". A case that checks a fault
expects the kernel to kill only the faulting child, with one line that says why.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

CASE = re.compile(r"^test (\S+): (OK|FAILED \(.*\))$", re.M)
TABLE_ENTRY = re.compile(r'^\s*\{ t_\w+,\s*"(\w+)"', re.M)
LEAKS = ["memleak", "fileleak", "cacheleak"]


def table_names(repo_root: Path) -> list[str]:
    """The case names in mmaptests.c's table, in order, then the leak checks."""
    source = (repo_root / "user/tests/mmaptests.c").read_text()
    return TABLE_ENTRY.findall(source) + LEAKS


def check_report(out: str, want: list[str]) -> None:
    """Asserts that out ran exactly the cases want and that all of them passed."""
    cases = CASE.findall(out)
    failed = [f"test {name}: {result}" for name, result in cases if result != "OK"]
    assert not failed, "mmaptests failed:\n" + "\n".join(failed) + f"\n\nfull output:\n{out}"
    assert [name for name, _ in cases] == want, f"cases run:\n{out}"
    assert "ALL TESTS PASSED" in out


@pytest.mark.guest
@pytest.mark.parametrize("cpus", [1, 2])
def test_mmaptests_all_pass(boot_guest, repo_root, cpus: int) -> None:
    g = boot_guest(cpus=cpus, ram="512M")
    out = g.run("mmaptests", timeout=600)
    check_report(out, table_names(repo_root))
    # Each refused access killed only its process, saying why.
    assert "past the end of the mapped file" in out
    assert "write to a read-only mapping" in out
    assert g.run("echo alive") == "alive\n"
    assert "panic" not in g.transcript


@pytest.mark.guest
def test_vmstat_counts_a_mapping(boot_guest) -> None:
    """vmstat counts the misses of mmaptests' shared case; the cache gives the pages of its
    files back once they are unlinked and unmapped."""
    g = boot_guest()
    before = g.run("vmstat")
    g.run("mmaptests shared")
    after = g.run("vmstat")
    fields = re.compile(r"page cache (\d+) KiB .* misses (\d+),")
    (cache0, miss0), (cache1, miss1) = (
        tuple(map(int, fields.search(s).groups())) for s in (before, after))
    assert miss1 >= miss0 + 2 and cache1 == cache0, f"before: {before}\nafter: {after}"
