"""Run the guest's self-test, user/tests/usertests.c, under QEMU on one and two harts.

usertests prints one line per case, "test NAME: OK" or "test NAME: FAILED (why)",
then "N passed, N failed" and, when nothing failed, "ALL TESTS PASSED". Its
bigfile case writes 110 MB and sbrkbig grows the heap by as much as RAM allows,
so the guest gets an image of its own, IMAGE_MIB whatever size build/fs.img
has, and 1-2 GiB of RAM. Its AI cases act as the worker, so the boots pass
CONSOLE_AI_WORKER (docs/AI_SERVICE.md, rule 13).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pyaisvc.guest.qemu import CONSOLE_AI_WORKER
from pyaisvc.image import fsimg

IMAGE_MIB = 512
SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed$", re.M)
CASE = re.compile(r"^test (\S+): (OK|FAILED \(.*\))$", re.M)
TABLE_ENTRY = re.compile(r'^\s*\{ t_\w+,\s*"(\w+)"', re.M)


@pytest.fixture(scope="module")
def big_image(build, tmp_path_factory) -> Path:
    """Every guest program on an image with room for the 110 MB case."""
    tree = build.program_tree()
    image = tmp_path_factory.mktemp("usertests") / "fs.img"
    fsimg.build_image(image, tree, size_blocks=IMAGE_MIB * (1 << 20) // tree.layout.BSIZE)
    return image


def table_names(repo_root: Path) -> list[str]:
    """The case names in usertests.c's table, in order, then the leak checks."""
    source = (repo_root / "user/tests/usertests.c").read_text()
    return TABLE_ENTRY.findall(source) + ["memleak", "fileleak"]


def check_report(out: str, want_cases: list[str]) -> None:
    """Asserts that out ran exactly want_cases and that all of them passed."""
    cases = CASE.findall(out)
    failed = [f"test {name}: {result}" for name, result in cases if result != "OK"]
    summary = SUMMARY.search(out)
    assert summary, f"usertests printed no summary line; its output:\n{out}"
    assert not failed and summary.group(2) == "0", (
        "usertests failed:\n" + "\n".join(failed) + f"\n\nfull output:\n{out}")
    assert [name for name, _ in cases] == want_cases, f"cases run:\n{out}"
    assert int(summary.group(1)) == len(want_cases)
    assert "ALL TESTS PASSED" in out


@pytest.mark.guest
@pytest.mark.parametrize("cpus,ram", [(1, "1G"), (2, "2G")])
def test_usertests_all_pass(boot_guest, big_image, repo_root, cpus: int, ram: str) -> None:
    g = boot_guest(cpus=cpus, ram=ram, image=big_image, append=CONSOLE_AI_WORKER)
    out = g.run("usertests", timeout=900)
    check_report(out, table_names(repo_root))
    # The kernel lived through every bad argument; so did the shell.
    assert g.run("echo alive") == "alive\n"
    assert "panic" not in g.transcript


@pytest.mark.guest
def test_usertests_options(boot_guest, repo_root) -> None:
    g = boot_guest(append=CONSOLE_AI_WORKER)
    check_report(g.run("usertests pipe dup", timeout=120), ["pipe", "dup", "memleak", "fileleak"])
    out = g.run("usertests nosuchcase")
    assert "usertests: no test named nosuchcase" in out
    assert "usage: usertests [-q] [NAME...]" in out
    assert "passed" not in out
    # -q leaves out exactly the cases marked slow in the table.
    source = (repo_root / "user/tests/usertests.c").read_text()
    slow = re.findall(r'^\s*\{ t_\w+,\s*"(\w+)", 1 \}', source, re.M)
    assert slow, "no slow cases found in the table"
    out = g.run("usertests -q", timeout=600)
    quick = [n for n in table_names(repo_root) if n not in slow]
    check_report(out, quick)
