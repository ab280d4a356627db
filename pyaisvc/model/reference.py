"""The numpy reference forward pass: the arithmetic the guest runtime must repeat.

docs/ARITHMETIC.md is the contract; this module implements it step for step
(int8 weights, activations quantised in groups of 32, exact integer dot
products, float64 elsewhere with sequential reductions, our own exp/log, an
int8 K/V cache with quantised attention, the Gated DeltaNet recurrence in
float64). The guest prints exactly the token ids ``Reference.generate`` returns.

Speed: positions are processed as a batch (prefill) with float64 BLAS for the
integer products (exact, see refmath). Every float step is elementwise or a
sequential cumsum, so a batch gives bit for bit what one position at a time
gives; tests/test_reference.py checks this.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pyaisvc.errors import AisvcError
from pyaisvc.model.assets import Assets, Config, QMat
from pyaisvc.model.refmath import (
    GS,
    MULT_ONE,
    QVec,
    exp,
    int_matmul,
    quantize,
    rmsnorm,
    seqsum,
    sigmoid,
    silu,
    softmax_exp,
    softplus,
)
from pyaisvc.model.sampling import Sampler

ATT_W_MAX = 32767.0  # attention weights are re-quantised to [0, 32767] per value group
L2NORM_EPS = 1e-6  # Gated DeltaNet q/k l2norm (transformers' l2norm default)
_LOWMEM_PARAMS = 400_000_000  # above this many weights, keep float32 copies (see _Linear)
_LOWMEM_ROWS = 8192  # rows widened to float64 at a time in that case
_HEAD_CHUNK = 128  # positions per output-head product in logits_all
_XMAX = 127 * 32768  # largest |m_g * q_k| of a quantised activation
_EXACT = 2**53  # float64 represents every integer below this exactly


class ReferenceModelError(AisvcError):
    """The reference cannot run this request (for example: too many positions)."""


class _Linear:
    """One quantised weight matrix, prepared for exact products: y = W x (docs "Matrix-vector").

    ``w`` holds the integers the product needs, as float64 (exact):
    v1/v2 ``qw[r][k]``, v3 ``wm[r][g(k)] * qw[r][k]`` (|.| <= 32768 * 127 < 2**22).
    Large models keep float32 copies instead (also exact below 2**24) and widen
    them per call, trading speed for memory.
    """

    def __init__(self, m: QMat, lowmem: bool):
        """The quantised matrix m ready for exact products: its values (times the group
        multipliers for v3) as floats (float32 when lowmem), its row scales, and whether the
        activations must be split for the sums to stay exact."""
        self.rows, self.cols = int(m.q.shape[0]), int(m.q.shape[1])
        self.grouped = m.mult is not None
        self.ws = np.asarray(m.scales, dtype=np.float64)
        if self.grouped:
            mult = np.repeat(np.asarray(m.mult, dtype=np.int32), GS, axis=1)
            w = mult * np.asarray(m.q, dtype=np.int32)
        else:
            w = np.asarray(m.q)
        # One product x' . w' with x' = m_g q_k (|x'| <= 127 * 32768) is exact when
        # max_r sum_k |w'[r][k]| * 127 * 32768 < 2**53 (no partial sum can exceed
        # it). Otherwise the activations are split in two halves (refmath.QVec).
        l1 = int(np.abs(w).sum(axis=1, dtype=np.int64).max()) if w.size else 0
        self.split = l1 * _XMAX >= _EXACT
        self.w = w.astype(np.float32 if lowmem else np.float64)
        # T_r is in units of xs / 32768 (one fixed-point factor) or xs / 2**30 (two).
        self.shift = MULT_ONE * MULT_ONE if self.grouped else MULT_ONE

    def totals(self, x: QVec) -> np.ndarray:
        """int64 [N, rows]: T_r = sum_g (wm[r][g] *) m_g * acc[r][g] for each of the N vectors."""
        hi, lo = x.scaled_halves()
        n = hi.shape[0]
        xs = hi * 256.0 + lo if not self.split else np.concatenate([hi, lo])
        if self.w.dtype == np.float64:
            t = int_matmul(xs, self.w)
        else:  # float32 copies: widen a block of rows at a time
            t = np.empty((xs.shape[0], self.rows), dtype=np.int64)
            for r in range(0, self.rows, _LOWMEM_ROWS):
                t[:, r:r + _LOWMEM_ROWS] = int_matmul(xs, self.w[r:r + _LOWMEM_ROWS]
                                                      .astype(np.float64))
        if not self.split:
            return t  # exact: see __init__
        # (m>>8) q and (m&255) q against wm * qw: each sum below 2**53 (refmath.QVec).
        return t[:n] * 256 + t[n:]

    def __call__(self, x: QVec) -> np.ndarray:
        """float64 [N, rows]: y_r = ((double)T_r * (xs / shift)) * ws_r."""
        t = self.totals(x).astype(np.float64)
        return (t * (x.xs / self.shift)[:, None]) * self.ws[None, :]


def _embed_rows(m: QMat, tokens: np.ndarray) -> np.ndarray:
    """Rows of EMB dequantised to float64 (docs "Embedding lookup")."""
    ws = np.asarray(m.scales, dtype=np.float64)[tokens][:, None]
    q = np.asarray(m.q)[tokens].astype(np.float64)
    if m.mult is None:
        return ws * q
    s = (ws * np.asarray(m.mult)[tokens].astype(np.float64)) / MULT_ONE
    return np.repeat(s, GS, axis=1) * q


@dataclass
class _KVCache:
    """One full-attention layer's int8 K/V cache, kept in the forms the products use."""

    k: np.ndarray  # float64 (kv_head, pos, head_dim): m_g * q_k (exact integers)
    kxs: np.ndarray  # float64 (kv_head, pos): xs of each key
    v: np.ndarray  # float64 (kv_head, pos, head_dim): q_k (int8 values)
    vs: np.ndarray  # float64 (kv_head, pos, head_dim / 32): group scales s_g


@dataclass
class _DeltaState:
    """One Gated DeltaNet layer's state."""

    conv: np.ndarray  # float64 (kernel - 1, conv_dim): the last in_proj_qkv outputs, oldest first
    s: np.ndarray  # float64 (v_heads, k_dim, v_dim): the recurrent state S


class Reference:
    """The reference model over loaded assets: greedy generation and teacher-forced logits."""

    def __init__(self, assets: Assets, lowmem: bool | None = None):
        """The forward pass over assets; lowmem (float32 weight copies) by default for models
        above _LOWMEM_PARAMS weights."""
        self.assets = assets
        self.cfg: Config = assets.config
        c = self.cfg
        if lowmem is None:
            lowmem = _count_params(assets) > _LOWMEM_PARAMS
        self.eps = float(np.float32(c.rms_eps))
        self.head = _Linear(assets.emb, lowmem)
        self.final_norm = np.asarray(assets.final_norm, dtype=np.float64)
        self.cos = np.asarray(assets.rope_cos, dtype=np.float64)
        self.sin = np.asarray(assets.rope_sin, dtype=np.float64)
        self.layers: list[dict] = []
        for layer in assets.layers:
            p: dict = {"kind": layer.kind}
            for name, t in layer.t.items():
                if isinstance(t, QMat):
                    p[name] = _Linear(t, lowmem)
                else:
                    p[name] = np.asarray(t, dtype=np.float64)
            self.layers.append(p)
        self.pos = 0
        self.state: list[_KVCache | _DeltaState] = []
        self.reset()

    # ------------------------------------------------------------ public

    def reset(self) -> None:
        """Forget all positions (empty caches, zero DeltaNet states)."""
        c = self.cfg
        self.pos = 0
        self.state = []
        for p in self.layers:
            if p["kind"] == 0:
                shape = (c.n_kv_heads, c.runtime_seq_len, c.head_dim)
                g = c.head_dim // GS
                self.state.append(_KVCache(np.zeros(shape), np.zeros(shape[:2]), np.zeros(shape),
                                           np.zeros((*shape[:2], g))))
            else:
                kern = c.linear_conv_kernel
                s = (c.linear_num_v_heads, c.linear_key_head_dim, c.linear_value_head_dim)
                self.state.append(_DeltaState(np.zeros((kern - 1, c.conv_dim)), np.zeros(s)))

    def generate(self, prompt: list[int], n_new: int,
                 stop: set[int] | None = None, sampler: Sampler | None = None) -> list[int]:
        """Continuation: prefill the prompt as one batch, then decode one position at a time.

        Logits are computed only at the last prompt position and at each decoded
        position; the next token is the first index of the maximum (greedy), or
        ``sampler``'s choice (the guest's --temp/--top-k/--top-p/--seed; its
        generator restarts from the seed here, as the guest's does per request).
        Generation stops early after a token in ``stop`` (which is included).
        """
        if not prompt:
            raise ReferenceModelError("generate: the prompt is empty")
        if n_new <= 0:
            return []
        self._check_room(len(prompt) + n_new - 1)
        self.reset()
        logits = self.forward(prompt, logits="last")
        out: list[int] = []
        if sampler is not None:
            sampler.reset()
        while True:
            tok = sampler.choose(logits[-1]) if sampler else int(np.argmax(logits[-1]))
            out.append(tok)
            if len(out) == n_new or (stop is not None and tok in stop):
                return out
            logits = self.forward([tok], logits="last")

    def logits_all(self, tokens: list[int], batch: int = 0) -> np.ndarray:
        """float64 [T, vocab]: teacher-forced logits at every position.

        ``batch`` positions go through the layers together (0: all at once);
        the result does not depend on it, bit for bit.
        """
        self._check_room(len(tokens))
        self.reset()
        step = batch if batch > 0 else max(1, len(tokens))
        parts = [self.forward(tokens[i:i + step], logits="all")
                 for i in range(0, len(tokens), step)]
        return np.concatenate(parts)

    def forward(self, tokens: list[int], logits: str = "last") -> np.ndarray:
        """Run ``tokens`` at the next positions; logits at the last one ("last") or all ("all")."""
        self._check_room(self.pos + len(tokens))
        ids = np.asarray(tokens, dtype=np.int64)
        if ids.ndim != 1 or ids.size == 0:
            raise ReferenceModelError("forward: expected a non-empty list of token ids")
        if ids.min() < 0 or ids.max() >= self.cfg.vocab_size:
            raise ReferenceModelError(
                f"forward: token id out of range 0..{self.cfg.vocab_size - 1}")
        x = _embed_rows(self.assets.emb, ids)
        for p, st in zip(self.layers, self.state, strict=True):
            if isinstance(st, _KVCache):
                x = self._attention(p, st, x)
            else:
                x = self._deltanet(p, st, x)
            x = self._mlp(p, x)
        self.pos += len(ids)
        if logits == "last":
            x = x[-1:]
        return np.concatenate([self._head(x[i:i + _HEAD_CHUNK])
                               for i in range(0, x.shape[0], _HEAD_CHUNK)])

    # ------------------------------------------------------------ blocks

    def _check_room(self, n_positions: int) -> None:
        """ReferenceModelError when n_positions exceed the model's runtime_seq_len."""
        limit = self.cfg.runtime_seq_len
        if n_positions > limit:
            raise ReferenceModelError(f"{n_positions} positions exceed runtime_seq_len {limit} "
                                 "(CFG.BIN); export with a larger --runtime-seq-len")

    def _head(self, x: np.ndarray) -> np.ndarray:
        """Final RMSNorm, quantise, logits = EMB xn."""
        return self.head(quantize(rmsnorm(x, self.final_norm, self.eps)))

    def _mlp(self, p: dict, x: np.ndarray) -> np.ndarray:
        """The MLP block with its residual: x + down(silu(gate(n)) * up(n)), n the normed and
        quantised x."""
        xq = quantize(rmsnorm(x, p["post_norm"], self.eps))
        h = silu(p["gate_proj"](xq)) * p["up_proj"](xq)
        return x + p["down_proj"](quantize(h))

    def _rope(self, x: np.ndarray, pos: np.ndarray) -> np.ndarray:
        """Rotate-half RoPE on the first rotary_dim dims of each head; x is (N, heads, head_dim)."""
        half = self.cfg.rotary_dim // 2
        c = self.cos[pos][:, None, :]
        s = self.sin[pos][:, None, :]
        a = x[..., :half]
        b = x[..., half:2 * half]
        out = x.copy()
        out[..., :half] = a * c - b * s
        out[..., half:2 * half] = b * c + a * s
        return out

    def _attention(self, p: dict, st: _KVCache, x: np.ndarray) -> np.ndarray:
        """Full attention over positions self.pos .. self.pos + N - 1 (docs "Full attention")."""
        c = self.cfg
        n, hd, nh, nkv = x.shape[0], c.head_dim, c.n_heads, c.n_kv_heads
        pos = np.arange(self.pos, self.pos + n)
        xq = quantize(rmsnorm(x, p["input_norm"], self.eps))
        q = p["q_proj"](xq)
        gate = None
        if c.has_gate:
            qg = q.reshape(n, nh, 2, hd)
            q, gate = qg[:, :, 0, :], qg[:, :, 1, :].reshape(n, nh * hd)
        else:
            q = q.reshape(n, nh, hd)
        k = p["k_proj"](xq).reshape(n, nkv, hd)
        v = p["v_proj"](xq).reshape(n, nkv, hd)
        if c.has_qk_norm:
            q = rmsnorm(q, p["q_norm"], self.eps)
            k = rmsnorm(k, p["k_norm"], self.eps)
        q = self._rope(q, pos)
        k = self._rope(k, pos)
        self._store_kv(st, quantize(k), quantize(v), pos)
        out = self._attend(st, quantize(q), pos)
        if gate is not None:
            out = out * sigmoid(gate)
        return x + p["o_proj"](quantize(out))

    def _store_kv(self, st: _KVCache, kq: QVec, vq: QVec, pos: np.ndarray) -> None:
        """Write the quantised keys/values of positions ``pos`` ((N, kv_head, ...) arrays)."""
        m = np.repeat(kq.m, GS, axis=-1).astype(np.float64)
        st.k[:, pos] = (m * kq.q).transpose(1, 0, 2)
        st.kxs[:, pos] = kq.xs.T
        st.v[:, pos] = vq.q.astype(np.float64).transpose(1, 0, 2)
        st.vs[:, pos] = vq.group_scales().transpose(1, 0, 2)

    def _attend(self, st: _KVCache, qq: QVec, pos: np.ndarray) -> np.ndarray:
        """Scores, softmax and values for each query (N, head) against cache 0..pos (steps 5-7)."""
        c = self.cfg
        n, nh, hd = qq.q.shape
        rep = nh // c.n_kv_heads
        t_len = int(pos[-1]) + 1
        valid = np.arange(t_len)[None, :] <= pos[:, None]  # (N, T)
        a = (qq.xs * (1.0 / np.sqrt(float(hd)))) / (MULT_ONE * MULT_ONE)  # (N, heads)
        hi, lo = qq.scaled_halves()
        out = np.empty((n, nh, hd))
        for kvh in range(c.n_kv_heads):
            hs = slice(kvh * rep, (kvh + 1) * rep)
            kmat = st.k[kvh, :t_len]
            # D_t = sum_g (mq_g mk_g) acc_g = 256 * hi.K' + lo.K' (exact, see refmath).
            qhl = np.concatenate([hi[:, hs].reshape(n * rep, hd), lo[:, hs].reshape(n * rep, hd)])
            d2 = int_matmul(qhl, kmat)
            d = (d2[:n * rep] * 256 + d2[n * rep:]).reshape(n, rep, t_len)
            score = (d.astype(np.float64) * st.kxs[kvh, :t_len]) * a[:, hs, None]
            out[:, hs] = self._softmax_values(st, kvh, score, valid, t_len)
        return out.reshape(n, nh * hd)

    def _softmax_values(self, st: _KVCache, kvh: int, score: np.ndarray, valid: np.ndarray,
                        t_len: int) -> np.ndarray:
        """Steps 6-7 for the (N, rep, T) scores of one kv head's query heads -> (N, rep, hd)."""
        vmask = valid[:, None, :]
        mx = np.where(vmask, score, -np.inf).max(axis=-1, keepdims=True)
        e = np.where(vmask, softmax_exp(np.where(vmask, score - mx, 0.0)), 0.0)
        inv = 1.0 / seqsum(e)  # trailing masked zeros add exactly 0.0
        sv = st.vs[kvh, :t_len]  # (T, G)
        w = e[..., None] * sv  # (N, rep, T, G)
        wmax = w.max(axis=2)  # (N, rep, G)
        nz = wmax > 0.0
        cg = ATT_W_MAX / np.where(nz, wmax, 1.0)
        wq = np.rint(w * cg[:, :, None, :])  # integers in [0, 32767]
        vq = st.v[kvh, :t_len]  # (T, hd)
        n, rep = score.shape[:2]
        out = np.empty((n, rep, vq.shape[1]))
        for g in range(vq.shape[1] // GS):
            cols = slice(g * GS, (g + 1) * GS)
            acc = int_matmul(wq[..., g].reshape(n * rep, t_len), vq[:, cols].T)
            scale = np.where(nz[..., g], wmax[..., g] / ATT_W_MAX, 0.0)
            out[..., cols] = (acc.reshape(n, rep, GS).astype(np.float64)
                              * scale[..., None]) * inv[..., None]
        return out

    def _deltanet(self, p: dict, st: _DeltaState, x: np.ndarray) -> np.ndarray:
        """Gated DeltaNet (Qwen layer kind 1) over N positions (docs "Gated DeltaNet")."""
        c = self.cfg
        n = x.shape[0]
        kh, kd = c.linear_num_k_heads, c.linear_key_head_dim
        vh, vd = c.linear_num_v_heads, c.linear_value_head_dim
        xq = quantize(rmsnorm(x, p["input_norm"], self.eps))
        mixed = p["in_proj_qkv"](xq)  # (N, conv_dim)
        z = p["in_proj_z"](xq).reshape(n, vh, vd)
        a = p["in_proj_a"](xq)  # (N, vh)
        b = p["in_proj_b"](xq)
        y = silu(self._conv(p["conv_weight"], st, mixed))
        q = y[:, :kh * kd].reshape(n, kh, kd)
        k = y[:, kh * kd:2 * kh * kd].reshape(n, kh, kd)
        v = y[:, 2 * kh * kd:].reshape(n, vh, vd)
        q = _l2norm(q) * (1.0 / np.sqrt(float(kd)))
        k = _l2norm(k)
        heads = np.arange(vh) // (vh // kh)  # value head h reads key head h / (vh / kh)
        q, k = q[:, heads], k[:, heads]  # (N, vh, kd)
        beta = sigmoid(b)
        decay = exp(-(exp(p["A_log"]) * softplus(a + p["dt_bias"])))
        o = np.empty((n, vh, vd))
        s = st.s
        for i in range(n):
            s = s * decay[i][:, None, None]
            kv_mem = seqsum(s * k[i][:, :, None], axis=1)  # (vh, vd), sum over k_dim
            delta = (v[i] - kv_mem) * beta[i][:, None]
            s = s + k[i][:, :, None] * delta[:, None, :]
            o[i] = seqsum(s * q[i][:, :, None], axis=1)
        st.s = s
        o = rmsnorm(o, p["norm"], self.eps) * silu(z)
        return x + p["out_proj"](quantize(o.reshape(n, vh * vd)))

    def _conv(self, w: np.ndarray, st: _DeltaState, mixed: np.ndarray) -> np.ndarray:
        """Causal depthwise conv: y_t[c] = sum_j w[c][j] * u_{t-K+1+j}[c], j = 0 (oldest) first."""
        kern = w.shape[1]
        n = mixed.shape[0]
        u = np.concatenate([st.conv, mixed])  # (K - 1 + N, conv_dim)
        acc = np.zeros_like(mixed)
        for j in range(kern):
            acc = acc + w[:, j] * u[j:j + n]
        st.conv = u[u.shape[0] - (kern - 1):].copy()
        return acc


def _l2norm(x: np.ndarray) -> np.ndarray:
    """x * (1 / sqrt(ss + 1e-6)), ss the sequential sum of x*x over the last axis."""
    r = 1.0 / np.sqrt(seqsum(x * x) + L2NORM_EPS)
    return x * r[..., None]


def _count_params(a: Assets) -> int:
    """The model's quantised weights: the embedding's and every layer's matrices' values."""
    n = a.emb.q.size
    for layer in a.layers:
        n += sum(t.q.size for t in layer.t.values() if isinstance(t, QMat))
    return int(n)
