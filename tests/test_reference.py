"""Unit tests of the reference arithmetic (pyaisvc/model/refmath.py, pyaisvc/model/reference.py).

What is checked here is what the C runtime relies on: exp/log accuracy, the
quantiser's edge cases, the exactness of the integer matrix products, and that
a batch of positions gives bit for bit the logits of one position at a time.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from pyaisvc.model import reference
from pyaisvc.model import refmath as M
from pyaisvc.model.assets import Assets, Config, Layer, layer_layout
from pyaisvc.model.export.common import rope_table
from pyaisvc.model.quant import group_scales
from pyaisvc.model.quant import quantize as quantize_weights
from pyaisvc.model.reference import Reference, ReferenceModelError, _Linear

# ---------------------------------------------------------------- helpers


def tiny_assets(version: int, qwen: bool, seed: int = 0, seq: int = 48) -> Assets:
    """A small random model: Smol-like (2 full layers) or Qwen-like (3 linear, 1 full)."""
    rng = np.random.default_rng(seed)
    lin = dict(linear_num_k_heads=2, linear_num_v_heads=4, linear_key_head_dim=32,
               linear_value_head_dim=32, linear_conv_kernel=4) if qwen else {}
    c = Config(version=version, model_kind=int(qwen), flags=3 if qwen else 0, dim=64,
               hidden_dim=96, n_layers=4 if qwen else 2, n_heads=4, n_kv_heads=2, head_dim=32,
               vocab_size=53, seq_len=seq, runtime_seq_len=seq,
               rms_eps=float(np.float32(1e-6)), rope_theta=10000.0,
               rotary_dim=16 if qwen else 32, group_size=32 if version == 3 else 0, **lin)
    kinds = [1, 1, 1, 0] if qwen else [0, 0]
    layers = []
    for kind in kinds:
        t: dict = {}
        for name, typ, shape in layer_layout(c, kind):
            if typ == "qmat":
                w = rng.standard_normal(shape) / math.sqrt(shape[1])
                t[name] = quantize_weights(w.astype(np.float32), version)
            elif name == "A_log":
                t[name] = rng.uniform(-0.7, 2.0, shape).astype(np.float32)
            else:
                t[name] = (1.0 + 0.2 * rng.standard_normal(shape)).astype(np.float32)
        layers.append(Layer(kind=kind, t=t))
    cos, sin = rope_table(c.rotary_dim, c.rope_theta, c.runtime_seq_len)
    emb = quantize_weights((rng.standard_normal((c.vocab_size, c.dim)) * 0.5).astype(np.float32),
                           version)
    return Assets(config=c, emb=emb, final_norm=np.ones(c.dim, np.float32), rope_cos=cos,
                  rope_sin=sin, layer_types=kinds, layers=layers)


MODELS = [(1, False), (3, False), (2, True), (3, True)]
MODEL_IDS = ["smol-v1", "smol-v3", "qwen-v2", "qwen-v3"]

# ---------------------------------------------------------------- exp / log


def test_exp_matches_math_exp() -> None:
    rng = np.random.default_rng(0)
    x = np.concatenate([np.linspace(-700.0, 700.0, 20001), rng.uniform(-30.0, 30.0, 20000),
                        [0.0, 1e-300, -1e-300, 0.5 * math.log(2.0)]])
    got = M.exp(x)
    want = np.array([math.exp(v) for v in x])
    assert np.max(np.abs(got - want) / want) < 2e-14
    assert M.exp(0.0) == 1.0


def test_exp_range_limits() -> None:
    assert M.exp(-708.5) == 0.0  # below -708 the contract returns exactly 0
    assert M.exp(-1000.0) == 0.0
    assert M.exp(800.0) == M.exp(709.0)  # clamped, no overflow to inf
    assert np.isfinite(M.exp(709.0))


def test_log_matches_math_log() -> None:
    rng = np.random.default_rng(1)
    y = np.concatenate([np.exp(rng.uniform(-690.0, 690.0, 20000)), np.linspace(0.5, 2.0, 20001),
                        [1.0, 5e-324, 1.7e308]])
    got = M.log(y)
    want = np.array([math.log(v) for v in y])
    err = np.abs(got - want)
    assert np.all(err <= 1e-15 * np.abs(want) + 3e-16)
    assert M.log(1.0) == 0.0


def test_derived_functions() -> None:
    x = np.linspace(-30.0, 30.0, 601)
    sig = np.array([1.0 / (1.0 + math.exp(-v)) for v in x])
    assert np.max(np.abs(M.sigmoid(x) - sig)) < 1e-15
    sp = np.array([v if v > 20.0 else math.log1p(math.exp(v)) for v in x])
    assert np.max(np.abs(M.softplus(x) - sp)) < 1e-14
    assert M.softplus(np.array([50.0]))[0] == 50.0


def test_tabulated_error_bounds() -> None:
    """The interpolated tables stay within h^2/8 * max|f''| plus the clamp past their ends:
    silu's sigmoid within 7.5e-7 (h = 1/128), softmax's exp within 2e-6 (h = 1/256)."""
    x = np.concatenate([np.linspace(-40.0, 40.0, 800001), np.arange(-4096, 4097) / 256.0,
                        [-1e6, -32.0, -16.0, 16.0, 32.0, 1e6, 1e-300, -1e-300]])
    true = np.array([v / (1.0 + math.exp(-v)) if v > -700.0 else 0.0 for v in x])
    assert np.all(np.abs(M.silu(x) - true) <= 7.5e-7 * np.abs(x))
    neg = x[x <= 0.0]
    true_exp = np.array([math.exp(v) for v in neg])
    assert np.all(np.abs(M.softmax_exp(neg) - true_exp) <= 2e-6)
    assert M.silu(np.array([0.0]))[0] == 0.0 and M.softmax_exp(np.array([0.0]))[0] == 1.0


def test_seqsum_is_sequential() -> None:
    # 1 + 1e-16 + ... rounds differently in order than pairwise: the order is observable.
    a = np.array([1.0] + [1e-16] * 1000 + [-1.0])
    loop = 0.0
    for v in a:
        loop = loop + v
    assert M.seqsum(a) == loop == 0.0
    assert np.sum(a) != loop  # numpy's pairwise sum differs: the test can tell them apart
    b = np.random.default_rng(2).standard_normal((3, 5, 7))
    for axis in range(3):
        want = np.zeros(np.delete(b.shape, axis))
        for i in range(b.shape[axis]):
            want = want + np.take(b, i, axis=axis)
        assert np.array_equal(M.seqsum(b, axis=axis), want)


# ---------------------------------------------------------------- quantize


def test_quantize_round_trip_bound() -> None:
    x = np.random.default_rng(3).standard_normal((20, 128)) * np.geomspace(1e-3, 1e3, 20)[:, None]
    v = M.quantize(x)
    s = np.repeat(v.group_scales(), M.GS, axis=-1)
    err = np.abs(M.dequantize(v) - x)
    assert np.all(err <= 0.5 * s * (1 + 1e-12))
    amax = np.abs(x).max(axis=1)
    assert np.allclose(v.xs, amax / 127.0, rtol=0, atol=0)
    assert v.m.min() >= 1 and v.m.max() == 32768
    assert np.all(np.abs(v.q).max(axis=1) == 127)


def test_quantize_all_zero() -> None:
    v = M.quantize(np.zeros((2, 64)))
    assert not v.q.any() and not v.m.any() and not v.xs.any()
    assert not M.dequantize(v).any()


def test_quantize_outlier_keeps_other_groups_precise() -> None:
    rng = np.random.default_rng(4)
    x = rng.uniform(-1.0, 1.0, 96)
    x[40] = 1000.0  # group 1 holds a large outlier
    v = M.quantize(x[None])
    assert v.m[0, 1] == 32768 and v.q[0, 40] == 127
    assert v.m[0, 0] < 40 and v.m[0, 2] < 40  # the other groups get fine scales
    err = np.abs(M.dequantize(v)[0] - x)
    assert err[:32].max() < 1.0 / 127 and err[64:].max() < 1.0 / 127
    x[64:] = 0.0  # an all-zero group in a non-zero vector: multiplier 1, values 0
    v = M.quantize(x[None])
    assert v.m[0, 2] == 1 and not v.q[0, 64:].any()


def test_quantize_rejects_bad_length() -> None:
    with pytest.raises(ValueError):
        M.quantize(np.ones(33))


# ---------------------------------------------------------------- matvec


@pytest.mark.parametrize("version", [1, 3])
def test_matvec_matches_dequantised_product(version: int) -> None:
    rng = np.random.default_rng(5)
    w = rng.standard_normal((70, 160)).astype(np.float32)
    qm = quantize_weights(w, version)
    lin = _Linear(qm, lowmem=False)
    x = rng.standard_normal((6, 160)) * 3.0
    v = M.quantize(x)
    y = lin(v)
    wd = group_scales(qm) * qm.q.astype(np.float64)  # float64, unlike quant.dequantize
    exact = M.dequantize(v) @ wd.T
    # The integer part is exact; only the final scaling rounds.
    assert np.max(np.abs(y - exact)) <= 1e-12 * np.max(np.abs(exact))
    # And the whole thing stays close to the float product.
    assert np.max(np.abs(y - x @ w.astype(np.float64).T)) < 0.05 * np.max(np.abs(exact))


def test_matvec_split_and_single_products_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(6)
    qm = quantize_weights(rng.standard_normal((50, 256)).astype(np.float32), 3)
    lin = _Linear(qm, lowmem=False)
    v = M.quantize(rng.standard_normal((4, 256)))
    lin.split = False
    single = lin.totals(v)
    lin.split = True
    split = lin.totals(v)
    assert np.array_equal(single, split)
    monkeypatch.setattr(reference, "_LOWMEM_ROWS", 16)  # several float32 blocks of rows
    lowmem = _Linear(qm, lowmem=True)
    assert lowmem.w.dtype == np.float32
    assert np.array_equal(lowmem(v), lin(v))


# ---------------------------------------------------------------- the forward pass


@pytest.mark.parametrize(("version", "qwen"), MODELS, ids=MODEL_IDS)
def test_batched_prefill_equals_one_position_at_a_time(version: int, qwen: bool) -> None:
    ref = Reference(tiny_assets(version, qwen))
    tokens = [int(t) for t in np.random.default_rng(7).integers(0, 53, 30)]
    whole = ref.logits_all(tokens)
    assert whole.shape == (30, 53) and np.all(np.isfinite(whole))
    assert np.array_equal(whole, ref.logits_all(tokens, batch=1))
    assert np.array_equal(whole, ref.logits_all(tokens, batch=7))


@pytest.mark.parametrize(("version", "qwen"), MODELS, ids=MODEL_IDS)
def test_generate_equals_teacher_forcing_argmax(version: int, qwen: bool) -> None:
    ref = Reference(tiny_assets(version, qwen))
    prompt = [3, 17, 42, 5, 9]
    out = ref.generate(prompt, 10)
    assert len(out) == 10
    logits = ref.logits_all(prompt + out[:-1])
    assert [int(np.argmax(r)) for r in logits[len(prompt) - 1:]] == out


def test_generate_first_index_on_ties_and_stop() -> None:
    a = tiny_assets(3, False)
    prompt = [1, 2, 3, 4]
    win = int(np.argmax(Reference(a).logits_all(prompt)[-1]))
    assert win not in (0, 7)
    # Rows 0 and 7 become copies of the winning row: three logits tie at the maximum.
    emb = dataclasses.replace(a.emb, scales=a.emb.scales.copy(), mult=a.emb.mult.copy(),
                              q=a.emb.q.copy())
    for r in (0, 7):
        emb.scales[r], emb.mult[r], emb.q[r] = emb.scales[win], emb.mult[win], emb.q[win]
    ref = Reference(dataclasses.replace(a, emb=emb))
    last = ref.logits_all(prompt)[-1]
    assert last[0] == last[7] == last[win] == last.max()
    assert ref.generate(prompt, 1) == [0]
    assert ref.generate(prompt, 6, stop={0}) == [0]
    assert len(ref.generate(prompt, 6)) == 6


def test_reference_refuses_too_many_positions_and_bad_ids() -> None:
    ref = Reference(tiny_assets(3, True, seq=16))
    with pytest.raises(ReferenceModelError, match="runtime_seq_len 16"):
        ref.generate(list(range(10)), 8)
    with pytest.raises(ReferenceModelError, match="runtime_seq_len"):
        ref.logits_all([1] * 17)
    with pytest.raises(ReferenceModelError, match="out of range"):
        ref.generate([1, 53], 1)
    assert ref.generate(list(range(10)), 7)  # exactly fills the 16 positions


# ---------------------------------------------------------------- the generate verb


def test_generate_cli_prints_the_references_tokens(tmp_path, capsys) -> None:
    from pyaisvc.cli import main
    from pyaisvc.model.assets import write_assets

    a = tiny_assets(3, False)
    # Smol's tokenizer emits ids up to 49151: widen the tiny model's vocabulary.
    rng = np.random.default_rng(8)
    emb = quantize_weights((rng.standard_normal((49152, 64)) * 0.5).astype(np.float32), 3)
    a = dataclasses.replace(a, emb=emb, config=dataclasses.replace(a.config, vocab_size=49152))
    write_assets(a, tmp_path / "SMOL", {"note": "test"})
    want = Reference(a).generate([504, 3575, 282, 4649, 314], 3)
    rc = main(["generate", "--backend", "reference", "--model", "smol", "--assets",
               str(tmp_path / "SMOL"), "--max-new-tokens", "3", "The capital of France is"])
    out = capsys.readouterr()
    assert rc == 0
    lines = out.out.splitlines()
    assert lines[0] == "prompt ids: 504 3575 282 4649 314"
    assert lines[1] == "ids: " + " ".join(str(t) for t in want)
    assert lines[2].startswith("text: ")
    assert "reference: load" in out.err
    rc = main(["generate", "--backend", "reference", "--assets", str(tmp_path / "missing"),
               "hello"])
    assert rc == 1 and "no such asset directory" in capsys.readouterr().err
