"""`pyaisvc run [--cpus N] [--ram 512M] [--image F] -- CMD`: one shell command in the guest.

Boots the guest on a throw-away overlay of the image (the image is never
written), runs CMD at the shell prompt, prints its output on stdout and the
boot time on stderr, and shuts QEMU down.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pyaisvc.errors import CommandError
from pyaisvc.qemu import Guest, GuestError, QemuConfig, default_qemu

DEFAULT_KERNEL = Path("build/kernel/kernel")
DEFAULT_IMAGE = Path("build/fs.img")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cpus", type=int, default=1, help="harts (default 1)")
    parser.add_argument("--ram", default="256M", help="guest RAM, e.g. 512M or 2G (default 256M)")
    parser.add_argument("--image", type=Path, default=DEFAULT_IMAGE,
                        help=f"file-system image (default {DEFAULT_IMAGE})")
    parser.add_argument("--kernel", type=Path, default=DEFAULT_KERNEL,
                        help=f"kernel ELF (default {DEFAULT_KERNEL})")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds CMD may run (default 60)")
    parser.add_argument("--qemu", default=default_qemu(),
                        help="QEMU binary (default: $AISVC_QEMU, else qemu-system-riscv64)")
    parser.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD",
                        help="the shell command line to run")


def run(args: argparse.Namespace) -> int:
    words = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not words:
        raise CommandError("run: no command given; usage: pyaisvc run -- echo hi")
    cfg = QemuConfig(kernel=args.kernel, image=args.image, ram=args.ram, cpus=args.cpus,
                     snapshot=True, qemu=args.qemu)
    try:
        with Guest(cfg) as guest:
            print(f"pyaisvc run: booted to the shell prompt in {guest.boot_seconds:.2f} s "
                  f"({guest.harts} harts, {guest.ram_mib} MiB)", file=sys.stderr)
            sys.stdout.write(guest.run(" ".join(words), timeout=args.timeout))
    except GuestError as e:
        raise CommandError(f"run: {e}") from e
    return 0
