// The LLM runtime's numeric kernels (user/llm/kernels.c): our own exp/log/
// sqrt/rint, activation quantisation in groups of 32, the int8 x int8
// matrix-vector products and the attention inner loops. Every operation
// follows docs/ARITHMETIC.md step by step, so that the guest's results equal
// the numpy reference's bit for bit.
#ifndef AISVC_LLM_KERNELS_H
#define AISVC_LLM_KERNELS_H

#define LLM_GS    32 // group size of activation and weight scales
#define LLM_BATCH 8  // prefill positions per pass through a matrix
#define LLM_PACKS 3  // words per column of the batch, 3 positions in each

// A quantised weight matrix W[rows][cols] (docs/ASSET_FORMAT.md,
// "qmat", v3 "gmat").
struct llm_qmat {
  int rows, cols;
  const double *ws; // (rows) row scales (the file's fp32, widened at load)
  const uint16 *wm; // (rows, cols/32) group multipliers, v3 only; 0 for v1/v2
  const int8 *q;    // (rows, cols) 8-byte aligned
  // Vector kernels (kernels_vec.h): the first vrows rows of q are packed
  // for them, with their group multipliers as int32 in vwm; 0 otherwise.
  // The other rows, the scalar kernels', hold each weight w offset by 128
  // (the byte w ^ 0x80, unsigned): llm_qmat_offset does it at load time.
  int vrows;
  const int32 *vwm;
};

// Up to LLM_BATCH activation vectors of length n, quantised (docs/ARITHMETIC.md
// "Activation quantisation"): position p stands for s_{p,g} * q[p][i].
struct llm_qact {
  int n;                  // vector length, a multiple of 32
  int count;              // positions held
  int8 *q;                // (LLM_BATCH, n) 8-byte aligned
  int32 *m;               // (LLM_BATCH, n/32) group multipliers in [0, 32768]
  double *xs;             // (LLM_BATCH) amax / 127
  int32 *qsum;            // (LLM_BATCH, n/32) 128 * the sum of each group's q
  int64 *packs;           // (n, LLM_PACKS) q[3j][k] + q[3j+1][k] * 2^21 +
                          // q[3j+2][k] * 2^42: three positions per word, for the
                          // batched matmul
  int64 *pairs;           // (n/2) position 0 alone: word 4i + j (j < 4) holds
                          // q[8i + j + 4] + q[8i + j] * 2^32
  int16 *ys;              // (LLM_BATCH, n) for the vector kernels (0 without
                          // them): q[p][k] - 256 q[p][k-1], or q[p][k]
                          // where k % 4 == 0
  double amax[LLM_BATCH]; // each position's largest |x_i|
};

// rint: round half to even, as numpy's np.rint.
static inline int64
llm_rint(double x)
{
#ifdef __riscv
  int64 r;
  asm("fcvt.l.d %0, %1, rne" : "=r"(r) : "f"(x));
  return r;
#else
  return hostcompat_rint(x);
#endif
}

// Below this magnitude llm_rint_small(x) is llm_rint(x).
#define LLM_RINT_SMALL_MAX 1e15

// llm_rint for |x| < LLM_RINT_SMALL_MAX (< 2^51), the caller's to check:
// x + 1.5 * 2^52 then lies in [2^52, 2^53), where the doubles are the
// integers, so the add rounds x to one (to nearest even: frm's mode, as
// the process starts), and the sum's low bits are that integer. Under
// QEMU an add costs about 5 ns and fcvt.l.d with a static rounding mode
// 12.8 ns (docs/PERF_NOTES.md, facts 35 and 36, "float and 64-bit vector
// costs" and "where a prefill's time goes").
static inline int64
llm_rint_small(double x)
{
  union {
    double d;
    uint64 u;
  } b = { .d = x + 6755399441055744.0 };
  return (int64)(b.u - 0x4338000000000000UL);
}

// IEEE (correctly rounded) square root.
static inline double
llm_sqrt(double x)
{
#ifdef __riscv
  double r;
  asm("fsqrt.d %0, %1" : "=f"(r) : "f"(x));
  return r;
#else
  return __builtin_sqrt(x);
#endif
}

// An int64 that orders as d does, for d not NaN (-0.0 and 0.0 both give
// 0): comparing it costs integer operations, where a float compare is a
// helper call under TCG (the output head compares every logit).
static inline int64
llm_order_key(double d)
{
  union {
    double d;
    int64 i;
  } u = { .d = d };
  return u.i >= 0 ? u.i : -(u.i & 0x7fffffffffffffffL);
}

// Math (docs/ARITHMETIC.md "Our own math functions").
double llm_exp(double x);
double llm_log(double y);
double llm_sigmoid(double x);
double llm_softplus(double x);
// Tabulated: call llm_math_init first (once, before any pool thread runs).
// y_i = silu(x_i) * m_i for i < n, or silu(x_i) if m is 0 (silu from a
// table: docs/ARITHMETIC.md); y may be x or m.
void llm_silu_mul(const double *x, const double *m, double *y, int n);
// x_t = exp(x_t - mx) for t < n (each x_t <= mx; exp from a table:
// docs/ARITHMETIC.md), in place; returns their sum, in order from 0.0.
double llm_softmax_exps(double *x, int n, double mx);
void llm_math_init(void);

// y = rmsnorm(x) * w (docs/ARITHMETIC.md "RMSNorm"); y may be x.
void llm_rmsnorm(const double *x, const double *w, int n, double eps, double *y);

// Quantisation.
void llm_quantize(const double *x, int n, int8 *q, int32 *m, double *xs);
// Quantises count vectors (row stride `stride` doubles) into a: q, m and
// xs as llm_quantize, each group's qsum, and the packed forms the scalar
// matmuls read. One position is packed pairwise for matmul1; more are
// packed three to a word for the batched matmul: packs[k][j] =
// q[3j][k] + q[3j+1][k] * 2^21 + q[3j+2][k] * 2^42, so that one multiply
// by a weight forms three products. Positions beyond count are zeros.
void llm_qact_fill(struct llm_qact *a, const double *x, int stride, int count);
// llm_qact_fill in two parts, so that the thread pool can split the
// second: llm_qact_start finds each position's amax and xs (and zeroes
// the positions beyond count); llm_qact_groups then does the rest for the
// groups [g0, g1) of every position, which depend on nothing outside
// them. Any split of the groups gives the same bytes.
void llm_qact_start(struct llm_qact *a, const double *x, int stride, int count);
void llm_qact_groups(struct llm_qact *a, const double *x, int stride, int g0, int g1);

// Stores the rows from m->vrows on offset by 128, as the scalar kernels
// read them (call once per matrix, after llm_vec_pack if at all).
void llm_qmat_offset(struct llm_qmat *m);

// y[p][r] = (W x_p)_r for the a->count positions and the rows [r0, r1)
// only (y has row stride ystride): each row's arithmetic is the same
// whichever range it is in, so the thread pool can split the rows. t is
// the calling thread's index in the pool (0 outside a pool step): the
// vector kernels keep per-thread state (kernels_vec.c).
void llm_matmul_rows(const struct llm_qmat *w, const struct llm_qact *a, double *y, int ystride,
    int r0, int r1, int t);

// Attention: D_t for t in [0, npos) (the integer part of q.k_t) and the
// value sums A_k = sum_t W_t * v[t][k] over one group of 32 dims.
void llm_attn_scores(const int8 *qq, const int32 *mq, int ngroups, const int8 *kq, const int32 *km,
    int kstride, int mstride, int npos, int64 *d);
void llm_attn_values(const int32 *wt, const int8 *vq, int vstride, int npos, int64 *acc);

// One gated delta rule step of one Gated DeltaNet value head.
void llm_delta_step(double *S, const double *k, const double *q, const double *v, double beta,
    double decay, int kd, int vd, double *kv, double *o);

#endif
