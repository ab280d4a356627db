"""The kernel treats on-disk metadata as untrusted.

Each case plants one corruption that a kernel trusting its disk would panic
or hang on (see the design comment atop kernel/fs/fs.c), boots the image, runs
the commands that read the damaged metadata, and asserts that they fail with an
error, that the console names the damage in one line, and that the shell
and the file system still work afterwards. The planted damage must also be
named by `pyaisvc fsimg check`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import fscorrupt as fc
import pytest

from pyaisvc.image import fscheck

pytestmark = pytest.mark.guest

FILES: dict[str, bytes] = {
    "f": b"hello\n",
    "d/x": b"in d\n",
    "big": bytes(range(256)) * 16 * 40,  # 40 blocks: uses the indirect block
}


def _boot(make_image, boot_guest, plant: Callable[[Path], None]):
    image = make_image(FILES)
    plant(image)
    return image, boot_guest(image=image)


def _alive(guest) -> None:
    """The shell answers and the file system still takes writes."""
    assert "alive" in guest.run("echo alive")
    out = guest.run("mkdir newdir ; echo data > newdir/file ; cat newdir/file")
    assert "data" in out, out


def test_link_count_is_limited_emlink(make_image, boot_guest) -> None:
    # Was: nlink (a short) wrapped to -32768 and the next unlink panicked.
    image, guest = _boot(make_image, boot_guest,
                         lambda img: fc.set_inode(img, fc.inum_of(img, "f"), "nlink", 32766))
    assert guest.run("ln f g") == ""
    out = guest.run("ln f h")
    assert "too many links" in out, out
    assert "no such file" in guest.run("rm h")
    assert guest.run("rm g") == ""
    _alive(guest)


def test_dirent_naming_free_inode(make_image, boot_guest) -> None:
    # Was: panic "ilock: inode has no type". (The last inode, so that init's
    # mknod of the console does not allocate it first.)
    def plant(img: Path) -> None:
        fc.set_dirent_inum(img, "/", "f", fc.superblock(img)["ninodes"] - 1)

    image, guest = _boot(make_image, boot_guest, plant)
    inum = fc.superblock(image)["ninodes"] - 1
    out = guest.run("cat f")
    assert f"fs: inode {inum}: free, yet a directory names it" in out, out
    assert "I/O error" in out
    guest.run("ls")
    guest.run("rm f")
    _alive(guest)
    assert any(f"names free inode {inum}" in p for p in fscheck.check_image(image))


def test_dirent_inum_beyond_inode_count(make_image, boot_guest) -> None:
    # Was: the kernel read a data block as inodes and panicked.
    def plant(img: Path) -> None:
        fc.set_dirent_inum(img, "/", "f", 60000)

    image, guest = _boot(make_image, boot_guest, plant)
    out = guest.run("cat f")
    assert "entry 'f' -> inode 60000 names an inode beyond the inode count" in out, out
    guest.run("rm f")
    _alive(guest)
    assert any("names inode 60000, beyond" in p for p in fscheck.check_image(image))


def test_block_pointer_beyond_disk(make_image, boot_guest) -> None:
    # Was: panic "virtio_disk_rw: disk I/O error".
    image, guest = _boot(make_image, boot_guest,
                         lambda img: fc.set_inode(img, fc.inum_of(img, "f"), "addrs", 10**9))
    inum = fc.inum_of(image, "f")
    out = guest.run("cat f")
    assert f"fs: inode {inum}: block number outside the data area" in out, out
    guest.run("rm f")
    _alive(guest)
    assert any(f"inode {inum}: addrs[0]: block 1000000000 outside" in p
               for p in fscheck.check_image(image))


def test_indirect_pointer_beyond_disk(make_image, boot_guest) -> None:
    image, guest = _boot(make_image, boot_guest,
                         lambda img: fc.set_indirect_entry(img, fc.inum_of(img, "big"), 3,
                                                           0xFFFFFFF0))
    out = guest.run("wc big")
    assert "entry 3: block 4294967280 outside the data area" in out, out
    guest.run("rm big")
    _alive(guest)


def test_directory_size_not_multiple_of_entry(make_image, boot_guest) -> None:
    # Was: mkdir in it panicked ("dirlink: read").
    def plant(img: Path) -> None:
        d = fc.inum_of(img, "d")
        fc.set_inode(img, d, "size", fc.get_inode(img, d, "size") + 1)

    image, guest = _boot(make_image, boot_guest, plant)
    d = fc.inum_of(image, "d")
    out = guest.run("mkdir d/sub")
    assert f"fs: inode {d}: directory size not a multiple of the entry size" in out, out
    _alive(guest)
    assert any(f"inode {d}: directory size" in p for p in fscheck.check_image(image))


def test_named_inode_with_zero_links(make_image, boot_guest) -> None:
    # Was: panic "unlink: nlink < 1" (and a read freed the named inode).
    image, guest = _boot(make_image, boot_guest,
                         lambda img: fc.set_inode(img, fc.inum_of(img, "f"), "nlink", 0))
    inum = fc.inum_of(image, "f")
    out = guest.run("cat f ; rm f")
    assert f"fs: inode {inum}: link count below 1" in out, out
    _alive(guest)
    assert any(f"inode {inum}: allocated with link count 0" in p
               for p in fscheck.check_image(image))


def test_block_in_use_but_free_in_bitmap(make_image, boot_guest) -> None:
    # Was: rm panicked ("bfree: freeing a free block").
    def plant(img: Path) -> None:
        fc.clear_bitmap_bit(img, fc.file_blocks(img, "f")[0])

    image, guest = _boot(make_image, boot_guest, plant)
    b = fc.file_blocks(image, "f")[0]
    out = guest.run("rm f")
    assert f"block {b} is already free in the bitmap; not freeing it" in out, out
    _alive(guest)
    assert f"block {b}: in use but marked free" in fscheck.check_image(image)


def test_log_header_beyond_disk_mounts_read_only(make_image, boot_guest) -> None:
    # Was: panic during recovery at boot.
    image = make_image(FILES)
    fc.set_log_header(image, 1, [10**9])
    guest = boot_guest(image=image)
    assert "not recovering, mounting read-only" in guest.transcript
    assert "alive" in guest.run("echo alive")
    assert "hello" in guest.run("cat f")
    assert "read-only file system" in guest.run("mkdir newdir")
    assert "read-only file system" in guest.run("echo x > newfile")
    assert "read-only file system" in guest.run("rm f")
    assert any("log header" in p and "1000000000" in p for p in fscheck.check_image(image))


def test_entry_naming_its_own_directory(make_image, boot_guest) -> None:
    # Was: rm deadlocked on the inode lock, and every later write hung.
    def plant(img: Path) -> None:
        fc.set_dirent_inum(img, "d", "x", fc.inum_of(img, "d"))

    image, guest = _boot(make_image, boot_guest, plant)
    d = fc.inum_of(image, "d")
    out = guest.run("rm d/x", timeout=10)
    assert f"fs: inode {d}: entry 'x' -> inode {d} names its own directory" in out, out
    _alive(guest)
    assert any(f"inode {d}: entry 'x'" in p and "names its own directory" in p
               for p in fscheck.check_image(image))


def test_entry_naming_the_parent_is_not_unlinked(make_image, boot_guest) -> None:
    # Unlinking it would lock the parent after its child, against the
    # parent-then-child order of every other path (a deadlock with a
    # concurrent unlink of the child). Refused instead.
    image, guest = _boot(make_image, boot_guest,
                         lambda img: fc.set_dirent_inum(img, "d", "x", 1))
    d = fc.inum_of(image, "d")
    out = guest.run("rm d/x", timeout=10)
    assert f"fs: inode {d}: entry 'x' names the directory's parent" in out, out
    assert "f" in guest.run("ls d/x")  # the entry is still there, and names /
    _alive(guest)
    assert any("names directory 1 a second time" in p for p in fscheck.check_image(image))


def test_garbage_indirect_block_costs_one_line(make_image, boot_guest) -> None:
    # An indirect block full of garbage: reading stops at the first bad
    # pointer, and rm frees what it can with one line for the rest.
    def plant(img: Path) -> None:
        ind = fc.get_inode(img, fc.inum_of(img, "big"), "addrs", fc.LAYOUT.NDIRECT)
        with open(img, "r+b") as f:
            f.seek(ind * fc.BSIZE)
            f.write(b"\xee" * fc.BSIZE)

    image, guest = _boot(make_image, boot_guest, plant)
    big = fc.inum_of(image, "big")
    assert "I/O error" in guest.run("wc big")
    out = guest.run("rm big")
    assert out.count("fs: inode") == 1, out
    assert f"fs: inode {big}: block 4008636142 is outside the data area; not freeing it " \
           "(1024 such blocks)" in out, out
    _alive(guest)


@pytest.mark.parametrize("damage", ["pointer beyond the disk", "garbage indirect block"])
def test_mapped_damaged_file_kills_only_the_reader(make_image, boot_guest, build,
                                                   damage: str) -> None:
    # A damaged file read through a mapping (tests/progs/maptouch): the page fault that
    # meets the damage kills only the reader, with the file system's line and the
    # mapping's reason; no panic, and the mapping's pages go back (the next run works).
    image = make_image({**FILES, "maptouch": build.testprogs["maptouch"]})
    big = fc.inum_of(image, "big")
    if damage == "pointer beyond the disk":
        fc.set_indirect_entry(image, big, 3, 0xFFFFFFF0)
    else:
        ind = fc.get_inode(image, big, "addrs", fc.LAYOUT.NDIRECT)
        with open(image, "r+b") as f:
            f.seek(ind * fc.BSIZE)
            f.write(b"\xee" * fc.BSIZE)
    guest = boot_guest(image=image)
    out = guest.run("maptouch map big")
    assert f"fs: inode {big}: " in out and "outside the data area" in out, out
    assert "maptouch: killed: load page fault" in out, out
    assert "the mapped file could not be read" in out, out
    assert "mapped 6 bytes" in guest.run("maptouch map f")
    guest.run("rm big")
    _alive(guest)
    assert "panic" not in guest.transcript
