"""Synthetic Qwen3.5 models: transformers' own Qwen3_5ForCausalLM, random weights.

No Qwen3.5 checkpoint ships with the course, so the exporter, the reference
and the guest runtime are exercised on models built from transformers' classes
at a fixed seed:

- tiny: 8 layers (linear, linear, linear, full) x 2, dim 128, head_dim 64 with
  partial rotary 0.25, output gate and q/k norm, the real 248320-token vocab
  (so any text the Qwen tokenizer encodes is valid input). Fast enough for tests.
- 0.8b: the real Qwen3.5-0.8B shapes (docs/ASSET_FORMAT.md), for timing and memory.

Weights are re-initialised so the model is not degenerate: every matrix is
N(0, 1/in_features) (activations keep unit scale through the residual stream),
embeddings are N(0, (4/sqrt(dim))^2) so tied-head logits have a spread of a
few units, and the RMSNorm weights are N(0, 0.1^2) so the stored "+1" values
differ from 1 and a missing or doubled +1 is caught.
"""

from __future__ import annotations

import math

import numpy as np

from pyaisvc.model.export.common import ExportError
from pyaisvc.model.hfsources import env_offline

_COMMON = dict(hidden_act="silu", rms_norm_eps=1e-6, tie_word_embeddings=True,
               linear_conv_kernel_dim=4, vocab_size=248320,
               rope_parameters={"rope_type": "default", "rope_theta": 10000000.0,
                                "partial_rotary_factor": 0.25})
PRESETS: dict[str, dict] = {
    "tiny": dict(hidden_size=128, intermediate_size=384, num_hidden_layers=8,
                 num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                 linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=32,
                 linear_value_head_dim=32, max_position_embeddings=4096, **_COMMON),
    "0.8b": dict(hidden_size=1024, intermediate_size=3584, num_hidden_layers=24,
                 num_attention_heads=8, num_key_value_heads=2, head_dim=256,
                 linear_num_key_heads=16, linear_num_value_heads=16, linear_key_head_dim=128,
                 linear_value_head_dim=128, max_position_embeddings=262144, **_COMMON),
}
EMB_GAIN = 4.0  # embedding row norm ~ EMB_GAIN: logits' spread across the vocab
NORM_STD = 0.1  # spread of the RMSNorm weights around their "1 + w" centre


def synthetic_config(preset: str):
    """transformers' Qwen3.5 text config for the preset; ExportError for an unknown one."""
    env_offline()
    from transformers import Qwen3_5TextConfig

    if preset not in PRESETS:
        raise ExportError(f"--synthetic {preset!r}: unknown preset; use one of "
                          f"{', '.join(PRESETS)}")
    return Qwen3_5TextConfig(**PRESETS[preset])


def _reinit(model, seed: int) -> None:
    """Fills model's weights with seeded random values scaled so that the activations and logits
    stay in a realistic range (norms near their centres, the embedding rows near EMB_GAIN)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    dim = model.config.hidden_size
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("embed_tokens.weight"):
                p.normal_(0.0, EMB_GAIN / math.sqrt(dim), generator=gen)
            elif name.endswith("linear_attn.norm.weight"):  # x * w: centred on 1
                p.normal_(1.0, NORM_STD, generator=gen)
            elif name.endswith("norm.weight"):  # x * (1 + w): centred on 0
                p.normal_(0.0, NORM_STD, generator=gen)
            elif name.endswith("conv1d.weight"):
                p.normal_(0.0, 1.0 / math.sqrt(p.shape[-1]), generator=gen)
            elif name.endswith("dt_bias"):
                p.normal_(0.0, 1.0, generator=gen)
            elif name.endswith("A_log"):  # A in [0.5, 8): decays of varied speed
                p.uniform_(math.log(0.5), math.log(8.0), generator=gen)
            elif p.ndim == 2:
                p.normal_(0.0, 1.0 / math.sqrt(p.shape[1]), generator=gen)
            else:
                raise ExportError(f"synthetic: no initialiser for parameter {name}")


def build_synthetic_qwen(preset: str, seed: int = 0):
    """A Qwen3_5ForCausalLM in fp32 with deterministic, non-degenerate random weights."""
    import torch
    from transformers import Qwen3_5ForCausalLM

    cfg = synthetic_config(preset)
    torch.manual_seed(seed)
    model = Qwen3_5ForCausalLM(cfg).float()
    _reinit(model, seed)
    model.tie_weights()
    model.eval()
    return model


def synthetic_info(preset: str, seed: int) -> dict:
    """INFO.TXT's source for a synthetic model: preset, seed and the scales, marked not trained."""
    return {"model": f"Qwen3.5 synthetic ({preset})", "synthetic": True, "preset": preset,
            "seed": seed, "emb_gain": EMB_GAIN, "norm_std": NORM_STD,
            "note": "random weights from transformers' Qwen3_5ForCausalLM; not a trained model"}


def logit_stats(model, ids: list[int]) -> dict[str, float]:
    """Spread of the last position's logits: a quick check the model is not degenerate."""
    import torch

    with torch.no_grad():
        out = model(torch.tensor([ids])).logits[0, -1].float().numpy()
    top = np.sort(out)[-2:]
    return {"std": float(out.std()), "top1_margin": float(top[1] - top[0])}
