// Building blocks of a forward pass (user/llm/layers.c), shared by the
// models: embedding, full attention, MLP, output head, and the batched
// matmul step every block uses. Each works on the n <= LLM_BATCH positions
// of a step (struct llm_step: positions of one or several requests, each
// with its own cache; docs/ARITHMETIC.md names the steps).
#ifndef AISVC_LLM_LAYERS_H
#define AISVC_LLM_LAYERS_H

#include "user/llm/session.h"

// x[p] = the embedding of the id at step position p.
void llm_embed(struct llm_runtime *rt, struct llm_session *s, const struct llm_step *st);
// x = x + full attention of layer l for the positions of st.
void llm_apply_full_layer(
    struct llm_runtime *rt, struct llm_session *s, int l, const struct llm_step *st);
// x = x + the MLP of layer l, for n positions.
void llm_apply_ffn(struct llm_runtime *rt, struct llm_session *s, int l, int n);
// The next token (greedy) from the hidden state at each of the batch
// positions at[0..n) (n <= LLM_BATCH), into ids[0..n), in one matmul.
void llm_heads(struct llm_runtime *rt, struct llm_session *s, const int *at, int n, int *ids);

// xn[p] = rmsnorm(x[p], w) for the n positions of a step (across the
// thread pool when n > 1).
void llm_norm_in(struct llm_runtime *rt, struct llm_session *s, const double *w, int n);
// Quantise n vectors of length len (row stride xstride) as the input of
// the next llm_mm calls; llm_mm then writes y[p] = W x_p (row stride
// ystride). Both charge their time to matmul_us under --profile.
void llm_mm_in(struct llm_session *s, const double *x, int xstride, int len, int n);
void llm_mm(struct llm_session *s, const struct llm_qmat *w, double *y, int ystride);
// A block's output joins the residual stream: x[p] = x[p] + W x_p for the
// positions of the input (W has dim rows; s->proj keeps W x_p), in one
// pool step: each thread adds the rows it computed, so no serial pass
// over x follows the matmul.
void llm_mm_residual(struct llm_runtime *rt, struct llm_session *s, const struct llm_qmat *w);
// Several matmuls of the same input in one step of the thread pool (one
// barrier instead of one per matrix): out[j].y = out[j].w x_p.
struct llm_mm_out {
  const struct llm_qmat *w;
  double *y;
  int ystride;
};
void llm_mm_many(struct llm_session *s, const struct llm_mm_out *out, int count);

#endif
