// The choice between scalar and RVV matmul kernels, and the C side of the
// RVV ones: packing the weights at load time and driving the assembly
// (user/llm/kernels_rvv.S, whose top comment describes the layout).
//
// Block size: a block of B rows fills one vector register group of 128
// bytes per load (B = 32 rows of 4 bytes), the size QEMU 10 turns into
// inline host SIMD (docs/PERF_NOTES.md, fact 9, "RVV written for TCG is 2-3x
// scalar on QEMU 10"): LMUL 4 at vlen 256, 2 at vlen 512; vlen 128 uses LMUL 4
// too (B = 16), since the int64 totals need twice the LMUL. The packing is in
// place (each byte offset by 128, as the kernels read them, in a new order),
// one block at a time through a scratch buffer; rows after the last full block
// stay row-major and go to the scalar kernel. The group multipliers are copied
// into int32 in the same order (vwm), 1/8 of the weights' size.
//
// The float steps stay in C and in the scalar kernel's order:
// y = ((double)T * f) * ws[r] with the assembly's exact int64 T.
#include "user/lib/user.h"
#include "user/llm/kernels.h"
#include "user/llm/kernels_vec.h"
#include "user/llm/loader.h"
#include "user/llm/pool.h"

enum { KERNELS_AUTO, KERNELS_SCALAR, KERNELS_VECTOR };

static int choice = KERNELS_AUTO; // from llm_kernels_select
static int decided = -1;          // KERNELS_SCALAR or _VECTOR, once known
static int block;                 // rows per packed block (B)
static long vtype32;              // e32, LMUL for B rows, ta, ma
static long vtype64;              // e64, LMUL 8 (vlen 128, 256) or 4 (512), ta, ma

#define MAXBLOCK 64

#ifdef __riscv
typedef void matvec_fn(const int8 *w, const int32 *wm, const int16 *y, const int32 *m, long ng,
    int64 *t, long vtype, const int32 *qs);
matvec_fn llm_rvv_matvec_m4_a, llm_rvv_matvec_m4_b, llm_rvv_matvec_m4_c;
matvec_fn llm_rvv_matvec_m2_a, llm_rvv_matvec_m2_b, llm_rvv_matvec_m2_c;
typedef void matvecp_fn(const int8 *w, const int32 *wm, const int16 *y, const int32 *m, long ng,
    int32 *p, long vtype, const int32 *qs);
matvecp_fn llm_rvv_matvecp_m4, llm_rvv_matvecp_m2;
typedef void matvec4_fn(const int8 *w, const int32 *wm, const int16 *y, const int32 *m, long ng,
    int64 *t, long vtype, long n, const int32 *qs);
matvec4_fn llm_rvv_matvec4_m2_a, llm_rvv_matvec4_m2_b, llm_rvv_matvec4_m1_a, llm_rvv_matvec4_m1_b;
typedef void delta_fn(double *S, const double *k, const double *q, const double *v, long kd,
    long vd, double *o, long vtype, double beta, double decay);
delta_fn llm_rvv_delta_m8, llm_rvv_delta_m4;

// The kernels' versions (kernels_rvv.S) for the packing's LMUL, 4 (vlen
// 128, 256) or 2 (512): four of the decode kernel, three register
// assignments of llm_rvv_matvec and llm_rvv_matvecp (PARTS, which uses
// every register: where a host page boundary cuts one, the others may
// win), and two of the 4-position kernel (which runs at half that LMUL).
enum { ONE, FOUR, KINDS };
#define VERSIONS         4
#define PARTS            3   // the version that is llm_rvv_matvecp
#define PARTS_MAX_GROUPS 128 // its int32 sums hold this many groups
#define VERSIONS4        2
static const int nversions[KINDS] = { VERSIONS, VERSIONS4 };
static matvec_fn *matvec[PARTS];
static matvecp_fn *matvecp;
static matvec4_fn *matvec4[VERSIONS4];
static delta_fn *delta;

// Each thread of the pool times the versions of a kernel on a call, runs
// the fastest, and times them again after RETIME_CALLS calls: an op on a
// vector register that a host page boundary cuts is about 4x slower
// under QEMU 10, and which register that is depends on the QEMU process
// and on the hart (a thread may move to another hart) (PERF_NOTES.md,
// facts 19 and 26, "where QEMU keeps the vector registers" and "the prefill
// kernel's second register set"). A timing costs a few calls, every few
// tokens.
#define RETIME_CALLS 20000
static struct {
  int version[KINDS];
  int left[KINDS]; // calls until the next timing
} per_thread[LLM_MAX_THREADS];

// One kernel call: a block (ONE) or half a block for 4 positions (FOUR).
struct call {
  int kind;
  const int8 *q;   // packed weights
  const int32 *wm; // packed multipliers
  const int16 *y;  // the activations' column factors (struct llm_qact's ys)
  const int32 *qs; // 128 * their group sums
  const int32 *m;  // their group multipliers
  int ng, n;       // groups and columns
  int64 *t;        // totals: block of them (ONE) or 2 * block (FOUR)
};

// Bytes per vector register, 0 without V.
static int
machine_vlenb(void)
{
  return vlenb();
}
#else
// The host build has no RVV.
static int
machine_vlenb(void)
{
  return 0;
}
#endif

int
llm_kernels_select(const char *prog, const char *name)
{
  if (strcmp(name, "auto") == 0)
    choice = KERNELS_AUTO;
  else if (strcmp(name, "scalar") == 0)
    choice = KERNELS_SCALAR;
  else if (strcmp(name, "vector") == 0)
    choice = KERNELS_VECTOR;
  else {
    fprintf(2, "%s: --kernels: '%s' is not auto, scalar or vector\n", prog, name);
    return -1;
  }
  int n = machine_vlenb();
  if (choice == KERNELS_VECTOR && (n < 16 || n > 64)) {
    fprintf(2, "%s: --kernels vector: %s; use --kernels scalar or auto\n", prog,
        n ? "the vector registers are longer than 512 bits"
          : "this machine has no vector extension (QEMU >= 10 gives it: see README)");
    return -1;
  }
  decided = -1;
  return 0;
}

// Decides between the kernels, once.
static int
kernels(void)
{
  if (decided < 0) {
    int n = machine_vlenb();
    decided = choice != KERNELS_SCALAR && n >= 16 && n <= 64 ? KERNELS_VECTOR : KERNELS_SCALAR;
    int lmul = n >= 32 ? 128 / n : 4; // 1 << (vtype & 3) registers per group
    block = n * lmul / 4;
    vtype32 = (3 << 6) | (2 << 3) | (lmul == 4 ? 2 : lmul == 2 ? 1 : 0);
    vtype64 = (3 << 6) | (3 << 3) | (n <= 32 ? 3 : 2);
#ifdef __riscv
    matvec_fn *m4[PARTS] = { llm_rvv_matvec_m4_a, llm_rvv_matvec_m4_b, llm_rvv_matvec_m4_c };
    matvec_fn *m2[PARTS] = { llm_rvv_matvec_m2_a, llm_rvv_matvec_m2_b, llm_rvv_matvec_m2_c };
    matvec4_fn *q2[VERSIONS4] = { llm_rvv_matvec4_m2_a, llm_rvv_matvec4_m2_b };
    matvec4_fn *q1[VERSIONS4] = { llm_rvv_matvec4_m1_a, llm_rvv_matvec4_m1_b };
    for (int v = 0; v < PARTS; v++)
      matvec[v] = lmul == 4 ? m4[v] : m2[v];
    matvecp = lmul == 4 ? llm_rvv_matvecp_m4 : llm_rvv_matvecp_m2;
    for (int v = 0; v < VERSIONS4; v++)
      matvec4[v] = lmul == 4 ? q2[v] : q1[v];
    delta = n <= 32 ? llm_rvv_delta_m8 : llm_rvv_delta_m4;
#endif
  }
  return decided;
}

int
llm_row_grain(void)
{
  return kernels() == KERNELS_VECTOR ? block : 16;
}

const char *
llm_kernels_name(void)
{
  return llm_kernels_vector() ? "vector" : "scalar";
}

int
llm_kernels_vector(void)
{
  return kernels() == KERNELS_VECTOR;
}

// Reorders one block of B rows (B * cols bytes at q) into the packed
// layout, each weight w stored as w + 128, through scratch; wm's
// multipliers of those rows go to vwm (ng per row), or ones without wm.
// (Strided vector loads would do it in fewer instructions, but QEMU 10
// runs them 10x slower than this loop.)
static void
pack_block(int8 *q, const uint16 *wm, int cols, uint32 *scratch, int32 *vwm)
{
  int words = cols / 4, ng = cols / LLM_GS, B = block;
  memmove(scratch, q, (uint64)B * cols);
  for (int r = 0; r < B; r++) {
    const uint32 *src = scratch + (uint64)r * words, *end = src + words;
    uint32 *dst = (uint32 *)q + r;
    for (; src < end; src++, dst += B)
      *dst = *src ^ 0x80808080U;
    int32 *m = vwm + r;
    for (int g = 0; g < ng; g++, m += B)
      *m = wm ? wm[(uint64)r * ng + g] : 1;
  }
}

int
llm_vec_block(void)
{
  return kernels() == KERNELS_VECTOR ? block : 0;
}

int
llm_vec_unpack(int8 *q, int rows, int cols, int B)
{
  int words = cols / 4, nb = B ? rows / B : 0;
  uint32 *scratch = malloc((uint64)(B ? B : 1) * cols);
  if (scratch == 0)
    return -1;
  for (int b = 0; b < nb; b++) {
    uint32 *blk = (uint32 *)(q + (uint64)b * B * cols);
    memmove(scratch, blk, (uint64)B * cols);
    for (int r = 0; r < B; r++)
      for (int k = 0; k < words; k++)
        blk[(uint64)r * words + k] = scratch[(uint64)k * B + r] ^ 0x80808080U;
  }
  free(scratch);
  uint64 *w = (uint64 *)(q + (uint64)nb * B * cols);
  for (uint64 i = 0; i < (uint64)(rows - nb * B) * cols / 8; i++)
    w[i] ^= 0x8080808080808080UL;
  return 0;
}

uint64
llm_vec_wm_bytes(const struct llm_qmat *m)
{
  if (kernels() != KERNELS_VECTOR || m->rows < block)
    return 0;
  return (uint64)(m->rows / block) * block * (m->cols / LLM_GS) * sizeof(int32);
}

int
llm_vec_pack(struct llm_qmat *m, int32 *vwm)
{
  int nb = m->rows / block, ng = m->cols / LLM_GS;
  uint32 *scratch = malloc((uint64)block * m->cols);
  if (scratch == 0)
    return -1;
  for (int b = 0; b < nb; b++)
    pack_block((int8 *)m->q + (uint64)b * block * m->cols,
        m->wm ? m->wm + (uint64)b * block * ng : 0, m->cols, scratch, vwm + (uint64)b * ng * block);
  free(scratch);
  m->vrows = nb * block;
  m->vwm = vwm;
  return 0;
}

int
llm_qmat_weight(const struct llm_qmat *w, int r, int k)
{
  if (r >= w->vrows)
    return (int)(uint8)w->q[(uint64)r * w->cols + k] - 128;
  const int8 *b = w->q + (uint64)(r / block) * block * w->cols;
  return (int)(uint8)b[((uint64)(k / 4) * block + r % block) * 4 + k % 4] - 128;
}

#ifdef __riscv
// The driver of the kernels below, from run_parts to llm_vec_matmul, runs
// for every block of rows: it shares one page (PERF_NOTES.md, facts 4 and
// 37, "hot code in one 4 KiB page" and "a call or return across pages costs a
// lookup"), which its first function starts.
#define HOT_VEC       __attribute__((section(".text.hot.vec")))
#define HOT_VEC_FIRST __attribute__((section(".text.hot.vec"), aligned(4096)))

// c's totals by llm_rvv_matvecp: its four int32 sums per row (p[k*B + r],
// kernels_rvv.S) put together in int64.
static HOT_VEC_FIRST void
run_parts(const struct call *c)
{
  int32 p[4 * MAXBLOCK];
  matvecp(c->q, c->wm, c->y, c->m, c->ng, p, vtype32, c->qs);
  const int32 *ll = p, *lh = p + block, *hl = p + 2 * block, *hh = p + 3 * block;
  for (int r = 0; r < block; r++)
    c->t[r] = (int64)hh[r] * (1L << 25) + (int64)(uint32)lh[r] * (1L << 15) +
        (int64)hl[r] * (1L << 10) + (int64)(uint32)ll[r];
}

// The versions of c's kernel that can run it.
static HOT_VEC int
versions(const struct call *c)
{
  if (c->kind == ONE && c->ng > PARTS_MAX_GROUPS)
    return PARTS;
  return nversions[c->kind];
}

// Runs version v of c's kernel.
static HOT_VEC void
run_version(const struct call *c, int v)
{
  if (c->kind == ONE && v == PARTS)
    run_parts(c);
  else if (c->kind == ONE)
    matvec[v](c->q, c->wm, c->y, c->m, c->ng, c->t, vtype32, c->qs);
  else
    matvec4[v](c->q, c->wm, c->y, c->m, c->ng, c->t, vtype32 - 1, c->n, c->qs);
}

// The fastest version for c, from two runs of each (the faster run
// counts), leaving c's totals. Every run must give the same totals: a
// difference is a bug in a version's registers, said and fatal (so every
// timing also checks the versions against each other).
static int
fastest_version(const struct call *c)
{
  int64 first[2 * MAXBLOCK];
  uint64 best = ~0UL, bytes = (c->kind == ONE ? block : 2 * block) * sizeof(int64);
  int fastest = 0, nv = versions(c);
  for (int run = 0; run < 2 * nv; run++) {
    int v = run % nv;
    uint64 t0 = time_ticks();
    run_version(c, v);
    uint64 dt = time_ticks() - t0;
    if (dt < best) {
      best = dt;
      fastest = v;
    }
    if (run == 0)
      memmove(first, c->t, bytes);
    else if (memcmp(first, c->t, bytes) != 0) {
      fprintf(2,
          "%s: vector kernel version %d differs from version 0 (a bug in kernels_rvv.S); "
          "run with --kernels scalar\n",
          llm_prog, v);
      exit(1);
    }
  }
  return fastest;
}

// Runs c on thread th with the version last timed fastest there (timing
// them again when due; version 0 if that one cannot run c).
static HOT_VEC void
run_call(const struct call *c, int th)
{
  int v = per_thread[th].version[c->kind];
  if (per_thread[th].left[c->kind]-- <= 0) {
    per_thread[th].version[c->kind] = fastest_version(c);
    per_thread[th].left[c->kind] = RETIME_CALLS;
  } else {
    run_version(c, v < versions(c) ? v : 0);
  }
}

// One block of B rows from row b0 for position p, by thread th: y[r] for
// the rows r of the block in [lo, hi) (a thread's range may cut a block).
static HOT_VEC void
block1(const struct llm_qmat *w, const struct llm_qact *a, int p, int b0, int lo, int hi, double f,
    double *y, int th)
{
  int64 t[MAXBLOCK];
  int ng = w->cols / LLM_GS;
  struct call c = { ONE, w->q + (uint64)b0 * w->cols, w->vwm + (uint64)b0 * ng, a->ys + p * w->cols,
    a->qsum + p * ng, a->m + p * ng, ng, w->cols, t };
  run_call(&c, th);
  for (int r = lo; r < hi; r++)
    y[r] = ((double)t[r - b0] * f) * w->ws[r];
}

// Half h of the block of B rows from row b0, for positions p0 .. p0+3
// (all held), by thread th: the rows in [lo, hi).
static HOT_VEC void
half4(const struct llm_qmat *w, const struct llm_qact *a, int b0, int h, int lo, int hi, int p0,
    const double *f, double *y, int ystride, int th)
{
  int64 t[4 * MAXBLOCK / 2];
  int ng = w->cols / LLM_GS, n = w->cols, H = block / 2, h0 = b0 + h * H;
  if (h0 >= hi || h0 + H <= lo)
    return;
  struct call c = { FOUR, w->q + (uint64)b0 * n + 4 * h * H, w->vwm + (uint64)b0 * ng + h * H,
    a->ys + p0 * n, a->qsum + p0 * ng, a->m + p0 * ng, ng, n, t };
  run_call(&c, th);
  int r0 = h0 > lo ? h0 : lo, r1 = h0 + H < hi ? h0 + H : hi;
  for (int p = p0; p < p0 + 4; p++)
    for (int r = r0; r < r1; r++)
      y[p * ystride + r] = ((double)t[(p - p0) * H + r - h0] * f[p]) * w->ws[r];
}

HOT_VEC void
llm_vec_matmul(const struct llm_qmat *w, const struct llm_qact *a, double *y, int ystride, int lo,
    int hi, int t)
{
  double f[LLM_BATCH];
  for (int p = 0; p < a->count; p++)
    f[p] = w->wm ? a->xs[p] / 1073741824.0 : a->xs[p] / 32768.0;
  if (hi > w->vrows)
    hi = w->vrows;
  // Whole fours of positions go through the 4-position kernel; the 1-3
  // left over each through the one-position kernel, which costs less than
  // a 4-position pass for them (PERF_NOTES.md, fact 27, "one to three
  // positions go one at a time").
  int fours = a->count - a->count % 4;
  for (int b0 = lo - lo % block; b0 < hi; b0 += block) {
    int r0 = b0 > lo ? b0 : lo, r1 = b0 + block < hi ? b0 + block : hi;
    for (int h = 0; h < 2; h++)
      for (int p0 = 0; p0 < fours; p0 += 4)
        half4(w, a, b0, h, r0, r1, p0, f, y, ystride, t);
    for (int p = fours; p < a->count; p++)
      block1(w, a, p, b0, r0, r1, f[p], y + p * ystride, t);
  }
}

int
llm_vec_delta_step(double *S, const double *k, const double *q, const double *v, double beta,
    double decay, int kd, int vd, double *o)
{
  if (kernels() != KERNELS_VECTOR)
    return -1;
  delta(S, k, q, v, kd, vd, o, vtype64, beta, decay);
  return 0;
}
#else
int
llm_vec_delta_step(double *S, const double *k, const double *q, const double *v, double beta,
    double decay, int kd, int vd, double *o)
{
  return -1;
}

void
llm_vec_matmul(const struct llm_qmat *w, const struct llm_qact *a, double *y, int ystride, int lo,
    int hi, int t)
{
  fprintf(2, "llm_vec_matmul: this build has no vector kernels\n");
  exit(1);
}
#endif
