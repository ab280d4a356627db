"""Weight quantisation for the asset files.

Two schemes (docs/ARITHMETIC.md, docs/ASSET_FORMAT.md):

- course (CFG versions 1 and 2): one fp32 scale per row,
  ``scale = max|W[r,:]| / 127`` (1.0 for an all-zero row),
  ``q = clip(rint(W / scale), -127, 127)``.
- v3 (CFG version 3, "group-scaled"): the same fp32 row scale ``ws`` plus a u16
  multiplier per group of 32 columns,
  ``wm = clip(ceil(max|W[r,g]| / max|W[r,:]| * 32768), 1, 32768)``; the group's
  scale is ``ws * wm / 32768`` and ``q = clip(rint(W / group_scale), -127, 127)``.

Rows are processed in chunks so a 248320 x 1024 embedding never needs more than
a few tens of MB of float64 temporaries.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

GROUP_SIZE = 32  # the only group size of format version 3
_CHUNK_ELEMS = 1 << 22  # elements per chunk of rows


@dataclass
class QMat:
    """One quantised weight matrix [rows][cols]."""

    scales: np.ndarray  # float32 [rows]
    mult: np.ndarray | None  # uint16 [rows, cols // group_size] (version 3), None (1/2)
    q: np.ndarray  # int8 [rows, cols]

    @property
    def shape(self) -> tuple[int, int]:
        """(rows, cols)."""
        return int(self.q.shape[0]), int(self.q.shape[1])

    @property
    def group_size(self) -> int:
        """Columns per multiplier group (0 for the per-row course scheme)."""
        return 0 if self.mult is None else self.q.shape[1] // self.mult.shape[1]


def _row_chunks(rows: int, cols: int):
    """Slices of rows that hold about _CHUNK_ELEMS elements each."""
    step = max(1, _CHUNK_ELEMS // max(cols, 1))
    for start in range(0, rows, step):
        yield slice(start, min(rows, start + step))


def _check_matrix(w: np.ndarray) -> np.ndarray:
    """w as a float32 matrix; ValueError when it is not 2-D or holds NaN or infinity."""
    w = np.asarray(w)
    if w.ndim != 2:
        raise ValueError(f"quantise: expected a 2-D matrix, got shape {w.shape}")
    if not np.all(np.isfinite(w)):
        raise ValueError("quantise: matrix contains NaN or infinity")
    return w.astype(np.float32, copy=False)


def _row_scales(amax: np.ndarray) -> np.ndarray:
    """fp32 row scales max|W|/127, 1.0 for an all-zero row."""
    scales = (amax / np.float32(127.0)).astype(np.float32)
    scales[amax == 0] = 1.0
    return scales


def quantize_rows(w: np.ndarray) -> QMat:
    """Course scheme: one fp32 scale per row, int8 values (round half to even)."""
    w = _check_matrix(w)
    rows, cols = w.shape
    scales = np.empty(rows, np.float32)
    q = np.empty((rows, cols), np.int8)
    for sl in _row_chunks(rows, cols):
        blk = w[sl]
        s = _row_scales(np.abs(blk).max(axis=1) if cols else np.zeros(blk.shape[0], np.float32))
        scales[sl] = s
        q[sl] = np.clip(np.rint(blk / s[:, None]), -127, 127).astype(np.int8)
    return QMat(scales=scales, mult=None, q=q)


def quantize_groups(w: np.ndarray, group: int = GROUP_SIZE) -> QMat:
    """Our scheme (version 3): fp32 row scale, u16 group multipliers, int8 values."""
    w = _check_matrix(w)
    rows, cols = w.shape
    if group <= 0 or cols % group:
        raise ValueError(f"quantise: cols {cols} is not a multiple of the group size {group}")
    ng = cols // group
    scales = np.empty(rows, np.float32)
    mult = np.empty((rows, ng), np.uint16)
    q = np.empty((rows, cols), np.int8)
    for sl in _row_chunks(rows, cols):
        blk = w[sl].astype(np.float64)
        gmax = np.abs(blk).reshape(-1, ng, group).max(axis=2)  # [r, ng]
        amax = gmax.max(axis=1)  # [r]
        ws = _row_scales(amax.astype(np.float32))
        safe = np.where(amax == 0, 1.0, amax)
        m = np.ceil(gmax / safe[:, None] * 32768.0)
        m = np.clip(m, 1, 32768)
        gscale = ws.astype(np.float64)[:, None] * m / 32768.0  # [r, ng]
        vals = np.rint(blk.reshape(-1, ng, group) / gscale[:, :, None])
        scales[sl] = ws
        mult[sl] = m.astype(np.uint16)
        q[sl] = np.clip(vals, -127, 127).reshape(-1, cols).astype(np.int8)
    return QMat(scales=scales, mult=mult, q=q)


def quantize(w: np.ndarray, version: int) -> QMat:
    """The scheme that CFG version ``version`` stores."""
    return quantize_groups(w) if version >= 3 else quantize_rows(w)


def group_scales(m: QMat) -> np.ndarray:
    """float64 [rows, cols]: the scale each stored int8 value is multiplied by."""
    rows, cols = m.shape
    s = m.scales.astype(np.float64)[:, None]
    if m.mult is None:
        return np.broadcast_to(s, (rows, cols))
    gs = s * m.mult.astype(np.float64) / 32768.0
    return np.repeat(gs, m.group_size, axis=1)


def dequantize(m: QMat) -> np.ndarray:
    """float32 [rows, cols]: the weights the quantised matrix stands for."""
    return (group_scales(m) * m.q.astype(np.float64)).astype(np.float32)


def max_error(w: np.ndarray, m: QMat) -> float:
    """Largest |W - dequantize(m)| over the matrix (what the exporter reports)."""
    worst = 0.0
    rows, cols = m.shape
    w = np.asarray(w, np.float32)
    for sl in _row_chunks(rows, cols):
        part = QMat(m.scales[sl], None if m.mult is None else m.mult[sl], m.q[sl])
        d = np.abs(w[sl].astype(np.float64) - group_scales(part) * part.q)
        if d.size:
            worst = max(worst, float(d.max()))
    return worst
