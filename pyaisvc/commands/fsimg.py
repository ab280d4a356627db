"""`pyaisvc fsimg build|list|check|extract`: file-system images for the guest."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pyaisvc.errors import CommandError
from pyaisvc.image import fscheck, fsimg

try:
    from tqdm import tqdm
except ImportError:  # tools/mkfsimg.py under a bare python3: build without a bar
    tqdm = None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The fsimg actions (build, list, check, extract) and their flags."""
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    b = sub.add_parser("build", help="pack host files into a new image")
    b.add_argument("--image", required=True, help="image file to write")
    size = b.add_mutually_exclusive_group()
    size.add_argument("--size", help="image size, e.g. 512M or 4G (default: fit the content)")
    size.add_argument("--size-blocks", type=int, help="image size in 4 KiB blocks")
    b.add_argument("--add", action="append", default=[], metavar="NAME=HOST",
                   help="add host file HOST as /NAME (repeatable; HOST alone uses its name)")
    b.add_argument("--add-dir", action="append", default=[], metavar="[TARGET=]DIR",
                   help="add directory DIR recursively at /TARGET (default: the root)")
    b.add_argument("--quiet", action="store_true", help="no progress bar")
    ls = sub.add_parser("list", help="print the image's tree with sizes")
    ls.add_argument("image_pos", nargs="?", metavar="IMAGE", help="the image to list")
    ls.add_argument("--image", help="the image to list (same as IMAGE)")
    c = sub.add_parser("check", help="check an image's consistency (like fsck); "
                       "exits 1 and lists every problem if it finds any")
    c.add_argument("image_pos", nargs="?", metavar="IMAGE", help="the image to check")
    c.add_argument("--image", help="the image to check (same as IMAGE)")
    x = sub.add_parser("extract", help="copy files out of an image")
    x.add_argument("--image", required=True)
    x.add_argument("--to", required=True, help="host directory to copy into")
    x.add_argument("paths", nargs="*", help="files or directories in the image (default: all)")


def tree_from_args(adds: list[str], add_dirs: list[str]) -> fsimg.Tree:
    """Turns --add and --add-dir values into the tree to pack."""
    tree = fsimg.Tree(fsimg.load_layout())
    for spec in add_dirs:
        target, _, host = spec.rpartition("=")
        tree.add_dir(target, host)
    for spec in adds:
        name, sep, host = spec.partition("=")
        tree.add_file(name if sep else Path(spec).name, host if sep else spec)
    return tree


def _size_blocks(args: argparse.Namespace) -> int | None:
    """The image size in blocks from --size-blocks or --size; None for the builder's
    default."""
    if args.size_blocks is not None:
        return int(args.size_blocks)
    if args.size is not None:
        return fsimg.parse_size(args.size) // fsimg.load_layout().BSIZE
    return None


def progress_bar(desc: str, quiet: bool) -> tuple[contextlib.AbstractContextManager[Any],
                                                  Callable[[int, int], None] | None]:
    """A context that closes the tqdm bar, and the progress callback that drives it (none if
    quiet). The bar appears with the first progress call, so work that is skipped draws none."""
    if quiet or tqdm is None:
        return contextlib.nullcontext(), None
    bars: list[Any] = []

    def progress(done: int, total: int) -> None:
        """Draws the bar (made at the first call) at done of total bytes."""
        if not bars:
            bars.append(tqdm(desc=desc, unit="B", unit_scale=True, leave=False))
        bars[0].total = total
        bars[0].update(done - bars[0].n)

    @contextlib.contextmanager
    def closing() -> Iterator[None]:
        """Closes the bar, if one was drawn, when the work ends."""
        try:
            yield
        finally:
            if bars:
                bars[0].close()

    return closing(), progress


def run(args: argparse.Namespace) -> int:
    """pyaisvc fsimg ACTION: builds, lists, checks or extracts an image; 0, or CommandError
    (an inconsistent image, a missing argument, the builder's error)."""
    try:
        if args.action == "build":
            tree = tree_from_args(args.add, args.add_dir)
            bar, progress = progress_bar(f"building {args.image}", args.quiet)
            with bar:
                info = fsimg.build_image(args.image, tree, _size_blocks(args), progress)
            print(info.summary())
        elif args.action == "list":
            layout = fsimg.load_layout()
            args.image = args.image or args.image_pos
            if not args.image:
                raise CommandError("fsimg list: give the image: pyaisvc fsimg list IMAGE")
            for e in fsimg.list_image(args.image):
                kind = "d" if e.type == layout.T_DIR else "-"
                print(f"{kind} {e.size:>12} {e.path}")
        elif args.action == "check":
            args.image = args.image or args.image_pos
            if not args.image:
                raise CommandError("fsimg check: give the image: pyaisvc fsimg check IMAGE")
            problems = fscheck.check_image(args.image)
            for p in problems:
                print(p)
            if problems:
                raise CommandError(f"fsimg check: {args.image} is inconsistent (see above)")
            print(f"{args.image}: clean")
        else:
            bar, progress = progress_bar(f"extracting {args.image}", False)
            with bar:
                files = fsimg.extract(args.image, args.to, args.paths, progress)
            print(f"extracted {len(files)} files into {args.to}")
    except fsimg.FsImageError as e:
        raise CommandError(f"fsimg {args.action}: {e}") from e
    return 0
