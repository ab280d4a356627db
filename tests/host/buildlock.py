"""One build at a time across parallel test workers (pytest-xdist).

The tests share build/: the kernel, the guest programs, build/fs.img, the
host runtime and the exports cached under build/llmtest. ``make test`` builds
everything before pytest starts, so normally each locked step finds nothing to
do; the lock makes a test run that starts from a stale build (``pytest -n 2``
by hand) safe too: the first worker builds while the others wait, then they
find the files up to date.

    with build_lock():
        subprocess.run(["make", "llm-host"], ...)
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def build_lock(name: str = "build") -> Iterator[None]:
    """Holds an exclusive lock on build/.test-NAME.lock (released on exit, also when the
    process dies). Steps that do not touch each other's files use different names."""
    lock = ROOT / "build" / f".test-{name}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
