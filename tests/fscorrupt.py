"""Plants single-field corruptions in a file-system image, for the tests
that boot damaged images (test_fs_untrusted.py, test_fs_fuzz.py) and for
the checker's tests.

Each function edits the image in place and locates what it changes with
pyaisvc.image.fsimg.Image, so the offsets follow kernel/include/fs.h.
"""

from __future__ import annotations

import struct
from pathlib import Path

from pyaisvc.image import fsimg

LAYOUT = fsimg.load_layout()
BSIZE = LAYOUT.BSIZE
ISIZE = LAYOUT.dinode.codec.size
DSIZE = LAYOUT.dirent.codec.size

# Byte offsets of the dinode's fields (struct dinode in fs.h).
_DINODE_OFF = {"type": 0, "major": 2, "minor": 4, "nlink": 6, "size": 8, "addrs": 16}
_SB_FIELDS = [name for _, name, _ in LAYOUT.superblock.fields]


def _poke(image: Path, offset: int, fmt: str, value: int) -> None:
    with open(image, "r+b") as f:
        f.seek(offset)
        f.write(struct.pack("<" + fmt, value))


def _peek(image: Path, offset: int, fmt: str) -> int:
    with open(image, "rb") as f:
        f.seek(offset)
        return struct.unpack("<" + fmt, f.read(struct.calcsize(fmt)))[0]


def superblock(image: Path) -> dict[str, int]:
    with fsimg.Image(image) as img:
        return dict(img.sb)


def inum_of(image: Path, path: str) -> int:
    with fsimg.Image(image) as img:
        return img.lookup(path).inum


def inode_offset(image: Path, inum: int) -> int:
    sb = superblock(image)
    return (sb["inodestart"] + inum // LAYOUT.ipb) * BSIZE + (inum % LAYOUT.ipb) * ISIZE


def set_sb(image: Path, field: str, value: int) -> None:
    _poke(image, BSIZE + 4 * _SB_FIELDS.index(field), "I", value)


def set_inode(image: Path, inum: int, field: str, value: int, index: int = 0) -> None:
    """Sets a dinode field; for addrs, entry `index`."""
    off = inode_offset(image, inum) + _DINODE_OFF[field]
    fmt = {"size": "Q", "addrs": "I"}.get(field, "h")
    _poke(image, off + (4 * index if field == "addrs" else 0), fmt, value)


def get_inode(image: Path, inum: int, field: str, index: int = 0) -> int:
    off = inode_offset(image, inum) + _DINODE_OFF[field]
    fmt = {"size": "Q", "addrs": "I"}.get(field, "h")
    return _peek(image, off + (4 * index if field == "addrs" else 0), fmt)


def file_blocks(image: Path, path: str) -> list[int]:
    with fsimg.Image(image) as img:
        return img.blocks(img.inode(img.lookup(path).inum))


def set_dirent_inum(image: Path, dirpath: str, name: str, inum: int) -> None:
    """Makes entry `name` of directory `dirpath` name inode `inum`."""
    with fsimg.Image(image) as img:
        d = img.lookup(dirpath)
        blocks = img.blocks(img.inode(d.inum))
        for b in blocks:
            data = img._block(b)
            for off in range(0, BSIZE, DSIZE):
                de = LAYOUT.dirent.unpack(data, off)
                if de["name"].rstrip(b"\0").decode(errors="replace") == name and de["inum"]:
                    _poke(image, b * BSIZE + off, "H", inum)
                    return
    raise KeyError(f"no entry {name!r} in {dirpath!r}")


def clear_bitmap_bit(image: Path, b: int) -> None:
    sb = superblock(image)
    off = sb["bmapstart"] * BSIZE + b // 8
    byte = _peek(image, off, "B")
    _poke(image, off, "B", byte & ~(1 << (b % 8)))


def set_bitmap_bit(image: Path, b: int) -> None:
    sb = superblock(image)
    off = sb["bmapstart"] * BSIZE + b // 8
    _poke(image, off, "B", _peek(image, off, "B") | (1 << (b % 8)))


def set_log_header(image: Path, n: int, blocks: list[int]) -> None:
    sb = superblock(image)
    off = sb["logstart"] * BSIZE
    _poke(image, off, "i", n)
    for i, b in enumerate(blocks):
        _poke(image, off + 4 + 4 * i, "I", b)


def set_indirect_entry(image: Path, inum: int, idx: int, value: int) -> None:
    """Sets entry idx of inode inum's single-indirect block."""
    ind = get_inode(image, inum, "addrs", LAYOUT.NDIRECT)
    assert ind, f"inode {inum} has no indirect block"
    _poke(image, ind * BSIZE + 4 * idx, "I", value)
