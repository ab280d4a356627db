"""The long fuzzers on a Dask cluster: ``make fuzz-syscalls CLUSTER=ADDRESS`` and
``make fuzz-fs CLUSTER=ADDRESS``.

    python -m pyaisvc.cluster.fuzz tcp://lab01:8786 syscalls --seeds 4
    python -m pyaisvc.cluster.fuzz tcp://lab01:8786 fs

The fuzzers are pytest tests (tests/test_syscall_fuzz.py: one 1,000,000-call
run per hart count; tests/test_fs_fuzz.py: one corrupted image per case).
The client collects their test ids here (``pytest --collect-only`` with the
suite's environment) and makes each (seed, test id) one Dask task that holds
a worker's guest resource (pyaisvc.cluster.workers): the syscall fuzzer's seeds x
harts, the file-system fuzzer's image cases. A task runs that one test with
pytest in the worker's checkout, after the same checks as a benchmark cell:
the worker's commit is the client's, and the guest programs and kernel it
built hash the same as the client's. A failed test is a finding, not an
accident, so it is not tried again; a worker that dies has its task run
elsewhere (Dask reschedules it).

The summary merges every task: calls made, failed calls, leaks (the
fuzzer's end-of-run leak checks), panics and hangs, then the output tail of
each test that failed.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pyaisvc.cluster.workers import (
    ClusterError,
    WrongCode,
    checkout,
    git_commit,
    mismatch,
    run_on_workers,
    worker_code,
)
from pyaisvc.errors import AisvcError
from pyaisvc.guest.qemu import TAIL_CHARS


@dataclass(frozen=True)
class Suite:
    """One fuzzer as pytest runs it."""

    path: str  # the test file
    env: dict[str, str]  # what selects its long run
    timeout_s: float  # one test's limit
    default_seed: int  # AISVC_FUZZ_SEED's default in the test file


SUITES = {
    "syscalls": Suite("tests/test_syscall_fuzz.py", {"AISVC_FUZZ_SYSCALLS": "1"}, 5 * 3600,
                      20261201),
    "fs": Suite("tests/test_fs_fuzz.py", {"AISVC_FUZZ_FS": "1"}, 1800, 20261201),
}
BUILT = ("kernel", "uprogs", "testprogs")  # what the fuzzers boot, made before hashing
# What a failed test's output says happened (the fuzzer's own lines, the Guest's errors).
LEAK = re.compile(r"^fuzz: leak: .*$", re.M)
SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed$", re.M)
FIGURES = re.compile(r"^fuzz-syscalls: \d+ hart\(s\): (\d+) calls", re.M)  # the test's line
CALLS = re.compile(r"^fuzz: (\d+) calls in \d+ ms", re.M)  # the guest's (a failed run's)
PANIC = re.compile(r"panicked|^panic: ", re.M)
HANG = re.compile(r"timed out waiting|' hung|GuestTimeout")


@dataclass(frozen=True)
class FuzzTask:
    test: str  # pytest node id
    seed: int
    env: dict[str, str]
    commit: str
    digest: str  # build_digest() of the client's checkout
    timeout_s: float


@dataclass(frozen=True)
class FuzzResult:
    test: str
    seed: int
    worker: str
    passed: bool
    calls: int
    failed_calls: int
    leaks: int
    panic: bool
    hang: bool
    seconds: float
    tail: str  # the end of pytest's output when the test failed


def build_digest(root: Path) -> str:
    """sha256 over the kernel and every guest program the build made (names and bytes),
    after `make kernel uprogs testprogs`; ClusterError when the build fails."""
    proc = subprocess.run(["make", *BUILT], cwd=root, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ClusterError(f"`make {' '.join(BUILT)}` failed in {root}:\n"
                           f"{(proc.stdout + proc.stderr)[-2000:]}")
    h = hashlib.sha256()
    files = [root / "build/kernel/kernel",
             *sorted((root / "build/user").glob("_*")), *sorted((root / "build/tests").glob("_*"))]
    for f in files:
        with open(f, "rb") as data:
            h.update(f"{f.relative_to(root)} {hashlib.file_digest(data, 'sha256').hexdigest()}\n"
                     .encode())
    return h.hexdigest()


def classify(output: str, passed: bool, seconds: float, test: str, seed: int,
             worker: str) -> FuzzResult:
    """A test's result from what pytest printed (the figures line of a long syscall run,
    the fuzzer's summary and leak lines, the Guest's panic and time-out errors)."""
    figures = FIGURES.search(output) or CALLS.search(output)
    calls = int(figures.group(1)) if figures else 0
    # a failed run's guest output may be quoted more than once: count its first copy
    summary = SUMMARY.search(output)
    leaks = len(set(LEAK.findall(output[:summary.end()] if summary else output)))
    failed_calls = max(0, int(summary.group(2)) - leaks) if summary else 0
    return FuzzResult(test, seed, worker, passed, calls, failed_calls, leaks,
                      bool(PANIC.search(output)), bool(HANG.search(output)), seconds,
                      "" if passed else output[-TAIL_CHARS:])


def run_test(task: FuzzTask) -> FuzzResult:
    """Runs one fuzzer test in this worker's checkout after checking its commit and build
    against the client's (WrongCode)."""
    code = worker_code()
    root = Path(code["root"])
    if (why := mismatch(code, task.commit)) is not None:
        raise WrongCode(why)
    digest = build_digest(root)
    if digest != task.digest:
        raise WrongCode(f"worker {code['name']}: the kernel and programs it built hash "
                        f"{digest[:12]}, the client's {task.digest[:12]} at the same commit "
                        f"{task.commit[:12]}: its RISC-V toolchain differs; run `make deps` on "
                        "the same Debian release as the client")
    env = {**os.environ, **task.env, "AISVC_FUZZ_SEED": str(task.seed)}
    t0 = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p",
                               "no:cacheprovider", task.test], cwd=root, env=env,
                              capture_output=True, text=True, timeout=task.timeout_s)
        output, passed = proc.stdout + proc.stderr, proc.returncode == 0
    except subprocess.TimeoutExpired as e:
        said = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else e.stdout
        output, passed = f"{said or ''}\nGuestTimeout: the test ran past {task.timeout_s:.0f} s", \
            False
    return classify(output, passed, time.monotonic() - t0, task.test, task.seed, code["name"])


def collect(root: Path, suite: Suite) -> list[str]:
    """The test ids of suite's long run, as pytest collects them with its environment."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "fuzz",
                           "-p", "no:cacheprovider", suite.path], cwd=root,
                          env={**os.environ, **suite.env}, capture_output=True, text=True)
    tests = [line for line in proc.stdout.splitlines() if line.startswith(suite.path + "::")]
    if not tests:
        raise ClusterError(f"pytest collected no fuzz test in {suite.path}:\n"
                           f"{(proc.stdout + proc.stderr)[-2000:]}")
    return tests


def summary(name: str, results: list[FuzzResult]) -> str:
    """The merged figures, one line per test, then each failure's output tail."""
    n = len(results)
    bad = [r for r in results if not r.passed]
    calls = name == "syscalls"  # the file-system fuzzer makes no counted calls
    lines = [f"fuzz-{name}: {n} test(s) on {len({r.worker for r in results})} worker(s): "
             + (f"{sum(r.calls for r in results)} calls, "
                f"{sum(r.failed_calls for r in results)} failed calls, "
                f"{sum(r.leaks for r in results)} leaks, " if calls else "")
             + f"{sum(r.panic for r in results)} panics, {sum(r.hang for r in results)} hangs; "
             f"{n - len(bad)} passed, {len(bad)} failed", ""]
    for r in sorted(results, key=lambda r: (r.test, r.seed)):
        lines.append(f"  {'passed' if r.passed else 'FAILED'}  {r.test} seed {r.seed} on "
                     f"{r.worker}: " + (f"{r.calls} calls, " if calls else "")
                     + f"{r.seconds:.0f} s")
    for r in bad:
        lines += ["", f"--- {r.test} seed {r.seed} on {r.worker} ---", r.tail.rstrip()]
    return "\n".join(lines) + "\n"


def run_fuzz(address: str, name: str, seeds: list[int], tests: list[str] | None = None,
             root: Path | None = None) -> list[FuzzResult]:
    """Every (seed, test) of the suite as a task on the cluster; the results as they come.
    tests: the ids to run (default: all that pytest collects)."""
    suite = SUITES[name]
    # the client's AISVC_FUZZ_* settings (e.g. AISVC_FUZZ_CALLS) go to every task
    env = {**{k: v for k, v in os.environ.items() if k.startswith("AISVC_FUZZ_")}, **suite.env}
    root = root or checkout()
    commit = git_commit(root)
    tests = tests or collect(root, suite)
    digest = build_digest(root)
    runs = [(s, t) for s in seeds for t in tests]
    results: list[FuzzResult] = []

    def say(line: str) -> None:
        """Prints line on stderr under the suite's name."""
        print(f"fuzz-{name}: {line}", file=sys.stderr)

    def task(run: tuple[int, str]) -> tuple[Callable[[FuzzTask], FuzzResult], FuzzTask, str]:
        """run_test, the run's task and its key prefix (for run_on_workers)."""
        seed, test = run
        return (run_test, FuzzTask(test, seed, env, commit, digest, suite.timeout_s),
                f"fuzz-{name}-{seed}")

    def finished(_run: tuple[int, str], fut) -> None:
        """Keeps the ended test's result and says how it went."""
        r: FuzzResult = fut.result()  # WrongCode and lost tasks end the run
        results.append(r)
        say(f"{'passed' if r.passed else 'FAILED'} {r.test} seed {r.seed} on {r.worker} "
            f"({len(results)}/{len(runs)})")

    run_on_workers(address, commit, runs, task, finished,
                   f"task(s) ({len(seeds)} seed(s) x {len(tests)} test(s))", say)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m pyaisvc.cluster.fuzz ADDRESS syscalls|fs`: exit 0 when every test passed."""
    p = argparse.ArgumentParser(prog="python -m pyaisvc.cluster.fuzz", description=main.__doc__)
    p.add_argument("address", help="the Dask scheduler, e.g. tcp://lab01:8786")
    p.add_argument("suite", choices=SUITES)
    p.add_argument("--seeds", type=int, default=1,
                   help="how many seeds from AISVC_FUZZ_SEED (or the test file's default) on")
    p.add_argument("--test", action="append", metavar="ID",
                   help="run only this test id (repeatable; default: every one collected)")
    args = p.parse_args(argv)
    if args.seeds < 1:
        p.error("--seeds must be at least 1")
    first = int(os.environ.get("AISVC_FUZZ_SEED", SUITES[args.suite].default_seed))
    try:
        results = run_fuzz(args.address, args.suite, list(range(first, first + args.seeds)),
                           args.test)
    except AisvcError as e:
        print(f"fuzz-{args.suite}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"fuzz-{args.suite}: interrupted", file=sys.stderr)
        return 130
    sys.stdout.write(summary(args.suite, results))
    return 0 if all(r.passed for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
