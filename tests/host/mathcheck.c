// Host driver for tests/test_llmrun_host.py: reads doubles (as 16 hex digits
// of their bits, one per line) and prints the bits of the runtime's
// llm_exp, llm_log (for x > 0, else 0), llm_sigmoid, llm_softplus, silu
// (llm_silu_mul) and softmax's exp (llm_softmax_exps; for x <= 0, else 0)
// of each, so the test can compare them bit for bit with pyaisvc.model.refmath,
// and llm_order_key.
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

// Quantises count positions of x (n = a->n columns) into a in three
// pieces, llm_qact_start then llm_qact_groups over [0, 1) and [1, n/32),
// and once more whole (llm_qact_fill), as the pool's steps and one thread
// do: is every byte the same? Leaves a as llm_qact_fill does; prints the
// first difference.
static int
split_is_whole(struct llm_qact *a, const double *x, int stride, int count)
{
  enum { MAXN = 96 };
  static int8 q[LLM_BATCH * MAXN];
  static int32 m[LLM_BATCH * MAXN / LLM_GS], qsum[LLM_BATCH * MAXN / LLM_GS];
  static int64 packs[MAXN * LLM_PACKS], pairs[MAXN / 2];
  static int16 ys[LLM_BATCH * MAXN];
  static double xs[LLM_BATCH];
  int n = a->n, ng = n / LLM_GS;
  llm_qact_start(a, x, stride, count);
  llm_qact_groups(a, x, stride, 0, 1);
  llm_qact_groups(a, x, stride, 1, ng);
  memcpy(q, a->q, LLM_BATCH * n);
  memcpy(m, a->m, LLM_BATCH * ng * sizeof(int32));
  memcpy(qsum, a->qsum, LLM_BATCH * ng * sizeof(int32));
  memcpy(packs, a->packs, n * LLM_PACKS * sizeof(int64));
  memcpy(pairs, a->pairs, n / 2 * sizeof(int64));
  memcpy(ys, a->ys, count * n * sizeof(int16));
  memcpy(xs, a->xs, count * sizeof(double));
  llm_qact_fill(a, x, stride, count);
  const char *differs = memcmp(q, a->q, LLM_BATCH * n)                      ? "q"
      : memcmp(m, a->m, LLM_BATCH * ng * sizeof(int32))                     ? "m"
      : memcmp(qsum, a->qsum, LLM_BATCH * ng * sizeof(int32))               ? "qsum"
      : memcmp(xs, a->xs, count * sizeof(double))                           ? "xs"
      : memcmp(ys, a->ys, count * n * sizeof(int16))                        ? "ys"
      : count == 1 && memcmp(pairs, a->pairs, n / 2 * sizeof(int64))        ? "pairs"
      : count > 1 && memcmp(packs, a->packs, n * LLM_PACKS * sizeof(int64)) ? "packs"
                                                                            : 0;
  if (differs)
    printf("quantisation: %d positions in two pieces: %s differs from one pass\n", count, differs);
  return differs == 0;
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
  enum { ROWS = 37, COLS = 96, NG = COLS / LLM_GS };
  static int8 q[ROWS * COLS], qo[ROWS * COLS] __attribute__((aligned(8)));
  static int8 aq[LLM_BATCH * COLS] __attribute__((aligned(8)));
  static uint16 wm[ROWS * NG];
  static double ws[ROWS];
  static int32 am[LLM_BATCH * NG], qsum[LLM_BATCH * NG];
  static int64 packs[COLS * LLM_PACKS], pairs[COLS / 2];
  static int16 ys[LLM_BATCH * COLS];
  static double x[LLM_BATCH * COLS], y[LLM_BATCH * ROWS], xs[LLM_BATCH];
  for (int i = 0; i < ROWS * COLS; i++)
    q[i] = !extreme ? rand8() : (i / COLS) % 3 == 0 ? -128 : 127;
  for (int i = 0; i < ROWS * NG; i++)
    wm[i] = 1 + (seed = seed * 6364136223846793005UL + 1) % 32768;
  for (int r = 0; r < ROWS; r++)
    ws[r] = (double)(0.01f * (float)(1 + r % 7));
  for (int i = 0; i < LLM_BATCH * COLS; i++)
    x[i] = !extreme ? rand8() / 16.0 : (i / COLS) % 2 ? -1.0 : 1.0;
  struct llm_qact a = { COLS, 0, aq, am, xs, qsum, packs, pairs, ys };
  int checked = 0;
  for (int v3 = 0; v3 < 2; v3++) {
    struct llm_qmat w = { ROWS, COLS, ws, v3 ? wm : 0, qo, 0, 0 };
    memcpy(qo, q, sizeof(q));
    llm_qmat_offset(&w);
    for (int count = 1; count <= LLM_BATCH; count++) {
      if (!split_is_whole(&a, x, COLS, count))
        return -1;
      int ranges[][2] = { { 0, ROWS }, { 3, 10 }, { 5, 6 }, { 8, 30 }, { 36, 37 } };
      for (int i = 0; i < 5; i++) {
        int r0 = ranges[i][0], r1 = ranges[i][1];
        memset(y, 0, sizeof(y));
        llm_matmul_rows(&w, &a, y, ROWS, r0, r1, 0);
        for (int p = 0; p < count; p++)
          for (int r = 0; r < ROWS; r++) {
            double want = r >= r0 && r < r1 ? plain_row(&w, q, &a, p, r) : 0.0;
            if (bits(y[p * ROWS + r]) != bits(want)) {
              printf(
                  "matmul: extreme=%d v3=%d count=%d rows [%d, %d): y[%d][%d] = %.17g, want %.17g\n",
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

int
main(int argc, char **argv)
{
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
    double x = v.d, silu, e = x;
    llm_silu_mul(&x, 0, &silu, 1);
    if (x <= 0)
      llm_softmax_exps(&e, 1, 0.0); // exp(x - 0.0), and x - 0.0 is x
    printf("%016lx %016lx %016lx %016lx %016lx %016lx %016lx\n", bits(llm_exp(x)),
        bits(x > 0 ? llm_log(x) : 0.0), bits(llm_sigmoid(x)), bits(llm_softplus(x)), bits(silu),
        bits(x <= 0 ? e : 0.0), (uint64)llm_order_key(x));
  }
  return 0;
}
