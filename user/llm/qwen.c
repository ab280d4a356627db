// The Qwen3.5 model: hybrid, LTY.BIN marks each layer as gated full
// attention or Gated DeltaNet. The full attention, MLP and head are the
// shared blocks of user/llm/layers.c; this file adds the Gated DeltaNet
// layer, as pyaisvc/model/reference.py computes it, and the forward pass that
// llmrun_qwen and ai_daemon run (llm_model_qwen).

#include "user/lib/user.h"
#include "kernel/include/aisvc.h"
#include "user/llm/layers.h"
#include "user/llm/qwen.h"

#define L2NORM_EPS 1e-6 // q/k l2norm epsilon (transformers' default)

// Causal depthwise conv of channel c of one position, in place on y
// (conv_dim): the window is the K-1 previous inputs in st (oldest first)
// and y itself; y_c = sum_j w[c][j] u_j[c] summed from 0.0, oldest tap
// first (conv_channels_run applies silu). st then drops its oldest row and
// takes the input.
static void
conv_channel(const struct llm_config *g, const double *w, double *st, double *y, int c)
{
  int cd = llm_conv_dim(g), K = g->conv_kernel;
  const double *wc = w + (uint64)c * K;
  double u = y[c], acc = 0.0;
  for (int j = 0; j < K - 1; j++)
    acc = acc + wc[j] * st[j * cd + c];
  acc = acc + wc[K - 1] * u;
  for (int j = 0; j + 1 < K - 1; j++)
    st[j * cd + c] = st[(j + 1) * cd + c];
  if (K > 1)
    st[(K - 2) * cd + c] = u;
  y[c] = acc;
}

// x = (x * (1 / sqrt(ss + 1e-6))) * c, ss the in-order sum of squares.
static void
l2norm(double *x, int n, double c)
{
  double ss = 0.0;
  for (int i = 0; i < n; i++)
    ss = ss + x[i] * x[i];
  double r = 1.0 / llm_sqrt(ss + L2NORM_EPS);
  for (int i = 0; i < n; i++)
    x[i] = (x[i] * r) * c;
}

// The q/k l2norms of one position after the conv, in place on y, its
// in_proj_qkv row (conv_dim).
static void
qk_norms(const struct llm_config *g, double *y)
{
  int kh = g->lin_k_heads, kd = g->lin_k_dim;
  double *q = y, *k = y + kh * kd;
  for (int h = 0; h < kh; h++) {
    l2norm(q + h * kd, kd, 1.0 / llm_sqrt((double)kd));
    l2norm(k + h * kd, kd, 1.0);
  }
}

// One Gated DeltaNet layer's parallel parts for every position of a step:
// the conv by channels, then the recurrence by value heads (two pool
// steps). A channel's window and a head's state are its own, and each
// goes through the positions in order, each on its request's cache.
struct delta_pass {
  const struct llm_config *g;
  const struct llm_layer *L;
  struct llm_session *s;
  const struct llm_step *st;
  int slot;
  const double *a, *b; // (n, v_heads) each
};

// Value head h at position p: the gated delta rule on the head's state,
// then out_h = rmsnorm(o) * silu(z_h) into s->mixed. t picks the scratch.
static void
delta_head(const struct delta_pass *d, int h, int p, int t)
{
  const struct llm_config *g = d->g;
  const struct llm_layer *L = d->L;
  int kh = g->lin_k_heads, kd = g->lin_k_dim, vh = g->lin_v_heads, vd = g->lin_v_dim;
  const double *y = d->s->qkv + p * llm_conv_dim(g), *z = d->s->z + (p * vh + h) * vd;
  const double *q = y, *k = y + kh * kd, *v = y + 2 * kh * kd;
  int hk = h / (vh / kh); // the key head this value head reads
  double beta = llm_sigmoid(d->b[p * vh + h]);
  double decay = llm_exp(-(llm_exp(L->a_log[h]) * llm_softplus(d->a[p * vh + h] + L->dt_bias[h])));
  double *S = d->st->kv[p]->state + ((uint64)d->slot * vh + h) * kd * vd;
  double *o = d->s->mixed + (p * vh + h) * vd;
  llm_delta_step(
      S, k + hk * kd, q + hk * kd, v + h * vd, beta, decay, kd, vd, d->s->delta_kv[t], o);
  llm_rmsnorm(o, L->norm, vd, (double)g->rms_eps, o);
  llm_silu_mul(z, o, o, vd); // o_j * silu(z_j): a product's order does not matter
}

// Pool step: conv channels [lo, hi) at every position, then silu of them
// (one llm_silu_mul per position: a loop in the hot page, not a call per
// channel).
static void
conv_channels_run(void *arg, int lo, int hi, int t)
{
  const struct delta_pass *d = arg;
  const struct llm_config *g = d->g;
  int cd = llm_conv_dim(g);
  for (int c = lo; c < hi; c++)
    for (int p = 0; p < d->st->n; p++)
      conv_channel(g, d->L->conv_w,
          d->st->kv[p]->conv + (uint64)d->slot * (g->conv_kernel - 1) * cd, d->s->qkv + p * cd, c);
  for (int p = 0; p < d->st->n; p++)
    llm_silu_mul(d->s->qkv + p * cd + lo, 0, d->s->qkv + p * cd + lo, hi - lo);
}

// Pool step: value heads [lo, hi) at every position.
static void
delta_heads_run(void *arg, int lo, int hi, int t)
{
  const struct delta_pass *d = arg;
  for (int h = lo; h < hi; h++)
    for (int p = 0; p < d->st->n; p++)
      delta_head(d, h, p, t);
}

// Cache c's conv window and state of linear layer `slot` start from zero
// (at a request's position 0).
static void
linear_reset(const struct llm_config *g, struct llm_cache *c, int slot)
{
  int cd = llm_conv_dim(g);
  uint64 ssize = (uint64)g->lin_v_heads * g->lin_k_dim * g->lin_v_dim;
  memset(c->conv + (uint64)slot * (g->conv_kernel - 1) * cd, 0,
      (g->conv_kernel - 1) * cd * sizeof(double));
  memset(c->state + slot * ssize, 0, ssize * sizeof(double));
}

// Gated DeltaNet layer l (LLM_LAYER_DELTANET) for the positions of st. The
// projections run batched; the conv and the recurrence go position by
// position, each on its request's cache. Position 0 starts from a zero
// state.
static void
apply_linear_layer(struct llm_runtime *rt, struct llm_session *s, int l, const struct llm_step *st)
{
  const struct llm_config *g = &rt->cfg;
  const struct llm_layer *L = &rt->layers[l];
  int dim = g->dim, cd = llm_conv_dim(g), slot = rt->slot[l];
  int vh = g->lin_v_heads, vdim = vh * g->lin_v_dim, n = st->n;
  llm_norm_in(rt, s, L->input_norm, n);
  llm_mm_in(s, s->xn, dim, dim, n);
  double *a = s->ab, *b = s->ab + LLM_BATCH * vh;
  struct llm_mm_out in[] = { { &L->qkv, s->qkv, cd }, { &L->z, s->z, vdim }, { &L->a, a, vh },
    { &L->b, b, vh } };
  llm_mm_many(s, in, 4);
  uint64 t = llm_clock(&s->tm);
  // A request's positions in a step are consecutive and in order, and its
  // position 0 comes first: resetting every position first, then running
  // each pass over all positions, gives every channel and head the order
  // it would have alone.
  for (int p = 0; p < n; p++)
    if (st->pos[p] == 0)
      linear_reset(g, st->kv[p], slot);
  struct delta_pass d = { g, L, s, st, slot, a, b };
  llm_pool_run(conv_channels_run, &d, cd, 64);
  for (int p = 0; p < n; p++)
    qk_norms(g, s->qkv + p * cd);
  llm_pool_run(delta_heads_run, &d, vh, 1);
  llm_charge(&s->tm, &s->tm.attn_us, t);
  llm_mm_in(s, s->mixed, vdim, vdim, n);
  llm_mm_residual(rt, s, &L->out);
}

// The positions of st: embedding, then per layer its token mixer (by
// LTY.BIN) and the MLP.
static void
qwen_forward(struct llm_runtime *rt, struct llm_session *s, const struct llm_step *st)
{
  llm_embed(rt, s, st);
  for (int l = 0; l < rt->cfg.n_layers; l++) {
    if (rt->layers[l].kind == LLM_LAYER_DELTANET)
      apply_linear_layer(rt, s, l, st);
    else
      llm_apply_full_layer(rt, s, l, st);
    llm_apply_ffn(rt, s, l, st->n);
  }
}

const struct llm_model llm_model_qwen = {
  .name = "llmrun_qwen",
  .default_dir = AI_QWEN_DIR,
  .model_kind = LLM_MODEL_QWEN,
  .forward = qwen_forward,
};
