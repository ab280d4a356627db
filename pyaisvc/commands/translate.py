"""`pyaisvc translate encode|decode`: text <-> token ids on the host.

    pyaisvc translate encode --model smol --text "The capital of France is"
    504 3575 282 4649 314
    pyaisvc translate decode --model smol --tokens "504 3575 282 4649 314"
    The capital of France is
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pyaisvc.errors import CommandError
from pyaisvc.model.tokenizer import MODELS
from pyaisvc.model.translate import decode_ids, encode_text, format_ids, parse_ids


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The encode and decode subcommands and their sources (text or file, ids or file)."""
    sub = parser.add_subparsers(dest="direction", metavar="encode|decode", required=True)
    enc = sub.add_parser("encode", help="text -> token ids separated by spaces")
    _common(enc)
    src = enc.add_mutually_exclusive_group(required=True)
    src.add_argument("--text", help="the text to encode")
    src.add_argument("--text-file", help="read the text from a file ('-' for stdin); "
                     "one trailing newline is dropped")
    dec = sub.add_parser("decode", help="token ids -> text")
    _common(dec)
    src = dec.add_mutually_exclusive_group(required=True)
    src.add_argument("--tokens", help='ids separated by spaces or commas, e.g. "504 3575"')
    src.add_argument("--token-file", help="read the ids from a file ('-' for stdin)")
    dec.add_argument("--skip-special-tokens", action="store_true",
                     help="leave out special tokens such as <|im_end|>")


def _common(p: argparse.ArgumentParser) -> None:
    """The flags both directions share: model and tokenizer file."""
    p.add_argument("--model", choices=MODELS, default="smol",
                   help="whose tokenizer (default smol)")
    p.add_argument("--tokenizer-file", help="use this local tokenizer.json instead")


def _read(path: str, option: str) -> str:
    """The text of path ('-': stdin); CommandError naming option when it cannot be read or
    is not UTF-8."""
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise CommandError(f"translate: {option} {path}: {e.strerror}") from e
    except UnicodeDecodeError as e:
        raise CommandError(f"translate: {option} {path}: not UTF-8 text ({e.reason})") from e


def run(args: argparse.Namespace) -> int:
    """pyaisvc translate: encode prints the ids, decode the text; 0, or CommandError for a
    bad source or id."""
    if args.direction == "encode":
        if args.text is not None:
            text = args.text
        else:
            text = _read(args.text_file, "--text-file")
            text = text[:-1] if text.endswith("\n") else text
        print(format_ids(encode_text(text, args.model, args.tokenizer_file)))
        return 0
    if args.tokens is not None:
        field, raw = "--tokens", args.tokens
    else:
        field, raw = "--token-file", _read(args.token_file, "--token-file")
    ids = parse_ids(raw, field)
    text = decode_ids(ids, args.model, args.tokenizer_file, args.skip_special_tokens, field)
    sys.stdout.write(text + "\n")
    return 0
