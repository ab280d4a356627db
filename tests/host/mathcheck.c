// Host driver for tests/test_llmrun_host.py: reads doubles (as 16 hex digits
// of their bits, one per line) and prints the bits of the runtime's
// llm_exp, llm_log (for x > 0, else 0), llm_sigmoid, llm_softplus, llm_silu
// and llm_softmax_exp (for x <= 0, else 0) of each, so the test can compare
// them bit for bit with pyaisvc.refmath, and llm_order_key.
//
// `llm_mathcheck matmul` instead checks llm_matmul_rows on random int8
// matrices (with and without group multipliers) for every position count
// and for row ranges of odd and even length against the integer sums
// written out here, and prints "matmul: N ok" or the first difference.

#include "user/llm/kernels.h"

static uint64
bits(double x)
{
  union {
    double d;
    uint64 u;
  } v = { .d = x };
  return v.u;
}

// A deterministic pseudo-random int8 in [-127, 127].
static uint64 seed = 88172645463325252UL;
static int
rand8(void)
{
  seed ^= seed << 13;
  seed ^= seed >> 7;
  seed ^= seed << 17;
  return (int)(seed % 255) - 127;
}

// y = (W x_p)_r as docs/ARITHMETIC.md writes it, for w's int8 weights q:
// the int64 sum over groups of mult_g times the group's int32 dot
// product, then two float products.
static double
plain_row(const struct llm_qmat *w, const int8 *q, const struct llm_qact *a, int p, int r)
{
  int ng = w->cols / LLM_GS;
  int64 t = 0;
  for (int g = 0; g < ng; g++) {
    int64 dot = 0;
    for (int k = g * LLM_GS; k < (g + 1) * LLM_GS; k++)
      dot += (int64)q[(uint64)r * w->cols + k] * a->q[p * a->n + k];
    int64 mult = (int64)(w->wm ? w->wm[r * ng + g] : 1) * a->m[p * ng + g];
    t += mult * dot;
  }
  double f = w->wm ? a->xs[p] / 1073741824.0 : a->xs[p] / 32768.0;
  return ((double)t * f) * w->ws[r];
}

// Every position count 1..LLM_BATCH and row ranges [r0, r1) of both
// parities of a 37 x 96 matrix, with random values (extreme = 0) or with
// the largest group sums there are (extreme = 1: weights of -128 and 127,
// activations of +-127, signs by row and position, so that the batched
// matmul's packed lanes reach +-32 * 128 * 127); returns the number of
// values checked, or -1 after printing the first difference.
static int
check_matmul(int extreme)
{
  enum { ROWS = 37,
    COLS = 96,
    NG = COLS / LLM_GS };
  static int8 q[ROWS * COLS], qo[ROWS * COLS] __attribute__((aligned(8)));
  static int8 aq[LLM_BATCH * COLS] __attribute__((aligned(8)));
  static uint16 wm[ROWS * NG];
  static double ws[ROWS];
  static int32 am[LLM_BATCH * NG], qsum[LLM_BATCH * NG];
  static int64 packs[COLS * LLM_PACKS], pairs[COLS / 2];
  static double x[LLM_BATCH * COLS], y[LLM_BATCH * ROWS], xs[LLM_BATCH];
  for (int i = 0; i < ROWS * COLS; i++)
    q[i] = !extreme ? rand8() : (i / COLS) % 3 == 0 ? -128
                                                    : 127;
  for (int i = 0; i < ROWS * NG; i++)
    wm[i] = 1 + (seed = seed * 6364136223846793005UL + 1) % 32768;
  for (int r = 0; r < ROWS; r++)
    ws[r] = (double)(0.01f * (float)(1 + r % 7));
  for (int i = 0; i < LLM_BATCH * COLS; i++)
    x[i] = !extreme ? rand8() / 16.0 : (i / COLS) % 2 ? -1.0
                                                      : 1.0;
  struct llm_qact a = { COLS, 0, aq, am, xs, qsum, packs, pairs };
  int checked = 0;
  for (int v3 = 0; v3 < 2; v3++) {
    struct llm_qmat w = { ROWS, COLS, ws, v3 ? wm : 0, qo, 0, 0 };
    memcpy(qo, q, sizeof(q));
    llm_qmat_offset(&w);
    for (int count = 1; count <= LLM_BATCH; count++) {
      llm_qact_fill(&a, x, COLS, count);
      int ranges[][2] = { { 0, ROWS }, { 3, 10 }, { 5, 6 }, { 8, 30 }, { 36, 37 } };
      for (int i = 0; i < 5; i++) {
        int r0 = ranges[i][0], r1 = ranges[i][1];
        memset(y, 0, sizeof(y));
        llm_matmul_rows(&w, &a, y, ROWS, r0, r1, 0);
        for (int p = 0; p < count; p++)
          for (int r = 0; r < ROWS; r++) {
            double want = r >= r0 && r < r1 ? plain_row(&w, q, &a, p, r) : 0.0;
            if (bits(y[p * ROWS + r]) != bits(want)) {
              printf("matmul: extreme=%d v3=%d count=%d rows [%d, %d): y[%d][%d] = %.17g, want %.17g\n",
                  extreme, v3, count, r0, r1, p, r, y[p * ROWS + r], want);
              return -1;
            }
            checked++;
          }
      }
    }
  }
  return checked;
}

// llm_quantize's q as docs/ARITHMETIC.md writes it, with float operations:
// q_i = clamp(rint(x_i * (1 / s_g)), -127, 127).
static void
plain_quantize(const double *x, int n, int8 *q)
{
  double amax = 0.0;
  for (int i = 0; i < n; i++)
    amax = __builtin_fabs(x[i]) > amax ? __builtin_fabs(x[i]) : amax;
  for (int g = 0; g < n / LLM_GS; g++) {
    double gmax = 0.0;
    for (int i = g * LLM_GS; i < (g + 1) * LLM_GS; i++)
      gmax = __builtin_fabs(x[i]) > gmax ? __builtin_fabs(x[i]) : gmax;
    double v = (gmax * 32768.0) / amax;
    int64 mg = (int64)v;
    if ((double)mg < v)
      mg++;
    mg = mg < 1 ? 1 : mg > 32768 ? 32768
                                 : mg;
    double inv = 1.0 / (((amax / 127.0) * (double)mg) / 32768.0);
    for (int i = g * LLM_GS; i < (g + 1) * LLM_GS; i++) {
      double r = __builtin_rint(x[i] * inv);
      q[i] = r > 127.0 ? 127 : r < -127.0 ? -127
                                          : (int8)r;
    }
  }
}

// A random double for the quantiser: random sign and significand, the
// exponent around 2^scale; every 7th value has a short significand (so
// that products with the group's 1/s_g are often exact or half-way), every
// 13th is zero, every 50th subnormal.
static double
rand_double(int scale, int i)
{
  union {
    double d;
    uint64 u;
  } b;
  seed ^= seed << 13;
  seed ^= seed >> 7;
  seed ^= seed << 17;
  uint64 sig = seed & ((1UL << 52) - 1);
  if (i % 7 == 0)
    sig &= 0xfUL << 48;
  int e = 1023 + scale - (int)((seed >> 56) % 12);
  b.u = (seed >> 63) << 63 | (uint64)e << 52 | sig;
  if (i % 13 == 0)
    b.u = 0;
  if (i % 50 == 0)
    b.u = (seed >> 63) << 63 | sig >> 3;
  return b.d;
}

// llm_quantize against plain_quantize: random vectors at many scales, and
// vectors whose every product is an exact tie (group maxima 127 * 2^j,
// values (k + 1/2) * 2^j); returns the number of values checked, or -1
// after printing the first difference.
static int
check_quantize(void)
{
  enum { N = 96 };
  static double x[N];
  int8 q[N], want[N];
  int32 m[N / LLM_GS];
  double xs;
  int checked = 0;
  for (int v = 0; v < 40000; v++) {
    int scale = v % 2000 - 1000, ties = v % 5 == 0;
    for (int i = 0; i < N; i++)
      x[i] = rand_double(v % 3 == 0 ? scale : scale % 12, i + v);
    if (ties) {
      double unit = 1.0;
      for (int j = 0; j < v % 40; j++)
        unit = unit * 0.5;
      for (int i = 0; i < N; i++)
        x[i] = (i % LLM_GS == 0 ? 127.0 : (double)(rand8() / 2) + 0.5) * unit;
    }
    llm_quantize(x, N, q, m, &xs);
    plain_quantize(x, N, want);
    for (int i = 0; i < N; i++, checked++)
      if (q[i] != want[i]) {
        printf("quantize: vector %d x[%d] = %a: q = %d, want %d\n", v, i, x[i], q[i], want[i]);
        return -1;
      }
  }
  return checked;
}

int
main(int argc, char **argv)
{
  if (argc > 1 && strcmp(argv[1], "quantize") == 0) {
    int n = check_quantize();
    if (n < 0)
      return 1;
    printf("quantize: %d ok\n", n);
    return 0;
  }
  if (argc > 1 && strcmp(argv[1], "matmul") == 0) {
    int n = check_matmul(0), m = n < 0 ? -1 : check_matmul(1);
    if (m < 0)
      return 1;
    printf("matmul: %d ok\n", n + m);
    return 0;
  }
  llm_math_init();
  char line[64];
  while (fgets(line, sizeof(line), stdin)) {
    union {
      uint64 u;
      double d;
    } v = { .u = strtoull(line, 0, 16) };
    double x = v.d;
    printf("%016lx %016lx %016lx %016lx %016lx %016lx %016lx\n", bits(llm_exp(x)),
        bits(x > 0 ? llm_log(x) : 0.0), bits(llm_sigmoid(x)), bits(llm_softplus(x)),
        bits(llm_silu(x)), bits(x <= 0 ? llm_softmax_exp(x) : 0.0), (uint64)llm_order_key(x));
  }
  return 0;
}
