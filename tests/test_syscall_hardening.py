"""Edge-case system-call arguments (issue 12): the kernel's usertests cases for them.

Each case is a usertests case (user/tests/usertests.c, "issue 12" section):

- ``wraprange``: read/write/fstat buffers whose range wraps past 2^64 or runs
  past the top of user space get EFAULT; the old kernel panicked in
  ``virtio_disk_io: bad segment count`` on the read.
- ``highexec``: a program whose only segment is at 192 GiB forks and exits in
  well under a second; the old kernel walked every page below it (7.6 s per walk).
- ``aicallnomem``: ``ai_call`` out of kernel memory fails with AIE_NOMEM and
  leaves no request in the table; the old kernel left it queued.
- ``aicompletenomem``: the worker's ``ai_complete`` works with no kernel memory
  left; the old kernel failed it with AIE_NOMEM and the request stayed RUNNING.
- ``killrace``: a kill that races with the victim's pipe-read sleep always ends it
  (a stress case: the window is a few instructions wide, so it did not catch
  the old kernel in our runs; the fix is argued in proc.c's sleep()).
- ``deaddir``: a directory removed while it is a process's cwd takes no new
  names (ENOENT); the old kernel created files in it, which then vanished with
  it (found by the syscall fuzzer as a create/unlink race).

They run on one and two harts (the kill race needs two to have a window).
"""

from __future__ import annotations

import re

import pytest

from pyaisvc.qemu import CONSOLE_AI_WORKER

pytestmark = pytest.mark.guest

CASES = ["wraprange", "highexec", "aicallnomem", "aicompletenomem", "killrace", "deaddir"]


@pytest.mark.parametrize("cpus", [1, 2])
def test_issue12_cases_pass(boot_guest, cpus: int) -> None:
    g = boot_guest(cpus=cpus, append=CONSOLE_AI_WORKER)  # the AI cases act as the worker
    out = g.run("usertests " + " ".join(CASES), timeout=180)
    for name in CASES:
        assert f"test {name}: OK" in out, out
    assert re.search(r"^\d+ passed, 0 failed$", out, re.M), out
    assert "panic" not in g.transcript
    assert g.run("echo alive") == "alive\n"
