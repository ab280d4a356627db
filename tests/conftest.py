"""Fixtures shared by the test suite.

Fixtures (name -> what it gives):

``repo_root`` (session) -> Path
    The repository root.

``build`` (session) -> Build
    Runs ``make kernel uprogs testprogs fsimg`` once per session (per worker
    under pytest-xdist, one worker at a time: tests/host/buildlock.py) (fails the
    test with make's output if that fails). ``Build`` has ``kernel`` (the
    kernel ELF), ``image`` (build/fs.img: every UPROG at /NAME), ``uprogs``
    (dict NAME -> ELF path of every guest program in the Makefile's UPROGS)
    and ``testprogs`` (dict NAME -> ELF of tests/progs/NAME.c).

``make_image`` -> callable
    ``make_image(files: Mapping[str, Path | bytes], uprogs: bool = True) -> Path``
    builds a new image in the test's tmp_path holding every UPROG at /NAME
    (unless uprogs=False) plus ``files`` (guest path -> host file or bytes).

``boot_guest`` -> callable
    ``boot_guest(cpus: int = 1, ram: str = "256M", image: Path | None = None,
    timeout: float = 60.0) -> pyaisvc.qemu.Guest`` boots QEMU (image defaults
    to build/fs.img) and returns the guest at the shell prompt. Disks are
    opened with snapshot=on: writes go to a throw-away overlay, so tests never
    change an image and several QEMUs can share one. Every guest is closed at
    teardown, also when the test fails.
    Guest: ``run(cmd, timeout=30) -> str`` (the output, echo and \\r stripped),
    ``boot_seconds``, ``harts``, ``ram_mib``, ``transcript``, ``child`` (the
    pexpect child, for typing raw keys), ``close()``.

Mark every test that boots the guest with ``@pytest.mark.guest``.

Parallel runs (``make test``: pytest-xdist, ``-n 2 --dist loadfile``): each
file runs in one worker, so a module fixture is built once; files listed in
SLOW_FILES are handed out first, so the longest ones do not start last.
Everything a test writes goes to its tmp_path, and every QEMU boots its disk
with snapshot=on, so workers never share a writable file.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from host.buildlock import build_lock

from pyaisvc import fsimg
from pyaisvc.qemu import Guest, QemuConfig

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Build:
    kernel: Path
    image: Path
    uprogs: dict[str, Path]
    testprogs: dict[str, Path]


def _make_list(root: Path, variable: str) -> list[str]:
    """The words of a Makefile variable, as make expands it (the print-VAR rule)."""
    out = subprocess.run(["make", "-s", "--no-print-directory", f"print-{variable}"],
                         cwd=root, capture_output=True, text=True, check=True)
    return out.stdout.split()


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def build(repo_root: Path) -> Build:
    with build_lock():
        proc = subprocess.run(["make", "kernel", "uprogs", "testprogs", "fsimg"], cwd=repo_root,
                              capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.fail(f"make failed:\n{(proc.stdout + proc.stderr)[-4000:]}", pytrace=False)
    names = _make_list(repo_root, "UPROGS")
    tests = _make_list(repo_root, "TESTPROGS")
    return Build(
        kernel=repo_root / "build/kernel/kernel",
        image=repo_root / "build/fs.img",
        uprogs={n: repo_root / f"build/user/_{n}" for n in names},
        testprogs={n: repo_root / f"build/tests/_{n}" for n in tests},
    )


@pytest.fixture
def make_image(build: Build, tmp_path: Path) -> Callable[..., Path]:
    counter = iter(range(1 << 30))

    def make(files: Mapping[str, Path | bytes], uprogs: bool = True) -> Path:
        n = next(counter)
        tree = fsimg.Tree(fsimg.load_layout())
        if uprogs:
            for name, elf in build.uprogs.items():
                tree.add_file(name, elf)
        for target, content in files.items():
            host = content
            if isinstance(content, bytes):
                host = tmp_path / f"content-{n}-{target.replace('/', '_')}"
                host.write_bytes(content)
            tree.add_file(target, host)
        image = tmp_path / f"test-{n}.img"
        fsimg.build_image(image, tree)
        return image

    return make


@pytest.fixture
def boot_guest(build: Build) -> Iterator[Callable[..., Guest]]:
    guests: list[Guest] = []

    def boot(cpus: int = 1, ram: str = "256M", image: Path | None = None,
             timeout: float = 60.0) -> Guest:
        cfg = QemuConfig(kernel=build.kernel, image=image or build.image, ram=ram,
                         cpus=cpus, snapshot=True)
        guest = Guest(cfg)
        guests.append(guest)
        guest.boot(timeout=timeout)
        return guest

    yield boot
    for guest in guests:
        guest.close()
