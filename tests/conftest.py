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
    ``build.program_tree(testprogs=(), without=())`` -> pyaisvc.image.fsimg.Tree: a new
    tree holding every UPROG at /NAME (but those in ``without``) and the named
    test programs, for a fixture of any scope to add its files to and build
    (``fsimg.build_image``).

``make_image`` -> callable
    ``make_image(files: Mapping[str, Path | bytes], uprogs: bool = True) -> Path``
    builds a new image in the test's tmp_path holding every UPROG at /NAME
    (unless uprogs=False) plus ``files`` (guest path -> host file or bytes).

``boot_guest`` -> callable
    ``boot_guest(cpus: int = 1, ram: str = DEFAULT_RAM, image: Path | None = None,
    timeout: float = 60.0, append: str = "") -> pyaisvc.guest.qemu.Guest`` boots QEMU
    (image defaults to build/fs.img; ``append`` is the boot command line, e.g.
    ``pyaisvc.guest.qemu.CONSOLE_AI_WORKER`` for a test whose console programs act as
    the AI worker) and returns the guest at the shell prompt. Disks are
    opened with snapshot=on: writes go to a throw-away overlay, so tests never
    change an image and several QEMUs can share one. Every guest is closed at
    teardown, also when the test fails.
    Guest: ``run(cmd, timeout=30) -> str`` (the output, echo and \\r stripped),
    ``boot_seconds``, ``harts``, ``ram_mib``, ``transcript``, ``child`` (the
    pexpect child, for typing raw keys), ``close()``.

``boot_shared_guest`` (module) -> callable
    The same, for a module fixture that boots one guest several tests share (its
    tests then form one group, below): for cases that each need no boot of their
    own, change nothing another case reads and check what they need themselves.
    Its guests are closed when the module's tests are done.

Mark every test that boots the guest with ``@pytest.mark.guest``.

Parallel runs (``make test``: pytest-xdist, ``-n 2 --dist loadgroup``): the
tests of a file that share a module-scoped fixture (an export, an image, a
benchmark run; each value of a parametrized one counts apart) form one group
that runs in one worker, so that fixture is built once; every other test is
handed out on its own (``xdist_groups``). Files in SLOW_FILES are collected
first, so their long groups start early instead of last, then the other guest
tests, then the host's: make test passes ``--no-loadscope-reorder``, so the workers
take the groups in this order (xdist's default puts the groups with most tests
first). Everything a test writes goes to its tmp_path, and every QEMU boots its
disk with snapshot=on, so workers never share a writable file.
"""

from __future__ import annotations

import os

# Under pytest-xdist each worker gets one core's worth of numpy and torch: their
# default of one BLAS/OpenMP thread per core, in 2 workers on 2 cores, spins
# threads against each other and against the other worker's QEMU (the numpy
# reference ran 2.1x slower that way). Set before anything imports numpy.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

import subprocess
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from host.buildlock import build_lock

from pyaisvc.guest.qemu import DEFAULT_RAM, Guest, QemuConfig
from pyaisvc.image import fsimg

ROOT = Path(__file__).resolve().parent.parent
# The files whose groups take longest (minutes each on the 2-core machine), longest first.
SLOW_FILES = ("test_fidelity.py", "test_export.py", "test_ai_service.py", "test_serve.py",
              "test_chat.py", "test_bench.py", "test_generate.py", "test_llmrun_guest.py",
              "test_usertests.py", "test_llmrun_host.py", "test_fs_guest.py")

# Module fixtures cheap enough to build in every worker that needs them (loading a
# model, a no-op make, a directory, an image of a few files: seconds): they do not tie
# their tests into one group, so tests that each boot their own guest on such an image
# spread over the workers. What stays grouped is what takes minutes or holds a live
# guest or server: an export, a benchmark run, a booted gateway, a `pyaisvc serve`.
CHEAP_FIXTURES = frozenset({
    "smol", "smol_model", "tiny_model", "progs", "tok", "qwen", "qwen_dir", "smol_assets",
    "smol_hf", "reference", "image", "qwen_image", "kv_image", "thread_image", "llm_image",
    "vec_image", "port_image", "big_image"})


def _group_name(file: str, fixture: str, param: object) -> str:
    """A group name xdist honours: its loadgroup reads the text after the last '@' of
    a test's id as the group only when no ']' follows, so the name has no brackets."""
    name = f"{file}::{fixture}" if param is None else f"{file}::{fixture}={param}"
    return name.replace("[", "(").replace("]", ")")


def xdist_groups(items: list[pytest.Item]) -> dict[str, str]:
    """nodeid -> group for every test that uses a module- or class-scoped fixture (but
    CHEAP_FIXTURES): tests of one file joined, directly or through others, by such a
    fixture (or the same parameter of a parametrized one) share a group."""
    parent: dict[str, str] = {}

    def find(k: str) -> str:
        while parent.setdefault(k, k) != k:
            k = parent[k]
        return k

    keys: dict[str, list[str]] = {}
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        mine = []
        for name in item.fixturenames:
            defs = item._fixtureinfo.name2fixturedefs.get(name)
            if defs and defs[-1].scope in ("module", "class") and name not in CHEAP_FIXTURES:
                mine.append(_group_name(item.path.name, name, params.get(name)))
        for k in mine[1:]:
            parent[find(k)] = find(mine[0])
        keys[item.nodeid] = mine
    return {nodeid: find(ks[0]) for nodeid, ks in keys.items() if ks}


# tryfirst: xdist's worker reads the xdist_group markers in its own hook of this name,
# so ours must have added them by then.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        """SLOW_FILES first, longest first, then the other guest tests, the host's last:
        the short tests at the end keep both workers busy until the suite ends."""
        name = item.path.name
        if name in SLOW_FILES:
            return SLOW_FILES.index(name)
        return len(SLOW_FILES) + (item.get_closest_marker("guest") is None)

    items.sort(key=rank)  # stable: the order within a file stays
    if config.pluginmanager.hasplugin("xdist"):  # the marker only steers --dist loadgroup
        groups = xdist_groups(items)
        for item in items:
            if item.nodeid in groups:
                item.add_marker(pytest.mark.xdist_group(name=groups[item.nodeid]))


@dataclass(frozen=True)
class Build:
    kernel: Path
    image: Path
    uprogs: dict[str, Path]
    testprogs: dict[str, Path]

    def program_tree(self, testprogs: Iterable[str] = (),
                     without: Iterable[str] = ()) -> fsimg.Tree:
        """A new image tree: every UPROG at /NAME but those in without, and the test
        programs named in testprogs."""
        tree = fsimg.Tree(fsimg.load_layout())
        skip = set(without)
        for name, elf in self.uprogs.items():
            if name not in skip:
                tree.add_file(name, elf)
        for name in testprogs:
            tree.add_file(name, self.testprogs[name])
        return tree


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
        tree = build.program_tree() if uprogs else fsimg.Tree(fsimg.load_layout())
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


def _booting(build: Build) -> Iterator[Callable[..., Guest]]:
    """boot_guest's and boot_shared_guest's booter; every guest it booted is closed
    when the generator ends."""
    guests: list[Guest] = []

    def boot(cpus: int = 1, ram: str = DEFAULT_RAM, image: Path | None = None,
             timeout: float = 60.0, append: str = "") -> Guest:
        cfg = QemuConfig(kernel=build.kernel, image=image or build.image, ram=ram,
                         cpus=cpus, snapshot=True, append=append)
        guest = Guest(cfg)
        guests.append(guest)
        guest.boot(timeout=timeout)
        return guest

    try:
        yield boot
    finally:
        for guest in guests:
            guest.close()


@pytest.fixture
def boot_guest(build: Build) -> Iterator[Callable[..., Guest]]:
    yield from _booting(build)


@pytest.fixture(scope="module")
def boot_shared_guest(build: Build) -> Iterator[Callable[..., Guest]]:
    yield from _booting(build)
