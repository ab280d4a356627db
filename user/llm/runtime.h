// The shared LLM runtime of llmrun_smol and llmrun_qwen (user/llm/runtime.c).
//
// State is split by role, each part with its set-up and tear-down:
//   struct llm_config   hyperparameters from CFG.BIN
//   struct llm_runtime  the weights (one buffer per asset file, read whole)
//   struct llm_session  the KV cache, Gated DeltaNet state and workspace,
//                       sized from the config and allocated before the first
//                       token: the forward pass never allocates.
// A program supplies its forward pass (struct llm_model) and calls
// llm_main(), which parses the command line and serves the requests.
#ifndef AISVC_LLMRUN_SUPPORT_H
#define AISVC_LLMRUN_SUPPORT_H

#include "user/llm/kernels.h"

#define LLM_MAX_PROMPT 255 // most prompt ids one request may carry

struct llm_config {
  int version;    // 1, 2 (course formats) or 3 (ours, group-scaled)
  int model_kind; // 0 smol/llama, 1 qwen
  int flags;      // bit0 attention output gate, bit1 q/k RMSNorm
  int dim, hidden_dim, n_layers, n_heads, n_kv_heads, head_dim;
  int vocab_size, seq_len, runtime_seq_len;
  float rms_eps, rope_theta;
  int rotary_dim;
  int lin_k_heads, lin_v_heads, lin_k_dim, lin_v_dim, conv_kernel;
  int group_size; // 32 for version 3, 0 for versions 1/2
};

#define LLM_GATED  1 // flags: attention output gate
#define LLM_QKNORM 2 // flags: per-head q/k RMSNorm

// One layer's weights, pointing into its Lxx.BIN buffer.
struct llm_layer {
  int kind;                // 0 full attention, 1 Gated DeltaNet
  const float *input_norm; // (dim)
  const float *post_norm;  // (dim)
  // full attention
  const float *q_norm, *k_norm; // (head_dim), when flags & LLM_QKNORM
  struct llm_qmat wq;           // (n_heads * head_dim * (1 or 2), dim)
  struct llm_qmat wk, wv;       // (n_kv_heads * head_dim, dim)
  struct llm_qmat wo;           // (dim, n_heads * head_dim)
  // Gated DeltaNet
  const float *conv_w;          // (conv_dim, conv_kernel) taps oldest first
  const float *dt_bias, *a_log; // (lin_v_heads)
  const float *norm;            // (lin_v_dim)
  struct llm_qmat qkv;          // (conv_dim, dim): q, k, v rows
  struct llm_qmat z;            // (lin_v_heads * lin_v_dim, dim)
  struct llm_qmat a, b;         // (lin_v_heads, dim)
  struct llm_qmat out;          // (dim, lin_v_heads * lin_v_dim)
  // MLP
  struct llm_qmat gate, up; // (hidden_dim, dim)
  struct llm_qmat down;     // (dim, hidden_dim)
};

#define LLM_MAXBUF 300 // asset files + aligned copies

struct llm_runtime {
  struct llm_config cfg;
  struct llm_qmat emb;      // (vocab_size, dim), also the output head
  const float *final_norm;  // (dim)
  const float *rope;        // (runtime_seq_len, rotary_dim): cos half, sin half
  struct llm_layer *layers; // (n_layers)
  int *slot;                // (n_layers) index among layers of its kind
  int n_full, n_linear;     // layers of each kind
  void *buf[LLM_MAXBUF];    // every allocation, freed by llm_runtime_free
  int nbuf;
};

struct llm_timing {
  uint64 load_us, init_us;             // llm_runtime_init, session_init
  uint64 matmul_us, attn_us, other_us; // --profile: time inside each part
  int profile;
};

struct llm_session {
  // KV cache of the full-attention layers, int8 with group multipliers
  int8 *kq, *vq;     // (n_full, runtime_seq_len, kv_dim)
  int32 *km, *vm;    // (n_full, runtime_seq_len, kv_dim/32)
  double *kxs, *vxs; // (n_full, runtime_seq_len, n_kv_heads)
  // Gated DeltaNet state
  double *conv;  // (n_linear, conv_kernel-1, conv_dim) last inputs, oldest first
  double *state; // (n_linear, lin_v_heads, lin_k_dim, lin_v_dim)
  // workspace for LLM_BATCH positions
  int *seq;             // (runtime_seq_len) prompt then generated ids
  double *x;            // (LLM_BATCH, dim) hidden state
  double *xn;           // (LLM_BATCH, maxin) normed input of a matmul
  double *y1, *y2, *y3; // (LLM_BATCH, maxout) matmul outputs
  double *att;          // (LLM_BATCH, maxin) attention output
  struct llm_qact act;  // (LLM_BATCH, maxin) quantised activations
  int8 *hq;             // (head_dim) a quantised query head
  int32 *hm;            // (head_dim/32)
  int64 *d;             // (runtime_seq_len) attention integer scores
  double *score;        // (runtime_seq_len) scores, then exp
  double *wt;           // (runtime_seq_len) value weights of one group
  int32 *wq;            // (runtime_seq_len) the same, rounded
  double *scratch;      // (maxin) Gated DeltaNet per-head work
  double *logits;       // (vocab_size)
  void *buf[32];        // every allocation, freed by session_free
  int nbuf;
  int oom; // an allocation failed
  struct llm_timing tm;
};

// What differs between the two programs.
struct llm_model {
  const char *name;        // program name for messages
  const char *default_dir; // /AI/SMOL or /AI/QWEN
  int model_kind;          // the CFG.BIN model_kind it runs
  // run positions [pos, pos+n) (n <= LLM_BATCH) through all layers
  void (*forward)(struct llm_runtime *, struct llm_session *, int pos, int n);
};

extern const char *llm_prog; // program name, prefixes every message
// If set, called with each generated id as soon as it exists (i counts
// from 0); ai_daemon reports progress with it, llm_cli's --stream prints
// the ids with it (llm_session_run then prints no id line of its own).
extern void (*llm_token_hook)(int i, int id);

// Set-up and tear-down. session_init enters dir, loads the model with
// llm_runtime_init (timed as load_us) and allocates the session (the whole
// call timed as init_us).
int llm_runtime_init(struct llm_runtime *rt, int model_kind);
void llm_runtime_free(struct llm_runtime *rt);
int session_init(struct llm_session *s, struct llm_runtime *rt,
    const char *dir, int model_kind);
void session_free(struct llm_session *s, struct llm_runtime *rt);

// Requests.
int llm_session_run(const struct llm_model *md, struct llm_runtime *rt,
    struct llm_session *s, const int *ids, int n, int predict,
    int quiet);
int llm_session_generate(const struct llm_model *md, struct llm_runtime *rt,
    struct llm_session *s, const int *ids, int n,
    int predict, uint64 *ttft, uint64 *tpot);
int llm_drive_decode(const struct llm_model *md, struct llm_runtime *rt,
    struct llm_session *s, int n, int predict, uint64 t0,
    uint64 *ttft, uint64 *tpot);

// Building blocks of a forward pass (ARITHMETIC.md sections).
void llm_embed(struct llm_runtime *rt, struct llm_session *s, int pos, int n);
void llm_apply_full_layer(struct llm_runtime *rt, struct llm_session *s,
    int l, int pos, int n);
void llm_apply_ffn(struct llm_runtime *rt, struct llm_session *s, int l, int n);
int llm_head(struct llm_runtime *rt, struct llm_session *s, int p);
void llm_mm_in(struct llm_session *s, const double *x, int xstride, int len,
    int n);
void llm_mm(struct llm_session *s, const struct llm_qmat *w, double *y,
    int ystride);
uint64 llm_clock(struct llm_session *s);
void llm_charge(struct llm_session *s, uint64 *part, uint64 since);

// The programs' main.
int llm_main(const struct llm_model *md, int argc, char **argv);

// The models of llmrun_smol.c and llmrun_qwen.c when built with
// -DLLM_MODEL_ONLY (no main), for ai_daemon.
extern const struct llm_model *const llm_smol_model;
extern const struct llm_model *const llm_qwen_model;

#endif
