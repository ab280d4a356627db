// Numeric kernels of the LLM runtime, written to docs/ARITHMETIC.md.
//
// Under QEMU's TCG a float operation costs 10-30 ns and an integer one
// 0.2-0.4 ns (docs/PERF_NOTES.md, fact 1, "float is expensive, integers are cheap"),
// so every O(dim^2) loop here is int8 x int8 with integer accumulation: 8
// bytes per 64-bit load, int32 sums per group of 32, int64 sums of the
// group sums times fixed-point multipliers. Floats appear once per row or
// per group. The matmuls take nearly all of a token's time, and under TCG
// they cost by the instruction (fact 2, "instructions count, bytes do
// not"), so they form two or three products with one 64-bit multiply
// (docs/PERF_NOTES.md, fact 20, "two or three int8 products per multiply"):
// - the scalar kernels' weights are stored offset by 128 (u = w + 128, the
//   byte w ^ 0x80), so that a mask takes two of them from a word with no
//   sign extension; the sum of u_k q_k is corrected by 128 * sum q_k, which
//   the activation carries per group (qsum);
// - one position (matmul1): weight pairs u_j + u_{j+4} * 2^32 times
//   activation pairs q_{j+4} + q_j * 2^32 have the two products' sum in the
//   high half;
// - up to 8 positions (matmul8): one weight times a word holding three
//   positions' activations in 21-bit lanes.
// The sums are exact: every lane is bounded well inside its bits.
//
// The hot kernels live in the section .text.hot, which user/lib/user.ld starts
// on a page of its own: code that crosses a 4 KiB page boundary runs 3-5x
// slower under TCG, and the section is kept smaller than a page (checked by
// `make llm-check-hot`); the batched matmul has a page of its own. The two
// matmuls are compiled without the first instruction-scheduling pass: it
// hoists the loads of the unrolled loops and spills registers, which made
// them 1.2x (decode) and 1.8x (prefill) slower under QEMU.

#include "user/lib/user.h"
#include "user/llm/kernels.h"
#include "user/llm/kernels_vec.h"

#define HOT __attribute__((section(".text.hot")))
// The batched matmul is too large to share the page: it has one of its own.
#define HOT_BATCH __attribute__((section(".text.hot.batch"), aligned(4096)))

// Byte j of the 64-bit word a, sign-extended: move it to the top, then
// shift it back down arithmetically.
#define SX(a, j) ((int64)((a) << (56 - 8 * (j))) >> 56)

static const double LN2_HI = 6.93147180369123816490e-01;
static const double LN2_LO = 1.90821492927058770002e-10;
static const double LOG2E = 1.44269504088896338700e+00;

// exp(x) = p(r) * 2^n with x = n*ln2 + r, |r| <= ln2/2, and p the Taylor
// polynomial of degree 11 (error below 1 ulp on that interval).
double
llm_exp(double x)
{
  // c_k = 1/k!, the double nearest to each.
  static const double c[12] = {
    1.0,
    1.0,
    0.5,
    1.0 / 6.0,
    1.0 / 24.0,
    1.0 / 120.0,
    1.0 / 720.0,
    1.0 / 5040.0,
    1.0 / 40320.0,
    1.0 / 362880.0,
    1.0 / 3628800.0,
    1.0 / 39916800.0,
  };
  if (x < -708.0)
    return 0.0;
  if (x > 709.0)
    x = 709.0;
  int64 n = llm_rint(x * LOG2E);
  double dn = (double)n;
  double r = (x - dn * LN2_HI) - dn * LN2_LO;
  double p = c[11];
  for (int k = 10; k >= 0; k--)
    p = c[k] + r * p;
  // 2^n built from its bits; n is in [-1021, 1023] here, a normal number.
  union {
    uint64 u;
    double d;
  } two_n = { .u = (uint64)(n + 1023) << 52 };
  return p * two_n.d;
}

// log(y) for y > 0: y = m * 2^e with m in [sqrt(1/2), sqrt(2)), then
// log(m) = 2 atanh(s) = 2s (1 + s^2/3 + s^4/5 + ...), s = (m-1)/(m+1).
double
llm_log(double y)
{
  static const double d[11] = {
    1.0,
    1.0 / 3.0,
    1.0 / 5.0,
    1.0 / 7.0,
    1.0 / 9.0,
    1.0 / 11.0,
    1.0 / 13.0,
    1.0 / 15.0,
    1.0 / 17.0,
    1.0 / 19.0,
    1.0 / 21.0,
  };
  union {
    uint64 u;
    double d;
  } b = { .d = y };
  int e = 0;
  if (((b.u >> 52) & 0x7ff) == 0) { // subnormal: scale into the normal range
    b.d = y * 18014398509481984.0;  // 2^54
    e = -54;
  }
  // frexp: m in [0.5, 1) and y = m * 2^e
  e += (int)((b.u >> 52) & 0x7ff) - 1022;
  b.u = (b.u & ~(0x7ffUL << 52)) | (1022UL << 52);
  double m = b.d;
  if (m < 0.70710678118654752440) {
    m = m * 2.0;
    e = e - 1;
  }
  double f = m - 1.0;
  double s = f / (2.0 + f);
  double z = s * s;
  double t = d[10];
  for (int k = 9; k >= 0; k--)
    t = d[k] + z * t;
  double de = (double)e;
  return de * LN2_HI + ((2.0 * s) * t + de * LN2_LO);
}

double
llm_sigmoid(double x)
{
  return 1.0 / (1.0 + llm_exp(-x));
}

// Tables of silu's sigmoid and of softmax's exp, each rint(f(k / 2^bits
// - 16) * 2^30) for k = 0..TABLE_N at 2^bits steps per unit, plus a pad
// entry equal to the last so that the top of the range needs no branch.
#define TABLE_N         4096
#define TABLE_LO        16 // each table starts at -16
#define SIG_STEP_BITS   7  // sigmoid on [-16, 16]
#define SMEXP_STEP_BITS 8  // exp on [-16, 0]
static int32 sig_table[TABLE_N + 2], smexp_table[TABLE_N + 2];

// Fills t[0..TABLE_N] with f at TABLE_LO + k / 2^step_bits in Q30, and
// one more entry equal to the last (for the interpolation at the end).
static void
table_fill(int32 *t, double (*f)(double), int step_bits)
{
  for (int k = 0; k <= TABLE_N; k++)
    t[k] = (int32)llm_rint(f((double)k / (double)(1 << step_bits) - TABLE_LO) * 1073741824.0);
  t[TABLE_N + 1] = t[TABLE_N];
}

void
llm_math_init(void)
{
  table_fill(sig_table, llm_sigmoid, SIG_STEP_BITS);
  table_fill(smexp_table, llm_exp, SMEXP_STEP_BITS);
}

// w = trunc(x * 2^(bits + 32)) clamped to [-16, hi] in that fixed point,
// plus 16: the table index of x in its top bits and 32 fraction bits below.
// The product is taken from the bits of x alone (x = m * 2^(e - 1075),
// m the 53-bit significand): no float operation, each of which is a helper
// call under TCG.
static uint64
table_pos(double x, int bits, int64 hi)
{
  union {
    double d;
    uint64 u;
  } b = { .d = x };
  int fb = bits + 32, shift = 1075 - fb - (int)((b.u >> 52) & 0x7ff);
  uint64 m = (b.u & ((1UL << 52) - 1)) | (1UL << 52);
  int64 v, lo = (int64)TABLE_LO << fb;
  if (shift < 48 - fb) // |x| >= 32
    v = lo << 1;
  else if (shift > 63)
    v = 0;
  else
    v = (int64)(m >> shift);
  if (b.u >> 63)
    v = -v;
  if (v < -lo)
    v = -lo;
  if (v > hi << fb)
    v = hi << fb;
  return (uint64)(v + lo);
}

// The value at w of table t interpolated linearly, in Q30:
// t[i] + (((t[i+1] - t[i]) * f) >> 32) for i = w >> 32, f = w & (2^32 - 1).
static int64
table_at(const int32 *t, uint64 w)
{
  int i = (int)(w >> 32);
  int64 f = (int64)(w & 0xffffffffUL);
  return t[i] + (((int64)(t[i + 1] - t[i]) * f) >> 32);
}

// silu(x) = x * (s * 2^-30), s = sigmoid(x) in Q30 from sig_table: one
// conversion and two float products where the exact silu costs about 30
// float operations.
static inline double
silu(double x)
{
  int64 s = table_at(sig_table, table_pos(x, SIG_STEP_BITS, TABLE_LO));
  return x * ((double)s * (1.0 / 1073741824.0));
}

// (contracts in user/llm/kernels.h) A loop here rather than a call per
// element from its callers: those live on other pages, and QEMU chains
// no jump or return across pages (docs/PERF_NOTES.md, facts 4 and 37, "hot
// code in one 4 KiB page" and "a call or return across pages costs a lookup").
HOT void
llm_silu_mul(const double *x, const double *m, double *y, int n)
{
  if (m)
    for (int i = 0; i < n; i++)
      y[i] = silu(x[i]) * m[i];
  else
    for (int i = 0; i < n; i++)
      y[i] = silu(x[i]);
}

HOT double
llm_softmax_exps(double *x, int n, double mx)
{
  double sum = 0.0;
  for (int t = 0; t < n; t++) {
    x[t] = (double)table_at(smexp_table, table_pos(x[t] - mx, SMEXP_STEP_BITS, 0)) *
        (1.0 / 1073741824.0);
    sum = sum + x[t];
  }
  return sum;
}

double
llm_softplus(double x)
{
  if (x > 20.0)
    return x;
  return llm_log(1.0 + llm_exp(x));
}

// y = (x * r) * w with r = 1 / sqrt(ss / n + eps), ss = sum of x_i^2 taken
// in order from 0.0. y may be x.
HOT void
llm_rmsnorm(const double *x, const double *w, int n, double eps, double *y)
{
  double ss = 0.0;
  for (int i = 0; i < n; i++)
    ss = ss + x[i] * x[i];
  double r = 1.0 / llm_sqrt(ss / (double)n + eps);
  for (int i = 0; i < n; i++)
    y[i] = (x[i] * r) * w[i];
}

// max |x_i| over x[0..n) (x without NaNs). Compared as integers: with the
// sign bit cleared, the bits of two doubles order as their magnitudes do,
// and an integer compare is one instruction under TCG where a float
// compare is a helper call (docs/PERF_NOTES.md, fact 1, "float is expensive, integers are cheap").
static inline double
absmax(const double *x, int n)
{
  const uint64 *b = (const uint64 *)x;
  uint64 a = 0;
  for (int i = 0; i < n; i++) {
    uint64 v = b[i] & ~(1UL << 63);
    if (v > a)
      a = v;
  }
  union {
    uint64 u;
    double d;
  } m = { .u = a };
  return m.d;
}

// r clamped to [-127, 127].
static inline int8
clamp127(int64 r)
{
  return r > 127 ? 127 : (r < -127 ? -127 : r);
}

// One group of llm_quantize: x[0..32) into q and *m, for a vector whose
// absolute maximum is amax (xs = amax / 127). amax = 0 gives zeros. (The
// group's maximum is found here, not kept from the pass that found amax:
// 32 integer compares are cheaper than a scratch array.) Not inlined:
// its two callers share one copy, which keeps the hot page whole.
static HOT __attribute__((noinline)) void
quantize_group(const double *x, double amax, double xs, int8 *q, int32 *m)
{
  if (amax == 0.0) {
    memset(q, 0, LLM_GS);
    *m = 0;
    return;
  }
  double gmax = absmax(x, LLM_GS), v = (gmax * 32768.0) / amax;
  int64 mg = (int64)v; // ceil: truncate, then up if below
  if ((double)mg < v)
    mg++;
  if (mg < 1)
    mg = 1;
  if (mg > 32768)
    mg = 32768;
  *m = (int32)mg;
  double inv = 1.0 / ((xs * (double)mg) / 32768.0);
  // |x_i * inv| <= gmax * inv, about 127 unless amax is near the
  // smallest doubles (then inv may be huge or inf). Two loops: a branch
  // ends a translation block under QEMU.
  if (gmax * inv < LLM_RINT_SMALL_MAX)
    for (int i = 0; i < LLM_GS; i++)
      q[i] = clamp127(llm_rint_small(x[i] * inv));
  else
    for (int i = 0; i < LLM_GS; i++)
      q[i] = clamp127(llm_rint(x[i] * inv));
}

// Quantise x[n] in groups of 32: xs = amax/127, group multipliers
// m_g = clamp(ceil(amax_g * 32768 / amax), 1, 32768) stored as int32,
// s_g = xs * m_g / 32768 and q_i = clamp(rint(x_i / s_g), -127, 127).
// An all-zero vector gives q = 0, m = 0, xs = 0.
HOT void
llm_quantize(const double *x, int n, int8 *q, int32 *m, double *xs)
{
  double amax = absmax(x, n);
  *xs = amax / 127.0;
  for (int g = 0; g < n / LLM_GS; g++)
    quantize_group(x + g * LLM_GS, amax, *xs, q + g * LLM_GS, &m[g]);
}

// (contracts in user/llm/kernels.h)
void
llm_qact_start(struct llm_qact *a, const double *x, int stride, int count)
{
  int n = a->n, ng = n / LLM_GS;
  a->count = count;
  for (int p = 0; p < count; p++) {
    a->amax[p] = absmax(x + p * stride, n);
    a->xs[p] = a->amax[p] / 127.0;
  }
  if (count == 1)
    return;
  for (int p = count; p < LLM_BATCH; p++) {
    memset(a->q + p * n, 0, n);
    memset(a->m + p * ng, 0, ng * sizeof(int32));
    memset(a->qsum + p * ng, 0, ng * sizeof(int32));
  }
}

HOT void
llm_qact_groups(struct llm_qact *a, const double *x, int stride, int g0, int g1)
{
  int n = a->n, ng = n / LLM_GS, count = a->count;
  for (int p = 0; p < count; p++)
    for (int g = g0; g < g1; g++) {
      int8 *q = a->q + p * n + g * LLM_GS;
      quantize_group(x + p * stride + g * LLM_GS, a->amax[p], a->xs[p], q, &a->m[p * ng + g]);
      int32 sum = 0;
      for (int i = 0; i < LLM_GS; i++)
        sum += q[i];
      a->qsum[p * ng + g] = 128 * sum;
      if (a->ys == 0)
        continue;
      int16 *y = a->ys + p * n + g * LLM_GS;
      for (int k = 0; k < LLM_GS; k += 4) {
        y[k] = q[k];
        y[k + 1] = q[k + 1] - 256 * q[k];
        y[k + 2] = q[k + 2] - 256 * q[k + 1];
        y[k + 3] = q[k + 3] - 256 * q[k + 2];
      }
    }
  if (count == 1) {
    for (int k = g0 * LLM_GS; k < g1 * LLM_GS; k += 8)
      for (int j = 0; j < 4; j++)
        a->pairs[k / 2 + j] = (int64)a->q[k + j + 4] + (int64)a->q[k + j] * 4294967296L;
    return;
  }
  for (int k = g0 * LLM_GS; k < g1 * LLM_GS; k++)
    for (int j = 0; j < LLM_PACKS; j++) {
      int64 v = 0;
      for (int l = 0; l < 3 && 3 * j + l < LLM_BATCH; l++)
        v += (int64)a->q[(3 * j + l) * n + k] * (1L << (21 * l));
      a->packs[k * LLM_PACKS + j] = v;
    }
}

void
llm_qact_fill(struct llm_qact *a, const double *x, int stride, int count)
{
  llm_qact_start(a, x, stride, count);
  llm_qact_groups(a, x, stride, 0, a->n / LLM_GS);
}

void
llm_qmat_offset(struct llm_qmat *m)
{
  uint64 *w = (uint64 *)(m->q + (uint64)m->vrows * m->cols);
  uint64 words = (uint64)(m->rows - m->vrows) * m->cols / 8;
  for (uint64 i = 0; i < words; i++)
    w[i] ^= 0x8080808080808080UL;
}

// The int32 dot product of 32 int8s: 4 loads of 8 bytes from each side.
static inline int64
dot32(const uint64 *w, const uint64 *x)
{
  int64 s = 0;
  for (int k = 0; k < 4; k++) {
    uint64 a = w[k], b = x[k];
    s += SX(a, 0) * SX(b, 0) + SX(a, 1) * SX(b, 1) + SX(a, 2) * SX(b, 2) + SX(a, 3) * SX(b, 3) +
        SX(a, 4) * SX(b, 4) + SX(a, 5) * SX(b, 5) + SX(a, 6) * SX(b, 6) + SX(a, 7) * SX(b, 7);
  }
  return s;
}

// Weight word w (8 offset weights u_0..u_7) as 4 pairs: pair j is
// u_j + u_{j+4} * 2^32. Times activation pair x_{j+4} + x_j * 2^32 it
// gives u_j x_{j+4} + (u_j x_j + u_{j+4} x_{j+4}) * 2^32 modulo 2^64:
// two products of the dot product in the high half, from one multiply
// (unsigned: the true product has bits beyond 2^64, dropped).
#define PAIR_MASK   0x000000ff000000ffUL
#define WPAIR(w, j) (((w) >> (8 * (j))) & PAIR_MASK)
#define MAC8(s, w, X) \
  s += WPAIR(w, 0) * X[0] + WPAIR(w, 1) * X[1] + WPAIR(w, 2) * X[2] + WPAIR(w, 3) * X[3]

// The offset dot product (sum of u_k q_k) of one group from its pair sum
// s = L + D * 2^32 (|L| <= 16 * 255 * 127 < 2^31, |D| < 2^20).
#define PAIR_DOT(s) (((int64)(s) - (int64)(int32)(s)) >> 32)

// The int64 T of rows rr[0..4) (equal rows allowed) for one position,
// into t[0..4).
static inline void
rows4(const struct llm_qmat *w, const struct llm_qact *a, const int *rr, int64 *t)
{
  int ng = w->cols / LLM_GS;
  const uint64 *w0 = (const uint64 *)(w->q + (uint64)rr[0] * w->cols);
  const uint64 *w1 = (const uint64 *)(w->q + (uint64)rr[1] * w->cols);
  const uint64 *w2 = (const uint64 *)(w->q + (uint64)rr[2] * w->cols);
  const uint64 *w3 = (const uint64 *)(w->q + (uint64)rr[3] * w->cols);
  const uint64 *X = (const uint64 *)a->pairs;
  int64 t0 = 0, t1 = 0, t2 = 0, t3 = 0;
  for (int g = 0; g < ng; g++) {
    uint64 s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (int i = 4 * g; i < 4 * g + 4; i++, X += 4) {
      uint64 a0 = w0[i], a1 = w1[i], a2 = w2[i], a3 = w3[i];
      MAC8(s0, a0, X);
      MAC8(s1, a1, X);
      MAC8(s2, a2, X);
      MAC8(s3, a3, X);
    }
    int64 m = a->m[g], c = a->qsum[g];
    if (w->wm) {
      const uint16 *wm = w->wm + g;
      t0 += (int64)(wm[(uint64)rr[0] * ng] * m) * (PAIR_DOT(s0) - c);
      t1 += (int64)(wm[(uint64)rr[1] * ng] * m) * (PAIR_DOT(s1) - c);
      t2 += (int64)(wm[(uint64)rr[2] * ng] * m) * (PAIR_DOT(s2) - c);
      t3 += (int64)(wm[(uint64)rr[3] * ng] * m) * (PAIR_DOT(s3) - c);
    } else {
      t0 += m * (PAIR_DOT(s0) - c);
      t1 += m * (PAIR_DOT(s1) - c);
      t2 += m * (PAIR_DOT(s2) - c);
      t3 += m * (PAIR_DOT(s3) - c);
    }
  }
  t[0] = t0;
  t[1] = t1;
  t[2] = t2;
  t[3] = t3;
}

// One position, rows four at a time (the last ones repeated to fill a
// four): T_r = sum_g mult_g * dot_g with mult_g = m_g (v1/v2) or
// wm[r][g] * m_g (v3, at most 2^30) and dot_g = (sum of u_k q_k) - qsum_g
// the group's int8 dot product; y_r = ((double)T_r * f) * ws_r with
// f = xs/32768 or xs/2^30.
HOT __attribute__((optimize("no-schedule-insns"))) static void
matmul1(const struct llm_qmat *w, const struct llm_qact *a, double *y, int r0, int r1)
{
  double f = w->wm ? a->xs[0] / 1073741824.0 : a->xs[0] / 32768.0;
  for (int r = r0; r < r1; r += 4) {
    int rr[4];
    int64 t[4];
    for (int i = 0; i < 4; i++)
      rr[i] = r + i < r1 ? r + i : r1 - 1;
    rows4(w, a, rr, t);
    for (int i = 0; i < 4 && r + i < r1; i++)
      y[r + i] = ((double)t[i] * f) * w->ws[r + i];
  }
}

// s_i += u * X[i] and t_i += v * X[i]: word i of one column of the batch
// times the weights u and v of two rows.
#define PACK2(i, X) \
  do { \
    int64 x_ = (X)[i]; \
    s##i += u_ * x_; \
    t##i += v_ * x_; \
  } while (0)

// The 3 packed words of one column (k) of the batch against two rows'
// weights: each word is loaded once for both rows (loads cost more than
// arithmetic under TCG).
#define MAC3X2(uv, vv, X) \
  do { \
    int64 u_ = (uv), v_ = (vv); \
    PACK2(0, X); \
    PACK2(1, X); \
    PACK2(2, X); \
  } while (0)

// A packed sum s = A + B * 2^21 + C * 2^42 over one group of 32 columns
// (no overflow: |A|, |B|, |C| <= 32 * 255 * 127 < 2^20, so |s| < 2^63):
// A is the low 21 bits, sign-extended; (s - A) >> 21 = B + C * 2^21 holds
// the other two the same way.
#define LOW21(s) ((int64)((uint64)(s) << 43) >> 43)

// The up-to-3 sums of word s into acc[0..n).
static inline void
unpack3(int64 s, int64 *acc, int n)
{
  int64 a = LOW21(s), r = (s - a) >> 21, b = LOW21(r);
  acc[0] = a;
  acc[1] = b;
  if (n > 2)
    acc[2] = (r - b) >> 21;
}

// Offset weight j of word a (u = w + 128, in [0, 255]).
#define UB(a, j) ((int64)(((a) >> (8 * (j))) & 0xff))

// Offset group sums (sum of u_k q_k) of two rows (weights wa, wb) and one
// group of 32 columns against the packed batch: acc[p] for row a,
// acc[LLM_BATCH + p] for row b. Each weight byte is extracted once and
// multiplied into the 3 words (one multiply per 3 MACs).
static inline void
group8x2(const uint64 *wa, const uint64 *wb, const int64 *X, int64 *acc)
{
  int64 s0 = 0, s1 = 0, s2 = 0, t0 = 0, t1 = 0, t2 = 0;
  for (int k = 0; k < 4; k++, X += 8 * LLM_PACKS) {
    uint64 a = wa[k], b = wb[k];
    MAC3X2(UB(a, 0), UB(b, 0), X + 0 * LLM_PACKS);
    MAC3X2(UB(a, 1), UB(b, 1), X + 1 * LLM_PACKS);
    MAC3X2(UB(a, 2), UB(b, 2), X + 2 * LLM_PACKS);
    MAC3X2(UB(a, 3), UB(b, 3), X + 3 * LLM_PACKS);
    MAC3X2(UB(a, 4), UB(b, 4), X + 4 * LLM_PACKS);
    MAC3X2(UB(a, 5), UB(b, 5), X + 5 * LLM_PACKS);
    MAC3X2(UB(a, 6), UB(b, 6), X + 6 * LLM_PACKS);
    MAC3X2(UB(a, 7), UB(b, 7), X + 7 * LLM_PACKS);
  }
  unpack3(s0, acc, 3);
  unpack3(s1, acc + 3, 3);
  unpack3(s2, acc + 6, LLM_BATCH - 6);
  unpack3(t0, acc + LLM_BATCH, 3);
  unpack3(t1, acc + LLM_BATCH + 3, 3);
  unpack3(t2, acc + LLM_BATCH + 6, LLM_BATCH - 6);
}

// Up to 8 positions at once, each with exactly matmul1's arithmetic; rows
// two at a time (a last odd row is computed as both, stored once).
HOT_BATCH __attribute__((optimize("no-schedule-insns"))) static void
matmul8(const struct llm_qmat *w, const struct llm_qact *a, double *y, int ystride, int r0, int r1)
{
  int ng = w->cols / LLM_GS;
  const int64 *X = (const int64 *)a->packs;
  double f[LLM_BATCH];
  for (int p = 0; p < a->count; p++)
    f[p] = w->wm ? a->xs[p] / 1073741824.0 : a->xs[p] / 32768.0;
  for (int r = r0; r < r1; r += 2) {
    int rb = r + 1 < r1 ? r + 1 : r; // the second row
    const uint64 *wa = (const uint64 *)(w->q + (uint64)r * w->cols);
    const uint64 *wb = (const uint64 *)(w->q + (uint64)rb * w->cols);
    int64 t[2 * LLM_BATCH] = { 0 }, acc[2 * LLM_BATCH];
    for (int g = 0; g < ng; g++) {
      group8x2(wa + 4 * g, wb + 4 * g, X + g * LLM_GS * LLM_PACKS, acc);
      int32 ga = w->wm ? w->wm[(uint64)r * ng + g] : 1;
      int32 gb = w->wm ? w->wm[(uint64)rb * ng + g] : 1;
      for (int p = 0; p < LLM_BATCH; p++) {
        int32 m = a->m[p * ng + g], c = a->qsum[p * ng + g];
        t[p] += (int64)(ga * m) * (acc[p] - c);
        t[LLM_BATCH + p] += (int64)(gb * m) * (acc[LLM_BATCH + p] - c);
      }
    }
    for (int p = 0; p < a->count; p++) {
      y[p * ystride + r] = ((double)t[p] * f[p]) * w->ws[r];
      y[p * ystride + rb] = ((double)t[LLM_BATCH + p] * f[p]) * w->ws[rb];
    }
  }
}

// Rows packed for the vector kernels go to them (kernels_vec.c), the rest
// (all rows, with scalar kernels) to matmul1 or matmul8.
HOT void
llm_matmul_rows(const struct llm_qmat *w, const struct llm_qact *a, double *y, int ystride, int r0,
    int r1, int t)
{
  struct llm_qmat tail;
  if (w->vrows > 0) {
    // Packed rows by the vector kernels, the rest as a row-major matrix
    // of its own starting at row vrows.
    int v = w->vrows;
    if (r0 < v)
      llm_vec_matmul(w, a, y, ystride, r0, r1, t);
    if (r1 <= v)
      return;
    tail = *w;
    tail.rows = w->rows - v;
    tail.ws += v;
    tail.wm = w->wm ? w->wm + (uint64)v * (w->cols / LLM_GS) : 0;
    tail.q += (uint64)v * w->cols;
    tail.vrows = 0;
    w = &tail;
    y += v;
    r0 = r0 > v ? r0 - v : 0;
    r1 -= v;
  }
  if (a->count == 1)
    matmul1(w, a, y, r0, r1);
  else
    matmul8(w, a, y, ystride, r0, r1);
}

// D_t = sum_g (mq_g * mk_{t,g}) * acc_{t,g}, acc the int32 dot of group g
// of the query and of key t (docs/ARITHMETIC.md "Full attention" step 5).
HOT void
llm_attn_scores(const int8 *qq, const int32 *mq, int ngroups, const int8 *kq, const int32 *km,
    int kstride, int mstride, int npos, int64 *d)
{
  const uint64 *x = (const uint64 *)qq;
  for (int t = 0; t < npos; t++) {
    const uint64 *k = (const uint64 *)(kq + (uint64)t * kstride);
    const int32 *mk = km + (uint64)t * mstride;
    int64 s = 0;
    for (int g = 0; g < ngroups; g++)
      s += (int64)(mq[g] * mk[g]) * dot32(x + 4 * g, k + 4 * g);
    d[t] = s;
  }
}

// acc_k = sum_t wt[t] * v[t][k] for the 32 dims of one group (step 7):
// 8 dims at a time, so the 8 sums stay in registers across the t loop.
HOT void
llm_attn_values(const int32 *wt, const int8 *vq, int vstride, int npos, int64 *acc)
{
  for (int k = 0; k < 4; k++) {
    int64 a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
    for (int t = 0; t < npos; t++) {
      int64 c = wt[t];
      uint64 v = ((const uint64 *)(vq + (uint64)t * vstride))[k];
      a0 += c * SX(v, 0);
      a1 += c * SX(v, 1);
      a2 += c * SX(v, 2);
      a3 += c * SX(v, 3);
      a4 += c * SX(v, 4);
      a5 += c * SX(v, 5);
      a6 += c * SX(v, 6);
      a7 += c * SX(v, 7);
    }
    int64 *o = acc + 8 * k;
    o[0] = a0;
    o[1] = a1;
    o[2] = a2;
    o[3] = a3;
    o[4] = a4;
    o[5] = a5;
    o[6] = a6;
    o[7] = a7;
  }
}

// One step of the gated delta rule for one value head (docs/ARITHMETIC.md
// "Gated DeltaNet", reference.py _deltanet), state S (kd, vd):
//   S = S * decay;  kv_j = sum_i S_ij k_i;  delta_j = (v_j - kv_j) * beta;
//   S = S + k_i delta_j;  o_j = sum_i S_ij q_i   (sums over i in order).
// kv is scratch (vd); o gets the output (vd).
HOT void
llm_delta_step(double *S, const double *k, const double *q, const double *v, double beta,
    double decay, int kd, int vd, double *kv, double *o)
{
  if (llm_vec_delta_step(S, k, q, v, beta, decay, kd, vd, o) == 0)
    return;
  for (int j = 0; j < vd; j++)
    kv[j] = o[j] = 0.0;
  for (int i = 0; i < kd; i++) {
    double *row = S + (uint64)i * vd, ki = k[i];
    for (int j = 0; j < vd; j++) {
      double sij = row[j] * decay;
      row[j] = sij;
      kv[j] = kv[j] + sij * ki;
    }
  }
  for (int j = 0; j < vd; j++)
    kv[j] = (v[j] - kv[j]) * beta; // delta
  for (int i = 0; i < kd; i++) {
    double *row = S + (uint64)i * vd, ki = k[i], qi = q[i];
    for (int j = 0; j < vd; j++) {
      double sij = row[j] + ki * kv[j];
      row[j] = sij;
      o[j] = o[j] + sij * qi;
    }
  }
}
