// Building blocks of the forward pass, shared by the Smol and Qwen models:
// embedding, full attention with its int8 KV cache, the MLP and the output
// head, each step as docs/ARITHMETIC.md writes it (and pyaisvc/model/reference.py
// computes it). A block works on n <= LLM_BATCH consecutive positions at
// once: the matmuls take all of them together (faster: each weight byte is
// decoded once for the batch), everything else runs per position, so each
// position's arithmetic is the same as alone. The positions may belong to
// different requests, each with its own cache (struct llm_step).

#include "user/lib/user.h"
#include "user/llm/layers.h"
#include "user/llm/kernels_vec.h"
#include "user/llm/pool.h"

// The groups of llm_mm_in's quantisation, one pool step: item g is
// group g of every position.
struct quant_step {
  struct llm_qact *a;
  const double *x;
  int xstride;
};

// Pool step (struct quant_step): quantizes the activation groups [lo, hi).
static void
quant_groups(void *arg, int lo, int hi, int t)
{
  struct quant_step *q = arg;
  llm_qact_groups(q->a, q->x, q->xstride, lo, hi);
}

// (contracts in user/llm/layers.h)
void
llm_mm_in(struct llm_session *s, const double *x, int xstride, int len, int n)
{
  uint64 t = llm_clock(&s->tm);
  s->act.n = len;
  llm_qact_start(&s->act, x, xstride, n);
  struct quant_step q = { &s->act, x, xstride };
  llm_pool_run(quant_groups, &q, len / LLM_GS, 1);
  llm_charge(&s->tm, &s->tm.matmul_us, t);
}

// One pool step of up to LLM_MM_MAX matmuls on the same input: item i is
// a row of the matrices' rows laid end to end. With x set, each row r of
// y is also added to x (x[p][r] = x[p][r] + y[p][r], same row stride), by
// the thread that computed it: the add needs nothing from other rows.
struct mm_step {
  int count;
  const struct llm_mm_out *out;
  const struct llm_qact *a;
  double *x;
};

// Pool step (struct mm_step): rows [lo, hi) of the outputs' matmuls, counted
// across the outputs in turn, each row added to x when x is set.
static void
mm_rows(void *arg, int lo, int hi, int t)
{
  struct mm_step *m = arg;
  int base = 0;
  for (int j = 0; j < m->count && base < hi; j++) {
    const struct llm_mm_out *o = &m->out[j];
    int r0 = lo > base ? lo - base : 0, r1 = hi - base < o->w->rows ? hi - base : o->w->rows;
    if (r0 < r1) {
      llm_matmul_rows(o->w, m->a, o->y, o->ystride, r0, r1, t);
      for (int p = 0; m->x && p < m->a->count; p++)
        for (int i = p * o->ystride + r0; i < p * o->ystride + r1; i++)
          m->x[i] = m->x[i] + o->y[i];
    }
    base += o->w->rows;
  }
}

// The matmuls of out as one pool step, adding each row to x when x is
// set. A matrix whose width is not the input's is a bug: message and exit.
static void
mm_step_run(struct llm_session *s, const struct llm_mm_out *out, int count, double *x)
{
  uint64 t = llm_clock(&s->tm);
  int rows = 0;
  for (int j = 0; j < count; j++) {
    if (out[j].w->cols != s->act.n) {
      fprintf(
          2, "%s: llm_mm: matrix has %d columns, input %d\n", llm_prog, out[j].w->cols, s->act.n);
      exit(1);
    }
    rows += out[j].w->rows;
  }
  struct mm_step m = { count, out, &s->act, x };
  llm_pool_run(mm_rows, &m, rows, llm_row_grain());
  llm_charge(&s->tm, &s->tm.matmul_us, t);
}

// (contracts in user/llm/layers.h)
void
llm_mm_many(struct llm_session *s, const struct llm_mm_out *out, int count)
{
  mm_step_run(s, out, count, 0);
}

void
llm_mm(struct llm_session *s, const struct llm_qmat *w, double *y, int ystride)
{
  struct llm_mm_out o = { w, y, ystride };
  mm_step_run(s, &o, 1, 0);
}

// A matrix whose height is not the model's width is a bug: message and exit.
void
llm_mm_residual(struct llm_runtime *rt, struct llm_session *s, const struct llm_qmat *w)
{
  if (w->rows != rt->cfg.dim) {
    fprintf(2, "%s: llm_mm_residual: matrix has %d rows, the model %d dims\n", llm_prog, w->rows,
        rt->cfg.dim);
    exit(1);
  }
  struct llm_mm_out o = { w, s->proj, rt->cfg.dim };
  mm_step_run(s, &o, 1, s->x);
}

// The positions of llm_norm_in, one pool step: item p is position p.
struct norm_step {
  struct llm_session *s;
  const double *w;
  int dim;
  double eps;
};

// Pool step (struct norm_step): rmsnorm of positions [lo, hi) into xn.
static void
norm_positions(void *arg, int lo, int hi, int t)
{
  struct norm_step *m = arg;
  for (int p = lo; p < hi; p++)
    llm_rmsnorm(m->s->x + p * m->dim, m->w, m->dim, m->eps, m->s->xn + p * m->dim);
}

// (contract in user/llm/layers.h)
void
llm_norm_in(struct llm_runtime *rt, struct llm_session *s, const double *w, int n)
{
  struct norm_step m = { s, w, rt->cfg.dim, (double)rt->cfg.rms_eps };
  llm_pool_run(norm_positions, &m, n, 1);
}

// x[p] = row st->kv[p]->seq[st->pos[p]] of EMB, dequantised:
// v1/v2 x_k = ws * q_k; v3 x_k = ((ws * wm_g) / 32768) * q_k.
void
llm_embed(struct llm_runtime *rt, struct llm_session *s, const struct llm_step *st)
{
  int dim = rt->cfg.dim, ng = dim / LLM_GS;
  const struct llm_qmat *e = &rt->emb;
  for (int p = 0; p < st->n; p++) {
    uint64 tok = st->kv[p]->seq[st->pos[p]];
    double ws = e->ws[tok], *x = s->x + p * dim;
    for (int g = 0; g < ng; g++) {
      double sg = e->wm ? (ws * (double)e->wm[tok * ng + g]) / 32768.0 : ws;
      for (int k = g * LLM_GS; k < (g + 1) * LLM_GS; k++)
        x[k] = sg * (double)llm_qmat_weight(e, tok, k);
    }
  }
}

// Rotate-half RoPE on the first rotary_dim dims of one head at `pos`:
// (a, b) = (x_i, x_{i+half}) -> (a c - b s, b c + a s).
static void
rope(const struct llm_runtime *rt, double *x, int pos)
{
  int rd = rt->cfg.rotary_dim, half = rd / 2;
  const double *cs = rt->rope + (uint64)pos * rd;
  for (int i = 0; i < half; i++) {
    double c = cs[i], sn = cs[half + i];
    double a = x[i], b = x[i + half];
    x[i] = a * c - b * sn;
    x[i + half] = b * c + a * sn;
  }
}

// Steps 2-4 for one query head at `pos`: its norm (if the model has
// one) and RoPE, in place.
static void
prepare_query(struct llm_runtime *rt, const struct llm_layer *L, int pos, double *qh)
{
  const struct llm_config *g = &rt->cfg;
  if (g->flags & LLM_QKNORM)
    llm_rmsnorm(qh, L->q_norm, g->head_dim, (double)g->rms_eps, qh);
  rope(rt, qh, pos);
}

// Steps 2-4 for the keys and values of one position: k norm, RoPE, and
// the quantised K and V of every kv head stored at `pos` of cache c.
static void
prepare_kv(struct llm_runtime *rt, struct llm_cache *c, const struct llm_layer *L, int slot,
    int pos, double *k, double *v)
{
  const struct llm_config *g = &rt->cfg;
  int hd = g->head_dim, kvd = g->n_kv_heads * hd;
  double eps = (double)g->rms_eps;
  struct llm_kvpool *kp = c->tab.pool;
  uint64 row = llm_kv_row(&c->tab, slot, pos);
  for (int h = 0; h < g->n_kv_heads; h++) {
    if (g->flags & LLM_QKNORM)
      llm_rmsnorm(k + h * hd, L->k_norm, hd, eps, k + h * hd);
    rope(rt, k + h * hd, pos);
    uint64 qo = row * kvd + h * hd, mo = row * (kvd / LLM_GS) + h * (hd / LLM_GS);
    llm_quantize(k + h * hd, hd, kp->kq + qo, kp->km + mo, &kp->kxs[row * g->n_kv_heads + h]);
    llm_quantize(v + h * hd, hd, kp->vq + qo, kp->vm + mo, &kp->vxs[row * g->n_kv_heads + h]);
  }
}

// Steps 5-6 for one query head: scores against positions 0..pos of cache
// c, block by block (D_t is one position's), then sc->score[t] = e_t =
// exp(score_t - max); returns inv = 1 / sum e_t.
static double
head_softmax(struct llm_runtime *rt, struct llm_head_scratch *sc, const struct llm_cache *c,
    int slot, int kvh, const double *qh, int pos)
{
  const struct llm_config *g = &rt->cfg;
  const struct llm_kvpool *kp = c->tab.pool;
  int hd = g->head_dim, kvd = g->n_kv_heads * hd, npos = pos + 1, nkvh = g->n_kv_heads;
  double xsq;
  llm_quantize(qh, hd, sc->qhead_q, sc->qhead_m, &xsq);
  double a = (xsq * (1.0 / llm_sqrt((double)hd))) / 1073741824.0;
  double mx = 0.0;
  int64 mxkey = 0; // llm_order_key(mx)
  for (int t0 = 0; t0 < npos; t0 += LLM_KV_BLOCK) {
    int nb = npos - t0 < LLM_KV_BLOCK ? npos - t0 : LLM_KV_BLOCK;
    uint64 row = llm_kv_row(&c->tab, slot, t0);
    llm_attn_scores(sc->qhead_q, sc->qhead_m, hd / LLM_GS, kp->kq + row * kvd + kvh * hd,
        kp->km + row * (kvd / LLM_GS) + kvh * (hd / LLM_GS), kvd, kvd / LLM_GS, nb, sc->dot + t0);
    const double *kxs = kp->kxs + row * nkvh + kvh;
    for (int t = t0; t < t0 + nb; t++) {
      sc->score[t] = ((double)sc->dot[t] * kxs[(t - t0) * nkvh]) * a;
      int64 key = llm_order_key(sc->score[t]);
      if (t == 0 || key > mxkey) {
        mx = sc->score[t];
        mxkey = key;
      }
    }
  }
  return 1.0 / llm_softmax_exps(sc->score, npos, mx);
}

// Step 7 for one group of 32 dims of one head (values from cache kc):
// weights w_t = e_t * sv_t re-quantised to integers W_t in [0, 32767],
// A_k = sum_t W_t qv_{t,k} (block by block: integer sums, exact in any
// grouping), out_k = (A_k * (wmax / 32767)) * inv.
static void
head_values(struct llm_runtime *rt, struct llm_head_scratch *sc, const struct llm_cache *kc,
    int slot, int kvh, int grp, int pos, double inv, double *out)
{
  const struct llm_config *g = &rt->cfg;
  const struct llm_kvpool *kp = kc->tab.pool;
  int hd = g->head_dim, kvd = g->n_kv_heads * hd, npos = pos + 1, nkvh = g->n_kv_heads;
  int gi = kvh * (hd / LLM_GS) + grp; // the group's index within a row
  double wmax = 0.0;
  int64 wmaxkey = 0; // llm_order_key(wmax)
  for (int t = 0; t < npos; t++) {
    uint64 row = llm_kv_row(&kc->tab, slot, t);
    double sv = (kp->vxs[row * nkvh + kvh] * (double)kp->vm[row * (kvd / LLM_GS) + gi]) / 32768.0;
    sc->val_w[t] = sc->score[t] * sv;
    int64 key = llm_order_key(sc->val_w[t]);
    if (key > wmaxkey) {
      wmax = sc->val_w[t];
      wmaxkey = key;
    }
  }
  if (wmax == 0.0) {
    memset(out, 0, LLM_GS * sizeof(double));
    return;
  }
  double c = 32767.0 / wmax, f = wmax / 32767.0;
  // 0 <= w_t * c <= wmax * c, about 32767 unless c overflowed
  if (wmax * c < LLM_RINT_SMALL_MAX)
    for (int t = 0; t < npos; t++)
      sc->val_wq[t] = (int32)llm_rint_small(sc->val_w[t] * c);
  else
    for (int t = 0; t < npos; t++)
      sc->val_wq[t] = (int32)llm_rint(sc->val_w[t] * c);
  int64 acc[LLM_GS] = { 0 }, part[LLM_GS];
  for (int t0 = 0; t0 < npos; t0 += LLM_KV_BLOCK) {
    int nb = npos - t0 < LLM_KV_BLOCK ? npos - t0 : LLM_KV_BLOCK;
    uint64 row = llm_kv_row(&kc->tab, slot, t0);
    llm_attn_values(sc->val_wq + t0, kp->vq + row * kvd + gi * LLM_GS, kvd, nb, part);
    for (int k = 0; k < LLM_GS; k++)
      acc[k] += part[k];
  }
  for (int k = 0; k < LLM_GS; k++)
    out[k] = ((double)acc[k] * f) * inv;
}

// Steps 2-8 for the query heads of the step's positions, one pool step:
// item i is head i % n_heads of step position p = i / n_heads (position
// st->pos[p] of cache st->kv[p]), with the thread's own scratch; its query
// norm and RoPE (steps 2-3) are done in place first. s->q
// holds the heads (each followed by its gate when flags & LLM_GATED);
// s->mixed gets n_heads*head_dim per position.
struct attend_step {
  struct llm_runtime *rt;
  struct llm_session *s;
  const struct llm_step *st;
  int slot, qrows; // qrows: s->q's row stride
  const struct llm_layer *L;
};

// Steps 2-4 for the keys and values of the step's positions, one pool
// step before attend_heads: item p is position p, whose K and V go to its
// own row of its cache. (The query heads' steps 2-4 run in attend_heads:
// each head needs only its own.)
static void
prepare_positions(void *arg, int lo, int hi, int t)
{
  struct attend_step *a = arg;
  int kvd = a->rt->cfg.n_kv_heads * a->rt->cfg.head_dim;
  for (int p = lo; p < hi; p++)
    prepare_kv(
        a->rt, a->st->kv[p], a->L, a->slot, a->st->pos[p], a->s->k + p * kvd, a->s->v + p * kvd);
}

// On a page of its own, with the loops over positions it inlines
// (docs/PERF_NOTES.md, facts 4 and 37, "hot code in one 4 KiB page" and "a
// call or return across pages costs a lookup").
static __attribute__((section(".text.hot.attn"), aligned(4096))) void
attend_heads(void *arg, int lo, int hi, int t)
{
  struct attend_step *a = arg;
  struct llm_runtime *rt = a->rt;
  struct llm_session *s = a->s;
  const struct llm_config *g = &rt->cfg;
  int hd = g->head_dim, gated = g->flags & LLM_GATED, nh = g->n_heads;
  int qstep = hd * (gated ? 2 : 1), rep = nh / g->n_kv_heads;
  for (int i = lo; i < hi; i++) {
    int p = i / nh, h = i % nh, pos = a->st->pos[p];
    const struct llm_cache *c = a->st->kv[p];
    double *qh = s->q + p * a->qrows + h * qstep;
    double *o = s->mixed + p * nh * hd + h * hd;
    prepare_query(rt, a->L, pos, qh);
    double inv = head_softmax(rt, &s->head[t], c, a->slot, h / rep, qh, pos);
    for (int grp = 0; grp < hd / LLM_GS; grp++)
      head_values(rt, &s->head[t], c, a->slot, h / rep, grp, pos, inv, o + grp * LLM_GS);
    if (gated)
      for (int k = 0; k < hd; k++)
        o[k] = o[k] * llm_sigmoid(qh[hd + k]);
  }
}

// Full attention (docs/ARITHMETIC.md, "Full attention") of layer l for
// the positions of st.
void
llm_apply_full_layer(
    struct llm_runtime *rt, struct llm_session *s, int l, const struct llm_step *st)
{
  int n = st->n;
  const struct llm_config *g = &rt->cfg;
  const struct llm_layer *L = &rt->layers[l];
  int dim = g->dim, kvd = g->n_kv_heads * g->head_dim;
  int qd = g->n_heads * g->head_dim, qrows = L->wq.rows, slot = rt->slot[l];
  // 1. xn = rmsnorm(x); q, k, v = Wq xn, Wk xn, Wv xn
  llm_norm_in(rt, s, L->input_norm, n);
  llm_mm_in(s, s->xn, dim, dim, n);
  struct llm_mm_out qkv[] = { { &L->wq, s->q, qrows }, { &L->wk, s->k, kvd },
    { &L->wv, s->v, kvd } };
  llm_mm_many(s, qkv, 3);
  // 2-8. norms, RoPE, cache, attention (keys of the whole batch first:
  // position p attends to its request's earlier positions in the batch too)
  uint64 t = llm_clock(&s->tm);
  struct attend_step a = { rt, s, st, slot, qrows, L };
  llm_pool_run(prepare_positions, &a, n, 1);
  llm_pool_run(attend_heads, &a, n * g->n_heads, 1);
  llm_charge(&s->tm, &s->tm.attn_us, t);
  // 9. x = x + Wo out
  llm_mm_in(s, s->mixed, qd, qd, n);
  llm_mm_residual(rt, s, &L->wo);
}

// The MLP's first pool step, item r of hidden_dim: rows r of Wgate and
// Wup for every position, then xn = silu(gate) * up at r, which needs
// nothing from the other rows, so it costs no barrier of its own.
struct gate_up_step {
  struct llm_session *s;
  const struct llm_layer *L;
  int hid;
};

// Pool step (struct gate_up_step): rows [lo, hi) of gate and up for every
// position, then silu(gate) * up into xn.
static void
gate_up_silu(void *arg, int lo, int hi, int t)
{
  struct gate_up_step *m = arg;
  struct llm_session *s = m->s;
  int hid = m->hid;
  llm_matmul_rows(&m->L->gate, &s->act, s->gate, hid, lo, hi, t);
  llm_matmul_rows(&m->L->up, &s->act, s->up, hid, lo, hi, t);
  for (int p = 0; p < s->act.count; p++)
    llm_silu_mul(s->gate + p * hid + lo, s->up + p * hid + lo, s->xn + p * hid + lo, hi - lo);
}

// MLP: x = x + Wdown (silu(Wgate xn) * (Wup xn)), xn = rmsnorm(x, post_norm).
void
llm_apply_ffn(struct llm_runtime *rt, struct llm_session *s, int l, int n)
{
  const struct llm_config *g = &rt->cfg;
  const struct llm_layer *L = &rt->layers[l];
  int dim = g->dim, hid = g->hidden_dim;
  llm_norm_in(rt, s, L->post_norm, n);
  llm_mm_in(s, s->xn, dim, dim, n);
  uint64 t = llm_clock(&s->tm);
  struct gate_up_step gu = { s, L, hid };
  llm_pool_run(gate_up_silu, &gu, hid, llm_row_grain());
  llm_charge(&s->tm, &s->tm.matmul_us, t);
  llm_mm_in(s, s->xn, hid, hid, n);
  llm_mm_residual(rt, s, &L->down);
}

// The head's pool step: logits rows [lo, hi) of every position, merged
// per position i into best[t][i], thread t's first index of the maximum
// over the chunks it ran (-1 before any).
struct head_step {
  struct llm_runtime *rt;
  struct llm_session *s;
  int n;
  int best[LLM_MAX_THREADS][LLM_BATCH];
};

// Does index c (its logit's llm_order_key kc) beat index b (key kb; -1:
// none yet) as the first index of the maximum? A larger value wins, an
// equal one the smaller index: the answer then does not depend on which
// chunks were merged first.
static int
beats(int64 kc, int c, int64 kb, int b)
{
  return b < 0 || kc > kb || (kc == kb && c < b);
}

// Pool step (struct head_step): the logits' rows [lo, hi) for each
// position, and thread t's best id so far for each (ties to the lower id).
static void
head_rows(void *arg, int lo, int hi, int t)
{
  struct head_step *h = arg;
  int V = h->rt->cfg.vocab_size;
  llm_matmul_rows(&h->rt->emb, &h->s->act, h->s->logits, V, lo, hi, t);
  for (int i = 0; i < h->n; i++) {
    const double *lg = h->s->logits + (uint64)i * V;
    int b = h->best[t][i];
    int64 kb = b < 0 ? 0 : llm_order_key(lg[b]);
    for (int k = lo; k < hi; k++) {
      int64 kk = llm_order_key(lg[k]);
      if (beats(kk, k, kb, b)) {
        b = k;
        kb = kk;
      }
    }
    h->best[t][i] = b;
  }
}

// Output head at batch positions at[0..n): logits_i = EMB rmsnorm(x[at[i]],
// NRM) in one pool step; ids[i] is the first index of the maximum of
// logits_i: each thread's first maximum over its chunks, then the first
// of those, as one pass would.
void
llm_heads(struct llm_runtime *rt, struct llm_session *s, const int *at, int n, int *ids)
{
  const struct llm_config *g = &rt->cfg;
  int dim = g->dim, V = g->vocab_size;
  if (n == 0)
    return;
  for (int i = 0; i < n; i++)
    llm_rmsnorm(s->x + at[i] * dim, rt->final_norm, dim, (double)g->rms_eps, s->xn + i * dim);
  llm_mm_in(s, s->xn, dim, dim, n);
  uint64 t = llm_clock(&s->tm);
  struct head_step h = { rt, s, n };
  int nt = llm_pool_threads();
  for (int k = 0; k < nt; k++)
    for (int i = 0; i < n; i++)
      h.best[k][i] = -1;
  llm_pool_run(head_rows, &h, V, llm_row_grain());
  llm_charge(&s->tm, &s->tm.matmul_us, t);
  for (int i = 0; i < n; i++) {
    const double *lg = s->logits + (uint64)i * V;
    int best = -1;
    int64 kbest = 0;
    for (int k = 0; k < nt; k++) {
      int c = h.best[k][i];
      if (c < 0)
        continue;
      int64 kc = llm_order_key(lg[c]);
      if (beats(kc, c, kbest, best)) {
        best = c;
        kbest = kc;
      }
    }
    ids[i] = best;
  }
}
