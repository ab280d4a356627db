// A session of the LLM runtime (user/llm/session.c): the state one model
// needs to serve requests, sized from the config and allocated before the
// first token (the forward pass never allocates), and the requests
// themselves: check, prefill, decode, timing line.
//
//   struct llm_runtime  the weights (user/llm/loader.h)
//   struct llm_session  the KV cache, Gated DeltaNet state and workspace
//   struct llm_model    what differs between the models: the forward pass
#ifndef AISVC_LLM_SESSION_H
#define AISVC_LLM_SESSION_H

#include "kernel/include/aisvc.h" // AI_MAX_PROMPT: most prompt ids per request
#include "user/llm/loader.h"
#include "user/llm/sample.h"
#include "user/llm/pool.h"
#include "user/llm/profile.h"
#include "user/llm/kvcache.h"

// One request's own state: its KV cache's block table, its Gated DeltaNet
// state and its ids. A session has one per request it can run at once
// (llm_session_init: one; llm_session_add_caches: more, for the batched
// path).
struct llm_cache {
  // KV cache of the full-attention layers, int8 with group multipliers, in
  // the session's pool of blocks (user/llm/kvcache.h)
  struct llm_kvtable tab;
  // Gated DeltaNet state
  double *conv;  // (n_linear, conv_kernel-1, conv_dim) last inputs, oldest first
  double *state; // (n_linear, lin_v_heads, lin_k_dim, lin_v_dim)
  int *seq;      // (runtime_seq_len) prompt then generated ids
};

#define LLM_MAXCACHE LLM_BATCH // requests one session can run at once
#define LLM_MAXKV    16 // caches one session may hold (ai_daemon's paused requests keep theirs)

// The positions one forward pass runs (at most LLM_BATCH): position p of
// the batch is position pos[p] of the request whose cache is kv[p]. The
// positions of one request are consecutive and in order.
struct llm_step {
  int n;
  struct llm_cache *kv[LLM_BATCH];
  int pos[LLM_BATCH];
};

struct llm_session {
  struct llm_cache kv[LLM_MAXKV]; // kv[0] serves the single-request path
  int ncache;                     // caches allocated
  struct llm_kvpool pool;         // the KV cache's blocks (llm_session_pool)
  int cached;                     // llm_session_generate's prompt positions from the pool
  int budget;                     // positions per batched step, 1..LLM_BATCH; 0: LLM_BATCH
  // workspace for LLM_BATCH positions
  double *x;  // (LLM_BATCH, dim) hidden state
  double *xn; // (LLM_BATCH, maxin) input of the next matmuls: normed x, or
              // the MLP's silu(gate) * up
  // matmul outputs (LLM_BATCH, maxout), named by what each block keeps in
  // them; the block's output projection reuses the first
  union {
    double *q;    // full attention: queries (each head followed by its gate)
    double *gate; // MLP: gate projection
    double *qkv;  // Gated DeltaNet: in_proj_qkv, the conv input
    double *proj; // any block: its output projection, added to x
  };
  union {
    double *k;  // full attention: keys
    double *up; // MLP: up projection
    double *z;  // Gated DeltaNet: output gates
  };
  union {
    double *v;  // full attention: values
    double *ab; // Gated DeltaNet: a (LLM_BATCH, v_heads), then b
  };
  double *mixed;       // (LLM_BATCH, maxin) attention or DeltaNet heads,
                       // input of the output projection
  struct llm_qact act; // (LLM_BATCH, maxin) quantised activations
  // attention scratch of one query head, one per pool thread
  struct llm_head_scratch {
    int8 *qhead_q;  // (head_dim) a quantised query head
    int32 *qhead_m; // (head_dim/32) its group multipliers
    int64 *dot;     // (runtime_seq_len) attention integer scores D_t
    double *score;  // (runtime_seq_len) scores, then exp
    double *val_w;  // (runtime_seq_len) value weights of one group
    int32 *val_wq;  // (runtime_seq_len) the same, rounded
  } head[LLM_MAX_THREADS];
  double *delta_kv[LLM_MAX_THREADS]; // (lin_v_dim) llm_delta_step's kv, per thread
  double *logits;                    // (LLM_BATCH, vocab_size) llm_heads' logits
  void *buf[32 + LLM_MAXKV];         // every allocation, freed by llm_session_free
  int nbuf;
  int oom; // an allocation failed
  struct llm_timing tm;
  struct llm_sampler *sampler; // the single-request path's: 0 greedy, no
                               // stop ids (set by the caller)
};

// What differs between the models (user/llm/smol.c, user/llm/qwen.c).
struct llm_model {
  const char *name;        // program name for messages
  const char *default_dir; // AI_SMOL_DIR or AI_QWEN_DIR (aisvc.h)
  int model_kind;          // the CFG.BIN model_kind it runs
  // run the positions of st through all layers
  void (*forward)(struct llm_runtime *, struct llm_session *, const struct llm_step *st);
};

// If set, called with each generated id as soon as it exists (i counts
// from 0); ai_daemon reports progress with it, the CLI's --stream prints
// the ids with it (llm_session_run then prints no id line of its own).
extern void (*llm_token_hook)(int i, int id);

// Check dir, load the model from it with llm_runtime_init (timed as
// load_us) and allocate the session (the whole call timed as init_us).
// Returns 0, or -1 after a message with everything freed.
int llm_session_init(
    struct llm_session *s, struct llm_runtime *rt, const char *dir, int model_kind);
// Free the session and the weights, and stop the thread pool
// (user/llm/pool.h: llm_pool_start after llm_session_init starts it).
void llm_session_free(struct llm_session *s, struct llm_runtime *rt);

// Allocate caches until the session has `want` (at most LLM_MAXCACHE) or
// memory runs out; returns how many it has (>= 1).
int llm_session_add_caches(struct llm_session *s, const struct llm_runtime *rt, int want);

// Allocate the KV cache's pool: `blocks` blocks (0: the default for the
// session's caches, llm_kv_default_blocks), prefix reuse on if `reuse`
// (never for a model with Gated DeltaNet layers: docs/KVCACHE.md), and
// say so on stderr unless quiet. Call after llm_session_add_caches and
// before the first request. Returns 0, or -1 after a message.
int llm_session_pool(
    struct llm_session *s, const struct llm_runtime *rt, int blocks, int reuse, int quiet);

// Check one request and generate: the ids land in s->kv[0].seq[n..n+predict),
// fewer if s->sampler's stop id comes first (it is kept). Returns how many
// were generated, or -1 after a message.
int llm_session_generate(const struct llm_model *md, struct llm_runtime *rt, struct llm_session *s,
    const int *ids, int n, int predict, uint64 *ttft, uint64 *tpot);
// The same, then print the ids (unless llm_token_hook is set) and, unless
// quiet, the timing line (gen= counts the ids generated).
int llm_session_run(const struct llm_model *md, struct llm_runtime *rt, struct llm_session *s,
    const int *ids, int n, int predict, int quiet);

// ---------------------------------------------------------------- batching
// Several requests at once, each with its own cache, sharing every forward
// pass (user/llm/session.c, "Batched steps").

// One request of the batched path.
struct llm_req {
  struct llm_cache *kv;        // its own cache; kv->seq holds prompt, then output
  int n, predict;              // prompt ids, ids to generate
  int fed;                     // positions already run through the layers
  int gen;                     // ids generated so far: kv->seq[n..n+gen)
  int done;                    // predict ids generated, or the last is a stop id
  int cached;                  // prompt positions taken from the KV pool
  struct llm_sampler *sampler; // 0: greedy, no stop ids (llm_req_start)
};

// Check a request (as llm_session_generate does) and set r up on cache kv
// with the prompt ids, greedy (the caller may set r->sampler after, which
// then chooses and stops its ids; a sampler serves one request at a time),
// and with the blocks of its positions: the prompt's longest cached prefix
// (r->cached positions, not run again) and free ones. Returns 0, or -1
// after a message (the pool short of blocks, or a limit).
int llm_req_start(const struct llm_runtime *rt, struct llm_req *r, struct llm_cache *kv,
    const int *ids, int n, int predict);
// The request is over (done, cancelled or failed): its cache gives its
// blocks back (the published ones stay cached). Any number of times.
void llm_req_end(struct llm_req *r);
// One batched step for the unfinished requests r[0..nr) (nr <= the
// step's budget, s->budget or LLM_BATCH, most urgent first: oldest first,
// or a scheduling policy's order): every request in decode runs its next
// position, requests in prefill share what is left of the budget (in
// r[]'s order, at least one position each step), then every request
// whose known ids are all run gets its next id (r->gen grows by one;
// r->done is set once it has predict ids or a stop id).
void llm_batch_step(const struct llm_model *md, struct llm_runtime *rt, struct llm_session *s,
    struct llm_req **r, int nr);

// Print ids on one stdout line, one space between two ids.
void llm_print_ids(const int *ids, int n);

// Print a request's timing line (user/llm/session.c, top) on stderr: its
// ttft and tpot in us, its prompt length and the ids it generated, with
// the session's load and init times, and how many prompt positions came
// from the KV pool (cached=).
void llm_print_timing(
    const struct llm_session *s, uint64 ttft, uint64 tpot, int prompt, int cached, int gen);

#endif
