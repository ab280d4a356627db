"""Edge-case system-call arguments: the kernel's usertests cases for them.

Each case is a usertests case (user/tests/usertests.c):

- ``wraprange``: read/write/fstat buffers whose range wraps past 2^64 or runs
  past the top of user space get EFAULT, never reach the disk driver (which
  would panic on such a buffer: ``virtio_disk_io: bad segment count``).
- ``highexec``: a program whose only segment is at 192 GiB forks and exits in
  well under a second: copying and freeing an address space visits only the
  pages it maps, not every page below its top.
- ``aicallnomem``: ``ai_call`` out of kernel memory fails with AIE_NOMEM and
  leaves no request in the table.
- ``aicompletenomem``: the worker's ``ai_complete`` works with no kernel memory
  left, so a request never stays RUNNING for want of memory.
- ``killrace``: a kill that races with the victim's pipe-read sleep always ends it
  (a stress case: the window is a few instructions wide, so a pass is evidence,
  not proof; why it holds is argued in proc.c's sleep()).
- ``deaddir``: a directory removed while it is a process's cwd takes no new
  names (ENOENT), so no file is created into a directory that is going away
  (a create/unlink race).

They run on one and two harts (the kill race needs two to have a window).
"""

from __future__ import annotations

import re

import pytest

from pyaisvc.guest.qemu import CONSOLE_AI_WORKER

pytestmark = pytest.mark.guest

CASES = ["wraprange", "highexec", "aicallnomem", "aicompletenomem", "killrace", "deaddir"]


@pytest.mark.parametrize("cpus", [1, 2])
def test_edge_case_syscalls_pass(boot_guest, cpus: int) -> None:
    g = boot_guest(cpus=cpus, append=CONSOLE_AI_WORKER)  # the AI cases act as the worker
    out = g.run("usertests " + " ".join(CASES), timeout=180)
    for name in CASES:
        assert f"test {name}: OK" in out, out
    assert re.search(r"^\d+ passed, 0 failed$", out, re.M), out
    assert "panic" not in g.transcript
    assert g.run("echo alive") == "alive\n"
