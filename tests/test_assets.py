"""Byte format and validation of the asset files (pyaisvc.model.assets, pyaisvc.model.quant).

Hand-built tiny models (numpy arrays made here) go through write_assets and
load_assets. The expected bytes are packed independently in this file from
docs/ASSET_FORMAT.md / docs/ARITHMETIC.md, not with the code under test.
"""

from __future__ import annotations

import shutil
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest

from pyaisvc.model.assets import AssetError, Assets, Config, Layer, load_assets, write_assets
from pyaisvc.model.quant import QMat, dequantize, quantize_groups, quantize_rows

MAGIC = 0x31474643
# version-2/3 header fields in file order after magic and version
# (docs/ASSET_FORMAT.md, section 2)
V2_FIELDS = ["model_kind", "flags", "dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads",
             "head_dim", "vocab_size", "seq_len", "runtime_seq_len", "rms_eps", "rope_theta",
             "rotary_dim", "linear_num_k_heads", "linear_num_v_heads", "linear_key_head_dim",
             "linear_value_head_dim", "linear_conv_kernel"]
V1_FIELDS = ["dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len",
             "runtime_seq_len", "rms_eps", "rope_theta"]


def smol_cfg(version: int) -> Config:
    return Config(version=version, model_kind=0, flags=0, dim=64, hidden_dim=96, n_layers=2,
                  n_heads=2, n_kv_heads=1, head_dim=32, vocab_size=50, seq_len=64,
                  runtime_seq_len=16, rms_eps=float(np.float32(1e-5)), rope_theta=10000.0,
                  rotary_dim=32, group_size=32 if version >= 3 else 0,
                  pack_rows=16 if version == 4 else 0)


def qwen_cfg(version: int) -> Config:
    return Config(version=version, model_kind=1, flags=3, dim=64, hidden_dim=96, n_layers=4,
                  n_heads=2, n_kv_heads=1, head_dim=32, vocab_size=50, seq_len=64,
                  runtime_seq_len=8, rms_eps=float(np.float32(1e-6)), rope_theta=1e7,
                  rotary_dim=8, linear_num_k_heads=1, linear_num_v_heads=2,
                  linear_key_head_dim=32, linear_value_head_dim=32, linear_conv_kernel=4,
                  group_size=32 if version >= 3 else 0, pack_rows=16 if version == 4 else 0)


def _shapes(c: Config, kind: int) -> list[tuple[str, bool, tuple[int, ...]]]:
    """(name, is_matrix, shape) in file order, from docs/ASSET_FORMAT.md section 6."""
    d, h = c.dim, c.hidden_dim
    mlp = [("gate_proj", True, (h, d)), ("up_proj", True, (h, d)), ("down_proj", True, (d, h))]
    if kind == 0:
        qk = [("q_norm", False, (c.head_dim,)), ("k_norm", False, (c.head_dim,))]
        qrows = c.n_heads * c.head_dim * (2 if c.flags & 1 else 1)
        return ([("input_norm", False, (d,)), ("post_norm", False, (d,))]
                + (qk if c.flags & 2 else [])
                + [("q_proj", True, (qrows, d)), ("k_proj", True, (c.n_kv_heads * c.head_dim, d)),
                   ("v_proj", True, (c.n_kv_heads * c.head_dim, d)),
                   ("o_proj", True, (d, c.n_heads * c.head_dim))] + mlp)
    kd = c.linear_num_k_heads * c.linear_key_head_dim
    vd = c.linear_num_v_heads * c.linear_value_head_dim
    conv = 2 * kd + vd
    vh = c.linear_num_v_heads
    return [("input_norm", False, (d,)), ("post_norm", False, (d,)),
            ("conv_weight", False, (conv, c.linear_conv_kernel)), ("dt_bias", False, (vh,)),
            ("A_log", False, (vh,)), ("norm", False, (c.linear_value_head_dim,)),
            ("in_proj_qkv", True, (conv, d)), ("in_proj_z", True, (vd, d)),
            ("in_proj_a", True, (vh, d)), ("in_proj_b", True, (vh, d)),
            ("out_proj", True, (d, vd))] + mlp


def build(c: Config, kinds: list[int], seed: int = 1) -> Assets:
    rng = np.random.default_rng(seed)
    quant = quantize_groups if c.version >= 3 else quantize_rows
    layers = []
    for k in kinds:
        t = {}
        for name, is_mat, shape in _shapes(c, k):
            w = rng.normal(0, 0.5, shape).astype(np.float32)
            t[name] = quant(w) if is_mat else w
        layers.append(Layer(kind=k, t=t))
    half = c.rotary_dim // 2
    return Assets(config=c, emb=quant(rng.normal(0, 1, (c.vocab_size, c.dim)).astype(np.float32)),
                  final_norm=rng.normal(1, 0.1, c.dim).astype(np.float32),
                  rope_cos=rng.random((c.runtime_seq_len, half), np.float32),
                  rope_sin=rng.random((c.runtime_seq_len, half), np.float32),
                  layer_types=kinds, layers=layers)


CASES = {
    "v1-smol": (smol_cfg(1), [0, 0]),
    "v2-qwen": (qwen_cfg(2), [1, 1, 1, 0]),
    "v3-smol": (smol_cfg(3), [0, 0]),
    "v3-qwen": (qwen_cfg(3), [1, 1, 1, 0]),
    "v4-smol": (smol_cfg(4), [0, 0]),
    "v4-qwen": (qwen_cfg(4), [1, 1, 1, 0]),
}


def header_bytes(c: Config) -> bytes:
    if c.version == 1:
        ints = [getattr(c, f) for f in V1_FIELDS[:8]]
        return struct.pack("<10I2f", MAGIC, 1, *ints, c.rms_eps, c.rope_theta)
    vals = [getattr(c, f) for f in V2_FIELDS]
    out = struct.pack("<13I", MAGIC, c.version, *vals[:11])
    out += struct.pack("<2f", vals[11], vals[12]) + struct.pack("<6I", *vals[13:])
    out += struct.pack("<I", 32) if c.version >= 3 else b""
    return out + (struct.pack("<I", c.pack_rows) if c.version == 4 else b"")


def qmat_v4_bytes(m: QMat, block: int) -> bytes:
    """Version 4's matrix, entry by entry as docs/ASSET_FORMAT.md section 3b places it."""
    rows, cols = m.q.shape
    ng, packed = cols // 32, rows // block * block
    mult = m.mult.astype("<u2").tobytes()
    out = m.scales.astype("<f8").tobytes() + mult + bytes(-len(mult) % 8)
    vm = [0] * (packed * ng)
    for b in range(packed // block):
        for g in range(ng):
            for i in range(block):
                vm[b * ng * block + g * block + i] = int(m.mult[b * block + i, g])
    out += struct.pack(f"<{len(vm)}i", *vm)
    vals = bytearray(rows * cols)
    for r in range(rows):
        for col in range(cols):
            byte = (int(m.q[r, col]) + 128) & 0xFF
            b, i, k, j = r // block, r % block, col // 4, col % 4
            at = b * block * cols + (k * block + i) * 4 + j if r < packed else r * cols + col
            vals[at] = byte
    return out + bytes(vals)


def qmat_bytes(m: QMat, c: Config | None = None) -> bytes:
    if c is not None and c.version == 4:
        return qmat_v4_bytes(m, c.pack_rows)
    out = m.scales.astype("<f4").tobytes()
    if m.mult is not None:
        out += m.mult.astype("<u2").tobytes()
    return out + m.q.astype(np.int8).tobytes()


def layer_bytes(c: Config, layer: Layer) -> bytes:
    out = b""
    floats = "<f8" if c.version == 4 else "<f4"
    for name, is_mat, _ in _shapes(c, layer.kind):
        v = layer.t[name]
        out += qmat_bytes(v, c) if is_mat else np.asarray(v, np.float32).astype(floats).tobytes()
    return out


@pytest.fixture(params=list(CASES))
def written(request, tmp_path) -> tuple[Assets, Path]:
    c, kinds = CASES[request.param]
    a = build(c, kinds)
    write_assets(a, tmp_path / "M", {"test": True})
    return a, tmp_path / "M"


def test_files_are_byte_exact(written):
    a, d = written
    c = a.config
    assert (d / "CFG.BIN").read_bytes() == header_bytes(c)
    assert len(header_bytes(c)) == {1: 48, 2: 84, 3: 88, 4: 92}[c.version]
    assert (d / "EMB.BIN").read_bytes() == qmat_bytes(a.emb, c)
    assert (d / "NRM.BIN").read_bytes() == a.final_norm.astype("<f4").tobytes()
    rope = b"".join(a.rope_cos[p].tobytes() + a.rope_sin[p].tobytes()
                    for p in range(c.runtime_seq_len))
    assert (d / "ROP.BIN").read_bytes() == rope
    for i, layer in enumerate(a.layers):
        assert (d / f"L{i:02d}.BIN").read_bytes() == layer_bytes(c, layer)
    if c.model_kind == 1:
        kinds = a.layer_types
        assert (d / "LTY.BIN").read_bytes() == struct.pack(f"<{1 + len(kinds)}I", len(kinds),
                                                            *kinds)
    else:
        assert not (d / "LTY.BIN").exists()
    assert (d / "INFO.TXT").is_file()


def _same(x, y) -> None:
    if isinstance(x, QMat):
        np.testing.assert_array_equal(x.scales, y.scales)
        np.testing.assert_array_equal(x.q, y.q)
        assert (x.mult is None) == (y.mult is None)
        if x.mult is not None:
            np.testing.assert_array_equal(x.mult, y.mult)
    else:
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.parametrize("as_zip", [False, True])
def test_round_trip(written, as_zip, tmp_path):
    a, d = written
    path = d
    if as_zip:
        path = tmp_path / "m.zip"
        with zipfile.ZipFile(path, "w") as z:
            for f in sorted(d.iterdir()):
                z.write(f, f"QWEN/{f.name}")
    b = load_assets(path)
    assert b.config == a.config
    assert b.layer_types == a.layer_types
    assert b.info["test"] is True
    _same(a.emb, b.emb)
    _same(a.final_norm, b.final_norm)
    _same(a.rope_cos, b.rope_cos)
    _same(a.rope_sin, b.rope_sin)
    for la, lb in zip(a.layers, b.layers, strict=True):
        assert la.kind == lb.kind and list(la.t) == list(lb.t)
        for name in la.t:
            _same(la.t[name], lb.t[name])


# ---------------------------------------------------------------- refusals

def _patch(d: Path, fld: str, value) -> None:
    data = bytearray((d / "CFG.BIN").read_bytes())
    version = struct.unpack_from("<I", data, 4)[0]
    if fld in ("magic", "version"):
        struct.pack_into("<I", data, 0 if fld == "magic" else 4, value)
    elif fld in ("group_size", "pack_rows"):
        struct.pack_into("<I", data, 84 if fld == "group_size" else 88, value)
    else:
        names = V1_FIELDS if version == 1 else V2_FIELDS
        off = 8 + 4 * names.index(fld)
        code = "<f" if fld in ("rms_eps", "rope_theta") else "<I"
        struct.pack_into(code, data, off, value)
    (d / "CFG.BIN").write_bytes(bytes(data))


def _resize(d: Path, name: str, delta: int) -> None:
    data = (d / name).read_bytes()
    (d / name).write_bytes(data[:delta] if delta < 0 else data + b"\0" * delta)


CFG_BAD = [  # (case, field, value, words expected in the message)
    ("v2-qwen", "magic", 0x32474643, "CFG.BIN: field magic"),
    ("v2-qwen", "version", 7, "CFG.BIN: field version: 7"),
    ("v1-smol", "version", 2, "CFG.BIN: size 48 bytes, expected 84"),
    ("v2-qwen", "dim", 0, "CFG.BIN: field dim: 0 must be > 0"),
    ("v2-qwen", "n_kv_heads", 0, "CFG.BIN: field n_kv_heads: 0"),
    ("v2-qwen", "n_kv_heads", 3, "CFG.BIN: field n_kv_heads: 3 must divide n_heads"),
    ("v2-qwen", "head_dim", 33, "CFG.BIN: field head_dim: 33 must be even"),
    ("v2-qwen", "rotary_dim", 7, "CFG.BIN: field rotary_dim: 7 must be even"),
    ("v2-qwen", "rotary_dim", 34, "CFG.BIN: field rotary_dim: 34 must be <= head_dim"),
    ("v2-qwen", "runtime_seq_len", 65, "CFG.BIN: field runtime_seq_len: 65 must be <="),
    ("v2-qwen", "linear_conv_kernel", 0, "CFG.BIN: field linear_conv_kernel: 0"),
    ("v2-qwen", "linear_num_k_heads", 3, "CFG.BIN: field linear_num_v_heads: 2 must be a "
     "multiple of linear_num_k_heads 3"),
    ("v2-qwen", "model_kind", 2, "CFG.BIN: field model_kind: 2"),
    ("v2-qwen", "flags", 4, "CFG.BIN: field flags"),
    ("v2-qwen", "rms_eps", -1.0, "CFG.BIN: field rms_eps"),
    ("v3-qwen", "group_size", 16, "CFG.BIN: field group_size: 16 must be 32"),
    ("v4-qwen", "group_size", 16, "CFG.BIN: field group_size: 16 must be 32"),
    ("v4-smol", "pack_rows", 8, "CFG.BIN: field pack_rows: 8 must be one of 0, 16, 32"),
    ("v3-smol", "dim", 48, "CFG.BIN: field dim: 48 must be a multiple of 32"),
    ("v1-smol", "n_heads", 3, "CFG.BIN: field n_heads: 3 must be > 0 and divide dim 64"),
    ("v1-smol", "n_kv_heads", 0, "CFG.BIN: field n_kv_heads: 0 must be > 0"),
    ("v1-smol", "seq_len", 8, "CFG.BIN: field runtime_seq_len: 16 must be <= seq_len 8"),
]


@pytest.mark.parametrize("case,fld,value,msg", CFG_BAD, ids=[f"{c}-{f}-{v}"
                                                              for c, f, v, _ in CFG_BAD])
def test_bad_cfg_field_refused(tmp_path, case, fld, value, msg):
    c, kinds = CASES[case]
    write_assets(build(c, kinds), tmp_path, {})
    load_assets(tmp_path)  # sound before the patch
    _patch(tmp_path, fld, value)
    with pytest.raises(AssetError) as e:
        load_assets(tmp_path)
    assert msg in str(e.value)


SIZE_BAD = [  # (case, file, bytes added (<0: cut), message)
    ("v2-qwen", "CFG.BIN", -1, "CFG.BIN: size 83 bytes, expected 84"),
    ("v3-qwen", "CFG.BIN", 1, "CFG.BIN: size 89 bytes, expected 88"),
    ("v4-qwen", "CFG.BIN", -4, "CFG.BIN: size 88 bytes, expected 92"),
    ("v4-smol", "EMB.BIN", -1, "EMB.BIN: size 4183 bytes, expected 4184"),
    ("v1-smol", "EMB.BIN", 1, "EMB.BIN: size 3401 bytes, expected 3400"),
    ("v3-smol", "EMB.BIN", -1, "EMB.BIN: size 3599 bytes, expected 3600"),
    ("v2-qwen", "NRM.BIN", -4, "NRM.BIN: size 252 bytes, expected 256"),
    ("v2-qwen", "ROP.BIN", 4, "ROP.BIN: size 260 bytes, expected 256"),
    ("v1-smol", "L01.BIN", -1, "L01.BIN: size"),
    ("v3-qwen", "L03.BIN", 1, "L03.BIN: size"),
    ("v2-qwen", "L00.BIN", -100, "L00.BIN: size"),
    ("v2-qwen", "LTY.BIN", -4, "LTY.BIN: size 16 bytes, expected 20"),
]


@pytest.mark.parametrize("case,name,delta,msg", SIZE_BAD,
                         ids=[f"{c}-{n}-{d}" for c, n, d, _ in SIZE_BAD])
def test_bad_size_refused(tmp_path, case, name, delta, msg):
    c, kinds = CASES[case]
    write_assets(build(c, kinds), tmp_path, {})
    want = (tmp_path / name).stat().st_size
    _resize(tmp_path, name, delta)
    with pytest.raises(AssetError) as e:
        load_assets(tmp_path)
    assert msg in str(e.value)
    if name.startswith("L") and name != "LTY.BIN":  # both sizes named
        assert f"{want + delta} bytes" in str(e.value) and f"expected {want} bytes" in str(e.value)


def test_emb_size_arithmetic():
    # Independent of the loader: v1 EMB = 50 rows * 4 + 50*64; v3 adds 50*2 u16 multipliers;
    # v4 (pack_rows 16): 50 f64 scales, 200 bytes of multipliers (a multiple of 8 already),
    # 48 packed rows * 2 groups as i32, 50*64 values.
    assert 50 * 4 + 50 * 64 == 3400
    assert 3400 + 50 * (64 // 32) * 2 == 3600
    assert 50 * 8 + 200 + 48 * 2 * 4 + 50 * 64 == 4184


@pytest.mark.parametrize("name", ["LTY.BIN", "EMB.BIN", "ROP.BIN", "L02.BIN", "CFG.BIN"])
def test_missing_file_refused(tmp_path, name):
    c, kinds = CASES["v2-qwen"]
    write_assets(build(c, kinds), tmp_path, {})
    (tmp_path / name).unlink()
    with pytest.raises(AssetError, match=rf"{name}: missing"):
        load_assets(tmp_path)


@pytest.mark.parametrize("words,msg", [
    ((5, 1, 1, 1, 0), "LTY.BIN: field count: 5, expected n_layers 4"),
    ((4, 1, 2, 1, 0), r"LTY.BIN: field kind\[1\]: 2"),
])
def test_bad_lty_refused(tmp_path, words, msg):
    c, kinds = CASES["v2-qwen"]
    write_assets(build(c, kinds), tmp_path, {})
    (tmp_path / "LTY.BIN").write_bytes(struct.pack("<5I", *words))
    with pytest.raises(AssetError, match=msg):
        load_assets(tmp_path)


def test_lty_optional_for_smol(tmp_path):
    c, kinds = CASES["v1-smol"]
    write_assets(build(c, kinds), tmp_path, {})
    (tmp_path / "LTY.BIN").write_bytes(struct.pack("<3I", 2, 0, 0))
    assert load_assets(tmp_path).layer_types == [0, 0]


def test_extra_files_tolerated(tmp_path):
    c, kinds = CASES["v2-qwen"]
    write_assets(build(c, kinds), tmp_path, {})
    for extra in ("PMT.BIN", "EXP.BIN", "PROMPT.TXT", "EXPECT.TXT", "LAYERS.TXT"):
        (tmp_path / extra).write_bytes(b"x")
    (tmp_path / "INFO.TXT").write_text("not json")
    assert load_assets(tmp_path).info is None


def test_zip_without_cfg_refused(tmp_path):
    p = tmp_path / "x.zip"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("SMOL/INFO.TXT", "{}")
    with pytest.raises(AssetError, match="no CFG.BIN"):
        load_assets(p)


def test_missing_path_says_what_to_do(tmp_path):
    with pytest.raises(AssetError, match="make smol-assets"):
        load_assets(tmp_path / "nope")


def test_rewrite_replaces_old_export(tmp_path):
    d = tmp_path / "M"
    c, kinds = CASES["v2-qwen"]
    write_assets(build(c, kinds), d, {})
    shutil.copy(d / "CFG.BIN", tmp_path / "keep")
    c1, k1 = CASES["v1-smol"]
    write_assets(build(c1, k1), d, {})
    assert load_assets(d).config.version == 1


# ---------------------------------------------------------------- quantisation

def test_rows_round_half_even_and_zero_row():
    w = np.array([[127, 0.5, 1.5, 2.5, -2.5, -127], [0, 0, 0, 0, 0, 0]], np.float32)
    m = quantize_rows(w)
    np.testing.assert_array_equal(m.scales, np.array([1.0, 1.0], np.float32))
    np.testing.assert_array_equal(m.q[0], [127, 0, 2, 2, -2, -127])
    np.testing.assert_array_equal(m.q[1], 0)


def test_groups_multipliers_follow_the_spec():
    w = np.zeros((2, 96), np.float32)
    w[0, :32] = 127.0  # group max 127 = row max
    w[0, 32] = 63.5  # 63.5 / 127 * 32768 = 16384 exactly
    w[0, 64] = 1.0  # ceil(1/127*32768) = ceil(258.01...) = 259
    m = quantize_groups(w)
    assert m.scales[0] == np.float32(1.0) and m.scales[1] == np.float32(1.0)
    np.testing.assert_array_equal(m.mult[0], [32768, 16384, 259])
    np.testing.assert_array_equal(m.mult[1], [1, 1, 1])  # all-zero row: clamp to 1
    assert m.q[0, 0] == 127 and m.q[0, 32] == 127  # 63.5 / (1 * 16384/32768)
    assert m.q[0, 64] == round(1.0 / (259 / 32768))  # 127 (126.5 rounds to even)


@pytest.mark.parametrize("quant", [quantize_rows, quantize_groups])
def test_quantisation_error_within_half_a_step(quant):
    rng = np.random.default_rng(0)
    w = (rng.standard_t(3, (300, 256)) * 0.05).astype(np.float32)
    w[7] = 0.0
    m = quant(w)
    deq = dequantize(m)
    # independent step size per element from the stored scales
    step = m.scales.astype(np.float64)[:, None]
    if m.mult is not None:
        step = step * np.repeat(m.mult.astype(np.float64) / 32768.0, 32, axis=1)
    err = np.abs(w.astype(np.float64) - deq.astype(np.float64))
    assert np.all(err <= step / 2 * (1 + 1e-6) + 1e-12)
    assert np.all(np.abs(m.q) <= 127)


def test_group_scales_help_on_outlier_rows():
    rng = np.random.default_rng(1)
    w = rng.normal(0, 0.02, (64, 256)).astype(np.float32)
    w[:, 0] = 1.0  # one outlier column dominates every row's scale
    e_rows = np.abs(w - dequantize(quantize_rows(w))).mean()
    e_groups = np.abs(w - dequantize(quantize_groups(w))).mean()
    assert e_groups < e_rows / 5


def test_groups_need_whole_groups():
    with pytest.raises(ValueError, match="multiple of the group size"):
        quantize_groups(np.zeros((2, 40), np.float32))
