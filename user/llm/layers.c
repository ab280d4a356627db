// Building blocks of the forward pass, shared by the Smol and Qwen models:
// embedding, full attention with its int8 KV cache, the MLP and the output
// head, each step as docs/ARITHMETIC.md writes it (and pyaisvc/reference.py
// computes it). A block works on n <= LLM_BATCH consecutive positions at
// once: the matmuls take all of them together (faster: each weight byte is
// decoded once for the batch), everything else runs per position, so each
// position's arithmetic is the same as alone. The positions may belong to
// different requests, each with its own cache (struct llm_step).

#include "user/lib/user.h"
#include "user/llm/layers.h"

// (contracts in user/llm/layers.h)
void
llm_mm_in(struct llm_session *s, const double *x, int xstride, int len, int n)
{
  uint64 t = llm_clock(s);
  s->act.n = len;
  llm_qact_fill(&s->act, x, xstride, n);
  llm_charge(s, &s->tm.matmul_us, t);
}

// y[p] = W x_p for the vectors given to llm_mm_in; a matrix whose width is
// not the input's is a bug: message and exit.
void
llm_mm(struct llm_session *s, const struct llm_qmat *w, double *y, int ystride)
{
  uint64 t = llm_clock(s);
  if (w->cols != s->act.n) {
    fprintf(2, "%s: llm_mm: matrix has %d columns, input %d\n", llm_prog,
        w->cols, s->act.n);
    exit(1);
  }
  llm_matmul(w, &s->act, y, ystride);
  llm_charge(s, &s->tm.matmul_us, t);
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
    const int8 *q = e->q + tok * dim;
    double ws = (double)e->ws[tok], *x = s->x + p * dim;
    for (int g = 0; g < ng; g++) {
      double sg = e->wm ? (ws * (double)e->wm[tok * ng + g]) / 32768.0 : ws;
      for (int k = g * LLM_GS; k < (g + 1) * LLM_GS; k++)
        x[k] = sg * (double)q[k];
    }
  }
}

// Rotate-half RoPE on the first rotary_dim dims of one head at `pos`:
// (a, b) = (x_i, x_{i+half}) -> (a c - b s, b c + a s).
static void
rope(const struct llm_runtime *rt, double *x, int pos)
{
  int rd = rt->cfg.rotary_dim, half = rd / 2;
  const float *cs = rt->rope + (uint64)pos * rd;
  for (int i = 0; i < half; i++) {
    double c = cs[i], sn = cs[half + i];
    double a = x[i], b = x[i + half];
    x[i] = a * c - b * sn;
    x[i + half] = b * c + a * sn;
  }
}

// Offsets of position t of full-attention layer `slot` in the KV cache.
static uint64
kv_row(const struct llm_runtime *rt, int slot, int t)
{
  return (uint64)slot * rt->cfg.runtime_seq_len + t;
}

// Steps 2-4 for one position: q/k norms, RoPE, and the quantised K and V
// of every kv head stored at `pos` of cache c.
static void
prepare_heads(struct llm_runtime *rt, struct llm_cache *c,
    const struct llm_layer *L, int slot, int pos,
    double *q, double *k, double *v)
{
  const struct llm_config *g = &rt->cfg;
  int hd = g->head_dim, qstep = hd * (g->flags & LLM_GATED ? 2 : 1);
  int kvd = g->n_kv_heads * hd;
  double eps = (double)g->rms_eps;
  for (int h = 0; h < g->n_heads; h++) {
    if (g->flags & LLM_QKNORM)
      llm_rmsnorm(q + h * qstep, L->q_norm, hd, eps, q + h * qstep);
    rope(rt, q + h * qstep, pos);
  }
  uint64 row = kv_row(rt, slot, pos);
  for (int h = 0; h < g->n_kv_heads; h++) {
    if (g->flags & LLM_QKNORM)
      llm_rmsnorm(k + h * hd, L->k_norm, hd, eps, k + h * hd);
    rope(rt, k + h * hd, pos);
    uint64 qo = row * kvd + h * hd, mo = row * (kvd / LLM_GS) + h * (hd / LLM_GS);
    llm_quantize(k + h * hd, hd, c->kq + qo, c->km + mo, &c->kxs[row * g->n_kv_heads + h]);
    llm_quantize(v + h * hd, hd, c->vq + qo, c->vm + mo, &c->vxs[row * g->n_kv_heads + h]);
  }
}

// Steps 5-6 for one query head: scores against positions 0..pos of cache
// c, then s->score[t] = e_t = exp(score_t - max); returns inv = 1 / sum e_t.
static double
head_softmax(struct llm_runtime *rt, struct llm_session *s, const struct llm_cache *c,
    int slot, int kvh, const double *qh, int pos)
{
  const struct llm_config *g = &rt->cfg;
  int hd = g->head_dim, kvd = g->n_kv_heads * hd, npos = pos + 1;
  double xsq;
  llm_quantize(qh, hd, s->qhead_q, s->qhead_m, &xsq);
  double a = (xsq * (1.0 / llm_sqrt((double)hd))) / 1073741824.0;
  uint64 row = kv_row(rt, slot, 0);
  llm_attn_scores(s->qhead_q, s->qhead_m, hd / LLM_GS, c->kq + row * kvd + kvh * hd,
      c->km + row * (kvd / LLM_GS) + kvh * (hd / LLM_GS),
      kvd, kvd / LLM_GS, npos, s->dot);
  const double *kxs = c->kxs + row * g->n_kv_heads + kvh;
  double mx = 0.0;
  for (int t = 0; t < npos; t++) {
    s->score[t] = ((double)s->dot[t] * kxs[t * g->n_kv_heads]) * a;
    if (t == 0 || s->score[t] > mx)
      mx = s->score[t];
  }
  double sum = 0.0;
  for (int t = 0; t < npos; t++) {
    s->score[t] = llm_exp(s->score[t] - mx);
    sum = sum + s->score[t];
  }
  return 1.0 / sum;
}

// Step 7 for one group of 32 dims of one head (values from cache kc): weights w_t = e_t * sv_t
// re-quantised to integers W_t in [0, 32767], A_k = sum_t W_t qv_{t,k},
// out_k = (A_k * (wmax / 32767)) * inv.
static void
head_values(struct llm_runtime *rt, struct llm_session *s, const struct llm_cache *kc,
    int slot, int kvh, int grp, int pos, double inv, double *out)
{
  const struct llm_config *g = &rt->cfg;
  int hd = g->head_dim, kvd = g->n_kv_heads * hd, npos = pos + 1;
  int gi = kvh * (hd / LLM_GS) + grp; // the group's index within a row
  uint64 row = kv_row(rt, slot, 0);
  double wmax = 0.0;
  for (int t = 0; t < npos; t++) {
    double sv = (kc->vxs[(row + t) * g->n_kv_heads + kvh] * (double)kc->vm[(row + t) * (kvd / LLM_GS) + gi]) / 32768.0;
    s->val_w[t] = s->score[t] * sv;
    if (s->val_w[t] > wmax)
      wmax = s->val_w[t];
  }
  if (wmax == 0.0) {
    memset(out, 0, LLM_GS * sizeof(double));
    return;
  }
  double c = 32767.0 / wmax, f = wmax / 32767.0;
  for (int t = 0; t < npos; t++)
    s->val_wq[t] = (int32)llm_rint(s->val_w[t] * c);
  int64 acc[LLM_GS];
  llm_attn_values(s->val_wq, kc->vq + row * kvd + gi * LLM_GS, kvd, npos, acc);
  for (int k = 0; k < LLM_GS; k++)
    out[k] = ((double)acc[k] * f) * inv;
}

// Steps 5-8 for every query head of position pos of cache c; q holds the
// heads (each followed by its gate when flags & LLM_GATED), out gets
// n_heads*head_dim.
static void
attend(struct llm_runtime *rt, struct llm_session *s, const struct llm_cache *c,
    int slot, int pos, const double *q, double *out)
{
  const struct llm_config *g = &rt->cfg;
  int hd = g->head_dim, gated = g->flags & LLM_GATED;
  int qstep = hd * (gated ? 2 : 1), rep = g->n_heads / g->n_kv_heads;
  for (int h = 0; h < g->n_heads; h++) {
    const double *qh = q + h * qstep;
    double *o = out + h * hd;
    double inv = head_softmax(rt, s, c, slot, h / rep, qh, pos);
    for (int grp = 0; grp < hd / LLM_GS; grp++)
      head_values(rt, s, c, slot, h / rep, grp, pos, inv, o + grp * LLM_GS);
    if (gated)
      for (int k = 0; k < hd; k++)
        o[k] = o[k] * llm_sigmoid(qh[hd + k]);
  }
}

// x = x + y, both (n, dim).
void
llm_residual(struct llm_runtime *rt, struct llm_session *s, const double *y, int n)
{
  int len = n * rt->cfg.dim;
  for (int i = 0; i < len; i++)
    s->x[i] = s->x[i] + y[i];
}

// Full attention (docs/ARITHMETIC.md, "Full attention") of layer l for
// the positions of st.
void
llm_apply_full_layer(struct llm_runtime *rt, struct llm_session *s, int l,
    const struct llm_step *st)
{
  int n = st->n;
  const struct llm_config *g = &rt->cfg;
  const struct llm_layer *L = &rt->layers[l];
  int dim = g->dim, kvd = g->n_kv_heads * g->head_dim;
  int qd = g->n_heads * g->head_dim, qrows = L->wq.rows, slot = rt->slot[l];
  // 1. xn = rmsnorm(x); q, k, v = Wq xn, Wk xn, Wv xn
  for (int p = 0; p < n; p++)
    llm_rmsnorm(s->x + p * dim, L->input_norm, dim, (double)g->rms_eps, s->xn + p * dim);
  llm_mm_in(s, s->xn, dim, dim, n);
  llm_mm(s, &L->wq, s->q, qrows);
  llm_mm(s, &L->wk, s->k, kvd);
  llm_mm(s, &L->wv, s->v, kvd);
  // 2-8. norms, RoPE, cache, attention (keys of the whole batch first:
  // position p attends to its request's earlier positions in the batch too)
  uint64 t = llm_clock(s);
  for (int p = 0; p < n; p++)
    prepare_heads(rt, st->kv[p], L, slot, st->pos[p], s->q + p * qrows,
        s->k + p * kvd, s->v + p * kvd);
  for (int p = 0; p < n; p++)
    attend(rt, s, st->kv[p], slot, st->pos[p], s->q + p * qrows, s->mixed + p * qd);
  llm_charge(s, &s->tm.attn_us, t);
  // 9. x = x + Wo out
  llm_mm_in(s, s->mixed, qd, qd, n);
  llm_mm(s, &L->wo, s->proj, dim);
  llm_residual(rt, s, s->proj, n);
}

// MLP: x = x + Wdown (silu(Wgate xn) * (Wup xn)), xn = rmsnorm(x, post_norm).
void
llm_apply_ffn(struct llm_runtime *rt, struct llm_session *s, int l, int n)
{
  const struct llm_config *g = &rt->cfg;
  const struct llm_layer *L = &rt->layers[l];
  int dim = g->dim, hid = g->hidden_dim;
  for (int p = 0; p < n; p++)
    llm_rmsnorm(s->x + p * dim, L->post_norm, dim, (double)g->rms_eps, s->xn + p * dim);
  llm_mm_in(s, s->xn, dim, dim, n);
  llm_mm(s, &L->gate, s->gate, hid);
  llm_mm(s, &L->up, s->up, hid);
  for (int i = 0; i < n * hid; i++)
    s->xn[i] = llm_silu(s->gate[i]) * s->up[i];
  llm_mm_in(s, s->xn, hid, hid, n);
  llm_mm(s, &L->down, s->proj, dim);
  llm_residual(rt, s, s->proj, n);
}

// Output head at batch positions at[0..n): logits_i = EMB rmsnorm(x[at[i]],
// NRM) in one matmul; ids[i] is the first index of the maximum of logits_i.
void
llm_heads(struct llm_runtime *rt, struct llm_session *s, const int *at, int n,
    int *ids)
{
  const struct llm_config *g = &rt->cfg;
  int dim = g->dim, V = g->vocab_size;
  if (n == 0)
    return;
  for (int i = 0; i < n; i++)
    llm_rmsnorm(s->x + at[i] * dim, rt->final_norm, dim, (double)g->rms_eps, s->xn + i * dim);
  llm_mm_in(s, s->xn, dim, dim, n);
  llm_mm(s, &rt->emb, s->logits, V);
  for (int i = 0; i < n; i++) {
    const double *lg = s->logits + (uint64)i * V;
    int best = 0;
    for (int k = 1; k < V; k++)
      if (lg[k] > lg[best])
        best = k;
    ids[i] = best;
  }
}
