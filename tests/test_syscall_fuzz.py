"""The guest system-call fuzzer, user/tests/fuzz.c, on one and two harts.

`fuzz -s SEED -p PROCS -n CALLS` runs PROCS worker processes of CALLS checked
calls each (typed and raw arguments to every system call, forked children, threads,
AI calls served by a fuzzer-run worker: the boots pass CONSOLE_AI_WORKER so that it may register,
docs/AI_SERVICE.md rule 13), then checks that free pages, open-file slots, process
slots and AI slots are back to their start values, and prints
"N passed, N failed" (N counts every call plus the leak checks).

A short run is part of the normal suite; `make fuzz-syscalls` runs the long
one (AISVC_FUZZ_SYSCALLS=1: 8 x 125,000 = 1,000,000 calls on 1 and on 2 harts)
and prints the figures. AISVC_FUZZ_SEED changes the seed, AISVC_FUZZ_CALLS the
calls per process of the long run (`make fuzz-syscalls CLUSTER=` spreads seeds
and harts over a Dask cluster: pyaisvc.cluster.fuzz).
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import pytest

from pyaisvc.guest.qemu import CONSOLE_AI_WORKER, Guest, QemuConfig
from pyaisvc.image import fscheck

pytestmark = pytest.mark.guest

SEED = int(os.environ.get("AISVC_FUZZ_SEED", "20261201"))
LONG = os.environ.get("AISVC_FUZZ_SYSCALLS") == "1"
LONG_CALLS = int(os.environ.get("AISVC_FUZZ_CALLS", "125000"))  # per process
SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed$", re.M)
CALLS = re.compile(r"^fuzz: (\d+) calls in (\d+) ms", re.M)


def _fuzz(guest, seed: int, procs: int, calls: int, timeout: float) -> tuple[int, int]:
    """Runs the fuzzer; asserts a clean result. Returns (calls, ms)."""
    out = guest.run(f"fuzz -s {seed} -p {procs} -n {calls}", timeout=timeout)
    summary = SUMMARY.search(out)
    figures = CALLS.search(out)
    assert summary and figures, f"fuzz printed no summary:\n{out}"
    assert summary.group(2) == "0", out
    done = int(figures.group(1))
    assert done >= procs * calls, out  # every worker reported every call
    assert int(summary.group(1)) == done + 4, out  # the calls and four leak checks
    assert "panic" not in guest.transcript
    # The file system reported no damage: the image starts clean, so a damaged inode
    # ("fs: inode N: ...") is one the kernel itself wrote (a create that raced with
    # the iput freeing the same inode once linked an inode with no links).
    assert not re.search(r"^fs: ", guest.transcript, re.M), guest.transcript[-2000:]
    assert guest.run("echo alive") == "alive\n"
    # The scratch directory is gone.
    assert "fuzz.tmp" not in guest.run("ls")
    return done, int(figures.group(2))


def _fuzz_on_a_copy(build, tmp_path: Path, cpus: int, calls: int, timeout: float
                    ) -> tuple[int, int]:
    """_fuzz on a writable copy of the image, which the host's checker then finds
    consistent: the fuzzer removed all it made, and nothing it did to the file
    system (concurrent creates, links and removals from 8 processes and their
    children) left a wrong link count, an inode no directory names or a lost block."""
    image = tmp_path / "fuzz.img"
    shutil.copyfile(build.image, image)
    cfg = QemuConfig(kernel=build.kernel, image=image, cpus=cpus, append=CONSOLE_AI_WORKER)
    with Guest(cfg) as g:
        got = _fuzz(g, SEED + cpus, procs=8, calls=calls, timeout=timeout)
    assert fscheck.check_image(image) == []
    return got


@pytest.mark.parametrize("cpus", [1, 2])
def test_fuzz_brief(build, tmp_path: Path, cpus: int) -> None:
    _fuzz_on_a_copy(build, tmp_path, cpus, calls=150, timeout=240)


def test_fuzz_removes_a_scratch_tree_deeper_than_its_descriptors(boot_guest) -> None:
    """A 1,000,000-call run left fuzz.tmp behind: a worker's chdir had nested
    directories deeper than a process's 16 descriptors, and the clean-up held one
    per level. A 24-deep tree left from such a run is removed at the next start."""
    g = boot_guest()
    g.run("mkdir fuzz.tmp ; cd fuzz.tmp" + " ; mkdir a ; cd a" * 24 + " ; echo x > f ; cd /")
    assert g.run("ls fuzz.tmp").count(" a\n") == 1
    _fuzz(g, SEED, procs=1, calls=20, timeout=120)


def test_fuzz_bad_arguments(boot_guest) -> None:
    out = boot_guest().run("fuzz -p 0")
    assert "usage: fuzz [-s SEED] [-p PROCS] [-n CALLS]" in out
    assert "passed" not in out


# The long run exists only under make fuzz-syscalls.
if LONG:

    @pytest.mark.fuzz
    @pytest.mark.parametrize("cpus", [1, 2])
    def test_fuzz_million(build, tmp_path: Path, cpus: int) -> None:
        t0 = time.monotonic()
        done, ms = _fuzz_on_a_copy(build, tmp_path, cpus, calls=LONG_CALLS, timeout=4 * 3600)
        print(f"\nfuzz-syscalls: {cpus} hart(s): {done} calls, guest {ms / 1000:.0f} s "
              f"({done * 1000 // max(ms, 1)} calls/s), wall {time.monotonic() - t0:.0f} s, "
              "0 failed, 0 leaks")
