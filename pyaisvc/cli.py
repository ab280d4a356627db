"""The `pyaisvc` command line: parse, dispatch, report errors once.

Each verb lives in its own module under pyaisvc/commands/ with two functions:
``add_arguments(parser)`` and ``run(args) -> int``. Modules are imported only
when their verb runs, so `pyaisvc run` does not pay for importing torch.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from pyaisvc import __version__
from pyaisvc.errors import AisvcError

DESCRIPTION = ("Run and measure small LLMs on the aisvc RISC-V teaching kernel: build its disk "
               "images, export models, boot it in QEMU, generate, chat and benchmark.")
# verb -> (module under pyaisvc.commands, one-line help)
_COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("run", "boot the guest, run one shell command, print its output"),
    "fsimg": ("fsimg", "build, list or extract a guest file-system image"),
    "image": ("image", "build a bootable guest image with a model (skipped when unchanged)"),
    "translate": ("translate", "convert text <-> token ids (smol or qwen tokenizer)"),
    "export": ("export", "export model weights to the course's asset files"),
    "generate": ("generate", "generate a continuation (guest or numpy reference)"),
    "bench": ("bench", "measure model loading time, TTFT and TPOT: tables and plots"),
    "chat": ("chat", "talk to a model loaded in the guest, one line at a time"),
}


def _command_module(verb: str):
    module_name, _ = _COMMANDS[verb]
    return importlib.import_module(f"pyaisvc.commands.{module_name}")


def build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pyaisvc", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"pyaisvc {__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    wanted = next((a for a in argv if not a.startswith("-")), None)
    for verb, (_, help_text) in _COMMANDS.items():
        p = sub.add_parser(verb, help=help_text, description=help_text)
        # Only the chosen verb's module is imported to add its arguments.
        if verb == wanted:
            _command_module(verb).add_arguments(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(args_list)
    args = parser.parse_args(args_list)
    if not args.verb:
        parser.print_help()
        return 2
    try:
        return int(_command_module(args.verb).run(args) or 0)
    except AisvcError as e:
        sys.stdout.flush()
        print(f"pyaisvc: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("pyaisvc: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
