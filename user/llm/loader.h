// Asset loading of the LLM runtime (user/llm/loader.c): the hyperparameters
// (struct llm_config, from CFG.BIN) and the weights (struct llm_runtime, one
// buffer per asset file, read whole or mapped), each file checked against the size its
// layout implies (docs/ASSET_FORMAT.md). Every function takes the asset
// directory as an argument; nothing changes the working directory.
#ifndef AISVC_LLM_LOADER_H
#define AISVC_LLM_LOADER_H

#include "user/llm/kernels.h"

// CFG.BIN's model_kind: which forward pass the weights are for.
enum llm_model_kind {
  LLM_MODEL_SMOL = 0, // SmolLM2 / Llama: every layer full attention
  LLM_MODEL_QWEN = 1, // Qwen3.5: full attention and Gated DeltaNet layers
  LLM_MODEL_ANY = -1, // llm_config_load: accept either kind
};

// LTY.BIN's kind of one layer: its token mixer.
enum llm_layer_kind {
  LLM_LAYER_FULL = 0,     // (gated) full attention with a KV cache
  LLM_LAYER_DELTANET = 1, // Gated DeltaNet (linear attention)
};

struct llm_config {
  int version;    // 1, 2 (course formats), 3 (ours, group-scaled) or 4 (3 in the kernels' layout)
  int model_kind; // enum llm_model_kind
  int flags;      // LLM_GATED | LLM_QKNORM
  int dim, hidden_dim, n_layers, n_heads, n_kv_heads, head_dim;
  int vocab_size, seq_len, runtime_seq_len;
  float rms_eps, rope_theta;
  int rotary_dim;
  int lin_k_heads, lin_v_heads, lin_k_dim, lin_v_dim, conv_kernel;
  int group_size; // 32 for versions 3 and 4, 0 for versions 1/2
  int pack_rows;  // version 4: rows per packed block of the weights (0: row-major)
};

#define LLM_GATED  1 // flags: attention output gate
#define LLM_QKNORM 2 // flags: per-head q/k RMSNorm

// One layer's weights, pointing into its Lxx.BIN buffer.
struct llm_layer {
  enum llm_layer_kind kind;
  const double *input_norm; // (dim)
  const double *post_norm;  // (dim)
  // full attention
  const double *q_norm, *k_norm; // (head_dim), when flags & LLM_QKNORM
  struct llm_qmat wq;            // (n_heads * head_dim * (1 or 2), dim)
  struct llm_qmat wk, wv;        // (n_kv_heads * head_dim, dim)
  struct llm_qmat wo;            // (dim, n_heads * head_dim)
  // Gated DeltaNet
  const double *conv_w;          // (conv_dim, conv_kernel) taps oldest first
  const double *dt_bias, *a_log; // (lin_v_heads)
  const double *norm;            // (lin_v_dim)
  struct llm_qmat qkv;           // (conv_dim, dim): q, k, v rows
  struct llm_qmat z;             // (lin_v_heads * lin_v_dim, dim)
  struct llm_qmat a, b;          // (lin_v_heads, dim)
  struct llm_qmat out;           // (dim, lin_v_heads * lin_v_dim)
  // MLP
  struct llm_qmat gate, up; // (hidden_dim, dim)
  struct llm_qmat down;     // (dim, hidden_dim)
};

// Buffers of one runtime: per layer its file, its widened floats and up to
// 8 vector multiplier copies; the tables; aligned copies (rare).
#define LLM_MAX_LAYERS 150
#define LLM_MAXBUF     (LLM_MAX_LAYERS * 11 + 50)

struct llm_runtime {
  struct llm_config cfg;
  struct llm_qmat emb;      // (vocab_size, dim), also the output head
  const double *final_norm; // (dim)
  const double *rope;       // (runtime_seq_len, rotary_dim): cos half, sin half
  struct llm_layer *layers; // (n_layers)
  int *slot;                // (n_layers) index among layers of its kind
  int n_full, n_linear;     // layers of each kind
  void *buf[LLM_MAXBUF];    // every allocation, freed by llm_runtime_free
  int nbuf;
  int mapping;                       // the weight files are mapped, not read (llm_map_weights)
  void *map[LLM_MAX_LAYERS + 1];     // the mappings, unmapped by llm_runtime_free
  uint64 maplen[LLM_MAX_LAYERS + 1]; //
  int nmap;
};

extern const char *llm_prog; // program name, prefixes every message

// 1 (the default): a version 4 model whose layout fits the kernels has its
// weight files (EMB.BIN, Lxx.BIN) mapped read-only (mmap, docs/VM.md), so
// every process shares the page cache's one copy; 0 (llmrun's --no-mmap,
// ai_daemon's mmap=0): every file is read into the heap.
extern int llm_map_weights;

// Channels of a Gated DeltaNet layer's causal conv: its q, k and v rows.
int llm_conv_dim(const struct llm_config *g);

// dir must be a directory whose asset paths fit MAXPATH. Returns 0, or -1
// after the "cannot enter the asset directory" message.
int llm_asset_dir_check(const char *dir);

// Read and check dir/CFG.BIN into *cfg; its model_kind must be model_kind
// (or either known kind for LLM_MODEL_ANY). Returns 0, or -1 after a
// message naming the field.
int llm_config_load(const char *dir, int model_kind, struct llm_config *cfg);

// Load the whole model from dir into rt. Returns 0, or -1 after a message
// (the caller then calls llm_runtime_free).
int llm_runtime_init(struct llm_runtime *rt, const char *dir, int model_kind);
void llm_runtime_free(struct llm_runtime *rt);

#endif
