"""Read, validate and write model asset directories (the "CFG1" format).

The byte format is docs/ASSET_FORMAT.md (versions 1 and 2, the
course's) plus our version 3 (docs/ARITHMETIC.md "Format version 3") and version 4
(version 3 in the layout the guest's kernels read, section 3b, which the guest maps
in place; it loads here into version 3's arrays). Loading
checks every header field and every file's exact size before it touches the
data, and refuses a bad file with an AssetError naming the file and the field.
Arrays are zero-copy views (np.memmap for a directory, one read per member for
a zip), so a 750 MB model loads in well under a second.
"""

from __future__ import annotations

import json
import os
import re
import struct
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from pyaisvc.errors import AisvcError
from pyaisvc.model.quant import GROUP_SIZE, QMat

__all__ = [
    "AssetError", "Config", "QMat", "Layer", "Assets", "load_assets", "write_assets",
    "load_config", "pack_config", "layer_layout", "file_sizes", "CFG_MAGIC", "CFG_SIZES",
]

CFG_MAGIC = 0x31474643  # b"CFG1" little-endian
CFG_SIZES = {1: 48, 2: 84, 3: 88, 4: 92}
PACK_ROWS = (0, 16, 32)  # version 4: rows per packed block (docs/ASSET_FORMAT.md 3b)
# The runtime_seq_len an export writes unless told otherwise (the course's SmolLM2
# value; Qwen3.5 takes the same, so both models share one exercise shape). For
# Qwen3.5-0.8B guest memory allows it easily: per position the runtime keeps, for
# each of the 6 full-attention layers, K and V for 2 kv heads x 256 dims as int8
# plus group scales (~6.5 KB), and ROP.BIN holds 64 fp32 (256 B); 256 positions
# cost ~1.7 MB beside ~756 MB of weights and the Gated DeltaNet state (18 layers x
# 16 heads x 128 x 128 values, ~38 MB as double). Longer contexts are limited by
# QEMU's speed, not memory.
DEFAULT_RUNTIME_SEQ_LEN = 256
MAX_LAYERS = 100  # file names are L00.BIN .. L99.BIN

_V1_FIELDS = ("dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size",
              "seq_len", "runtime_seq_len")
_V2_HEAD = ("model_kind", "flags", "dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads",
            "head_dim", "vocab_size", "seq_len", "runtime_seq_len")
_LINEAR_FIELDS = ("linear_num_k_heads", "linear_num_v_heads", "linear_key_head_dim",
                  "linear_value_head_dim", "linear_conv_kernel")
_V2_FMT = "<2I11I2f6I"  # magic, version, 11 u32, eps, theta, rotary_dim + 5 linear fields


class AssetError(AisvcError):
    """A bad asset file; the message names the file and the field."""


@dataclass(frozen=True)
class Config:
    version: int  # 1, 2 (course formats), 3 (v3, group-scaled) or 4 (v3, kernels' layout)
    model_kind: int  # 0 smol/llama, 1 qwen
    flags: int  # bit0 attention output gate, bit1 q/k RMSNorm
    dim: int
    hidden_dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    vocab_size: int
    seq_len: int
    runtime_seq_len: int
    rms_eps: float  # the fp32 value as a Python float
    rope_theta: float  # the fp32 value as a Python float
    rotary_dim: int
    linear_num_k_heads: int = 0
    linear_num_v_heads: int = 0
    linear_key_head_dim: int = 0
    linear_value_head_dim: int = 0
    linear_conv_kernel: int = 0
    group_size: int = 0  # 32 for versions 3 and 4, 0 for versions 1/2
    pack_rows: int = 0  # version 4: rows per packed block of the weights

    @property
    def has_gate(self) -> bool:
        """Whether the FFN has a gate projection (flags bit 0)."""
        return bool(self.flags & 1)

    @property
    def has_qk_norm(self) -> bool:
        """Whether queries and keys are normalised per head (flags bit 1)."""
        return bool(self.flags & 2)

    @property
    def conv_dim(self) -> int:
        """Channels of the linear-attention layers' convolution: the keys' twice (q and k) plus
        the values'."""
        return (2 * self.linear_num_k_heads * self.linear_key_head_dim
                + self.linear_num_v_heads * self.linear_value_head_dim)


@dataclass
class Layer:
    kind: int  # 0 full attention, 1 linear attention (Gated DeltaNet)
    t: dict[str, np.ndarray | QMat]


@dataclass
class Assets:
    config: Config
    emb: QMat  # [vocab_size, dim], also the output head
    final_norm: np.ndarray  # float32 [dim]
    rope_cos: np.ndarray  # float32 [runtime_seq_len, rotary_dim // 2]
    rope_sin: np.ndarray  # float32 [runtime_seq_len, rotary_dim // 2]
    layer_types: list[int]  # from LTY.BIN, or all 0 when absent (smol)
    layers: list[Layer]
    info: dict | None = None  # INFO.TXT parsed, when present
    source: str = field(default="")  # where the assets were loaded from


# ---------------------------------------------------------------- CFG.BIN

def pack_config(c: Config) -> bytes:
    """The CFG.BIN bytes for ``c`` (layout chosen by c.version)."""
    if c.version == 1:
        return struct.pack("<10I2f", CFG_MAGIC, 1, c.dim, c.hidden_dim, c.n_layers, c.n_heads,
                           c.n_kv_heads, c.vocab_size, c.seq_len, c.runtime_seq_len,
                           c.rms_eps, c.rope_theta)
    head = [getattr(c, f) for f in _V2_HEAD]
    tail = [c.rotary_dim] + [getattr(c, f) for f in _LINEAR_FIELDS]
    data = struct.pack(_V2_FMT, CFG_MAGIC, c.version, *head, c.rms_eps, c.rope_theta, *tail)
    if c.version >= 3:
        data += struct.pack("<I", c.group_size)
    if c.version == 4:
        data += struct.pack("<I", c.pack_rows)
    return data


def _unpack_config(data: bytes, name: str) -> Config:
    """The Config in CFG.BIN's bytes of any supported version (1-3); AssetError naming the file
    (name) and the field for a bad magic, version or size."""
    if len(data) < 8:
        raise AssetError(f"{name}: size {len(data)} bytes, too short for magic and version")
    magic, version = struct.unpack_from("<2I", data)
    if magic != CFG_MAGIC:
        raise AssetError(f"{name}: field magic: 0x{magic:08x}, expected 0x{CFG_MAGIC:08x} "
                         "(bytes 'CFG1'); this is not a model config file")
    if version not in CFG_SIZES:
        raise AssetError(f"{name}: field version: {version} is not supported "
                         f"(this pyaisvc reads versions {sorted(CFG_SIZES)})")
    if len(data) != CFG_SIZES[version]:
        raise AssetError(f"{name}: size {len(data)} bytes, expected {CFG_SIZES[version]} bytes "
                         f"for version {version}")
    if version == 1:
        v = struct.unpack("<10I2f", data)
        d = dict(zip(_V1_FIELDS, v[2:10], strict=True))
        if d["n_heads"] == 0 or d["dim"] % d["n_heads"]:
            raise AssetError(f"{name}: field n_heads: {d['n_heads']} must be > 0 and divide "
                             f"dim {d['dim']}")
        hd = d["dim"] // d["n_heads"]
        return Config(version=1, model_kind=0, flags=0, head_dim=hd, rotary_dim=hd,
                      rms_eps=v[10], rope_theta=v[11], **d)
    v = struct.unpack_from(_V2_FMT, data)
    d = dict(zip(_V2_HEAD, v[2:13], strict=True))
    d.update(zip(_LINEAR_FIELDS, v[16:21], strict=True))
    gs = struct.unpack_from("<I", data, 84)[0] if version >= 3 else 0
    pr = struct.unpack_from("<I", data, 88)[0] if version == 4 else 0
    return Config(version=version, rms_eps=v[13], rope_theta=v[14], rotary_dim=v[15],
                  group_size=gs, pack_rows=pr, **d)


def _require(ok: bool, name: str, fld: str, msg: str) -> None:
    """AssetError "name: field fld: msg" unless ok."""
    if not ok:
        raise AssetError(f"{name}: field {fld}: {msg}")


def _validate_config(c: Config, name: str = "CFG.BIN") -> None:
    """AssetError naming the first field of c that the runtime cannot use (a size not above 0, a
    flag or kind it does not know, shapes that do not fit each other)."""
    positive = ["dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "head_dim",
                "vocab_size", "seq_len", "runtime_seq_len", "rotary_dim"]
    for f in positive:
        _require(getattr(c, f) > 0, name, f, f"{getattr(c, f)} must be > 0")
    _require(c.model_kind in (0, 1), name, "model_kind",
             f"{c.model_kind} must be 0 (smol/llama) or 1 (qwen)")
    _require(c.flags & ~3 == 0, name, "flags", f"0x{c.flags:x} has bits other than 0 and 1")
    _require(c.n_layers <= MAX_LAYERS, name, "n_layers", f"{c.n_layers} exceeds {MAX_LAYERS}")
    _require(c.head_dim % 2 == 0, name, "head_dim", f"{c.head_dim} must be even")
    _require(c.rotary_dim % 2 == 0, name, "rotary_dim", f"{c.rotary_dim} must be even")
    _require(c.rotary_dim <= c.head_dim, name, "rotary_dim",
             f"{c.rotary_dim} must be <= head_dim {c.head_dim}")
    _require(c.n_heads % c.n_kv_heads == 0, name, "n_kv_heads",
             f"{c.n_kv_heads} must divide n_heads {c.n_heads}")
    _require(c.runtime_seq_len <= c.seq_len, name, "runtime_seq_len",
             f"{c.runtime_seq_len} must be <= seq_len {c.seq_len}")
    for f in ("rms_eps", "rope_theta"):
        val = getattr(c, f)
        _require(np.isfinite(val) and val > 0, name, f, f"{val} must be a positive number")
    lin = [getattr(c, f) for f in _LINEAR_FIELDS]
    if any(lin) and not all(lin):
        zero = next(f for f in _LINEAR_FIELDS if getattr(c, f) == 0)
        raise AssetError(f"{name}: field {zero}: 0, but other linear-attention fields are set "
                         "(they must be all zero or all set)")
    if all(lin):
        _require(c.linear_num_v_heads % c.linear_num_k_heads == 0, name, "linear_num_v_heads",
                 f"{c.linear_num_v_heads} must be a multiple of linear_num_k_heads "
                 f"{c.linear_num_k_heads}")
    if c.version >= 3:
        _require(c.group_size == GROUP_SIZE, name, "group_size",
                 f"{c.group_size} must be {GROUP_SIZE}")
    if c.version == 4:
        _require(c.pack_rows in PACK_ROWS, name, "pack_rows",
                 f"{c.pack_rows} must be one of {', '.join(map(str, PACK_ROWS))}")
    # The runtime quantises activations in groups of 32 (docs/ARITHMETIC.md), so every
    # vector it quantises must be a whole number of groups.
    grouped = {"dim": c.dim, "hidden_dim": c.hidden_dim, "head_dim": c.head_dim}
    if all(lin):
        grouped["linear_value_head_dim"] = c.linear_value_head_dim
    for f, val in grouped.items():
        _require(val % GROUP_SIZE == 0, name, f,
                 f"{val} must be a multiple of {GROUP_SIZE} (activation groups)")


def load_config(data: bytes, name: str = "CFG.BIN") -> Config:
    """Parse and validate CFG.BIN bytes."""
    c = _unpack_config(data, name)
    _validate_config(c, name)
    return c


# ---------------------------------------------------------------- layouts

def layer_layout(c: Config, kind: int) -> list[tuple[str, str, tuple[int, ...]]]:
    """(tensor name, "f32" or "qmat", shape) in file order for a layer of ``kind``."""
    d, hdim = c.dim, c.hidden_dim
    mlp = [("gate_proj", "qmat", (hdim, d)), ("up_proj", "qmat", (hdim, d)),
           ("down_proj", "qmat", (d, hdim))]
    norms = [("input_norm", "f32", (d,)), ("post_norm", "f32", (d,))]
    if kind == 0:
        qk = [("q_norm", "f32", (c.head_dim,)), ("k_norm", "f32", (c.head_dim,))]
        q_rows = c.n_heads * c.head_dim * (2 if c.has_gate else 1)
        kv = c.n_kv_heads * c.head_dim
        return norms + (qk if c.has_qk_norm else []) + [
            ("q_proj", "qmat", (q_rows, d)), ("k_proj", "qmat", (kv, d)),
            ("v_proj", "qmat", (kv, d)), ("o_proj", "qmat", (d, c.n_heads * c.head_dim)),
        ] + mlp
    vh, vd = c.linear_num_v_heads, c.linear_value_head_dim
    return norms + [
        ("conv_weight", "f32", (c.conv_dim, c.linear_conv_kernel)),
        ("dt_bias", "f32", (vh,)), ("A_log", "f32", (vh,)), ("norm", "f32", (vd,)),
        ("in_proj_qkv", "qmat", (c.conv_dim, d)), ("in_proj_z", "qmat", (vh * vd, d)),
        ("in_proj_a", "qmat", (vh, d)), ("in_proj_b", "qmat", (vh, d)),
        ("out_proj", "qmat", (d, vh * vd)),
    ] + mlp


def _pad8(n: int) -> int:
    return n + -n % 8


def _packed_rows(c: Config, rows: int) -> int:
    """Version 4: the rows of a matrix that lie in whole packed blocks."""
    return rows // c.pack_rows * c.pack_rows if c.pack_rows else 0


def _qmat_bytes(c: Config, rows: int, cols: int) -> int:
    """Bytes of a rows x cols quantised matrix: its row scales, the v3 group multipliers
    (version 4: doubles, the multipliers, their packed int32 copy), the int8 values."""
    ng = cols // GROUP_SIZE
    if c.version == 4:
        return 8 * rows + _pad8(2 * rows * ng) + 4 * _packed_rows(c, rows) * ng + rows * cols
    mult = rows * ng * 2 if c.version == 3 else 0
    return rows * 4 + mult + rows * cols


def _tensor_bytes(c: Config, kind: str, shape: tuple[int, ...]) -> int:
    """Bytes of one tensor of kind "qmat" (quantised) or float (version 4: doubles), of
    the given shape."""
    if kind == "qmat":
        return _qmat_bytes(c, *shape)
    return (8 if c.version == 4 else 4) * int(np.prod(shape))


def file_sizes(c: Config, layer_types: list[int] | None) -> dict[str, int]:
    """Exact size of every data file the config implies (INFO.TXT excluded)."""
    sizes = {"CFG.BIN": CFG_SIZES[c.version],
             "EMB.BIN": _qmat_bytes(c, c.vocab_size, c.dim),
             "NRM.BIN": 4 * c.dim,
             "ROP.BIN": 4 * c.runtime_seq_len * c.rotary_dim}
    kinds = layer_types if layer_types is not None else [0] * c.n_layers
    if layer_types is not None:
        sizes["LTY.BIN"] = 4 * (1 + c.n_layers)
    for i, k in enumerate(kinds):
        sizes[f"L{i:02d}.BIN"] = sum(_tensor_bytes(c, t, s) for _, t, s in layer_layout(c, k))
    return sizes


# ---------------------------------------------------------------- reading

class _Source:
    """A directory or a zip holding SMOL/ or QWEN/: name -> bytes-like buffer."""

    def __init__(self, path: Path):
        """The assets at path, a directory or a zip (with CFG.BIN under one folder); AssetError
        saying what to run when it is neither or holds no config."""
        self.path = path
        self._zip: zipfile.ZipFile | None = None
        self._prefix = ""
        if path.is_dir():
            return
        if not path.exists():
            raise AssetError(f"{path}: no such asset directory or zip; run `make smol-assets` "
                             "or `pyaisvc export smol|qwen`")
        try:
            self._zip = zipfile.ZipFile(path)
        except zipfile.BadZipFile as e:
            raise AssetError(f"{path}: not a directory and not a zip file ({e})") from e
        cfgs = [n for n in self._zip.namelist() if n.endswith("CFG.BIN")]
        if not cfgs:
            raise AssetError(f"{path}: the zip holds no CFG.BIN (expected SMOL/ or QWEN/ inside)")
        self._prefix = min(cfgs, key=len)[: -len("CFG.BIN")]

    def exists(self, name: str) -> bool:
        """Whether the source holds the file name."""
        if self._zip is None:
            return (self.path / name).is_file()
        try:
            self._zip.getinfo(self._prefix + name)
            return True
        except KeyError:
            return False

    def size(self, name: str) -> int:
        """The size in bytes of the file name."""
        if self._zip is None:
            return os.path.getsize(self.path / name)
        return self._zip.getinfo(self._prefix + name).file_size

    def read(self, name: str) -> np.ndarray:
        """The file as a read-only uint8 array (memory-mapped for a directory)."""
        if self._zip is None:
            if self.size(name) == 0:
                return np.zeros(0, np.uint8)
            return np.memmap(self.path / name, dtype=np.uint8, mode="r")
        return np.frombuffer(self._zip.read(self._prefix + name), np.uint8)


class _Reader:
    """Cuts typed views out of one file's buffer, in order."""

    def __init__(self, buf: np.ndarray, c: Config):
        """A reader of buf from its start, shaped by config c."""
        self.buf, self.c, self.off = buf, c, 0

    def take(self, dtype: type, count: int, shape: tuple[int, ...]) -> np.ndarray:
        """The next count items of dtype as an array of shape (a view of the buffer)."""
        n = np.dtype(dtype).itemsize * count
        view = self.buf[self.off:self.off + n].view(dtype).reshape(shape)
        self.off += n
        return view

    def f32(self, shape: tuple[int, ...]) -> np.ndarray:
        """The next float32 tensor of shape."""
        return self.take(np.float32, int(np.prod(shape)), shape)

    def tensor(self, shape: tuple[int, ...]) -> np.ndarray:
        """A layer's or EMB.BIN's float tensor: f32, or version 4's f64 (exact f32 values)."""
        if self.c.version == 4:
            return self.take(np.float64, int(np.prod(shape)), shape).astype(np.float32)
        return self.f32(shape)

    def qmat(self, rows: int, cols: int) -> QMat:
        """The next rows x cols quantised matrix: scales, the v3 group multipliers, values."""
        if self.c.version == 4:
            return self._qmat_v4(rows, cols)
        scales = self.f32((rows,))
        mult = None
        if self.c.version == 3:
            ng = cols // GROUP_SIZE
            mult = self.take(np.uint16, rows * ng, (rows, ng))
        return QMat(scales=scales, mult=mult, q=self.take(np.int8, rows * cols, (rows, cols)))

    def _qmat_v4(self, rows: int, cols: int) -> QMat:
        """Version 4's matrix (docs/ASSET_FORMAT.md 3b) as version 3's arrays."""
        ng, packed = cols // GROUP_SIZE, _packed_rows(self.c, rows)
        scales = self.tensor((rows,))
        mult = self.take(np.uint16, rows * ng, (rows, ng))
        self.off = _pad8(self.off) + 4 * packed * ng  # the packed copy of mult: not needed
        raw = self.take(np.uint8, rows * cols, (rows * cols,))
        return QMat(scales=scales, mult=mult, q=unpack_weights(raw, rows, cols, self.c.pack_rows))


def unpack_weights(raw: np.ndarray, rows: int, cols: int, block: int) -> np.ndarray:
    """int8 [rows, cols] from version 4's bytes: q + 128, the first rows in blocks of
    ``block`` rows word-interleaved (docs/ASSET_FORMAT.md 3b)."""
    packed = rows // block * block if block else 0
    q = (raw ^ 0x80).view(np.int8)
    head = q[:packed * cols].reshape(-1, cols // 4, block or 1, 4).transpose(0, 2, 1, 3)
    return np.concatenate([head.reshape(packed, cols), q[packed * cols:].reshape(-1, cols)])


def pack_weights(m: QMat, block: int) -> list[bytes]:
    """Version 4's packed multipliers and values of m (the inverse of unpack_weights)."""
    rows, cols = m.shape
    packed, ng = (rows // block * block if block else 0), cols // GROUP_SIZE
    vm = m.mult[:packed].astype("<i4").reshape(-1, block or 1, ng).transpose(0, 2, 1)
    u = m.q.view(np.uint8) ^ 0x80
    head = u[:packed].reshape(-1, block or 1, cols // 4, 4).transpose(0, 2, 1, 3)
    return [np.ascontiguousarray(vm).tobytes(), np.ascontiguousarray(head).tobytes(),
            np.ascontiguousarray(u[packed:]).tobytes()]


def _read_lty(src: _Source, c: Config) -> list[int] | None:
    """The layer kinds from LTY.BIN (0 attention, 1 linear attention), None when absent for a
    Smol model; AssetError when Qwen lacks it or it does not fit the config."""
    if not src.exists("LTY.BIN"):
        if c.model_kind == 1:
            raise AssetError("LTY.BIN: missing; it is required for Qwen (model_kind 1) assets")
        return None
    raw = bytes(src.read("LTY.BIN"))
    want = 4 * (1 + c.n_layers)
    if len(raw) != want:
        raise AssetError(f"LTY.BIN: size {len(raw)} bytes, expected {want} bytes "
                         f"(count + {c.n_layers} kinds)")
    count, *kinds = struct.unpack(f"<{1 + c.n_layers}I", raw)
    if count != c.n_layers:
        raise AssetError(f"LTY.BIN: field count: {count}, expected n_layers {c.n_layers}")
    for i, k in enumerate(kinds):
        if k not in (0, 1):
            raise AssetError(f"LTY.BIN: field kind[{i}]: {k} must be 0 (full) or 1 (linear)")
    if 1 in kinds and not c.linear_conv_kernel:
        raise AssetError("LTY.BIN: field kind: linear-attention layers present but CFG.BIN's "
                         "linear fields are zero")
    return kinds


def load_assets(path: str | os.PathLike[str]) -> Assets:
    """Load and validate an asset directory, or a zip holding SMOL/ or QWEN/."""
    src = _Source(Path(path))
    if not src.exists("CFG.BIN"):
        raise AssetError(f"CFG.BIN: missing in {path}")
    c = load_config(bytes(src.read("CFG.BIN")))
    lty = _read_lty(src, c)
    for name, want in file_sizes(c, lty).items():
        if not src.exists(name):
            raise AssetError(f"{name}: missing in {path}")
        got = src.size(name)
        if got != want:
            raise AssetError(f"{name}: size {got} bytes, expected {want} bytes "
                             "for the shapes in CFG.BIN")
    emb = _Reader(src.read("EMB.BIN"), c).qmat(c.vocab_size, c.dim)  # NRM, ROP: f32 always
    final_norm = _Reader(src.read("NRM.BIN"), c).f32((c.dim,))
    rope = _Reader(src.read("ROP.BIN"), c).f32((c.runtime_seq_len, c.rotary_dim))
    half = c.rotary_dim // 2
    kinds = lty if lty is not None else [0] * c.n_layers
    layers = []
    for i, k in enumerate(kinds):
        r = _Reader(src.read(f"L{i:02d}.BIN"), c)
        t: dict[str, np.ndarray | QMat] = {}
        for tname, typ, shape in layer_layout(c, k):
            t[tname] = r.qmat(*shape) if typ == "qmat" else r.tensor(shape)
        layers.append(Layer(kind=k, t=t))
    info = _read_info(src)
    return Assets(config=c, emb=emb, final_norm=final_norm, rope_cos=rope[:, :half],
                  rope_sin=rope[:, half:], layer_types=list(kinds), layers=layers, info=info,
                  source=str(path))


def _read_info(src: _Source) -> dict | None:
    """INFO.TXT as JSON, or None when it is absent or not JSON."""
    if not src.exists("INFO.TXT"):
        return None
    try:
        return json.loads(bytes(src.read("INFO.TXT")).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None  # INFO.TXT is for humans; a course file need not be JSON we understand


# ---------------------------------------------------------------- writing

def _qmat_blob(m: QMat, c: Config, name: str) -> list[bytes]:
    """The file parts of quantised matrix m as config c stores it (scales, v3 and v4
    multipliers, values); AssetError naming name when m's scheme is not c's version's."""
    if (m.mult is None) != (c.version < 3):
        raise AssetError(f"{name}: quantised with the wrong scheme for CFG version {c.version}")
    if c.version == 4:
        mult = np.ascontiguousarray(m.mult, "<u2").tobytes()
        return [_tensor_blob(m.scales, c), mult + bytes(-len(mult) % 8),
                *pack_weights(m, c.pack_rows)]
    parts = [np.ascontiguousarray(m.scales, "<f4").tobytes()]
    if m.mult is not None:
        parts.append(np.ascontiguousarray(m.mult, "<u2").tobytes())
    parts.append(np.ascontiguousarray(m.q, np.int8).tobytes())
    return parts


def _f32_blob(a: np.ndarray) -> bytes:
    """a as little-endian float32 bytes."""
    return np.ascontiguousarray(a, "<f4").tobytes()


def _tensor_blob(a: np.ndarray, c: Config) -> bytes:
    """A float tensor of a layer or matrix: f32, or version 4's f64 of the f32 values."""
    if c.version == 4:
        return np.ascontiguousarray(np.asarray(a, np.float32), "<f8").tobytes()
    return _f32_blob(a)


def _write(out: Path, name: str, parts: list[bytes]) -> int:
    """Writes parts to out/name in order; returns the file's size."""
    with open(out / name, "wb") as f:
        for p in parts:
            f.write(p)
    return os.path.getsize(out / name)


def write_layer(out_dir: Path, index: int, layer: Layer, c: Config) -> int:
    """Write L%02d.BIN; returns its size. Shapes are checked against the layout."""
    name = f"L{index:02d}.BIN"
    parts: list[bytes] = []
    for tname, typ, shape in layer_layout(c, layer.kind):
        if tname not in layer.t:
            raise AssetError(f"{name}: tensor {tname} missing from the layer to write")
        v = layer.t[tname]
        got = v.shape if isinstance(v, QMat) else tuple(np.shape(v))
        if tuple(got) != shape:
            raise AssetError(f"{name}: tensor {tname} has shape {got}, expected {shape}")
        parts += _qmat_blob(v, c, f"{name} {tname}") if typ == "qmat" else [_tensor_blob(v, c)]
    return _write(out_dir, name, parts)


def write_header_files(out_dir: Path, a: Assets, write_lty: bool) -> dict[str, int]:
    """CFG, EMB, NRM, ROP and (optionally) LTY; returns name -> size."""
    c = a.config
    _validate_config(c)
    out_dir.mkdir(parents=True, exist_ok=True)
    sizes = {"CFG.BIN": _write(out_dir, "CFG.BIN", [pack_config(c)]),
             "EMB.BIN": _write(out_dir, "EMB.BIN", _qmat_blob(a.emb, c, "EMB.BIN")),
             "NRM.BIN": _write(out_dir, "NRM.BIN", [_f32_blob(a.final_norm)])}
    rope = np.concatenate([a.rope_cos, a.rope_sin], axis=1)
    sizes["ROP.BIN"] = _write(out_dir, "ROP.BIN", [_f32_blob(rope)])
    if write_lty:
        lty = struct.pack(f"<{1 + c.n_layers}I", c.n_layers, *a.layer_types)
        sizes["LTY.BIN"] = _write(out_dir, "LTY.BIN", [lty])
    return sizes


def write_info(out_dir: Path, info: dict) -> None:
    """INFO.TXT last: its presence marks a complete asset directory."""
    (out_dir / "INFO.TXT").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")


def config_dict(c: Config) -> dict:
    """The config's fields as a dict (field name -> value)."""
    return asdict(c)


_ASSET_NAME = re.compile(r"^(CFG|EMB|NRM|ROP|LTY|L\d\d)\.BIN$|^INFO\.TXT$")


def clear_asset_dir(out_dir: Path) -> None:
    """Remove the asset files an earlier export left (INFO.TXT first: no longer valid)."""
    if not out_dir.is_dir():
        return
    info = out_dir / "INFO.TXT"
    if info.exists():
        info.unlink()
    for p in out_dir.iterdir():
        if p.is_file() and _ASSET_NAME.match(p.name):
            p.unlink()


def write_assets(assets: Assets, out_dir: Path, info: dict) -> dict[str, int]:
    """Write a whole asset directory from in-memory Assets; returns file -> size.

    Asset files already in out_dir are removed first. LTY.BIN is written for Qwen
    (model_kind 1), where it is required.
    """
    out_dir = Path(out_dir)
    clear_asset_dir(out_dir)
    sizes = write_header_files(out_dir, assets, write_lty=assets.config.model_kind == 1)
    for i, layer in enumerate(assets.layers):
        sizes[f"L{i:02d}.BIN"] = write_layer(out_dir, i, layer, assets.config)
    write_info(out_dir, {**info, "files": dict(sizes)})
    return sizes
