"""Text <-> token ids for the guest's llmrun programs.

The guest takes and prints token ids; students convert on the host:
encode_text("The capital of France is", "smol") -> [504, 3575, 282, 4649, 314].
parse_ids checks an id list before it reaches a tokenizer, so a typo gives an
error naming the field ("--tokens: item 3 'x7' is not a number") rather than a
traceback.
"""

from __future__ import annotations

import re

from pyaisvc.errors import AisvcError
from pyaisvc.model.tokenizer import Tokenizer, load_tokenizer


class TokenIdError(AisvcError):
    """A token id list that cannot be decoded; the message names the field and item."""


_SEPARATORS = re.compile(r"[\s,]+")


def parse_ids(text: str, field: str, vocab_size: int | None = None) -> list[int]:
    """Parse ids separated by spaces, commas or newlines (brackets allowed).

    ``field`` names the argument in messages (e.g. "--tokens"). Raises
    TokenIdError for an item that is not a number, is negative, or is
    >= vocab_size when that is given.
    """
    body = text.strip().strip("[]")
    items = [s for s in _SEPARATORS.split(body) if s]
    ids = []
    for n, item in enumerate(items, 1):
        try:
            value = int(item, 10)
        except ValueError:
            raise TokenIdError(f"{field}: item {n} {item!r} is not a number "
                               "(give token ids separated by spaces)") from None
        if value < 0:
            raise TokenIdError(f"{field}: item {n} {value} is negative (ids start at 0)")
        if vocab_size is not None and value >= vocab_size:
            raise TokenIdError(f"{field}: item {n} {value} is beyond the vocabulary "
                               f"(ids are 0..{vocab_size - 1})")
        ids.append(value)
    return ids


def format_ids(ids: list[int]) -> str:
    """The guest's input form: ids separated by single spaces."""
    return " ".join(str(i) for i in ids)


def encode_text(text: str, model: str, tokenizer_file: str | None = None) -> list[int]:
    """Token ids for ``text`` (no BOS/EOS added)."""
    return load_tokenizer(model, tokenizer_file).encode(text)


def decode_ids(ids: list[int], model: str, tokenizer_file: str | None = None,
               skip_special_tokens: bool = False, field: str = "tokens") -> str:
    """Text for ``ids``; ids outside the tokenizer's vocabulary raise TokenIdError."""
    tok: Tokenizer = load_tokenizer(model, tokenizer_file)
    check_ids(ids, tok.vocab_size, field)
    return tok.decode(ids, skip_special_tokens=skip_special_tokens)


def check_ids(ids: list[int], vocab_size: int, field: str) -> None:
    """TokenIdError naming field and the first id outside 0..vocab_size-1."""
    for n, value in enumerate(ids, 1):
        if value < 0:
            raise TokenIdError(f"{field}: item {n} {value} is negative (ids start at 0)")
        if value >= vocab_size:
            raise TokenIdError(f"{field}: item {n} {value} is beyond the vocabulary "
                               f"(ids are 0..{vocab_size - 1})")
