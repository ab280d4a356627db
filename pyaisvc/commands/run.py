"""`pyaisvc run [--cpus N] [--ram 512M] [--image F] -- CMD`: one shell command in the guest.

Boots the guest on a throw-away overlay of the image (the image is never
written), runs CMD at the shell prompt, prints its output on stdout and the
boot time on stderr, and shuts QEMU down; its exit status is CMD's in the
guest (the shell's $?: 127 for a command that does not exist), so scripts
can test it. A process the kernel kills for a fault gets one more stderr
line: where its pc lies, as function and file:line (pyaisvc.guest.symbolize).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pyaisvc.errors import CommandError
from pyaisvc.guest.qemu import (
    DEFAULT_RAM,
    KERNEL,
    Guest,
    GuestError,
    GuestTimeout,
    QemuConfig,
    default_cpus,
    default_qemu,
)

DEFAULT_IMAGE = Path("build/fs.img")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The run flags (harts, RAM, image, kernel, timeout, QEMU) and the command after --."""
    parser.add_argument("--cpus", type=int, default=default_cpus(),
                        help=f"harts (default: the host's cores, at most 4; {default_cpus()} here)")
    parser.add_argument("--ram", default=DEFAULT_RAM,
                        help=f"guest RAM, e.g. 512M or 2G (default {DEFAULT_RAM})")
    parser.add_argument("--image", type=Path, default=DEFAULT_IMAGE,
                        help=f"file-system image (default {DEFAULT_IMAGE})")
    parser.add_argument("--kernel", type=Path, default=KERNEL,
                        help=f"kernel ELF (default {KERNEL})")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds CMD may run (default 60)")
    parser.add_argument("--qemu", default=default_qemu(),
                        help="QEMU binary (default: $AISVC_QEMU, else qemu-system-riscv64)")
    parser.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD",
                        help="the shell command line to run")


def run(args: argparse.Namespace) -> int:
    """pyaisvc run -- CMD: CMD's output on stdout; returns CMD's exit status in the guest (1
    when it has none), CommandError when CMD times out or stops the guest."""
    words = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not words:
        raise CommandError("run: no command given; usage: pyaisvc run -- echo hi")
    cfg = QemuConfig(kernel=args.kernel, image=args.image, ram=args.ram, cpus=args.cpus,
                     snapshot=True, qemu=args.qemu)
    line = " ".join(words)
    with Guest(cfg) as guest:  # boot errors go to the CLI as they are
        print(f"pyaisvc run: booted to the shell prompt in {guest.boot_seconds:.2f} s "
              f"({guest.harts} harts, {guest.ram_mib} MiB)", file=sys.stderr)
        try:
            output = guest.run(line, timeout=args.timeout)
            sys.stdout.write(output)
            for where in guest.explain(output):  # a fault's pc as function and file:line
                print(f"pyaisvc run: {where}", file=sys.stderr)
        except GuestTimeout:
            raise CommandError(f"run: `{line}` did not finish within --timeout {args.timeout:g} "
                               "s; raise --timeout if it needs longer") from None
        except GuestError as e:
            raise CommandError(f"run: `{line}` stopped the guest: {e}") from e
        status = guest.last_status
    return status if status is not None and 0 <= status <= 255 else 1
