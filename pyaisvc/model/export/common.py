"""The model-independent half of an export: quantise, write the files, INFO.TXT, zip.

A model module (smol.py, qwen.py) describes its weights as a ModelSource: the
Config (without a format version), the float32 embedding and final norm, and a
function that returns one layer's float32 tensors under the asset names of
pyaisvc.model.assets.layer_layout, already transformed (Qwen's +1 folded into the
norms, the conv weight as [conv_dim, kernel]). export_model turns that into an
asset directory in the course format (v1/v2) or v3 (group-scaled), one layer
at a time so a 0.8B model never sits in memory twice.
"""

from __future__ import annotations

import dataclasses
import os
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pyaisvc.errors import AisvcError
from pyaisvc.model import assets as A
from pyaisvc.model.quant import GROUP_SIZE, QMat, dequantize, max_error, quantize
from pyaisvc.model.reference import Reference
from pyaisvc.model.tokenizer import load_tokenizer

SAMPLE_PROMPT = "The capital of France is"
SAMPLE_NEW_TOKENS = 8
FORMATS = ("v4", "v3", "course")
PACK_ROWS = 32  # v4: the RVV kernels' block at 256- and 512-bit vectors (kernels_vec.c)
FORMAT_ALIASES = {"ours": "v3"}  # v3's first name; scripts may still use it

# progress(done, total, label): called after each step; the CLI draws the bar.
Progress = Callable[[int, int, str], None]


class ExportError(AisvcError):
    """The export cannot proceed; the message says what to provide instead."""


@dataclass
class ModelSource:
    config: A.Config  # version is replaced by the chosen format's
    layer_types: list[int]
    embedding: Callable[[], np.ndarray]  # float32 [vocab, dim]
    final_norm: Callable[[], np.ndarray]  # float32 [dim], as stored (Qwen: +1 folded)
    layer: Callable[[int], dict[str, np.ndarray]]  # float32 tensors under asset names
    info: dict = field(default_factory=dict)  # source description for INFO.TXT
    tokenizer: str = ""  # "smol" or "qwen": which tokenizer encodes the sample prompt


@dataclass
class QuantReport:
    tensor: str  # e.g. "L03.BIN q_proj"
    shape: tuple[int, int]
    max_abs_error: float
    max_abs_weight: float


@dataclass
class ExportResult:
    out_dir: Path
    zip_path: Path | None
    sizes: dict[str, int]
    seconds: float
    quant_errors: list[QuantReport]
    info: dict


def rope_table(rotary_dim: int, theta: float, n_pos: int) -> tuple[np.ndarray, np.ndarray]:
    """cos, sin float32 [n_pos, rotary_dim/2] of angle p / theta^(2i/rotary_dim), in fp32."""
    i = np.arange(0, rotary_dim, 2, dtype=np.float32)
    inv_freq = (np.float32(1.0) / np.power(np.float32(theta), i / np.float32(rotary_dim)))
    ang = np.arange(n_pos, dtype=np.float32)[:, None] * inv_freq[None, :].astype(np.float32)
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def format_config(c: A.Config, fmt: str, runtime_seq_len: int) -> A.Config:
    """The Config to write for ``fmt``: course v1 (Smol) / v2 (Qwen), v3, or v4 (v3 in the
    guest kernels' layout, which the guest maps: docs/ASSET_FORMAT.md 3b)."""
    fmt = FORMAT_ALIASES.get(fmt, fmt)
    if fmt not in FORMATS:
        raise ExportError(f"export: --format {fmt!r} unknown; use one of {', '.join(FORMATS)}")
    if runtime_seq_len <= 0 or runtime_seq_len > c.seq_len:
        raise ExportError(f"export: --runtime-seq-len {runtime_seq_len} must be in "
                          f"1..{c.seq_len} (the model's seq_len)")
    if fmt == "course":
        version = 1 if c.model_kind == 0 else 2
        if version == 1 and (c.head_dim * c.n_heads != c.dim or c.rotary_dim != c.head_dim):
            raise ExportError("export: this Llama model's head_dim/rotary_dim cannot be "
                              "expressed in course format v1; use --format v3")
        gs = 0
    else:
        version, gs = (4 if fmt == "v4" else 3), GROUP_SIZE
    return dataclasses.replace(c, version=version, group_size=gs,
                               pack_rows=PACK_ROWS if version == 4 else 0,
                               runtime_seq_len=runtime_seq_len)


class _Quantiser:
    """Quantises for one config and records the largest error when asked."""

    def __init__(self, c: A.Config, report: bool):
        """A quantiser for config c; with report, the error of each matrix is kept in errors."""
        self.c, self.report, self.errors = c, report, []

    def __call__(self, w: np.ndarray, label: str) -> QMat:
        """w quantised for the config's version; its error recorded under label when reporting."""
        m = quantize(w, self.c.version)
        if self.report:
            self.errors.append(QuantReport(label, m.shape, max_error(w, m),
                                           float(np.abs(w).max()) if w.size else 0.0))
        return m


def _layer_assets(src: ModelSource, i: int, quant: _Quantiser) -> A.Layer:
    """Layer i of src as assets: each tensor of the layer's layout, quantised where it is a
    matrix; ExportError when src lacks one."""
    kind = src.layer_types[i]
    floats = src.layer(i)
    t: dict[str, np.ndarray | QMat] = {}
    for name, typ, _ in A.layer_layout(quant.c, kind):
        if name not in floats:
            raise ExportError(f"export: layer {i} has no tensor {name!r}; the checkpoint is "
                              "not the architecture this exporter expects")
        w = floats[name]
        t[name] = quant(w, f"L{i:02d}.BIN {name}") if typ == "qmat" else w.astype(np.float32)
    return A.Layer(kind=kind, t=t)


def write_zip(out_dir: Path, zip_path: Path, top: str) -> int:
    """Zip out_dir's files under ``top``/ (INFO.TXT last); returns the zip's size."""
    names = sorted(p.name for p in out_dir.iterdir() if p.is_file())
    names.sort(key=lambda n: n == "INFO.TXT")
    tmp = zip_path.with_suffix(".zip.tmp")
    # Level 1: int8 weights hardly compress, so a higher level only costs time.
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        for n in names:
            z.write(out_dir / n, f"{top}/{n}")
    os.replace(tmp, zip_path)
    return zip_path.stat().st_size


def export_model(src: ModelSource, out_dir: Path, zip_path: Path | None, fmt: str,
                 runtime_seq_len: int, progress: Progress | None = None,
                 report_errors: bool = False, sample: bool = True) -> ExportResult:
    """Write ``src`` as an asset directory (and zip); see the module doc."""
    t0 = time.monotonic()
    c = format_config(src.config, fmt, runtime_seq_len)
    out_dir = Path(out_dir)
    A.clear_asset_dir(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    total = c.n_layers + 3 + (1 if zip_path else 0)
    step = _Stepper(progress, total)
    quant = _Quantiser(c, report_errors)
    cos, sin = rope_table(c.rotary_dim, c.rope_theta, c.runtime_seq_len)
    emb = quant(src.embedding(), "EMB.BIN")
    head = A.Assets(config=c, emb=emb, final_norm=src.final_norm().astype(np.float32),
                    rope_cos=cos, rope_sin=sin, layer_types=list(src.layer_types), layers=[])
    sizes = A.write_header_files(out_dir, head, write_lty=c.model_kind == 1)
    del emb, head
    step("EMB/NRM/ROP")
    for i in range(c.n_layers):
        sizes[f"L{i:02d}.BIN"] = A.write_layer(out_dir, i, _layer_assets(src, i, quant), c)
        step(f"L{i:02d}.BIN")
    info = build_info(src, c, fmt, sizes)
    if sample:
        info["sample"] = sample_continuation(out_dir, src.tokenizer, c)
    A.write_info(out_dir, info)
    step("INFO.TXT")
    loaded = A.load_assets(out_dir)  # the exporter never leaves files its loader refuses
    del loaded
    step("verified")
    if zip_path is not None:
        top = "SMOL" if c.model_kind == 0 else "QWEN"
        sizes["zip"] = write_zip(out_dir, Path(zip_path), top)
        step(Path(zip_path).name)
    return ExportResult(out_dir, zip_path, sizes, time.monotonic() - t0, quant.errors, info)


class _Stepper:
    """Counts the export's steps for the progress callback."""

    def __init__(self, progress: Progress | None, total: int):
        """A step counter of total steps reporting to progress, when given."""
        self.progress, self.total, self.done = progress, total, 0

    def __call__(self, label: str) -> None:
        """One step done (label names it): tells progress, when given."""
        self.done += 1
        if self.progress is not None:
            self.progress(self.done, self.total, label)


_FORMAT_NAMES = {1: "course", 2: "course",
                 3: "aisvc group-scaled (docs/ARITHMETIC.md, Format version 3)",
                 4: "aisvc group-scaled in the kernels' layout (docs/ASSET_FORMAT.md, 3b)"}


def build_info(src: ModelSource, c: A.Config, fmt: str, sizes: dict[str, int]) -> dict:
    """INFO.TXT's content: the format, where the weights came from, the config, the layer kinds
    and the files' sizes."""
    return {
        "format": {"version": c.version, "name": _FORMAT_NAMES[c.version]},
        "source": src.info,
        "synthetic": bool(src.info.get("synthetic", False)),
        "config": A.config_dict(c),
        "layer_types": list(src.layer_types),
        "files": dict(sizes),
        "total_bytes": int(sum(sizes.values())),
        "exporter": "pyaisvc export",
    }


def sample_continuation(out_dir: Path, tokenizer: str, c: A.Config) -> dict:
    """The sample prompt, its ids and the numpy reference's greedy continuation.

    Each step is optional: a missing tokenizer or reference is recorded, not fatal.
    """
    out: dict = {"prompt": SAMPLE_PROMPT, "new_tokens": SAMPLE_NEW_TOKENS}
    try:
        tok = load_tokenizer(tokenizer)
        ids = tok.encode(SAMPLE_PROMPT)
    except Exception as e:  # noqa: BLE001 - INFO.TXT records why the step was skipped
        out["skipped"] = f"tokenizer unavailable: {e}"
        return out
    out["prompt_ids"] = ids
    if max(ids) >= c.vocab_size:
        out["skipped"] = f"prompt ids exceed this model's vocab_size {c.vocab_size}"
        return out
    try:
        cont = [int(t) for t in Reference(A.load_assets(out_dir)).generate(ids,
                                                                          SAMPLE_NEW_TOKENS)]
    except Exception as e:  # noqa: BLE001 - the reference is optional here
        out["skipped"] = f"reference continuation not computed: {type(e).__name__}: {e}"
        return out
    out["expected_ids"] = cont
    try:
        out["expected_text"] = tok.decode(cont)
    except Exception:  # noqa: BLE001 - ids without text are still useful
        pass
    return out


def assets_source(path: Path) -> ModelSource:
    """Re-export an existing asset zip or directory (e.g. a course qwen.zip into v3).

    Weights are dequantised exactly, then quantised again for the new format.
    """
    a = A.load_assets(path)

    def layer(i: int) -> dict[str, np.ndarray]:
        """Layer i's tensors as float32 (quantised ones dequantised exactly)."""
        t = a.layers[i].t
        return {k: (dequantize(v) if isinstance(v, A.QMat) else np.array(v, np.float32))
                for k, v in t.items()}

    c = dataclasses.replace(a.config, version=0, group_size=0, pack_rows=0)
    info = {"model": "qwen3_5" if c.model_kind else "llama", "reexported_from": str(path),
            "original_info": a.info, "synthetic": bool((a.info or {}).get("synthetic", False))}
    return ModelSource(config=c, layer_types=list(a.layer_types),
                       embedding=lambda: dequantize(a.emb),
                       final_norm=lambda: np.array(a.final_norm, np.float32),
                       layer=layer, info=info, tokenizer="qwen" if c.model_kind else "smol")
