"""Host unit tests of the image builder (pyaisvc.image.fsimg): no QEMU needed."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from pyaisvc import cheader
from pyaisvc.cli import main as cli_main
from pyaisvc.image import fscheck, fsimg

LAYOUT = fsimg.load_layout()


def _write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


@pytest.fixture
def content(tmp_path: Path) -> dict[str, bytes]:
    """A host tree with nested dirs, an empty file and files of several sizes."""
    rng = random.Random(7)
    files = {
        "models/SMOL/CFG.BIN": rng.randbytes(100),
        "models/SMOL/EMB.BIN": rng.randbytes(3 * 1024 * 1024 + 17),   # a few MB: double indirect
        "models/SMOL/sub/deeper/empty": b"",
        "models/SMOL/sub/one_block": rng.randbytes(LAYOUT.BSIZE),
        "models/SMOL/sub/indirect": rng.randbytes((LAYOUT.NDIRECT + 5) * LAYOUT.BSIZE + 1),
    }
    for name, data in files.items():
        _write(tmp_path / name, data)
    _write(tmp_path / "bin/_cat", b"\x7fELF cat")
    return files


def test_layout_matches_kernel_structs() -> None:
    # fs.h's comments promise these sizes; the kernel asserts the same.
    assert LAYOUT.dinode.codec.size == 128
    assert LAYOUT.dirent.codec.size == 32
    assert LAYOUT.BSIZE % LAYOUT.dinode.codec.size == 0
    assert LAYOUT.MAXFILE * LAYOUT.BSIZE >= 1 << 30   # files of 1 GiB and more
    assert LAYOUT.DIRSIZ >= 14


def test_round_trip(tmp_path: Path, content: dict[str, bytes]) -> None:
    tree = fsimg.Tree(LAYOUT)
    tree.add_dir("AI/SMOL", tmp_path / "models/SMOL")
    tree.add_file("cat", tmp_path / "bin/_cat")
    image = tmp_path / "fs.img"
    info = fsimg.build_image(image, tree)
    assert image.stat().st_size == info.size_blocks * LAYOUT.BSIZE
    free = info.size_blocks - info.used_blocks
    assert free * LAYOUT.BSIZE >= fsimg.MIN_FREE_BYTES  # room for the guest to write

    entries = {e.path: e for e in fsimg.list_image(image)}
    assert entries["/"].type == LAYOUT.T_DIR
    assert entries["/AI/SMOL/sub/deeper"].type == LAYOUT.T_DIR
    assert entries["/AI/SMOL/EMB.BIN"].size == len(content["models/SMOL/EMB.BIN"])
    assert entries["/AI/SMOL/sub/deeper/empty"].size == 0

    assert fscheck.check_image(image) == []
    out = tmp_path / "out"
    fsimg.extract(image, out)
    for name, data in content.items():
        target = out / "AI/SMOL" / name.removeprefix("models/SMOL/")
        assert target.read_bytes() == data, name
    assert (out / "cat").read_bytes() == b"\x7fELF cat"


def test_files_are_contiguous(tmp_path: Path, content: dict[str, bytes]) -> None:
    # The kernel's fast read path depends on each file's data being one run.
    tree = fsimg.Tree(LAYOUT)
    tree.add_dir("", tmp_path / "models")
    image = tmp_path / "fs.img"
    fsimg.build_image(image, tree)
    with fsimg.Image(image) as img:
        e = img.lookup("SMOL/EMB.BIN")
        blocks = img.blocks(img.inode(e.inum))
    assert len(blocks) == -(-len(content["models/SMOL/EMB.BIN"]) // LAYOUT.BSIZE)
    assert blocks == list(range(blocks[0], blocks[0] + len(blocks)))


def test_cli_build_list_extract(tmp_path: Path, content: dict[str, bytes],
                                capsys: pytest.CaptureFixture[str]) -> None:
    image = tmp_path / "cli.img"
    rc = cli_main(["fsimg", "build", "--image", str(image), "--size", "64M", "--quiet",
                   "--add", f"bin/cat={tmp_path / 'bin/_cat'}",
                   "--add-dir", f"AI/SMOL={tmp_path / 'models/SMOL'}"])
    assert rc == 0
    assert image.stat().st_size == 64 << 20
    capsys.readouterr()
    assert cli_main(["fsimg", "list", "--image", str(image)]) == 0
    listing = capsys.readouterr().out
    assert f"{len(content['models/SMOL/CFG.BIN'])} /AI/SMOL/CFG.BIN" in listing
    assert "/bin/cat" in listing
    assert cli_main(["fsimg", "extract", "--image", str(image), "--to", str(tmp_path / "x"),
                     "AI/SMOL/sub"]) == 0
    assert (tmp_path / "x/AI/SMOL/sub/one_block").read_bytes() == \
        content["models/SMOL/sub/one_block"]
    assert not (tmp_path / "x/bin/cat").exists()


def test_name_too_long(tmp_path: Path) -> None:
    host = _write(tmp_path / "f", b"x")
    tree = fsimg.Tree(LAYOUT)
    with pytest.raises(fsimg.FsImageError, match="at most 30"):
        tree.add_file("a" * (LAYOUT.DIRSIZ + 1), host)
    tree.add_file("a" * LAYOUT.DIRSIZ, host)  # exactly DIRSIZ fits


def test_missing_host_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli_main(["fsimg", "build", "--image", str(tmp_path / "x.img"),
                   "--add", f"x={tmp_path / 'nope'}"])
    assert rc == 1
    err = capsys.readouterr().err
    assert "no such file" in err and "nope" in err
    assert not (tmp_path / "x.img").exists()


def test_image_too_small_says_how_big(tmp_path: Path) -> None:
    _write(tmp_path / "big", os.urandom(2 << 20))
    tree = fsimg.Tree(LAYOUT)
    tree.add_file("big", tmp_path / "big")
    with pytest.raises(fsimg.FsImageError, match=r"image too small.*--size \d+M"):
        fsimg.build_image(tmp_path / "small.img", tree, size_blocks=300)
    assert not (tmp_path / "small.img").exists()


def test_bad_size_and_bad_image(tmp_path: Path) -> None:
    with pytest.raises(fsimg.FsImageError, match="bad size"):
        fsimg.parse_size("12 parsecs")
    assert fsimg.parse_size("512M") == 512 << 20
    junk = _write(tmp_path / "junk.img", bytes(3 * LAYOUT.BSIZE))
    with pytest.raises(fsimg.FsImageError, match="not an aisvc"):
        fsimg.list_image(junk)


def test_file_with_double_indirect_blocks(tmp_path: Path) -> None:
    """A file one block past what the direct and single-indirect blocks hold: its
    bytes come back from the image, and the checker finds it consistent."""
    nblocks = LAYOUT.NDIRECT + LAYOUT.NINDIRECT + 1
    data = random.Random(3).randbytes(nblocks * LAYOUT.BSIZE)
    tree = fsimg.Tree(LAYOUT)
    tree.add_file("big", _write(tmp_path / "big", data))
    image = tmp_path / "di.img"
    fsimg.build_image(image, tree)
    with fsimg.Image(image) as img:
        assert img.read_file(img.lookup("big").inum) == data
    assert fscheck.check_image(image) == []


def test_large_sparse_image_builds_fast(tmp_path: Path) -> None:
    # A 4 GiB image: the size the kernel must handle; sparse, so it is cheap.
    _write(tmp_path / "f", b"hello")
    tree = fsimg.Tree(LAYOUT)
    tree.add_file("f", tmp_path / "f")
    info = fsimg.build_image(tmp_path / "big.img", tree, size_blocks=(4 << 30) // LAYOUT.BSIZE)
    assert (tmp_path / "big.img").stat().st_blocks * 512 < 64 << 20
    with fsimg.Image(info.path) as img:
        assert img.read_file(img.lookup("f").inum) == b"hello"
        assert img.sb["size"] == 1 << 20


def test_check_finds_damage(tmp_path: Path, content: dict[str, bytes],
                            capsys: pytest.CaptureFixture[str]) -> None:
    tree = fsimg.Tree(LAYOUT)
    tree.add_dir("m", tmp_path / "models")
    image = tmp_path / "fs.img"
    fsimg.build_image(image, tree)
    assert cli_main(["fsimg", "check", "--image", str(image)]) == 0
    with fsimg.Image(image) as img:
        sb = img.sb
        emb = img.lookup("m/SMOL/EMB.BIN")
        first = img.blocks(img.inode(emb.inum))[0]
    with open(image, "r+b") as f:
        # Mark EMB.BIN's first block free in the bitmap.
        f.seek(sb["bmapstart"] * LAYOUT.BSIZE + first // 8)
        byte = f.read(1)[0]
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte & ~(1 << (first % 8))]))
        # And give inode 1 (the root) a wrong link count.
        f.seek(sb["inodestart"] * LAYOUT.BSIZE + LAYOUT.dinode.codec.size + 6)
        f.write((9).to_bytes(2, "little"))
    problems = fscheck.check_image(image)
    assert f"block {first}: in use but marked free" in problems
    assert "inode 1: nlink 9, expected 2" in problems
    assert cli_main(["fsimg", "check", "--image", str(image)]) == 1
    assert "inconsistent" in capsys.readouterr().err


def test_header_string_reads_a_string_define(tmp_path: Path) -> None:
    (tmp_path / "h.h").write_text('// a comment "not this"\n#define NAME_DIR "/AI/X" // why\n'
                                  "#define NUMBER 3\n")
    assert cheader.header_string("h.h", "NAME_DIR", tmp_path) == "/AI/X"
    for missing in ("NUMBER", "OTHER"):
        with pytest.raises(cheader.CHeaderError, match=f"no string #define {missing}"):
            cheader.header_string("h.h", missing, tmp_path)
