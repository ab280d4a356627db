"""Model images: every guest program plus model directories, rebuilt when their content changes.

The one recipe behind ``make qemu-smol``/``qemu-qwen``/``qemu-llm`` (through
``pyaisvc image``) and ``pyaisvc bench``/``generate``/``chat`` (through
``pyaisvc.guest.llmguest.prepare``)::

    build_model_image(Path("build/fs-smol.img"), {"sh": Path("build/user/_sh"), ...},
                      {"AI/SMOL": Path("models/SMOL")})

An image is rebuilt when the content hash of what it would hold differs from
the one stored beside it (IMAGE.hash): every file's bytes and its path in the
image, every directory, and the builder itself (this module, pyaisvc/image/fsimg.py
and the kernel headers it reads the layout from). Hashing bytes, not sizes
and times, is what makes replacing models/SMOL with older files rebuild the
image. Each file's hash is cached in the stamp under its (size, mtime_ns,
ctime_ns, inode), so an unchanged model is not read again.

A new image is written beside the old one and renamed over it: a QEMU still
running on the old image (snapshot=on reads the file) keeps the old contents.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

from pyaisvc import cheader
from pyaisvc.image import fsimg

# The code and headers that decide the bytes of an image besides its content.
RECIPE = (Path(__file__), Path(fsimg.__file__), Path(cheader.__file__),
          *(fsimg.INCLUDE_DIR / h for h in ("stat.h", "fsparam.h", "fs.h")))


def model_tree(programs: dict[str, Path], dirs: dict[str, Path]) -> fsimg.Tree:
    """Programs at /NAME and each host directory (recursively) at its target path."""
    tree = fsimg.Tree(fsimg.load_layout())
    for name, elf in sorted(programs.items()):
        tree.add_file(name, elf)
    for target, host in sorted(dirs.items()):
        tree.add_dir(target, host)
    return tree


def _entries(node: fsimg.Node, path: str) -> Iterator[tuple[str, Path | None]]:
    """(path in the image, host file or None for a directory), parents first."""
    yield path or "/", node.host
    for name in sorted(node.children):
        yield from _entries(node.children[name], f"{path}/{name}")


def _file_key(st: os.stat_result) -> list[int]:
    """What tells whether a file changed without reading it: size, times and inode."""
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _file_hash(path: Path, cache: dict[str, list], fresh: dict[str, list]) -> str:
    """sha256 of path's bytes; reused from cache while its stat key is unchanged."""
    real = str(path.resolve())
    key = _file_key(path.stat())
    old = cache.get(real)
    if old is not None and old[:-1] == key:
        digest = str(old[-1])
    else:
        with open(path, "rb") as f:
            digest = hashlib.file_digest(f, "sha256").hexdigest()
    fresh[real] = [*key, digest]
    return digest


def content_hash(tree: fsimg.Tree, cache: dict[str, list], fresh: dict[str, list]) -> str:
    """The hash of everything that decides the image's bytes (see the module doc); each
    file's hash comes from cache while its stat key matches, and goes into fresh."""
    h = hashlib.sha256()
    for recipe in RECIPE:
        h.update(f"recipe {recipe.name} {_file_hash(recipe, cache, fresh)}\n".encode())
    for path, host in _entries(tree.root, ""):
        line = f"dir {path}" if host is None else f"file {path} {_file_hash(host, cache, fresh)}"
        h.update(line.encode() + b"\n")
    return h.hexdigest()


def _stamp_path(image: Path) -> Path:
    """Where the image's content hash is stored: IMAGE.hash beside it."""
    return image.with_name(image.name + ".hash")


def _read_stamp(image: Path) -> dict:
    """The image's stored stamp, or {} when there is none or it is not JSON."""
    try:
        stamp = json.loads(_stamp_path(image).read_text())
    except (OSError, ValueError):
        return {}
    return stamp if isinstance(stamp, dict) else {}


def stored_digest(image: Path) -> str | None:
    """The content hash stored beside image when it was built (None without one)."""
    digest = _read_stamp(Path(image)).get("digest")
    return digest if isinstance(digest, str) else None


def build_model_image(image: Path, programs: dict[str, Path], dirs: dict[str, Path],
                      progress: fsimg.Progress | None = None) -> fsimg.ImageInfo | None:
    """Builds image (sized to fit) unless its stored content hash is current (then None)."""
    image = Path(image)
    tree = model_tree(programs, dirs)
    stamp = _read_stamp(image)
    files: dict[str, list] = {}
    digest = content_hash(tree, stamp.get("files", {}), files)
    if image.is_file() and stamp.get("digest") == digest:
        return None
    image.parent.mkdir(parents=True, exist_ok=True)
    tmp = image.with_name(f"{image.name}.{os.getpid()}.tmp")
    try:
        info = fsimg.build_image(tmp, tree, progress=progress)
        os.replace(tmp, image)
    finally:
        tmp.unlink(missing_ok=True)
    stamp_tmp = tmp.with_name(tmp.name + ".hash")  # renamed too: a reader never sees half
    stamp_tmp.write_text(json.dumps({"digest": digest, "files": files}))
    os.replace(stamp_tmp, _stamp_path(image))
    return dataclasses.replace(info, path=image)
