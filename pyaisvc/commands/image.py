"""`pyaisvc image --model smol --out build/fs-smol.img`: a bootable image with a model.

    pyaisvc image --model smol --out build/fs-smol.img
    pyaisvc image --model smol=models/SMOL --model qwen=build/assets/qwen08/QWEN \\
        --out build/fs-llm.img --add sh=build/user/_sh ...

Every guest program (--add NAME=ELF, or all of the Makefile's UPROGS) at
/NAME and each model's asset directory at its guest directory (/AI/SMOL,
/AI/QWEN). Nothing is written when the image already holds exactly this
content (pyaisvc.image.modelimage compares content hashes), so `make qemu-smol`
calls it every time.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pyaisvc.commands.fsimg import progress_bar
from pyaisvc.errors import AisvcError, CommandError
from pyaisvc.guest.llmguest import MODELS, uprogs
from pyaisvc.image.modelimage import build_model_image


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The image flags: --out, --model NAME[=DIR] (repeatable), --add NAME=ELF, --quiet."""
    parser.add_argument("--out", type=Path, required=True, help="image file to write")
    parser.add_argument("--model", action="append", required=True, metavar="NAME[=DIR]",
                        help=f"add model NAME ({', '.join(MODELS)}) from DIR (default "
                        + " or ".join(str(m.assets) for m in MODELS.values())
                        + "); repeatable")
    parser.add_argument("--add", action="append", default=[], metavar="NAME=ELF",
                        help="guest program ELF as /NAME (repeatable; default: every UPROG "
                        "of the Makefile, from build/user/)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def model_dirs(values: list[str]) -> dict[str, Path]:
    """--model NAME[=DIR] values -> {guest directory without the leading '/': host DIR}."""
    dirs = {}
    for value in values:
        name, sep, host = value.partition("=")
        if name not in MODELS:
            raise CommandError(f"image: --model {value}: unknown model {name!r}; use one of "
                               f"{', '.join(MODELS)}, optionally followed by =DIR")
        spec = MODELS[name]
        dirs[spec.guest_dir.lstrip("/")] = Path(host) if sep else spec.assets
    return dirs


def programs(adds: list[str]) -> dict[str, Path]:
    """--add NAME=ELF values -> {NAME: ELF}; the Makefile's UPROGS when there are none."""
    if not adds:
        try:
            return uprogs(Path("."))
        except AisvcError as e:
            raise CommandError(f"image: {e}") from e
    out = {}
    for value in adds:
        name, sep, elf = value.partition("=")
        if not sep or not name:
            raise CommandError(f"image: --add {value}: write NAME=ELF, e.g. sh=build/user/_sh")
        out[name] = Path(elf)
    return out


def run(args: argparse.Namespace) -> int:
    """pyaisvc image: an image holding the programs and the models, rebuilt only when its
    content changed; 0, or CommandError."""
    dirs = model_dirs(args.model)
    progs = programs(args.add)
    try:
        bar, progress = progress_bar(f"building {args.out}", args.quiet)
        with bar:
            info = build_model_image(args.out, progs, dirs, progress)
    except AisvcError as e:
        raise CommandError(f"image: {e}") from e
    print(f"{args.out}: up to date" if info is None else info.summary())
    return 0
