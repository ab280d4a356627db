"""Image fuzzer: one corrupted field at a time, booted.

For each class of on-disk field (superblock, log header, inode type, size,
link count and block numbers, indirect blocks, directory entries, free
bitmap) a seeded generator corrupts one field of a fresh small image. Each
case then asserts that

  + `pyaisvc fsimg check` names the corruption;
  + the kernel boots it without a panic: to a shell, or, for a superblock
    whose inode table cannot be located, to its one-line refusal to mount
    (the documented outcome, kernel/fs/fs.c);
  + a fixed script of file operations (ls, cat, wc, mkdir, echo > file,
    ln, rm) finishes within its deadline with no panic;
  + the shell still answers `echo alive`.

The normal suite runs the first case of each class (`FUZZ_SAMPLE`). The
full set (`CASES_PER_CLASS` per class) runs with `make fuzz-fs`, which is
`AISVC_FUZZ_FS=1 pytest -m fuzz tests/test_fs_fuzz.py`; AISVC_FUZZ_SEED
changes the seed.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import fscorrupt as fc
import pytest

from pyaisvc.guest.qemu import GuestCrashed, GuestError, GuestTimeout
from pyaisvc.image import fscheck, fsimg

SEED = int(os.environ.get("AISVC_FUZZ_SEED", "20261201"))
CASES_PER_CLASS = 8
FULL = os.environ.get("AISVC_FUZZ_FS") == "1"
LAYOUT = fc.LAYOUT

FILES: dict[str, bytes] = {
    "f": b"hello\n",
    "g": b"world\n" * 1000,                   # 2 blocks
    "d/x": b"in d\n",
    "big": bytes(range(256)) * 16 * 40,       # 40 blocks: the indirect block too
}
TARGETS = ["f", "g", "d", "d/x", "big"]       # never the root or the programs
SCRIPT = [
    "ls", "cat f", "cat d/x", "wc big", "ls d",
    "mkdir newd", "echo hi > newd/nf", "cat newd/nf", "ln newd/nf newl", "rm newl",
    "echo more > f", "rm g", "rm d/x", "rm big", "ls",
]
REFUSAL = "refusing to mount"

pytestmark = pytest.mark.guest

Plant = Callable[[Path], str]  # corrupts the image; returns words check must print


@dataclass(frozen=True)
class Case:
    cls: str
    index: int
    desc: str
    plant: Plant

    def __str__(self) -> str:
        return f"{self.cls}-{self.index}"


def _pick(rng: random.Random, orig: int, values: list[int]) -> int:
    choices = [v for v in values if v != orig]
    return rng.choice(choices)


def _superblock(rng: random.Random) -> tuple[str, Plant]:
    field = rng.choice(["size", "nblocks", "ninodes", "nlog", "logstart", "inodestart",
                        "bmapstart", "magic", "version"])
    pick = rng.random()

    def plant(img: Path) -> str:
        orig = fc.superblock(img)[field]
        value = _pick(random.Random(pick), orig,
                      [0, 1, orig + 1, max(orig - 1, 0), orig * 2 + 1, 0xFFFFFFFF,
                       int(pick * 2**32)])
        fc.set_sb(img, field, value)
        return "superblock" if field not in ("magic", "version") else "not an aisvc"

    return f"superblock.{field}", plant


def _log(rng: random.Random) -> tuple[str, Plant]:
    kind = rng.choice(["count", "block-high", "block-low"])
    n = rng.randint(1, 5)
    seed = rng.random()

    def plant(img: Path) -> str:
        sb = fc.superblock(img)
        r = random.Random(seed)
        if kind == "count":
            fc.set_log_header(img, r.choice([-1, -(2**31), LAYOUT.LOGBLOCKS + 1, 2**31 - 1]),
                              [])
        else:
            bad = (r.randrange(sb["size"], 2**32) if kind == "block-high"
                   else r.randrange(0, sb["inodestart"]))
            blocks = [sb["inodestart"] + i for i in range(n)]
            blocks[r.randrange(n)] = bad
            fc.set_log_header(img, n, blocks)
        return "log header"

    return f"log.{kind}", plant


def _inode_field(field: str) -> Callable[[random.Random], tuple[str, Plant]]:
    def gen(rng: random.Random) -> tuple[str, Plant]:
        target = rng.choice(TARGETS)
        seed = rng.random()
        index = rng.randrange(3)

        def plant(img: Path) -> str:
            inum = fc.inum_of(img, target)
            r = random.Random(seed)
            orig = fc.get_inode(img, inum, field, index)
            if field == "type":
                values = [0, 4, -1, LAYOUT.T_DIR, LAYOUT.T_FILE, LAYOUT.T_DEVICE]
            elif field == "nlink":
                values = [0, -1, orig + 1, 32767, -32768]
            elif field == "size":
                # Not orig + 1 for a file: a size within the last block is
                # not damage that anything could tell.
                values = [orig + (1 if target == "d" else LAYOUT.BSIZE),
                          orig * 2 + LAYOUT.BSIZE, 2**63, 0 if orig else 1,
                          LAYOUT.MAXFILE * LAYOUT.BSIZE + 1]
            else:
                other = fc.file_blocks(img, "g")[0] if target != "g" else \
                    fc.file_blocks(img, "f")[0]
                sb = fc.superblock(img)
                values = [1, sb["bmapstart"], 10**9, 0xFFFFFFFF, other, sb["size"]]
                if orig:
                    values.append(0)
            value = _pick(r, orig, values)
            fc.set_inode(img, inum, field, value, index)
            return f"inode {inum}"

        return f"inode.{field}.{target}", plant

    return gen


def _indirect(rng: random.Random) -> tuple[str, Plant]:
    idx = rng.randrange(14)
    seed = rng.random()

    def plant(img: Path) -> str:
        inum = fc.inum_of(img, "big")
        sb = fc.superblock(img)
        value = random.Random(seed).choice(
            [0, 1, 0xFFFFFFFF, sb["size"], sb["inodestart"], fc.file_blocks(img, "f")[0]])
        fc.set_indirect_entry(img, inum, idx, value)
        return f"inode {inum}"

    return f"indirect.{idx}", plant


def _dirent(rng: random.Random) -> tuple[str, Plant]:
    where = rng.choice([("/", "f"), ("/", "g"), ("/", "d"), ("/", "big"), ("d", "x"),
                        ("d", "."), ("d", "..")])
    seed = rng.random()

    def plant(img: Path) -> str:
        sb = fc.superblock(img)
        r = random.Random(seed)
        d = fc.inum_of(img, where[0])
        others = [fc.inum_of(img, t) for t in TARGETS]
        value = r.choice([0, sb["ninodes"], sb["ninodes"] - 1, 65535, d, r.choice(others)])
        orig = {".": d, "..": 1}.get(where[1]) or \
            fc.inum_of(img, f"{where[0]}/{where[1]}".replace("//", "/"))
        if value == orig:
            value = sb["ninodes"] + 1
        fc.set_dirent_inum(img, where[0], where[1], value)
        return f"inode {d}|inode {orig}|inode {value}"  # the directory or an inode concerned

    return f"dirent.{where[0]}{where[1]}", plant


def _bitmap(rng: random.Random) -> tuple[str, Plant]:
    kind = rng.choice(["used-as-free", "free-as-used", "meta-as-free"])
    seed = rng.random()

    def plant(img: Path) -> str:
        r = random.Random(seed)
        sb = fc.superblock(img)
        if kind == "used-as-free":
            b = r.choice(fc.file_blocks(img, r.choice(["f", "g", "big"])))
            fc.clear_bitmap_bit(img, b)
        elif kind == "free-as-used":
            b = r.randrange(sb["size"] - 64, sb["size"])
            fc.set_bitmap_bit(img, b)
        else:
            b = r.randrange(0, sb["bmapstart"])
            fc.clear_bitmap_bit(img, b)
        return f"block {b}:"

    return f"bitmap.{kind}", plant


GENERATORS: dict[str, Callable[[random.Random], tuple[str, Plant]]] = {
    "superblock": _superblock,
    "log": _log,
    "inode-type": _inode_field("type"),
    "inode-size": _inode_field("size"),
    "inode-nlink": _inode_field("nlink"),
    "inode-addrs": _inode_field("addrs"),
    "indirect": _indirect,
    "dirent": _dirent,
    "bitmap": _bitmap,
}


def cases(per_class: int, seed: int = SEED) -> list[Case]:
    out = []
    for cls, gen in GENERATORS.items():
        rng = random.Random(f"{seed}-{cls}")
        for i in range(per_class):
            desc, plant = gen(rng)
            out.append(Case(cls, i, desc, plant))
    return out


def _check_names_it(image: Path, words: str) -> list[str]:
    try:
        problems = fscheck.check_image(image)
    except fsimg.FsImageError as e:
        problems = [str(e)]
    assert problems, "fsimg check found nothing wrong"
    # words: what a line must contain; "a|b" accepts either.
    assert any(w in p for w in words.split("|") for p in problems), problems
    return problems


def _run_case(case: Case, make_image, boot_guest) -> None:
    image = make_image(FILES)
    words = case.plant(image)
    problems = _check_names_it(image, words)
    try:
        guest = boot_guest(image=image, timeout=30)
    except GuestCrashed as e:
        # Only a superblock that hides the inode table may stop the boot,
        # and only with the kernel's refusal, never another panic.
        assert case.cls == "superblock" and REFUSAL in e.transcript, \
            f"{case.desc}: {e}\n{problems}"
        return
    for cmd in SCRIPT:
        try:
            guest.run(cmd, timeout=20)
        except GuestTimeout as e:
            pytest.fail(f"{case.desc}: '{cmd}' hung\n{e.transcript[-2000:]}")
        except GuestError as e:
            pytest.fail(f"{case.desc}: '{cmd}': {e}\n{e.transcript[-2000:]}")
    assert "alive" in guest.run("echo alive", timeout=20)
    assert "panic" not in guest.transcript


FUZZ_SAMPLE = [c for c in cases(1)]


@pytest.mark.parametrize("case", FUZZ_SAMPLE, ids=str)
def test_fuzz_sample(case: Case, make_image, boot_guest) -> None:
    _run_case(case, make_image, boot_guest)


# The full set exists only under make fuzz-fs, so the normal suite neither
# runs nor lists its cases.
if FULL:

    @pytest.mark.fuzz
    @pytest.mark.parametrize("case", cases(CASES_PER_CLASS), ids=str)
    def test_fuzz_full(case: Case, make_image, boot_guest) -> None:
        _run_case(case, make_image, boot_guest)
