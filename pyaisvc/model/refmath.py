"""The numeric kernels of the reference forward pass (docs/ARITHMETIC.md).

Everything here is the exact arithmetic the guest's C runtime repeats: our own
exp/log polynomials (the guest has no libm), the tables of silu and softmax's
exp with integer interpolation, sequential float reductions, activation
quantisation in groups of 32 with fixed-point group multipliers, and the exact
integer matrix products. All functions are vectorised over leading
axes, but every float operation is elementwise, so a batch of vectors gives
bit for bit what one vector at a time gives.

Integer dot products are computed with float64 BLAS: every product and every
partial sum is an integer below 2**53, so any summation order is exact. The
bounds are checked in the comments where each product is formed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

GS = 32  # activation group size (docs/ARITHMETIC.md "Activation quantisation")
MULT_ONE = 32768.0  # fixed-point 1.0 of a group multiplier (m_g, wm[r][g])

LN2_HI = 6.93147180369123816490e-01
LN2_LO = 1.90821492927058770002e-10
LOG2E = 1.44269504088896338700e00
SQRT_HALF = 0.70710678118654752440

# c_k = 1/k!, k = 0..11, as correctly rounded doubles (the C runtime uses these literals).
EXP_COEFFS = (
    1.00000000000000000000e00,
    1.00000000000000000000e00,
    5.00000000000000000000e-01,
    1.66666666666666657415e-01,
    4.16666666666666643537e-02,
    8.33333333333333321769e-03,
    1.38888888888888894189e-03,
    1.98412698412698412526e-04,
    2.48015873015873015658e-05,
    2.75573192239858925110e-06,
    2.75573192239858882758e-07,
    2.50521083854417202239e-08,
)
# d_k = 1/(2k+1), k = 0..10 (log(m) = 2*atanh(s) = 2*s*sum_k d_k s^(2k)).
LOG_COEFFS = (
    1.00000000000000000000e00,
    3.33333333333333314830e-01,
    2.00000000000000011102e-01,
    1.42857142857142849213e-01,
    1.11111111111111104943e-01,
    9.09090909090909116141e-02,
    7.69230769230769273470e-02,
    6.66666666666666657415e-02,
    5.88235294117647050660e-02,
    5.26315789473684181310e-02,
    4.76190476190476164042e-02,
)


def exp(x: np.ndarray | float) -> np.ndarray:
    """Our exp: range reduction by ln2 (hi/lo), degree-11 Taylor polynomial, exact 2^n."""
    x = np.asarray(x, dtype=np.float64)
    # Inputs below -708 give 0.0 below; clamping them too keeps the polynomial finite.
    xc = np.clip(x, -708.0, 709.0)
    n = np.rint(xc * LOG2E)
    r = (xc - n * LN2_HI) - n * LN2_LO
    p = np.full_like(r, EXP_COEFFS[11])
    for k in range(10, -1, -1):
        p = EXP_COEFFS[k] + r * p
    out = np.ldexp(p, n.astype(np.int64))
    return np.where(x < -708.0, 0.0, out)


def log(y: np.ndarray | float) -> np.ndarray:
    """Our log for y > 0: y = m 2^e with m in [sqrt(1/2), sqrt(2)), atanh series in s."""
    y = np.asarray(y, dtype=np.float64)
    m, e = np.frexp(y)
    low = m < SQRT_HALF
    m = np.where(low, m * 2.0, m)
    e = np.where(low, e - 1, e).astype(np.float64)
    f = m - 1.0
    s = f / (2.0 + f)
    z = s * s
    t = np.full_like(z, LOG_COEFFS[10])
    for k in range(9, -1, -1):
        t = LOG_COEFFS[k] + z * t
    return e * LN2_HI + ((2.0 * s) * t + e * LN2_LO)


def sigmoid(x: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-x)) with the exact exp above."""
    return 1.0 / (1.0 + exp(-x))


# The tables of silu's sigmoid and of softmax's exp: rint(f(k / 2^bits - 16) * 2^30) for
# k = 0..4096 at 2^bits steps per unit, plus a pad entry equal to the last. Built with our exact
# functions, as the C runtime builds them at load time (docs/ARITHMETIC.md "Tabulated").
TABLE_N = 4096
TABLE_LO = 16
SIG_STEP_BITS = 7  # sigmoid on [-16, 16]
SMEXP_STEP_BITS = 8  # exp on [-16, 0]
Q30 = 1073741824.0


def _table(f: Callable[[np.ndarray], np.ndarray], step_bits: int) -> np.ndarray:
    """The table of f at k / 2^step_bits - TABLE_LO for k = 0..TABLE_N, in units of 2^-30, plus
    a pad entry equal to the last."""
    k = np.arange(TABLE_N + 1, dtype=np.float64)
    t = np.rint(f(k / float(1 << step_bits) - TABLE_LO) * Q30).astype(np.int64)
    return np.append(t, t[-1])


SIG_TABLE = _table(sigmoid, SIG_STEP_BITS)
SMEXP_TABLE = _table(exp, SMEXP_STEP_BITS)


def _table_at(t: np.ndarray, x: np.ndarray, bits: int, hi: int) -> np.ndarray:
    """The Q30 value of table t at x (clamped to [-16, hi]), interpolated linearly in int64."""
    fb = bits + 32
    # trunc(x * 2^fb) of x clamped to +-32: exact, a power-of-two product.
    v = np.trunc(np.clip(x, -32.0, 32.0) * float(1 << fb)).astype(np.int64)
    w = np.clip(v, -(TABLE_LO << fb), hi << fb) + (TABLE_LO << fb)
    i = w >> 32
    f = w & 0xFFFFFFFF
    return t[i] + (((t[i + 1] - t[i]) * f) >> 32)


def silu(x: np.ndarray) -> np.ndarray:
    """x * (s * 2^-30), s the Q30 sigmoid interpolated in SIG_TABLE."""
    x = np.asarray(x, dtype=np.float64)
    s = _table_at(SIG_TABLE, x, SIG_STEP_BITS, TABLE_LO)
    return x * (s.astype(np.float64) * (1.0 / Q30))


def softmax_exp(x: np.ndarray) -> np.ndarray:
    """exp(x) for softmax's x <= 0, interpolated in SMEXP_TABLE (exp(0) = 1 exactly)."""
    x = np.asarray(x, dtype=np.float64)
    return _table_at(SMEXP_TABLE, x, SMEXP_STEP_BITS, 0).astype(np.float64) * (1.0 / Q30)


def softplus(x: np.ndarray) -> np.ndarray:
    """log(1 + exp(x)) with the exact functions above, and x itself above 20."""
    # The polynomial is only evaluated where it is used, so exp never sees a huge x.
    x = np.asarray(x, dtype=np.float64)
    small = np.minimum(x, 20.0)
    return np.where(x > 20.0, x, log(1.0 + exp(small)))


def seqsum(a: np.ndarray, axis: int = -1) -> np.ndarray:
    """Sequential float sum along ``axis`` (index 0 first), as the C loop does it.

    np.cumsum is an accumulate: out[i] = out[i-1] + a[i], strictly in order.
    """
    c = np.cumsum(a, axis=axis)
    return np.take(c, -1, axis=axis)


def rmsnorm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    """y = (x * r) * w, r = 1 / sqrt(ss / n + eps), ss the sequential sum of x*x (last axis)."""
    n = x.shape[-1]
    ss = seqsum(x * x)
    r = 1.0 / np.sqrt(ss / float(n) + eps)
    return (x * r[..., None]) * np.asarray(w, dtype=np.float64)


@dataclass
class QVec:
    """Quantised activations, one vector per row: value = s_g * q_k (docs "Activation ...")."""

    q: np.ndarray  # int8 [..., n]
    m: np.ndarray  # int64 [..., n / GS], group multipliers in [1, 32768] (0 for a zero vector)
    xs: np.ndarray  # float64 [...], amax / 127

    def group_scales(self) -> np.ndarray:
        """float64 [..., n / GS]: s_g = (xs * m_g) / 32768."""
        return (self.xs[..., None] * self.m.astype(np.float64)) / MULT_ONE

    def scaled_halves(self) -> tuple[np.ndarray, np.ndarray]:
        """float64 (hi, lo) with m_g * q_k = 256 * hi_k + lo_k, hi = (m>>8) q, lo = (m&255) q.

        |hi| <= 128 * 127, |lo| <= 255 * 127: a product with a 22-bit integer
        (wm * qw or m * q) summed over up to 2**16 terms stays below 2**53.
        """
        m = np.repeat(self.m, GS, axis=-1)
        q = self.q.astype(np.int64)
        return ((m >> 8) * q).astype(np.float64), ((m & 255) * q).astype(np.float64)


def quantize(x: np.ndarray) -> QVec:
    """Quantise each vector along the last axis in groups of 32 (docs "Activation quantisation")."""
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[-1]
    if n % GS:
        raise ValueError(f"quantize: length {n} is not a multiple of {GS}")
    ax = np.abs(x)
    gmax = ax.reshape(*x.shape[:-1], n // GS, GS).max(axis=-1)
    amax = gmax.max(axis=-1)
    zero = amax == 0.0
    safe = np.where(zero, 1.0, amax)
    xs = np.where(zero, 0.0, amax / 127.0)
    m = np.ceil((gmax * MULT_ONE) / safe[..., None])
    m = np.clip(m, 1.0, MULT_ONE)
    m = np.where(zero[..., None], 0.0, m)
    s = (xs[..., None] * m) / MULT_ONE
    inv = 1.0 / np.where(s == 0.0, 1.0, s)
    q = np.clip(np.rint(x * np.repeat(inv, GS, axis=-1)), -127.0, 127.0)
    q = np.where(zero[..., None], 0.0, q)
    return QVec(q=q.astype(np.int8), m=m.astype(np.int64), xs=xs)


def dequantize(v: QVec) -> np.ndarray:
    """float64: the values a quantised vector stands for (s_g * q_k)."""
    return np.repeat(v.group_scales(), GS, axis=-1) * v.q.astype(np.float64)


def int_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Exact integer a @ b.T from float64 arrays of integers whose partial sums are < 2**53."""
    return np.rint(a @ b.T).astype(np.int64)
