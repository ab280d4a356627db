"""Run the guest's thread self-test, user/tests/threadtests.c, on 1, 2 and 4 harts.

threadtests prints one line per case ("test NAME: OK" or "test NAME: FAILED (why)"),
then the leak checks (free pages and process slots before and after), "N passed,
N failed" and, when nothing failed, "ALL TESTS PASSED". A lost futex wakeup would
hang a case: the run's timeout catches it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed$", re.M)
CASE = re.compile(r"^test (\S+): (OK|FAILED \(.*\))$", re.M)
TABLE_ENTRY = re.compile(r'^\s*\{ t_\w+, "(\w+)" \}', re.M)


def table_names(repo_root: Path) -> list[str]:
    """The case names in threadtests.c's table, in order, then the leak checks."""
    source = (repo_root / "user/tests/threadtests.c").read_text()
    return TABLE_ENTRY.findall(source) + ["memleak", "slotleak"]


@pytest.mark.guest
@pytest.mark.parametrize("cpus", [1, 2, 4])
def test_threadtests_all_pass(boot_guest, repo_root, cpus: int) -> None:
    g = boot_guest(cpus=cpus, ram="512M")
    out = g.run("threadtests", timeout=600)
    assert f"threadtests starting on {cpus} harts" in out
    cases = CASE.findall(out)
    failed = [f"test {name}: {result}" for name, result in cases if result != "OK"]
    summary = SUMMARY.search(out)
    assert summary, f"threadtests printed no summary line; its output:\n{out}"
    assert not failed and summary.group(2) == "0", "\n".join(failed) + f"\n\n{out}"
    assert [name for name, _ in cases] == table_names(repo_root), out
    assert "ALL TESTS PASSED" in out
    # The kernel is still fine: the other self-test's process cases pass.
    out = g.run("usertests forkmany exitstatus kill sbrkfork", timeout=300)
    assert "ALL TESTS PASSED" in out, out
    assert "panic" not in g.transcript
