"""Check an aisvc file-system image's consistency on the host: an fsck.

check_image() trusts nothing on disk, as the kernel does not: every number
is checked before it is used to find something else. It reports every
inconsistency it finds, naming the inode or block; it reads each directory
once (cycles cost nothing) and keeps one bit per block, so it stays fast and
small on any input. The layout (block size, structs, inode types) is the
kernel's, from pyaisvc.image.fsimg.load_layout().
"""

from __future__ import annotations

import array
import bisect
import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pyaisvc.image.fsimg import FsImageError, Layout, blocks_for, load_layout

MAX_PROBLEMS = 10000  # lines check_image reports at most; the rest are counted


class _Checker:
    """One fsck pass over an image; `problems` collects what is wrong.

    Reads the disk as untrusted, like the kernel: every number is checked
    before it is used to find something else. Memory is bounded by the
    image's metadata (one bit per block, the inode table, one entry per
    inode) and each directory is read once, so cycles cost nothing.
    """

    def __init__(self, f: Any, nbytes: int, layout: Layout, limit: int) -> None:
        """A checker of the image open as f (nbytes long) for layout, keeping at most limit
        problems."""
        self.f, self.ly, self.limit = f, layout, limit
        self.file_blocks = nbytes // layout.BSIZE
        self.problems: list[str] = []
        self.dropped = 0

    def bad(self, msg: str) -> None:
        """Records the problem msg (counted only, once limit are kept)."""
        if len(self.problems) < self.limit:
            self.problems.append(msg)
        else:
            self.dropped += 1

    def block(self, bno: int) -> bytes:
        """Block bno, zero-padded where the file is short."""
        bs = self.ly.BSIZE
        self.f.seek(bno * bs)
        data = self.f.read(bs)
        return data + bytes(bs - len(data))

    # ------------------------------------------------------------ superblock and log

    def superblock(self) -> bool:
        """Checks the superblock; False if the rest cannot be located."""
        ly = self.ly
        if self.file_blocks < 2:
            raise FsImageError(f"the file holds {self.file_blocks} blocks of {ly.BSIZE} bytes; "
                               "an image has at least a boot block and a superblock")
        sb = self.sb = ly.superblock.unpack(self.block(1))
        if sb["magic"] != ly.FSMAGIC or sb["version"] != ly.FSVERSION:
            raise FsImageError(f"not an aisvc file-system image (bad superblock magic "
                               f"{sb['magic']:#x} or version {sb['version']})")
        if not ly.ROOTINO < sb["ninodes"] <= ly.MAXINODES + 1:
            self.bad(f"superblock: ninodes {sb['ninodes']} out of range "
                     f"[{ly.ROOTINO + 1}, {ly.MAXINODES + 1}]")
            return False
        itable_end = sb["inodestart"] + blocks_for(sb["ninodes"], ly.ipb)
        if sb["inodestart"] < 3 or itable_end != sb["bmapstart"]:
            self.bad(f"superblock: inode table [{sb['inodestart']}, {itable_end}) and the "
                     f"free map at {sb['bmapstart']} disagree (inodestart, ninodes, bmapstart)")
            return False
        if sb["bmapstart"] >= self.file_blocks:
            self.bad(f"superblock: free map at block {sb['bmapstart']} beyond the "
                     f"{self.file_blocks}-block file")
            return False
        self.size = sb["size"]
        if sb["size"] != self.file_blocks:
            self.bad(f"superblock: size {sb['size']} blocks, but the file holds "
                     f"{self.file_blocks}")
            self.size = self.file_blocks
        self.datastart = sb["bmapstart"] + blocks_for(self.size, ly.bpb)
        if self.datastart >= self.size:
            self.bad(f"superblock: size {sb['size']} leaves no data blocks after the "
                     f"free map")
            return False
        if sb["nblocks"] != self.size - self.datastart:
            self.bad(f"superblock: nblocks {sb['nblocks']}, expected "
                     f"{self.size - self.datastart}")
        self.log_ok = (sb["logstart"] >= 2 and sb["nlog"] >= ly.LOGBLOCKS + 1
                       and sb["logstart"] + sb["nlog"] <= sb["inodestart"])
        if not self.log_ok:
            self.bad(f"superblock: log region [{sb['logstart']}, "
                     f"{sb['logstart'] + sb['nlog']}) too small (nlog >= {ly.LOGBLOCKS + 1}) "
                     f"or overlapping the inode table at {sb['inodestart']}")
        return True

    def log_header(self) -> None:
        """Checks the log header, when the log region itself is sane: its count within the log,
        every entry a block from the inode table to the end of the image."""
        ly, sb = self.ly, self.sb
        if not self.log_ok:
            return
        raw = self.block(sb["logstart"])
        n = struct.unpack_from("<i", raw)[0]
        if not 0 <= n <= min(ly.LOGBLOCKS, sb["nlog"] - 1):
            self.bad(f"log header (block {sb['logstart']}): count {n} out of range "
                     f"[0, {ly.LOGBLOCKS}]")
            return
        for i, b in enumerate(struct.unpack_from(f"<{n}I", raw, 4)):
            if not sb["inodestart"] <= b < self.size:
                self.bad(f"log header (block {sb['logstart']}): entry {i} names block {b}, "
                         f"outside [{sb['inodestart']}, {self.size})")

    # ------------------------------------------------------------ inodes and blocks

    def inodes(self) -> None:
        """Reads the inode table and checks each allocated inode's fields."""
        ly, sb = self.ly, self.sb
        isize = ly.dinode.codec.size
        table = b"".join(self.block(sb["inodestart"] + i)
                         for i in range(blocks_for(sb["ninodes"], ly.ipb)))
        self.itype: dict[int, int] = {}
        self.inode: dict[int, dict[str, Any]] = {}
        for inum in range(1, sb["ninodes"]):
            ino = ly.dinode.unpack(table, inum * isize)
            if ino["type"] == 0:
                continue
            self.inode[inum] = ino
            self.itype[inum] = ino["type"]
            if ino["type"] not in (ly.T_DIR, ly.T_FILE, ly.T_DEVICE):
                self.bad(f"inode {inum}: bad type {ino['type']}")
            if ino["nlink"] < 1:
                self.bad(f"inode {inum}: allocated with link count {ino['nlink']}")
            if ino["size"] > ly.MAXFILE * ly.BSIZE:
                self.bad(f"inode {inum}: size {ino['size']} beyond the largest file")
            if ino["type"] == ly.T_DIR and ino["size"] % ly.dirent.codec.size:
                self.bad(f"inode {inum}: directory size {ino['size']} not a multiple of "
                         f"{ly.dirent.codec.size}")
        if ly.ROOTINO not in self.inode or self.itype[ly.ROOTINO] != ly.T_DIR:
            self.bad(f"inode {ly.ROOTINO}: the root is not an allocated directory")

    def in_data(self, b: int) -> bool:
        """Whether block b lies in the data area."""
        return self.datastart <= b < self.size

    def ptrs(self, bno: int) -> tuple[int, ...]:
        """The block numbers held in the indirect block bno."""
        return struct.unpack(f"<{self.ly.NINDIRECT}I", self.block(bno))

    def block_map(self, inum: int, report: bool) -> Iterator[tuple[int, int]]:
        """(file block index or -1 for an indirect block, disk block) of each
        valid pointer of inode inum; reports bad pointers if `report`."""
        ly = self.ly
        addrs = self.inode[inum]["addrs"]
        for i, b in enumerate(addrs[:ly.NDIRECT]):
            if b and self._ok(inum, b, f"addrs[{i}]", report):
                yield i, b
        single, double = addrs[ly.NDIRECT], addrs[ly.NDIRECT + 1]
        if single and self._ok(inum, single, "the indirect block", report):
            yield -1, single
            for i, b in enumerate(self.ptrs(single)):
                if b and self._ok(inum, b, f"indirect block {single} entry {i}", report):
                    yield ly.NDIRECT + i, b
        if double and self._ok(inum, double, "the double-indirect block", report):
            yield -1, double
            base = ly.NDIRECT + ly.NINDIRECT
            for i, mid in enumerate(self.ptrs(double)):
                if not mid or not self._ok(inum, mid, f"indirect block {double} entry {i}",
                                           report):
                    continue
                yield -1, mid
                for j, b in enumerate(self.ptrs(mid)):
                    if b and self._ok(inum, b, f"indirect block {mid} entry {j}", report):
                        yield base + i * ly.NINDIRECT + j, b

    def _ok(self, inum: int, b: int, where: str, report: bool) -> bool:
        """Whether block b, which inode inum names at where, lies in the data area; reports it
        when not and report is set."""
        if self.in_data(b):
            return True
        if report:
            self.bad(f"inode {inum}: {where}: block {b} outside the data area "
                     f"[{self.datastart}, {self.size})")
        return False

    def extent(self, inum: int, mapped: array.array[int]) -> None:
        """Reports holes below an inode's size and blocks past it; `mapped`
        are the file blocks that have a disk block, in increasing order.
        Devices have no blocks."""
        ly = self.ly
        ino = self.inode[inum]
        if ino["type"] == ly.T_DEVICE:
            if mapped or ino["size"]:
                self.bad(f"inode {inum}: a device with size {ino['size']} or data blocks")
            return
        if ino["size"] > ly.MAXFILE * ly.BSIZE:
            return  # reported by inodes()
        n = blocks_for(ino["size"], ly.BSIZE)
        inside = bisect.bisect_left(mapped, n)
        if inside < n:
            first = next((i for i, fb in enumerate(mapped[:inside]) if fb != i), inside)
            self.bad(f"inode {inum}: {n - inside} holes below its size {ino['size']} "
                     f"(the first is file block {first})")
        if inside < len(mapped):
            self.bad(f"inode {inum}: {len(mapped) - inside} blocks mapped past its size "
                     f"{ino['size']} (the first is file block {mapped[inside]})")

    def blocks(self) -> None:
        """Marks each block in use; reports blocks used twice, naming both owners."""
        self.used = bytearray((self.size + 7) // 8)
        twice: set[int] = set()
        for inum in self.inode:
            mapped = array.array("I")  # 4 bytes a block, however big the file
            for fb, b in self.block_map(inum, True):
                if fb >= 0:
                    mapped.append(fb)
                if self.used[b >> 3] >> (b & 7) & 1:
                    twice.add(b)
                self.used[b >> 3] |= 1 << (b & 7)
            self.extent(inum, mapped)
        if twice:
            owners: dict[int, list[int]] = {}
            for inum in self.inode:
                for _, b in self.block_map(inum, False):
                    if b in twice:
                        owners.setdefault(b, []).append(inum)
            for b in sorted(twice):
                names = ", ".join(f"inode {i}" for i in owners[b])
                self.bad(f"block {b}: used more than once (by {names})")

    def bitmap(self) -> None:
        """Compares the free map with the blocks in use, both ways."""
        ly, sb = self.ly, self.sb
        nb = blocks_for(self.size, ly.bpb)
        bitmap = b"".join(self.block(sb["bmapstart"] + i) for i in range(nb))
        want = bytearray(self.used)
        for b in range(min(self.datastart, self.size)):  # metadata: always in use
            want[b >> 3] |= 1 << (b & 7)
        nbytes = len(want)
        step = 4096
        for start in range(0, nbytes, step):
            if bitmap[start:start + step] == want[start:start + step]:
                continue
            for i in range(start, min(start + step, nbytes)):
                diff = bitmap[i] ^ want[i]
                for bit in range(8):
                    b = i * 8 + bit
                    if diff >> bit & 1 and b < self.size:
                        if want[i] >> bit & 1:
                            self.bad(f"block {b}: in use but marked free")
                        else:
                            self.bad(f"block {b}: marked used but free")

    # ------------------------------------------------------------ directories

    def dir_entries(self, inum: int) -> Iterator[tuple[int, str, int]]:
        """(offset, name, inum) of each used entry of directory inum."""
        ly = self.ly
        de = ly.dirent
        size = self.inode[inum]["size"]
        for fb, b in self.block_map(inum, False):
            if fb < 0 or fb * ly.BSIZE >= size:
                continue
            data = self.block(b)
            end = min(ly.BSIZE, size - fb * ly.BSIZE)
            for off in range(0, end - de.codec.size + 1, de.codec.size):
                d = de.unpack(data, off)
                if d["inum"]:
                    name = d["name"].split(b"\0")[0].decode(errors="replace")
                    yield fb * ly.BSIZE + off, name, int(d["inum"])

    def looks_like_dir(self, inum: int) -> bool:
        """Does non-directory inode inum hold "." naming itself first, as
        only a directory does? (Its type field was then damaged.)"""
        ino = self.inode[inum]
        if ino["size"] < 2 * self.ly.dirent.codec.size:
            return False
        first = next(iter(self.dir_entries(inum)), None)
        return first is not None and first[1:] == (".", inum)

    def directories(self) -> None:
        """Walks the tree from the root, each directory once; counts links."""
        ly, sb = self.ly, self.sb
        self.named: dict[int, int] = {}     # inum -> entries naming it (not . or ..)
        self.dotdot: dict[int, int] = {}    # inum -> other directories' ".." naming it
        parent = {ly.ROOTINO: ly.ROOTINO}
        if self.itype.get(ly.ROOTINO) != ly.T_DIR:
            return
        queue = [ly.ROOTINO]
        seen = {ly.ROOTINO}
        while queue:
            d = queue.pop()
            has_dot = has_dotdot = False
            for off, name, child in self.dir_entries(d):
                where = f"inode {d}: entry '{name}' (offset {off})"
                if child >= sb["ninodes"]:
                    self.bad(f"{where} names inode {child}, beyond the {sb['ninodes']} inodes")
                    continue
                if child not in self.inode:
                    self.bad(f"{where} names free inode {child}")
                    continue
                if name == ".":
                    has_dot = True
                    if child != d:
                        self.bad(f"{where}: '.' names inode {child}, not itself")
                    continue
                if name == "..":
                    has_dotdot = True
                    if child != parent[d]:
                        self.bad(f"{where}: '..' names inode {child}, not the parent "
                                 f"{parent[d]}")
                    elif child != d:
                        self.dotdot[child] = self.dotdot.get(child, 0) + 1
                    continue
                self.named[child] = self.named.get(child, 0) + 1
                if child == d:
                    self.bad(f"{where} names its own directory")
                    continue
                if self.itype[child] != ly.T_DIR:
                    if self.looks_like_dir(child):
                        self.bad(f"inode {child}: type {self.itype[child]}, but it holds a "
                                 "directory's entries ('.' naming itself)")
                    continue
                if child in seen:
                    self.bad(f"{where} names directory {child} a second time "
                             "(a directory cycle or a hard link to a directory)")
                    continue
                seen.add(child)
                parent[child] = d
                queue.append(child)
            if not has_dot or not has_dotdot:
                self.bad(f"inode {d}: directory without '.' or '..'")

    def links(self) -> None:
        """Checks every allocated inode is in a directory and that its nlink counts the entries
        naming it (and the .. of its subdirectories)."""
        ly = self.ly
        for inum, ino in self.inode.items():
            refs = self.named.get(inum, 0) + self.dotdot.get(inum, 0)
            if inum == ly.ROOTINO:
                refs += 1  # the root is its own parent
            elif inum not in self.named:
                self.bad(f"inode {inum}: allocated but in no directory")
                continue
            if ino["nlink"] != refs and ino["nlink"] >= 1:
                self.bad(f"inode {inum}: nlink {ino['nlink']}, expected {refs}")

    def run(self) -> None:
        """The whole pass: superblock (nothing more when it is bad), log, inodes, blocks,
        bitmap, directories, link counts."""
        if not self.superblock():
            return
        self.log_header()
        self.inodes()
        self.blocks()
        self.bitmap()
        self.directories()
        self.links()


def check_image(image: str | Path, limit: int = MAX_PROBLEMS) -> list[str]:
    """Checks an image's consistency, like fsck, and returns every problem
    found (at most `limit` lines, then one that counts the rest), or [] for
    a clean image. Each names the inode or block concerned. Checked: the
    superblock's layout, the log header, each allocated inode's type, link
    count, size and block numbers, blocks used twice, the free bitmap both
    ways, directory entries (out-of-range or free inodes, '.' and '..',
    cycles), and link counts against the entries. Raises FsImageError (one
    line) only when the file is not an image at all.
    """
    layout = load_layout()
    try:
        with open(image, "rb") as f:
            c = _Checker(f, os.fstat(f.fileno()).st_size, layout, limit)
            c.run()
    except OSError as e:
        raise FsImageError(f"{image}: {e.strerror or e}") from e
    except FsImageError as e:
        raise FsImageError(f"{image}: {e}") from e
    except (struct.error, ValueError, KeyError, IndexError, OverflowError) as e:
        raise FsImageError(f"{image}: cannot check, the metadata is garbage "
                           f"({type(e).__name__}: {e})") from e
    if c.dropped:
        c.problems.append(f"... and {c.dropped} more problems")
    return c.problems
