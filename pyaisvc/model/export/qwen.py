"""Qwen3.5 (hybrid Gated DeltaNet + gated full attention) -> asset files.

Sources: a real checkpoint directory (config.json with model_type qwen3_5 or
qwen3_5_text, sharded safetensors, read tensor by tensor), a synthetic model
built with transformers' own classes (synthetic.py), or a course-made zip
(re-exported, e.g. from the course format into v3).

Transformations (docs/ASSET_FORMAT.md):
- Qwen3_5RMSNorm computes x * (1 + w): input/post/final/q/k norms are stored
  with +1 added (in fp32, as transformers does). The Gated DeltaNet's own
  `norm` (Qwen3_5RMSNormGated, x * w) is stored raw.
- q_proj keeps HF's row order: transformers views its output as
  [heads, 2*head_dim] and chunks it into query then gate, so each head's
  head_dim query rows are followed by its head_dim gate rows - exactly the
  asset layout.
- conv1d.weight [conv_dim, 1, kernel] becomes [conv_dim, kernel], taps oldest
  to newest (the causal conv's last tap multiplies the newest input).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from pyaisvc.model import assets as A
from pyaisvc.model.export.common import (
    ExportError,
    ExportResult,
    ModelSource,
    Progress,
    assets_source,
    export_model,
)
from pyaisvc.model.export.synthetic import build_synthetic_qwen, synthetic_info
from pyaisvc.model.hfsources import env_offline

_PLUS_ONE = ("input_norm", "post_norm", "q_norm", "k_norm")
_HF_NAMES = {
    "input_norm": "input_layernorm.weight",
    "post_norm": "post_attention_layernorm.weight",
    "q_norm": "self_attn.q_norm.weight", "k_norm": "self_attn.k_norm.weight",
    "q_proj": "self_attn.q_proj.weight", "k_proj": "self_attn.k_proj.weight",
    "v_proj": "self_attn.v_proj.weight", "o_proj": "self_attn.o_proj.weight",
    "conv_weight": "linear_attn.conv1d.weight", "dt_bias": "linear_attn.dt_bias",
    "A_log": "linear_attn.A_log", "norm": "linear_attn.norm.weight",
    "in_proj_qkv": "linear_attn.in_proj_qkv.weight", "in_proj_z": "linear_attn.in_proj_z.weight",
    "in_proj_a": "linear_attn.in_proj_a.weight", "in_proj_b": "linear_attn.in_proj_b.weight",
    "out_proj": "linear_attn.out_proj.weight",
    "gate_proj": "mlp.gate_proj.weight", "up_proj": "mlp.up_proj.weight",
    "down_proj": "mlp.down_proj.weight",
}
_LAYER_KINDS = {"full_attention": 0, "linear_attention": 1}


def qwen_config(tc) -> tuple[A.Config, list[int]]:
    """(asset Config with version 0, layer kinds) from a Qwen3_5TextConfig-like object."""
    get = (tc.get if isinstance(tc, dict) else lambda k, d=None: getattr(tc, k, d))
    rope = get("rope_parameters") or {}
    theta = rope.get("rope_theta", get("rope_theta", 10000.0))
    prf = rope.get("partial_rotary_factor", get("partial_rotary_factor", 0.25))
    head_dim = get("head_dim")
    try:
        kinds = [_LAYER_KINDS[t] for t in get("layer_types")]
    except KeyError as e:
        raise ExportError(f"export qwen: unknown layer type {e} in config.layer_types") from e
    c = A.Config(
        version=0, model_kind=1, flags=3, dim=get("hidden_size"),
        hidden_dim=get("intermediate_size"), n_layers=get("num_hidden_layers"),
        n_heads=get("num_attention_heads"), n_kv_heads=get("num_key_value_heads"),
        head_dim=head_dim, vocab_size=get("vocab_size"),
        seq_len=get("max_position_embeddings"), runtime_seq_len=0,
        rms_eps=float(np.float32(get("rms_norm_eps"))), rope_theta=float(np.float32(theta)),
        rotary_dim=int(head_dim * prf), linear_num_k_heads=get("linear_num_key_heads"),
        linear_num_v_heads=get("linear_num_value_heads"),
        linear_key_head_dim=get("linear_key_head_dim"),
        linear_value_head_dim=get("linear_value_head_dim"),
        linear_conv_kernel=get("linear_conv_kernel_dim"))
    return c, kinds


def _plus_one(w: np.ndarray) -> np.ndarray:
    """w + 1 in float32 (Qwen3.5 stores its norm weights less one)."""
    return (w.astype(np.float32) + np.float32(1.0)).astype(np.float32)


def qwen_source(c: A.Config, kinds: list[int], get: Callable[[str], np.ndarray],
                info: dict) -> ModelSource:
    """A ModelSource over HF tensor names without prefix ("layers.3.mlp.up_proj.weight")."""

    def layer(i: int) -> dict[str, np.ndarray]:
        """Layer i's tensors by the assets' names, in float32 (norms plus one, the convolution's
        kernel as rows)."""
        out = {}
        for name, _, _ in A.layer_layout(c, kinds[i]):
            w = get(f"layers.{i}.{_HF_NAMES[name]}")
            if name in _PLUS_ONE:
                w = _plus_one(w)
            elif name == "conv_weight":
                w = w.reshape(w.shape[0], -1)
            out[name] = w.astype(np.float32)
        return out

    return ModelSource(config=c, layer_types=kinds,
                       embedding=lambda: get("embed_tokens.weight").astype(np.float32),
                       final_norm=lambda: _plus_one(get("norm.weight")),
                       layer=layer, info=info, tokenizer="qwen")


# ---------------------------------------------------------------- sources

def _strip(name: str) -> str | None:
    """The checkpoint's tensor name without its model prefix, or None when it has neither."""
    for p in ("model.language_model.", "model."):
        if name.startswith(p):
            return name[len(p):]
    return None


def checkpoint_source(ckpt: Path) -> ModelSource:
    """A real Qwen3.5 checkpoint directory, read lazily from its safetensors."""
    env_offline()
    from safetensors import safe_open

    cfg_path = ckpt / "config.json"
    if not cfg_path.is_file():
        raise ExportError(f"{ckpt}: no config.json; pass a Qwen3.5 checkpoint directory")
    cfg = json.loads(cfg_path.read_text())
    if cfg.get("model_type") not in ("qwen3_5", "qwen3_5_text"):
        raise ExportError(f"{cfg_path}: model_type {cfg.get('model_type')!r}, expected qwen3_5")
    tc = cfg.get("text_config", cfg)
    if "layer_types" not in tc:
        n, every = tc["num_hidden_layers"], tc.get("full_attention_interval", 4)
        tc["layer_types"] = ["linear_attention" if (i + 1) % every else "full_attention"
                             for i in range(n)]
    c, kinds = qwen_config(tc)
    files = sorted(ckpt.glob("*.safetensors"))
    if not files:
        raise ExportError(f"{ckpt}: no *.safetensors files")
    where: dict[str, Path] = {}
    for f in files:
        with safe_open(str(f), framework="pt") as h:
            for k in h.keys():
                s = _strip(k)
                if s is not None and not s.startswith(("visual", "mtp")):
                    where[s] = f
    for k in ("lm_head.weight",):
        if any(n.endswith(k) for n in where) and not tc.get("tie_word_embeddings", True):
            raise ExportError(f"{ckpt}: untied lm_head; the asset format needs tied embeddings")

    def get(name: str) -> np.ndarray:
        """The checkpoint's tensor name in float32; ExportError when no safetensors file holds
        it."""
        if name not in where:
            raise ExportError(f"{ckpt}: tensor {name} not found in the safetensors files")
        with safe_open(str(where[name]), framework="pt") as h:
            full = next(k for k in h.keys() if _strip(k) == name)
            return h.get_tensor(full).float().numpy()

    info = {"model": "qwen3_5", "checkpoint": str(ckpt), "synthetic": False}
    return qwen_source(c, kinds, get, info)


def torch_model_source(model, info: dict) -> ModelSource:
    """A transformers Qwen3_5ForCausalLM already in memory (e.g. synthetic)."""
    sd = {(_strip(k) or k): v for k, v in model.state_dict().items()}
    if "lm_head.weight" in sd and not bool((sd["lm_head.weight"] ==
                                            sd["embed_tokens.weight"]).all()):
        raise ExportError("export qwen: lm_head differs from embed_tokens; the asset format "
                          "needs tied embeddings")
    c, kinds = qwen_config(model.config)
    return qwen_source(c, kinds, lambda n: sd[n].detach().float().numpy(), info)


def export_qwen(out_dir: Path, zip_path: Path | None, checkpoint: Path | None = None,
                course_zip: Path | None = None, synthetic: str | None = None, seed: int = 0,
                fmt: str = "v3", runtime_seq_len: int = A.DEFAULT_RUNTIME_SEQ_LEN,
                progress: Progress | None = None, report_errors: bool = False,
                sample: bool = True) -> ExportResult:
    """Export a Qwen3.5 model from exactly one source to ``out_dir`` and ``zip_path``."""
    given = [s for s in (checkpoint, course_zip, synthetic) if s is not None]
    if len(given) != 1:
        raise ExportError(
            "export qwen needs exactly one source: --checkpoint DIR (a Qwen3.5 HF directory), "
            "--course-zip qwen.zip (a course archive), or --synthetic tiny|0.8b [--seed N] "
            "(a random model with real shapes)")
    if checkpoint is not None:
        src = checkpoint_source(Path(checkpoint))
    elif course_zip is not None:
        src = assets_source(Path(course_zip))
        if src.config.model_kind != 1:
            raise ExportError(f"{course_zip}: holds a Smol model; use `pyaisvc export smol`")
    else:
        model = build_synthetic_qwen(synthetic, seed)
        src = torch_model_source(model, synthetic_info(synthetic, seed))
    return export_model(src, out_dir, zip_path, fmt, runtime_seq_len, progress,
                        report_errors, sample)
