"""The fuzzers on a Dask cluster (pyaisvc.cluster.fuzz; `make fuzz-syscalls CLUSTER=`).

On loopback, a scheduler and two workers (one guest resource each) run the
long system-call fuzzer's tests, made short (AISVC_FUZZ_CALLS=40 calls per
process instead of 125,000), for two seeds: four tasks, each (seed, harts)
exactly once in the merged summary, every one clean, their calls adding up
to the total; then two of the file-system fuzzer's image cases. On the
host: the file-system fuzzer's full set is collected as one test id per
image case, and a failed run's output is read as the fuzzer's failed calls,
leaks, panics and hangs.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import test_fs_fuzz
from host.loopcluster import ROOT, loopback_cluster

from pyaisvc.cluster import fuzz as fuzzcluster

pytestmark = pytest.mark.skipif(not importlib.util.find_spec("distributed"),
                                reason="dask.distributed is not installed: run `make deps`")


def test_fs_cases_are_collected_one_task_each():
    tests = fuzzcluster.collect(ROOT, fuzzcluster.SUITES["fs"])
    want = len(test_fs_fuzz.GENERATORS) * test_fs_fuzz.CASES_PER_CLASS
    assert len(tests) == len(set(tests)) == want
    assert "tests/test_fs_fuzz.py::test_fuzz_full[superblock-0]" in tests


def test_a_failed_run_is_read_as_calls_leaks_panics_and_hangs():
    guest = ("fuzz: seed 5, 8 processes x 40 calls\n"
             "fuzz: worker 3: 2 failed; first: read(3) returned 7\n"
             "fuzz: leak: free pages 100 before, 98 after\n"
             "fuzz: 322 calls in 900 ms; free pages 100 -> 98\n"
             "324 passed, 3 failed\n")
    out = f"E   AssertionError: {guest}E   assert '3' == '0'\n{guest}1 failed in 9.1s\n"
    r = fuzzcluster.classify(out, False, 9.1, "t[1]", 5, "w1")
    assert (r.calls, r.failed_calls, r.leaks, r.panic, r.hang) == (322, 2, 1, False, False)
    assert r.tail.endswith("1 failed in 9.1s\n")
    hung = fuzzcluster.classify("GuestTimeout: timed out waiting for the end of 'fuzz'", False,
                                1.0, "t[2]", 5, "w2")
    assert (hung.hang, hung.panic, hung.calls) == (True, False, 0)
    panicked = fuzzcluster.classify("GuestCrashed: the kernel panicked while waiting", False,
                                    1.0, "t[2]", 5, "w2")
    assert panicked.panic and not panicked.hang
    ok = fuzzcluster.classify("fuzz-syscalls: 2 hart(s): 326 calls, guest 1 s (326 calls/s)",
                              True, 1.0, "t[2]", 5, "w2")
    assert (ok.calls, ok.tail) == (326, "")
    text = fuzzcluster.summary("syscalls", [r, hung, panicked, ok])
    assert text.startswith("fuzz-syscalls: 4 test(s) on 2 worker(s): 648 calls, 2 failed "
                           "calls, 1 leaks, 1 panics, 1 hangs; 1 passed, 3 failed\n")
    assert fuzzcluster.summary("fs", [hung, ok]).startswith(
        "fuzz-fs: 2 test(s) on 1 worker(s): 0 panics, 1 hangs; 1 passed, 1 failed\n\n"
        "  FAILED  t[2] seed 5 on w2: 1 s\n")


@pytest.mark.guest
def test_fuzzers_as_tasks(build, tmp_path: Path):
    with loopback_cluster(tmp_path / "logs") as cluster:
        cluster.add_worker("w1")
        cluster.add_worker("w2")
        cluster.wait_for(2)
        env = {**os.environ, "AISVC_FUZZ_CALLS": "40", "AISVC_FUZZ_SEED": "7"}
        proc = subprocess.run([sys.executable, "-m", "pyaisvc.cluster.fuzz", cluster.address,
                               "syscalls", "--seeds", "2"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=1800)
        cases = [f"tests/test_fs_fuzz.py::test_fuzz_full[{c}]" for c in ("log-0", "bitmap-1")]
        fs = subprocess.run([sys.executable, "-m", "pyaisvc.cluster.fuzz", cluster.address, "fs",
                             *(a for c in cases for a in ("--test", c))], cwd=ROOT,
                            capture_output=True, text=True, timeout=1800)
    assert fs.returncode == 0, fs.stdout + fs.stderr[-3000:]
    assert fs.stdout.startswith("fuzz-fs: 2 test(s) on ")
    assert sorted(re.findall(r"^  passed  (\S+) seed 20261201 on w[12]: ", fs.stdout, re.M)) \
        == sorted(cases)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    lines = re.findall(r"^  passed  tests/test_syscall_fuzz.py::test_fuzz_million\[(\d)\] "
                       r"seed (\d+) on (w1|w2): (\d+) calls", proc.stdout, re.M)
    assert sorted((h, s) for h, s, _, _ in lines) == [("1", "7"), ("1", "8"), ("2", "7"),
                                                      ("2", "8")]
    calls = [int(c) for *_, c in lines]
    assert all(c >= 8 * 40 for c in calls)  # every process made every call
    first = proc.stdout.splitlines()[0]
    assert re.fullmatch(rf"fuzz-syscalls: 4 test\(s\) on [12] worker\(s\): {sum(calls)} calls, "
                        r"0 failed calls, 0 leaks, 0 panics, 0 hangs; 4 passed, 0 failed",
                        first), first
