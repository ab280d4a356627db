"""`pyaisvc fsimg check`: a real checker. Each test plants damage in a fresh
small image and asserts that the checker names it (the inode or block),
exits non-zero, stays within time and memory on a cyclic image, and never
raises a bare Python exception on garbage.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import fscorrupt as fc
import pytest

from pyaisvc.cli import main as cli_main
from pyaisvc.image import fscheck, fsimg

LAYOUT = fsimg.load_layout()
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def image(tmp_path: Path) -> Path:
    """A small image: /f, /g, /d/x, /d/e (empty dir), /big (uses the indirect block)."""
    host = tmp_path / "host"
    (host / "d" / "e").mkdir(parents=True)
    (host / "f").write_bytes(b"hello\n")
    (host / "g").write_bytes(b"world\n" * 1000)
    (host / "d" / "x").write_bytes(b"in d\n")
    (host / "big").write_bytes(bytes(range(256)) * 16 * 40)
    tree = fsimg.Tree(LAYOUT)
    tree.add_dir("", host)
    img = tmp_path / "fs.img"
    fsimg.build_image(img, tree, size_blocks=2048)
    assert fscheck.check_image(img) == []
    return img


def _has(problems: list[str], *parts: str) -> bool:
    return any(all(p in line for p in parts) for line in problems)


def test_clean_image_and_cli(image: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["fsimg", "check", str(image)]) == 0
    assert "clean" in capsys.readouterr().out
    fc.set_inode(image, fc.inum_of(image, "f"), "nlink", 3)
    assert cli_main(["fsimg", "check", str(image)]) == 1
    captured = capsys.readouterr()
    assert "nlink 3, expected 1" in captured.out
    assert "inconsistent" in captured.err


def test_reports_every_problem(image: Path) -> None:
    f, g, d = (fc.inum_of(image, p) for p in ("f", "g", "d"))
    gb = fc.file_blocks(image, "g")
    fc.set_inode(image, f, "addrs", 10**9)                      # out of range
    fc.set_inode(image, g, "addrs", fc.file_blocks(image, "big")[0], 1)  # used twice
    fc.clear_bitmap_bit(image, fc.file_blocks(image, "big")[5])  # in use, marked free
    fc.set_bitmap_bit(image, 2000)                               # free, marked used
    fc.set_inode(image, d, "size", 3 * 32 + 5)                   # bad dir size
    fc.set_inode(image, g, "nlink", 2)                           # link count
    problems = fscheck.check_image(image)
    assert _has(problems, f"inode {f}: addrs[0]: block 1000000000 outside the data area")
    assert _has(problems, "used more than once", f"inode {g}")
    assert _has(problems, f"block {fc.file_blocks(image, 'big')[5]}: in use but marked free")
    assert _has(problems, "block 2000: marked used but free")
    assert _has(problems, f"block {gb[1]}: marked used but free")  # g's lost block
    assert _has(problems, f"inode {d}: directory size 101 not a multiple of 32")
    assert _has(problems, f"inode {g}: nlink 2, expected 1")


def test_dirent_problems(image: Path) -> None:
    ninodes = fc.superblock(image)["ninodes"]
    d, x = fc.inum_of(image, "d"), fc.inum_of(image, "d/x")
    fc.set_dirent_inum(image, "/", "f", ninodes + 7)     # beyond the inode count
    fc.set_dirent_inum(image, "/", "g", ninodes - 1)     # a free inode
    fc.set_dirent_inum(image, "d", "x", d)               # its own directory
    problems = fscheck.check_image(image)
    assert _has(problems, "inode 1: entry 'f'", f"names inode {ninodes + 7}, beyond")
    assert _has(problems, "inode 1: entry 'g'", f"names free inode {ninodes - 1}")
    assert _has(problems, f"inode {d}: entry 'x'", "names its own directory")
    assert _has(problems, f"inode {x}: allocated but in no directory")


def test_zero_link_and_free_named(image: Path) -> None:
    f = fc.inum_of(image, "f")
    fc.set_inode(image, f, "nlink", 0)
    assert _has(fscheck.check_image(image), f"inode {f}: allocated with link count 0")


def test_bad_types_and_sizes(image: Path) -> None:
    f, g = fc.inum_of(image, "f"), fc.inum_of(image, "g")
    fc.set_inode(image, f, "type", 9)
    fc.set_inode(image, g, "size", 1 << 62)
    big = fc.inum_of(image, "big")
    fc.set_inode(image, big, "size", 100 * 4096)
    x = fc.inum_of(image, "d/x")
    fc.set_inode(image, x, "size", 0)
    problems = fscheck.check_image(image)
    assert _has(problems, f"inode {f}: bad type 9")
    assert _has(problems, f"inode {g}: size {1 << 62} beyond the largest file")
    assert _has(problems, f"inode {big}: 60 holes below its size 409600",
                "(the first is file block 40)")
    assert _has(problems, f"inode {x}: 1 blocks mapped past its size 0")


def test_indirect_entry_out_of_range(image: Path) -> None:
    big = fc.inum_of(image, "big")
    fc.set_indirect_entry(image, big, 4, 0xFFFFFFF0)
    assert _has(fscheck.check_image(image), f"inode {big}: indirect block",
                "entry 4: block 4294967280 outside")


def test_log_header(image: Path) -> None:
    fc.set_log_header(image, 2, [5, 10**9])
    problems = fscheck.check_image(image)
    assert _has(problems, "log header", "entry 0 names block 5")
    assert _has(problems, "log header", "entry 1 names block 1000000000")
    fc.set_log_header(image, -3, [])
    assert _has(fscheck.check_image(image), "log header", "count -3 out of range")


@pytest.mark.parametrize("field,value,words", [
    ("size", 10**6, "superblock: size 1000000 blocks, but the file holds 2048"),
    ("nblocks", 5, "superblock: nblocks 5, expected"),
    ("nlog", 3, "superblock: log region"),
    ("ninodes", 0, "superblock: ninodes 0 out of range"),
    ("inodestart", 10**6, "superblock: inode table"),
    ("bmapstart", 10**6, "superblock: inode table"),
    ("magic", 7, "not an aisvc file-system image"),
])
def test_superblock_fields(image: Path, field: str, value: int, words: str) -> None:
    fc.set_sb(image, field, value)
    try:
        problems = fscheck.check_image(image)
    except fsimg.FsImageError as e:
        problems = [str(e)]
    assert _has(problems, words)


def test_directory_cycle_is_fast_and_small(image: Path, tmp_path: Path) -> None:
    # d/x names the root (d -> / -> d ...) and /f names d a second time.
    fc.set_dirent_inum(image, "d", "x", 1)
    fc.set_dirent_inum(image, "/", "f", fc.inum_of(image, "d"))
    problems = fscheck.check_image(image)
    assert _has(problems, "names directory 1 a second time")
    # The checker reports its own peak (VmHWM of its address space): a child's
    # ru_maxrss starts from this big test process's size, which exec keeps.
    probe = ("import sys; from pyaisvc.cli import main; code = main(sys.argv[1:]); "
             "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')]; "
             "print(hwm[0].split()[1], file=sys.stderr); sys.exit(code)")
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", probe, "fsimg", "check", str(image)],
                          cwd=ROOT, capture_output=True, text=True, timeout=30)
    seconds = time.monotonic() - start
    peak_mib = int(proc.stderr.split()[-1]) / 1024
    assert proc.returncode == 1, proc.stderr
    assert "a second time" in proc.stdout
    assert seconds < 5 and peak_mib < 200, (seconds, peak_mib)
    # list and extract terminate on it too.
    assert len(fsimg.list_image(image)) < 20


def test_truncated_and_garbage_files(tmp_path: Path, image: Path) -> None:
    cases = {"empty": b"", "short": b"\0" * 100, "garbage": os.urandom(3 * LAYOUT.BSIZE)}
    head = image.read_bytes()[:8 * LAYOUT.BSIZE]
    cases["truncated"] = head
    for name, data in cases.items():
        p = tmp_path / name
        p.write_bytes(data)
        try:
            problems = fscheck.check_image(p)
        except fsimg.FsImageError as e:
            assert "\n" not in str(e)
        else:
            assert problems, name
    assert cli_main(["fsimg", "check", str(tmp_path / "garbage")]) == 1
    assert cli_main(["fsimg", "check", str(tmp_path / "nonexistent")]) == 1


def test_random_metadata_damage_never_raises(image: Path) -> None:
    """Seeded: random bytes over random metadata and directory blocks."""
    rng = random.Random(20261201)
    pristine = image.read_bytes()
    sb = fc.superblock(image)
    meta_end = sb["bmapstart"] + 1
    dirs = fc.file_blocks(image, "/") + fc.file_blocks(image, "d")
    for _ in range(300):
        data = bytearray(pristine)
        for _ in range(rng.randint(1, 6)):
            bno = rng.choice([1, 2, *range(sb["inodestart"], meta_end), *dirs])
            off = bno * LAYOUT.BSIZE + rng.randrange(LAYOUT.BSIZE if bno > 1 else 48)
            data[off:off + 4] = rng.randbytes(4)
        image.write_bytes(data)
        try:
            fscheck.check_image(image)
        except fsimg.FsImageError as e:
            assert "\n" not in str(e)
