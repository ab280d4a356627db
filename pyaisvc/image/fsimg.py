"""Build, list and extract aisvc file-system images on the host.

The on-disk layout is defined once, in kernel/include/fs.h (with LOGBLOCKS in
fsparam.h and the inode types in stat.h). This module parses those headers:
the #defines become `Layout` fields and the structs become `struct` formats,
so the kernel and the builder cannot drift apart.

An image is built in one pass over a plan:

    [ boot | super | log | inodes | bitmap | indirect + data, file by file ]

Each file gets its indirect blocks and then all its data blocks as one
contiguous run, so the kernel's readi() can read it with a few large disk
requests. Blocks are handed out in order, so the free bitmap is a prefix of
ones. The image is written as a sparse file; file contents are copied with
os.copy_file_range in large pieces, so an 800 MB image builds in seconds.
Every image holds /console, the device init opens.

Checking an image's consistency (an fsck) is pyaisvc.image.fscheck's job.
"""

from __future__ import annotations

import functools
import os
import re
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pyaisvc import cheader
from pyaisvc.cheader import CStruct
from pyaisvc.errors import AisvcError

INCLUDE_DIR = cheader.INCLUDE_DIR
MIN_FREE_BYTES = 16 << 20  # free space an auto-sized image keeps at least
FREE_FRACTION = 0.20       # ... or this share of the content, if larger
COPY_CHUNK = 8 << 20       # bytes per copy call while writing file data

Progress = Callable[[int, int], None]  # (bytes done, bytes total)


class FsImageError(AisvcError):
    """The image cannot be built or read; the message says what to change."""


# ---------------------------------------------------------------- layout from the headers

@dataclass(frozen=True)
class Layout:
    """The file system's constants, as fs.h, fsparam.h and stat.h define them."""

    defines: dict[str, int]
    superblock: CStruct
    dinode: CStruct
    dirent: CStruct

    def __getattr__(self, name: str) -> int:
        """The named constant (e.g. BSIZE, DIRSIZ) from the headers; AttributeError if none."""
        try:
            return self.defines[name]
        except KeyError:
            raise AttributeError(name) from None

    @property
    def ipb(self) -> int:
        """Inodes per block."""
        return self.BSIZE // self.dinode.codec.size

    @property
    def bpb(self) -> int:
        """Bitmap bits per block."""
        return self.BSIZE * 8


@functools.cache
def load_layout(include_dir: Path = INCLUDE_DIR) -> Layout:
    """Reads the layout from the kernel headers; CHeaderError if they are missing."""
    defines: dict[str, int] = {}
    text = ""
    for name in ("stat.h", "fsparam.h", "fs.h"):
        body = cheader.read_header(include_dir / name)
        text += body
        cheader.add_defines(body, defines)
    structs = cheader.parse_structs(text, defines)
    return Layout(defines, structs["superblock"], structs["dinode"], structs["dirent"])


# ---------------------------------------------------------------- the tree to pack

CONSOLE_NAME = "console"  # every image has /console, the device init opens
CONSOLE_MAJOR = 1         # CONSOLE in kernel/include/file.h


@dataclass
class Node:
    """A file (host is set), a device (major is set) or a directory
    (children is used) in the image."""

    name: str
    host: Path | None = None
    size: int = 0
    children: dict[str, Node] = field(default_factory=dict)
    inum: int = 0
    major: int = 0

    @property
    def is_dir(self) -> bool:
        """Whether the node is a directory (neither a host file nor a device)."""
        return self.host is None and not self.major


def parse_size(text: str) -> int:
    """'512M', '4G', '100K', '4096' -> bytes. FsImageError if malformed."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMGT]?)i?B?\s*", text, re.I)
    if not m:
        raise FsImageError(f"bad size {text!r}: write e.g. 512M, 4G or a number of bytes")
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30, "T": 40}[m.group(2).upper()]


def _split_path(target: str, layout: Layout) -> list[str]:
    """The path's components for an image file name such as /bin/NAME; FsImageError for an empty
    name, '.' or '..', or a component longer than DIRSIZ."""
    parts = [p for p in target.split("/") if p]
    if not parts:
        raise FsImageError(f"bad name {target!r}: give a file name such as /bin/NAME")
    for p in parts:
        if p in (".", ".."):
            raise FsImageError(f"bad name {target!r}: '.' and '..' cannot be added")
        if len(p.encode()) > layout.DIRSIZ:
            raise FsImageError(
                f"name {p!r} in {target!r} is {len(p.encode())} bytes; the file system "
                f"allows at most {layout.DIRSIZ} (DIRSIZ in kernel/include/fs.h): rename it")
    return parts


class Tree:
    """The directory tree to pack, built from --add and --add-dir requests."""

    def __init__(self, layout: Layout) -> None:
        """An empty tree for layout: only the root and the console device."""
        self.layout = layout
        self.root = Node("/")
        # The console device is part of every image, so that init finds it
        # even when the kernel mounts a damaged image read-only.
        self.root.children[CONSOLE_NAME] = Node(CONSOLE_NAME, major=CONSOLE_MAJOR)

    def _dir(self, parts: list[str], target: str) -> Node:
        """The directory at parts, made with any directories missing on the way; FsImageError
        when one of them is already a file (target names it)."""
        node = self.root
        for p in parts:
            node = node.children.setdefault(p, Node(p))
            if not node.is_dir:
                raise FsImageError(f"{target!r}: {p!r} is already a file, not a directory")
        return node

    def add_file(self, target: str, host: str | Path) -> None:
        """Adds host file `host` at path `target` (parent directories are made)."""
        host = Path(host)
        if not host.is_file():
            raise FsImageError(f"{host}: no such file (given for {target!r}); check the path")
        parts = _split_path(target, self.layout)
        parent = self._dir(parts[:-1], target)
        if parts[-1] in parent.children:
            if parent is self.root and parts[-1] == CONSOLE_NAME:
                raise FsImageError(f"{target!r}: /{CONSOLE_NAME} is the console device that "
                                   "every image has; pick another name")
            raise FsImageError(f"{target!r} is added twice: give each file one name")
        parent.children[parts[-1]] = Node(parts[-1], host, host.stat().st_size)

    def add_dir(self, target: str, host: str | Path) -> None:
        """Adds host directory `host` recursively at `target` ('' or '/' is the root)."""
        host = Path(host)
        if not host.is_dir():
            raise FsImageError(f"{host}: no such directory (given for {target!r})")
        parts = [p for p in target.split("/") if p]
        if parts:
            _split_path(target, self.layout)
        self._dir(parts, target)
        for sub in sorted(host.iterdir()):
            dest = "/".join(parts + [sub.name])
            if sub.is_dir():
                self.add_dir(dest, sub)
            elif sub.is_file():
                self.add_file(dest, sub)

    def walk(self) -> Iterator[Node]:
        """All nodes, parents before children, in name order."""
        stack = [self.root]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(sorted(node.children.values(), key=lambda n: n.name)))


# ---------------------------------------------------------------- planning the blocks

def blocks_for(nbytes: int, bsize: int) -> int:
    """The blocks of bsize bytes that hold nbytes."""
    return -(-nbytes // bsize)


def _nindirect(nblocks: int, layout: Layout) -> int:
    """Indirect blocks a file of nblocks data blocks needs."""
    rest = nblocks - layout.NDIRECT
    if rest <= 0:
        return 0
    if rest <= layout.NINDIRECT:
        return 1
    rest -= layout.NINDIRECT
    if rest > layout.NINDIRECT * layout.NINDIRECT:
        raise FsImageError(f"a file of {nblocks} blocks exceeds MAXFILE ({layout.MAXFILE})")
    return 2 + blocks_for(rest, layout.NINDIRECT)


def _node_bytes(node: Node, layout: Layout) -> int:
    """How many bytes node takes in the image: a directory's entries (with . and ..) or a file's
    size."""
    if node.is_dir:
        return (len(node.children) + 2) * layout.dirent.codec.size
    return node.size


@dataclass(frozen=True)
class Geometry:
    size: int          # blocks in the image
    ninodes: int
    nlog: int
    logstart: int
    inodestart: int
    bmapstart: int
    datastart: int


def _geometry(size: int, ninodes: int, layout: Layout) -> Geometry:
    """Where each region of an image of size blocks and ninodes inodes begins: boot block,
    superblock, log, inodes, bitmap, data."""
    nlog = layout.LOGBLOCKS + 1
    inodestart = 2 + nlog
    bmapstart = inodestart + blocks_for(ninodes, layout.ipb)
    datastart = bmapstart + blocks_for(size, layout.bpb)
    return Geometry(size, ninodes, nlog, 2, inodestart, bmapstart, datastart)


def plan_size(tree: Tree) -> tuple[int, int]:
    """(blocks the content needs, inodes to provide) for this tree."""
    layout = tree.layout
    content = 0
    nodes = 0
    for node in tree.walk():
        n = blocks_for(_node_bytes(node, layout), layout.BSIZE)
        content += n + _nindirect(n, layout)
        nodes += 1
    ninodes = min(layout.MAXINODES, max(256, 2 * nodes + 64))
    if nodes + 1 > ninodes:
        raise FsImageError(f"{nodes} files and directories exceed the {layout.MAXINODES} "
                           "inodes an image can hold; pack fewer files")
    return content, ninodes


def auto_size_blocks(tree: Tree) -> int:
    """Image size in blocks: content, metadata, and free space for the guest to write."""
    layout = tree.layout
    content, ninodes = plan_size(tree)
    free = max(int(content * FREE_FRACTION), MIN_FREE_BYTES // layout.BSIZE)
    size = content + free
    return size + _geometry(size, ninodes, layout).datastart


# ---------------------------------------------------------------- writing

class _Writer:
    """Writes one image: allocates blocks in order and records the inodes."""

    def __init__(self, fd: int, geo: Geometry, layout: Layout) -> None:
        """A writer of the image open at fd with geometry geo; data blocks are allocated from
        geo.datastart on."""
        self.fd, self.geo, self.layout = fd, geo, layout
        self.next_block = geo.datastart
        self.inodes: dict[int, bytes] = {}

    def alloc(self, n: int) -> int:
        """The first of n consecutive new data blocks."""
        first = self.next_block
        self.next_block += n
        return first

    def write_block(self, bno: int, data: bytes) -> None:
        """Writes data at block bno of the image."""
        os.pwrite(self.fd, data, bno * self.layout.BSIZE)

    def place(self, nblocks: int) -> tuple[list[int], int]:
        """Allocates a file's indirect blocks, then its data contiguously.

        Returns the inode's addrs and the first data block; writes the
        indirect blocks.
        """
        ly = self.layout
        nind = _nindirect(nblocks, ly)
        ind = self.alloc(nind)
        first = self.alloc(nblocks)
        data = list(range(first, first + nblocks))
        addrs = data[:ly.NDIRECT]
        rest = data[ly.NDIRECT:]
        if rest:
            addrs += [0] * (ly.NDIRECT - len(addrs)) + [ind]
            self._write_ptrs(ind, rest[:ly.NINDIRECT])
            rest = rest[ly.NINDIRECT:]
        if rest:
            level2 = list(range(ind + 2, ind + nind))
            addrs.append(ind + 1)
            self._write_ptrs(ind + 1, level2)
            for i, bno in enumerate(level2):
                self._write_ptrs(bno, rest[i * ly.NINDIRECT:(i + 1) * ly.NINDIRECT])
        return addrs, first

    def _write_ptrs(self, bno: int, ptrs: list[int]) -> None:
        """Writes the block numbers ptrs as the indirect block bno."""
        self.write_block(bno, struct.pack(f"<{len(ptrs)}I", *ptrs))

    def add_inode(self, inum: int, itype: int, size: int, addrs: list[int], nlink: int,
                  major: int = 0) -> None:
        """Records inode inum, written to the inode table by finish()."""
        self.inodes[inum] = self.layout.dinode.pack(type=itype, major=major, nlink=nlink,
                                                    size=size, addrs=addrs)

    def finish(self, ninodes: int) -> None:
        """Writes the inode table, the bitmap (every block up to the last allocated one in use)
        and the superblock for ninodes inodes."""
        ly, geo = self.layout, self.geo
        isize = ly.dinode.codec.size
        table = bytearray(blocks_for(ninodes, ly.ipb) * ly.BSIZE)
        for inum, raw in self.inodes.items():
            table[inum * isize:(inum + 1) * isize] = raw
        os.pwrite(self.fd, bytes(table), geo.inodestart * ly.BSIZE)
        used = self.next_block
        bitmap = bytearray(blocks_for(geo.size, ly.bpb) * ly.BSIZE)
        bitmap[:used // 8] = b"\xff" * (used // 8)
        if used % 8:
            bitmap[used // 8] = (1 << (used % 8)) - 1
        os.pwrite(self.fd, bytes(bitmap), geo.bmapstart * ly.BSIZE)
        sbk = ly.superblock.pack(magic=ly.FSMAGIC, version=ly.FSVERSION, size=geo.size,
                                 nblocks=geo.size - geo.datastart, ninodes=ninodes,
                                 nlog=geo.nlog, logstart=geo.logstart,
                                 inodestart=geo.inodestart, bmapstart=geo.bmapstart)
        self.write_block(1, sbk)


def _copy_into(fd: int, host: Path, offset: int, done: int, total: int,
               progress: Progress | None) -> int:
    """Copies the host file into the image file fd at byte offset (copy_file_range, else reads
    and writes), reporting done + the bytes so far of total to progress; returns the new
    done. FsImageError when the file shrinks meanwhile."""
    with open(host, "rb") as src:
        left = host.stat().st_size
        pos = 0
        while left > 0:
            try:
                n = os.copy_file_range(src.fileno(), fd, min(left, COPY_CHUNK), pos, offset + pos)
            except OSError:
                src.seek(pos)
                n = os.pwrite(fd, src.read(min(left, COPY_CHUNK)), offset + pos)
            if n <= 0:
                raise FsImageError(f"{host}: file shrank while being packed; try again")
            pos += n
            left -= n
            done += n
            if progress:
                progress(done, total)
    return done


def _dir_bytes(node: Node, parent: Node, layout: Layout) -> bytes:
    """The directory node's blocks' content: its entries ., .. (parent) and its children by
    name."""
    entries = [(node.inum, "."), (parent.inum, "..")]
    entries += [(c.inum, c.name) for c in sorted(node.children.values(), key=lambda n: n.name)]
    return b"".join(layout.dirent.pack(inum=i, name=n.encode()) for i, n in entries)


@dataclass(frozen=True)
class ImageInfo:
    path: Path
    size_blocks: int
    used_blocks: int
    ninodes: int
    files: int

    def summary(self) -> str:
        """One line: entries, space used and inodes."""
        bs = load_layout().BSIZE
        return (f"{self.path}: {self.files} entries, {self.used_blocks * bs >> 20} MiB used "
                f"of {self.size_blocks * bs >> 20} MiB, {self.ninodes} inodes")


def build_image(image: str | Path, tree: Tree, size_blocks: int | None = None,
                progress: Progress | None = None) -> ImageInfo:
    """Writes `tree` into a new image file; sized automatically when size_blocks is None.

    Raises FsImageError when the content does not fit, saying how big it must be.
    """
    ly = tree.layout
    content, ninodes = plan_size(tree)
    need = content + _geometry(content, ninodes, ly).datastart
    if size_blocks is None:
        size_blocks = auto_size_blocks(tree)
    if size_blocks >= 1 << 32:
        raise FsImageError(f"{size_blocks} blocks exceed the 2^32 that 32-bit block numbers allow")
    geo = _geometry(size_blocks, ninodes, ly)
    if content + geo.datastart > size_blocks:
        mib = -(-(need + 1) * ly.BSIZE // (1 << 20))
        raise FsImageError(f"image too small: {size_blocks} blocks given, the content needs "
                           f"at least {need + 1} blocks of {ly.BSIZE} bytes; use --size {mib}M "
                           "or more, or leave the size out")
    nodes = list(tree.walk())
    for inum, node in enumerate(nodes, start=ly.ROOTINO):
        node.inum = inum
    parents = {id(c): n for n in nodes for c in n.children.values()}
    total = sum(n.size for n in nodes if not n.is_dir)
    image = Path(image)
    fd = os.open(image, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.ftruncate(fd, size_blocks * ly.BSIZE)
        w = _Writer(fd, geo, ly)
        done = 0
        for node in nodes:
            nbytes = _node_bytes(node, ly)
            addrs, first = w.place(blocks_for(nbytes, ly.BSIZE))
            if node.is_dir:
                os.pwrite(fd, _dir_bytes(node, parents.get(id(node), node), ly),
                          first * ly.BSIZE)
                ndirs = sum(c.is_dir for c in node.children.values())
                # As mkdir does: 1, plus one for each subdirectory's "..".
                w.add_inode(node.inum, ly.T_DIR, nbytes, addrs, 1 + ndirs)
            elif node.major:
                w.add_inode(node.inum, ly.T_DEVICE, 0, [], 1, node.major)
            else:
                assert node.host is not None
                done = _copy_into(fd, node.host, first * ly.BSIZE, done, total, progress)
                w.add_inode(node.inum, ly.T_FILE, nbytes, addrs, 1)
        w.finish(ninodes)
    except BaseException:
        os.close(fd)
        image.unlink(missing_ok=True)
        raise
    os.close(fd)
    return ImageInfo(image, size_blocks, w.next_block, ninodes, len(nodes))


# ---------------------------------------------------------------- reading

@dataclass(frozen=True)
class Entry:
    path: str
    type: int
    size: int
    inum: int


class Image:
    """Read access to an image: inodes, directories, file contents."""

    def __init__(self, path: str | Path, layout: Layout | None = None) -> None:
        """Opens the image at path for reading; FsImageError when it cannot be opened or its
        superblock is not an aisvc file system's."""
        self.layout = ly = layout or load_layout()
        self.path = Path(path)
        try:
            self.f = open(self.path, "rb")
        except OSError as e:
            raise FsImageError(f"{path}: {e.strerror}") from e
        self.sb = ly.superblock.unpack(self._block(1))
        if self.sb["magic"] != ly.FSMAGIC or self.sb["version"] != ly.FSVERSION:
            self.f.close()
            raise FsImageError(f"{path}: not an aisvc file-system image (bad superblock magic "
                               f"{self.sb['magic']:#x} or version {self.sb['version']})")

    def close(self) -> None:
        """Closes the image file."""
        self.f.close()

    def __enter__(self) -> Image:
        """The open image itself (closed on leaving the block)."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Closes the image file."""
        self.close()

    def _block(self, bno: int) -> bytes:
        """Block bno, zero-padded where the file is short (a damaged image)."""
        self.f.seek(bno * self.layout.BSIZE)
        data = self.f.read(self.layout.BSIZE)
        return data + bytes(self.layout.BSIZE - len(data))

    def inode(self, inum: int) -> dict[str, object]:
        """The on-disk inode inum's fields."""
        ly = self.layout
        raw = self._block(inum // ly.ipb + int(self.sb["inodestart"]))
        return ly.dinode.unpack(raw, (inum % ly.ipb) * ly.dinode.codec.size)

    def _ptrs(self, bno: int) -> list[int]:
        """The block numbers held in the indirect block bno."""
        return list(struct.unpack(f"<{self.layout.NINDIRECT}I", self._block(bno)))

    def blocks(self, ino: dict[str, object]) -> list[int]:
        """The inode's data block numbers, in file order (0 for a hole)."""
        ly = self.layout
        addrs: list[int] = ino["addrs"]
        n = blocks_for(int(ino["size"]), ly.BSIZE)
        out = addrs[:ly.NDIRECT]
        if n > ly.NDIRECT and addrs[ly.NDIRECT]:
            out += self._ptrs(addrs[ly.NDIRECT])
        if n > ly.NDIRECT + ly.NINDIRECT and addrs[ly.NDIRECT + 1]:
            for p in self._ptrs(addrs[ly.NDIRECT + 1]):
                out += self._ptrs(p) if p else [0] * ly.NINDIRECT
        return out[:n]

    def read_chunks(self, inum: int, chunk: int = COPY_CHUNK) -> Iterator[bytes]:
        """The contents of inode inum, in pieces of about `chunk` bytes."""
        ly = self.layout
        ino = self.inode(inum)
        left = int(ino["size"])
        blocks = self.blocks(ino)
        i = 0
        while left > 0:
            j = i + 1  # extend the run over contiguous blocks
            while j < len(blocks) and blocks[j] == blocks[j - 1] + 1 and \
                    (j - i) * ly.BSIZE < chunk and blocks[i]:
                j += 1
            n = min(left, (j - i) * ly.BSIZE)
            if blocks[i]:
                self.f.seek(blocks[i] * ly.BSIZE)
                data = self.f.read(n)
            else:
                data = bytes(n)
            yield data
            left -= n
            i = j

    def read_file(self, inum: int) -> bytes:
        """The whole contents of inode inum."""
        return b"".join(self.read_chunks(inum))

    def entries(self, inum: int) -> list[tuple[str, int]]:
        """(name, inum) for each entry of directory inum, without . and .."""
        de = self.layout.dirent
        data = self.read_file(inum)
        out = []
        for off in range(0, len(data) - de.codec.size + 1, de.codec.size):
            d = de.unpack(data, off)
            name = d["name"].rstrip(b"\0").decode(errors="replace")
            if d["inum"] and name not in (".", ".."):
                out.append((name, int(d["inum"])))
        return out

    def walk(self) -> Iterator[Entry]:
        """Every file and directory, depth first, parents before children.
        Each directory is listed once (a damaged image may have cycles);
        entries naming no inode of the image are left out (`check` says why)."""
        root = self.layout.ROOTINO
        stack = [("/", root)]
        seen = {root}
        while stack:
            path, inum = stack.pop()
            ino = self.inode(inum)
            itype = int(ino["type"])
            yield Entry(path, itype, int(ino["size"]), inum)
            if itype == self.layout.T_DIR:
                base = path.rstrip("/")
                for name, child in sorted(self.entries(inum), reverse=True):
                    if child in seen or not 0 < child < self.sb["ninodes"]:
                        continue
                    if self.inode(child)["type"] == self.layout.T_DIR:
                        seen.add(child)
                    stack.append((f"{base}/{name}", child))

    def lookup(self, path: str) -> Entry:
        """The entry at `path`; FsImageError if there is none."""
        want = "/" + path.strip("/")
        for e in self.walk():
            if e.path == want:
                return e
        raise FsImageError(f"{self.path}: no file {want!r} in the image; "
                           "see `pyaisvc fsimg list`")


def list_image(image: str | Path) -> list[Entry]:
    """All entries of an image, in tree order."""
    with Image(image) as img:
        return list(img.walk())


def extract(image: str | Path, dest: str | Path, paths: list[str] | None = None,
            progress: Progress | None = None) -> list[Path]:
    """Copies files (all, or those under `paths`) out of `image` into directory `dest`."""
    dest = Path(dest)
    written = []
    with Image(image) as img:
        entries = list(img.walk())
        if paths:
            wanted = ["/" + p.strip("/") for p in paths]
            for w in wanted:
                if not any(e.path == w or e.path.startswith(w.rstrip("/") + "/") for e in entries):
                    raise FsImageError(f"{image}: no file {w!r} in the image")
            entries = [e for e in entries
                       if any(e.path == w or e.path.startswith(w.rstrip("/") + "/")
                              or w == "/" for w in wanted)]
        total = sum(e.size for e in entries if e.type == img.layout.T_FILE)
        done = 0
        for e in entries:
            out = dest / e.path.lstrip("/")
            if e.type == img.layout.T_DIR:
                out.mkdir(parents=True, exist_ok=True)
                continue
            if e.type != img.layout.T_FILE:
                continue  # devices have no contents to copy
            out.parent.mkdir(parents=True, exist_ok=True)
            with open(out, "wb") as f:
                for chunk in img.read_chunks(e.inum):
                    f.write(chunk)
                    done += len(chunk)
                    if progress:
                        progress(done, total)
            written.append(out)
    return written

