"""The `pyaisvc` command line: parse, dispatch, report errors once.

Each verb lives in its own module under pyaisvc/commands/ with two functions:
``add_arguments(parser)`` and ``run(args) -> int``. Modules are imported only
when their verb runs, so `pyaisvc run` does not pay for importing torch.

Every error is one line on stderr, ``pyaisvc VERB: what went wrong; what to
do``: the library's AisvcError messages, argparse's complaints (with the
flags the verb accepts when an unknown one was given) and a missing program
alike. Exit status 1 for errors, 2 for bad usage, 130 for Ctrl-C.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

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
    "serve": ("serve", "serve the kernel AI service over HTTP (OpenAI API), for a room too"),
}


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line naming the verb."""

    def error(self, message: str) -> NoReturn:
        """Exits with status 2 and message, naming the flags the verb accepts when an unknown
        one was given, and pointing at --help."""
        if "unrecognized arguments" in message or "invalid choice" in message:
            flags = sorted({o for a in self._actions for o in a.option_strings
                            if o.startswith("--") and o != "--help"})
            if flags and "unrecognized" in message:
                message += f"; {self.prog} accepts {', '.join(flags)}"
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def one_line(verb: str | None, message: str) -> str:
    """The CLI's error line: "pyaisvc VERB: message", or "pyaisvc message" when the message
    already starts with the verb ("fsimg list: ..."); the console tail a GuestError
    carries stays below it."""
    if not verb:
        return f"pyaisvc: {message}"
    if message.startswith((f"{verb}: ", f"{verb} ")):
        return f"pyaisvc {message}"
    return f"pyaisvc {verb}: {message}"


def _command_module(verb: str):
    """The commands/ module of verb, imported when the verb runs."""
    module_name, _ = _COMMANDS[verb]
    return importlib.import_module(f"pyaisvc.commands.{module_name}")


def build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    """The parser; only the verb named in argv gets its arguments (and module)."""
    parser = _Parser(prog="pyaisvc", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"pyaisvc {__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=_Parser)
    wanted = next((a for a in argv if not a.startswith("-")), None)
    for verb, (_, help_text) in _COMMANDS.items():
        p = sub.add_parser(verb, help=help_text, description=help_text)
        # Only the chosen verb's module is imported to add its arguments.
        if verb == wanted:
            _command_module(verb).add_arguments(p)
    return parser


def _verb_parser(parser: argparse.ArgumentParser, verb: str) -> argparse.ArgumentParser:
    """The sub-parser of verb."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[verb]


def main(argv: Sequence[str] | None = None) -> int:
    """`pyaisvc VERB ...`: runs the verb and returns its exit status; an AisvcError (or a
    missing program) is one line on stderr and status 1; no verb prints the help (2); Ctrl-C
    gives 130."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(args_list)
    args, extra = parser.parse_known_args(args_list)
    if extra:
        verb_parser = parser if not args.verb else _verb_parser(parser, args.verb)
        verb_parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if not args.verb:
        parser.print_help()
        return 2
    try:
        return int(_command_module(args.verb).run(args) or 0)
    except AisvcError as e:
        sys.stdout.flush()
        print(one_line(args.verb, str(e)), file=sys.stderr)
        return 1
    except FileNotFoundError as e:  # a program the verb runs (make, QEMU, gcc) is missing
        sys.stdout.flush()
        print(one_line(args.verb, f"{e.filename or e}: not found; run `make deps` (or install "
                       "it) and try again"), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("pyaisvc: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
