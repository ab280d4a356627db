"""Shared cases for the LLM runtime tests (tests/test_llmrun_host.py, test_llmrun_guest.py).

- model assets: the real SmolLM2 (v3: models/SMOL; course format: exported
  once into build/llmtest/smol-course; ``smol_or_skip`` skips a test or a
  fixture of any scope without them) and the tiny synthetic Qwen3.5 in both
  formats (exported once per seed into build/llmtest/);
- prompts, and the token ids pyaisvc.model.reference generates for them (cached in
  build/llmtest/refcache.json, keyed by the asset files' sizes and times and
  the reference's code);
- request lines that break each limit, with the message each must produce;
- malformed asset directories (symlinks to a good one, one file changed), with
  the message each must produce.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from host.buildlock import build_lock

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / "build/llmtest"
PYTHON = sys.executable
QWEN_SEED = 1

FRANCE = {"smol": [504, 3575, 282, 4649, 314], "qwen": [760, 6511, 314, 9338, 369]}
SMOL_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def smol_chat_text(message: str) -> str:
    """One user message in SmolLM2-Instruct's chat template, written out by hand (ChatML
    with its default system line), ready for the assistant's turn: the check on the
    renderer (pyaisvc.model.chattemplate), which renders it from the GGUF's Jinja template."""
    return (f"<|im_start|>system\n{SMOL_SYSTEM}<|im_end|>\n<|im_start|>user\n{message}"
            "<|im_end|>\n<|im_start|>assistant\n")


# ---------------------------------------------------------------- assets

def _export(model: str, fmt: str, out: Path, extra: list[str]) -> Path:
    top = out / model.upper()
    with build_lock("export"):  # parallel workers: one exports, the others then find it
        if not (top / "INFO.TXT").exists():
            subprocess.run([PYTHON, "-m", "pyaisvc", "export", model, "--format", fmt, "--out",
                            str(out), "--no-zip", "--no-sample", "-q", *extra],
                           cwd=ROOT, check=True, capture_output=True)
    return top


def smol_dir(fmt: str) -> Path | None:
    """SmolLM2 assets in format fmt ("v4", "v3" or "course"), None if models/SMOL is
    missing (models/SMOL itself when it is in that format)."""
    ours = ROOT / "models/SMOL"
    if not (ours / "INFO.TXT").exists():
        return None
    version = json.loads((ours / "INFO.TXT").read_text())["config"]["version"]
    if {"v3": 3, "v4": 4}.get(fmt) == version:
        return ours
    return _export("smol", fmt, CACHE / f"smol-{fmt}", [])


def smol_or_skip(fmt: str = "v3") -> Path:
    """smol_dir(fmt); skips the test (or the fixture, and with it its tests) when
    models/SMOL is missing."""
    d = smol_dir(fmt)
    if d is None:
        pytest.skip("models/SMOL is missing: run `make smol-assets`")
    return d


def qwen_tiny_dir(fmt: str) -> Path:
    """The tiny synthetic Qwen3.5 (seed QWEN_SEED) in format fmt."""
    return _export("qwen", fmt, CACHE / f"qwen-tiny-{QWEN_SEED}-{fmt}",
                   ["--synthetic", "tiny", "--seed", str(QWEN_SEED)])


# ---------------------------------------------------------------- prompts

def heldout_ids(model: str, n: int) -> list[int]:
    from pyaisvc.model.tokenizer import load_tokenizer

    text = (ROOT / "tests/data/heldout_en.txt").read_text()[:6000]
    ids = load_tokenizer(model).encode(text)
    assert len(ids) >= n
    return ids[:n]


def smol_prompts() -> list[list[int]]:
    """Six prompts: 1 to 120 tokens, crossing the runtime's 8-position batches."""
    long = heldout_ids("smol", 120)
    return [FRANCE["smol"], long[:1], long[5:14], long[20:37], long[40:80], long]


def qwen_prompts() -> list[list[int]]:
    """The tiny Qwen's prompts: up to 150 tokens (every full-attention layer's cache)."""
    long = heldout_ids("qwen", 150)
    return [FRANCE["qwen"], long[:1], long[3:12], long[:40], long]


def _key(assets: Path, prompt: list[int], n: int) -> str:
    """The assets' files (name, size, time), the reference's code and the request."""
    stamp = [(p.name, p.stat().st_size, p.stat().st_mtime_ns)
             for p in sorted(assets.glob("*.BIN"))]
    code = hashlib.sha256(b"".join((ROOT / "pyaisvc" / "model" / f).read_bytes()
                                   for f in ("reference.py", "refmath.py"))).hexdigest()
    return json.dumps([str(assets.resolve()), stamp, code, prompt, n])


def until_stop(ids: list[int], stops: set[int]) -> list[int]:
    """ids up to and including the first stop id (all of them if none comes): what a
    greedy run with those stop ids generates (pyaisvc.model.reference's generate(stop=...))."""
    cut = next((i + 1 for i, t in enumerate(ids) if t in stops), len(ids))
    return ids[:cut]


def reference_ids(assets: Path, prompts: list[list[int]], n: int) -> list[list[int]]:
    """pyaisvc.model.reference's greedy continuation of each prompt (n tokens), cached in a file
    the parallel workers share: the lock is held to read and to merge, not while the
    reference computes (minutes for SmolLM2), so a worker never waits for another's."""
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / "refcache.json"
    keys = [_key(assets, p, n) for p in prompts]
    with build_lock("refcache"):
        cache = _read_cache(path)
    new = {}
    missing = [(k, p) for k, p in zip(keys, prompts, strict=True) if k not in cache]
    if missing:
        from pyaisvc.model.assets import load_assets
        from pyaisvc.model.reference import Reference

        ref = Reference(load_assets(assets))
        new = {k: ref.generate(p, n) for k, p in missing}
        with build_lock("refcache"):
            merged = _read_cache(path) | new
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(merged))
            os.replace(tmp, path)
    return [new[k] if k in new else cache[k] for k in keys]


def _read_cache(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


# Sampling cases (temp, top_k, top_p, seed), the decimals as typed: each
# draws differently (all ids, few ids, a 64-bit seed, a hot temperature).
SAMPLING_CASES = [("0.8", 40, "0.95", 0), ("1", 0, "1", 7),
                  ("0.7", 5, "0.5", 12345678901234567890), ("1.3", 100, "0.9", 3)]


def sampling_args(case: tuple[str, int, str, int]) -> list[str]:
    """llmrun's options for a sampling case."""
    temp, k, p, seed = case
    return ["--temp", temp, "--top-k", str(k), "--top-p", p, "--seed", str(seed)]


@functools.cache
def reference_model(assets: Path):  # -> pyaisvc.model.reference.Reference, loaded once
    from pyaisvc.model.assets import load_assets
    from pyaisvc.model.reference import Reference

    return Reference(load_assets(assets))


def sampled_reference(assets: Path, prompt: list[int], n: int,
                      case: tuple[str, int, str, int]) -> list[int]:
    """The reference's continuation of prompt with the sampler of case."""
    from pyaisvc.model.sampling import Sampler, parse_decimal

    temp, k, p, seed = case
    sampler = Sampler(parse_decimal(temp, "temp"), k, parse_decimal(p, "top-p"), seed)
    return reference_model(assets).generate(prompt, n, sampler=sampler)


def request_lines(prompts: list[list[int]], n: int) -> str:
    return "".join(f"{n} {' '.join(map(str, p))}\n" for p in prompts)


# ---------------------------------------------------------------- limits

def limit_cases(vocab: int, seq: int) -> list[tuple[str, str]]:
    """(--stdin line, expected message) for each violated limit and bad line."""
    return [
        ("1 " + " ".join(["7"] * 256), "prompt of 256 ids exceeds the limit of 255 prompt ids"),
        (f"{seq - 99} " + " ".join(["7"] * 100),
         f"prompt 100 + predict {seq - 99} = {seq + 1} exceeds runtime_seq_len {seq}"),
        (f"1 5 {vocab}", f"id {vocab} at prompt position 1 is not below vocab_size {vocab}"),
        ("0 5 6", "predict 0: must be at least 1"),
        ("2 5 x7", "'x7' is not a token id"),
        ("3", "expected '<predict> <id0> <id1> ...'"),
    ]


# ---------------------------------------------------------------- malformed assets

def _cfg_word(i: int, value: int) -> Callable[[Path], None]:
    def mutate(d: Path) -> None:
        data = bytearray((d / "CFG.BIN").read_bytes())
        struct.pack_into("<I", data, 4 * i, value)
        _replace(d / "CFG.BIN", bytes(data))
    return mutate


def _resize(name: str, delta: int) -> Callable[[Path], None]:
    def mutate(d: Path) -> None:
        data = (d / name).read_bytes()
        _replace(d / name, data[:len(data) + delta] if delta < 0 else data + b"\0" * delta)
    return mutate


def _remove(name: str) -> Callable[[Path], None]:
    def mutate(d: Path) -> None:
        (d / name).unlink()
    return mutate


def _replace(path: Path, data: bytes) -> None:
    path.unlink()
    path.write_bytes(data)


def malformed_cases(version: int) -> list[tuple[str, Callable[[Path], None], str]]:
    """(id, mutation of a Qwen asset directory, expected message) of format `version`."""
    size = {2: 84, 3: 88}[version]
    return [
        ("cfg-truncated", _resize("CFG.BIN", -8),
         f"CFG.BIN: wrong size: {size - 8} bytes, expected {size} for version {version} "
         "(truncated)"),
        ("cfg-stub", _resize("CFG.BIN", 5 - size), "CFG.BIN: truncated: 5 bytes"),
        ("cfg-long", _resize("CFG.BIN", 4), "(too long)"),
        ("bad-magic", _cfg_word(0, 0x32474643), "CFG.BIN: field magic: 0x32474643"),
        ("bad-version", _cfg_word(1, 9), "CFG.BIN: field version: 9 unsupported"),
        ("zero-dim", _cfg_word(4, 0), "CFG.BIN: field dim: 0 must be > 0"),
        ("many-layers", _cfg_word(6, 151), "CFG.BIN: field n_layers: 151 is too large"),
        ("kv-heads", _cfg_word(8, 3), "CFG.BIN: field n_heads: 4 is not a multiple of n_kv_heads"),
        ("seq-len", _cfg_word(12, 100000),
         "CFG.BIN: field runtime_seq_len: 100000 exceeds seq_len"),
        ("emb-truncated", _resize("EMB.BIN", -1), "EMB.BIN: wrong size:"),
        ("layer-long", _resize("L03.BIN", 1), "L03.BIN: wrong size:"),
        ("layer-missing", _remove("L05.BIN"), "L05.BIN: cannot open"),
        ("nrm-missing", _remove("NRM.BIN"), "NRM.BIN: cannot open"),
        ("rop-truncated", _resize("ROP.BIN", -4), "ROP.BIN: wrong size:"),
        ("lty-missing", _remove("LTY.BIN"), "LTY.BIN: required for Qwen"),
        ("lty-truncated", _resize("LTY.BIN", -4), "LTY.BIN: wrong size:"),
    ]


def make_malformed(good: Path, dest: Path, mutate: Callable[[Path], None]) -> Path:
    """dest: a copy of `good` (symlinks for the big files), then mutated."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for f in good.iterdir():
        if f.stat().st_size < 4096:
            shutil.copy(f, dest / f.name)
        else:
            (dest / f.name).symlink_to(f.resolve())
    mutate(dest)
    return dest
