// A session of the LLM runtime: allocate the KV cache, the Gated DeltaNet
// state and the workspace once, then validate and serve requests, and time
// them.
//
// Serving (llm_session_run -> llm_drive_decode): prefill runs the prompt
// through the layers LLM_BATCH positions at a time, the head gives the
// first token; decode then feeds back one token per step (greedy, or
// sampled: user/llm/sample.c), until the request's length or a stop id.
// Timing, on one stderr line per request:
//   PROG: timing load_us=L init_us=I ttft_us=F tpot_us=P prompt=N gen=G cached=C faults=M
//     kernels=K threads=T
// (one line) load_us: llm_runtime_init; init_us: llm_session_init (which
// includes the load); ttft_us: request start to the first generated token;
// tpot_us: mean time of each following token (0 when G is 1); cached: the
// prompt positions taken from the KV cache (docs/KVCACHE.md); kernels: the
// matmul kernels that ran (scalar, or vector: kernels_vec.c); threads: the
// thread pool's size (user/llm/pool.c: the matmuls' rows are split across
// them); faults: the page faults that filled a file mapping since the
// previous timing line, the first one counting from the end of the load
// (sysinfo(): so the first request shows what its first forward pass paid
// for the mapped weights, docs/VM.md; 0 on the read path). With
// --profile, more lines split the prefill and the decode time into matmuls
// (quantising their inputs included), attention (for Qwen also the Gated
// DeltaNet recurrence) and the rest, and say per thread how long it
// worked in pool steps, waited at their end barrier for the others
// (thread 0, the caller, waits inside matmul_us and attn_us), how many
// of those waits slept in the kernel, and how long thread 0 ran alone
// between steps (serial_us: the part more threads cannot shorten):
//   PROG: profile phase=prefill matmul_us=M attn_us=A other_us=O tokens=N
//   PROG: profile phase=prefill threads=T steps=S busy_us=B0,B1 wait_us=W0,W1 sleeps=Z0,Z1 serial_us=R
//   PROG: profile phase=decode matmul_us=M attn_us=A other_us=O tokens=G-1
//   PROG: profile phase=decode threads=T steps=S busy_us=B0,B1 wait_us=W0,W1 sleeps=Z0,Z1 serial_us=R
// (the CLI's --batch prints one pair, phase=batch, for all its requests:
// tokens= then counts the positions run, prompts and fed-back ids).

#include "user/lib/user.h"
#include "kernel/include/sysinfo.h"
#include "user/llm/session.h"
#include "user/llm/kernels_vec.h"
#include "user/llm/layers.h"
#include "user/llm/pool.h"

void (*llm_token_hook)(int i, int id);

// ---------------------------------------------------------------- set-up

// Remember a new buffer of n bytes in s, for llm_session_free; sets
// s->oom and returns 0 if out of memory or of slots.
static void *
s_alloc(struct llm_session *s, uint64 n)
{
  void *p = 0;
  if (s->nbuf < sizeof(s->buf) / sizeof(s->buf[0]))
    p = malloc(n ? n : 1);
  if (p)
    s->buf[s->nbuf++] = p;
  else
    s->oom = 1;
  return p;
}

// The larger of a and b.
static int
max2(int a, int b)
{
  return a > b ? a : b;
}

// Round n up to a multiple of 8 bytes.
static uint64
align8(uint64 n)
{
  return (n + 7) & ~7UL;
}

// Lay out (base != 0) or size (base == 0) one cache at base; returns its
// bytes. Every buffer starts 8-byte aligned. Its KV cache is a block table
// into the session's pool.
static uint64
cache_layout(struct llm_cache *c, const struct llm_runtime *rt, char *base)
{
  const struct llm_config *g = &rt->cfg;
  uint64 T = g->runtime_seq_len;
  uint64 size[] = { rt->n_linear * (uint64)max2(g->conv_kernel - 1, 0) * llm_conv_dim(g) *
        sizeof(double),
    rt->n_linear * (uint64)g->lin_v_heads * g->lin_k_dim * g->lin_v_dim * sizeof(double),
    T * sizeof(int), (T + LLM_KV_BLOCK - 1) / LLM_KV_BLOCK * sizeof(int) };
  void **field[] = { (void **)&c->conv, (void **)&c->state, (void **)&c->seq,
    (void **)&c->tab.blk };
  uint64 off = 0;
  for (int i = 0; i < sizeof(size) / sizeof(size[0]); i++) {
    if (base)
      *field[i] = base + off;
    off += align8(size[i]);
  }
  return off;
}

// One more cache, in one allocation. Returns 0, or -1 if out of memory
// (nothing allocated; s->oom stays as it was).
static int
cache_alloc(struct llm_session *s, const struct llm_runtime *rt)
{
  int oom = s->oom;
  char *base = s_alloc(s, cache_layout(&s->kv[s->ncache], rt, 0));
  if (base == 0) {
    s->oom = oom;
    return -1;
  }
  cache_layout(&s->kv[s->ncache], rt, base);
  s->kv[s->ncache++].tab.pool = &s->pool;
  return 0;
}

// The first cache and the workspace (for LLM_BATCH positions), sized for
// the longest vector each buffer holds. Returns 0, or -1 if out of memory.
static int
session_alloc(struct llm_session *s, const struct llm_runtime *rt)
{
  const struct llm_config *g = &rt->cfg;
  uint64 T = g->runtime_seq_len, B = LLM_BATCH;
  uint64 vdim = (uint64)g->lin_v_heads * g->lin_v_dim;
  int maxin = max2(max2(g->dim, g->hidden_dim), max2(g->n_heads * g->head_dim, vdim));
  int conv_dim = llm_conv_dim(g);
  int maxout = max2(max2(maxin, 2 * g->n_heads * g->head_dim), conv_dim);
  if (cache_alloc(s, rt) < 0)
    return -1;
  s->x = s_alloc(s, B * g->dim * sizeof(double));
  s->xn = s_alloc(s, B * maxin * sizeof(double));
  s->q = s_alloc(s, B * maxout * sizeof(double)); // also gate, qkv, proj
  s->k = s_alloc(s, B * maxout * sizeof(double)); // also up, z
  s->v = s_alloc(s, B * maxout * sizeof(double)); // also ab
  s->mixed = s_alloc(s, B * maxin * sizeof(double));
  s->act.q = s_alloc(s, B * maxin);
  s->act.m = s_alloc(s, B * (maxin / LLM_GS) * sizeof(int32));
  s->act.xs = s_alloc(s, B * sizeof(double));
  s->act.qsum = s_alloc(s, B * (maxin / LLM_GS) * sizeof(int32));
  s->act.packs = s_alloc(s, (uint64)maxin * LLM_PACKS * sizeof(int64));
  s->act.pairs = s_alloc(s, (uint64)(maxin / 2) * sizeof(int64));
  s->act.ys = llm_kernels_vector() ? s_alloc(s, B * maxin * sizeof(int16)) : 0;
  // per-thread attention scratch, carved from one block, 8-byte aligned
  uint64 hd = (g->head_dim + 7) & ~7UL, hm = ((g->head_dim / LLM_GS) * sizeof(int32) + 7) & ~7UL;
  uint64 one =
      hd + hm + T * (sizeof(int64) + 2 * sizeof(double)) + ((T * sizeof(int32) + 7) & ~7UL);
  char *blk = s_alloc(s, LLM_MAX_THREADS * one);
  for (int t = 0; blk && t < LLM_MAX_THREADS; t++) {
    struct llm_head_scratch *h = &s->head[t];
    char *c = blk + t * one;
    h->qhead_q = (int8 *)c;
    h->qhead_m = (int32 *)(c + hd);
    h->dot = (int64 *)(c + hd + hm);
    h->score = (double *)(h->dot + T);
    h->val_w = h->score + T;
    h->val_wq = (int32 *)(h->val_w + T);
  }
  double *kv = s_alloc(s, (uint64)LLM_MAX_THREADS * g->lin_v_dim * sizeof(double));
  for (int t = 0; kv && t < LLM_MAX_THREADS; t++)
    s->delta_kv[t] = kv + (uint64)t * g->lin_v_dim;
  s->logits = s_alloc(s, B * g->vocab_size * sizeof(double));
  return s->oom ? -1 : 0;
}

int
llm_session_add_caches(struct llm_session *s, const struct llm_runtime *rt, int want)
{
  if (want > LLM_MAXKV)
    want = LLM_MAXKV;
  while (s->ncache < want && cache_alloc(s, rt) == 0)
    ;
  return s->ncache;
}

static uint64 faults_seen; // the process's mapping faults at the last timing line, or the load

// The page faults that filled this process's file mappings (sysinfo).
static uint64
mapping_faults(void)
{
  struct sysinfo si;
  return sysinfo(&si) == 0 ? si.faults : 0;
}

int
llm_session_init(struct llm_session *s, struct llm_runtime *rt, const char *dir, int model_kind)
{
  uint64 t0 = time_us();
  memset(s, 0, sizeof(*s));
  if (llm_asset_dir_check(dir) < 0)
    return -1;
  uint64 t1 = time_us();
  if (llm_runtime_init(rt, dir, model_kind) < 0) {
    llm_runtime_free(rt);
    return -1;
  }
  s->tm.load_us = time_us() - t1;
  faults_seen = mapping_faults();
  if (session_alloc(s, rt) < 0) {
    fprintf(2, "%s: out of memory for the KV cache and workspace\n", llm_prog);
    llm_session_free(s, rt);
    return -1;
  }
  s->tm.init_us = time_us() - t0;
  return 0;
}

int
llm_session_pool(
    struct llm_session *s, const struct llm_runtime *rt, int blocks, int reuse, int quiet)
{
  const struct llm_config *g = &rt->cfg;
  int least = (g->runtime_seq_len + LLM_KV_BLOCK - 1) / LLM_KV_BLOCK;
  int dflt = blocks == 0;
  if (dflt)
    blocks = llm_kv_default_blocks(g, rt->n_full, s->ncache);
  if (blocks < least) {
    fprintf(2, "%s: kv pool of %d blocks: at least %d (one window of %d positions)\n", llm_prog,
        blocks, least, g->runtime_seq_len);
    return -1;
  }
  if (llm_kv_init(&s->pool, g, rt->n_full, blocks, reuse && rt->n_linear == 0) < 0) {
    fprintf(2, "%s: out of memory for a kv pool of %d blocks\n", llm_prog, blocks);
    return -1;
  }
  uint64 pos = llm_kv_pos_bytes(g, rt->n_full);
  if (!quiet)
    fprintf(2,
        "%s: kv pool %d blocks of %d positions, %lu bytes per position, %lu KiB (%s), "
        "prefix reuse %s\n",
        llm_prog, blocks, LLM_KV_BLOCK, pos, pos * LLM_KV_BLOCK * blocks / 1024,
        dflt ? "default: 1/" AI_STR(LLM_KV_SHARE) " of free memory" : "as asked",
        s->pool.reuse ? "on" : "off");
  return 0;
}

void
llm_session_free(struct llm_session *s, struct llm_runtime *rt)
{
  llm_pool_stop();
  llm_kv_free(&s->pool);
  while (s->nbuf > 0)
    free(s->buf[--s->nbuf]);
  llm_runtime_free(rt);
}

// ---------------------------------------------------------------- requests

// Prefill, then decode, as batched steps of this one request
// (llm_batch_step; greedy unless r->sampler says otherwise): the course's
// loop runs `pos` over every position and starts writing results once
// pos >= n - 1; here the prompt positions go through the layers LLM_BATCH
// at a time (the head only at the last one), and each generated token is
// fed back at the next position, until predict tokens or a stop id.
// r->kv->seq[0..n) holds the prompt; the tokens land after it. Returns how
// many were generated.
static int
llm_drive_decode(const struct llm_model *md, struct llm_runtime *rt, struct llm_session *s,
    struct llm_req *r, uint64 t0, uint64 *ttft, uint64 *tpot)
{
  uint64 t1 = 0;
  while (!r->done) {
    int had = r->gen;
    llm_batch_step(md, rt, s, &r, 1);
    if (r->gen == had)
      continue; // a prefill chunk before the last
    if (had == 0) {
      t1 = time_us();
      *ttft = t1 - t0;
    }
    if (llm_token_hook)
      llm_token_hook(had, r->kv->seq[r->n + had]);
    if (had == 0 && s->tm.profile)
      llm_profile_lines(&s->tm, "prefill", *ttft, r->n - r->cached);
  }
  uint64 t2 = time_us();
  *tpot = r->gen > 1 ? (t2 - t1) / (r->gen - 1) : 0;
  if (s->tm.profile)
    llm_profile_lines(&s->tm, "decode", t2 - t1, r->gen - 1);
  return r->gen;
}

// Check a request against the limits; -1 after a message naming the limit.
static int
request_check(const struct llm_config *g, const int *ids, int n, int predict)
{
  if (n < 1) {
    fprintf(2, "%s: request: empty prompt (at least 1 id)\n", llm_prog);
    return -1;
  }
  if (n > AI_MAX_PROMPT) {
    fprintf(2, "%s: request: prompt of %d ids exceeds the limit of %d prompt ids\n", llm_prog, n,
        AI_MAX_PROMPT);
    return -1;
  }
  if (predict < 1) {
    fprintf(2, "%s: request: predict %d: must be at least 1\n", llm_prog, predict);
    return -1;
  }
  if (n + predict > g->runtime_seq_len) {
    fprintf(2, "%s: request: prompt %d + predict %d = %d exceeds runtime_seq_len %d\n", llm_prog, n,
        predict, n + predict, g->runtime_seq_len);
    return -1;
  }
  for (int i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= g->vocab_size) {
      fprintf(2, "%s: request: id %d at prompt position %d is not below vocab_size %d\n", llm_prog,
          ids[i], i, g->vocab_size);
      return -1;
    }
  return 0;
}

void
llm_print_timing(
    const struct llm_session *s, uint64 ttft, uint64 tpot, int prompt, int cached, int gen)
{
  uint64 faults = mapping_faults();
  fprintf(2,
      "%s: timing load_us=%lu init_us=%lu ttft_us=%lu tpot_us=%lu "
      "prompt=%d gen=%d cached=%d faults=%lu kernels=%s threads=%d\n",
      llm_prog, s->tm.load_us, s->tm.init_us, ttft, tpot, prompt, gen, cached, faults - faults_seen,
      llm_kernels_name(), llm_pool_threads());
  faults_seen = faults;
}

void
llm_print_ids(const int *ids, int n)
{
  char line[512];
  int len = 0;
  for (int i = 0; i < n; i++) {
    if (len > (int)sizeof(line) - 16) {
      write(1, line, len);
      len = 0;
    }
    len += snprintf(line + len, sizeof(line) - len, i ? " %d" : "%d", ids[i]);
  }
  line[len++] = '\n';
  write(1, line, len);
}

int
llm_req_start(const struct llm_runtime *rt, struct llm_req *r, struct llm_cache *kv, const int *ids,
    int n, int predict)
{
  if (request_check(&rt->cfg, ids, n, predict) < 0)
    return -1;
  int cached = llm_kv_open(&kv->tab, ids, n, n + predict);
  if (cached < 0) {
    fprintf(2, "%s: request: the kv pool has no %d free blocks (all %d in use)\n", llm_prog,
        (n + predict + LLM_KV_BLOCK - 1) / LLM_KV_BLOCK, kv->tab.pool->nblocks);
    return -1;
  }
  memmove(kv->seq, ids, n * sizeof(int));
  r->kv = kv;
  r->n = n;
  r->predict = predict;
  r->fed = r->cached = cached;
  r->gen = r->done = 0;
  r->sampler = 0;
  return 0;
}

void
llm_req_end(struct llm_req *r)
{
  llm_kv_close(&r->kv->tab);
}

int
llm_session_generate(const struct llm_model *md, struct llm_runtime *rt, struct llm_session *s,
    const int *ids, int n, int predict, uint64 *ttft, uint64 *tpot)
{
  uint64 t0 = time_us();
  struct llm_req r;
  if (llm_req_start(rt, &r, &s->kv[0], ids, n, predict) < 0)
    return -1;
  llm_pool_profile(s->tm.profile);
  r.sampler = s->sampler;
  if (s->sampler)
    llm_sampler_reset(s->sampler);
  int gen = llm_drive_decode(md, rt, s, &r, t0, ttft, tpot);
  s->cached = r.cached;
  llm_req_end(&r);
  return gen;
}

int
llm_session_run(const struct llm_model *md, struct llm_runtime *rt, struct llm_session *s,
    const int *ids, int n, int predict, int quiet)
{
  uint64 ttft, tpot;
  int gen = llm_session_generate(md, rt, s, ids, n, predict, &ttft, &tpot);
  if (gen < 0)
    return -1;
  if (llm_token_hook == 0) // else the hook has written them (the CLI's --stream)
    llm_print_ids(s->kv[0].seq + n, gen);
  if (!quiet)
    llm_print_timing(s, ttft, tpot, n, s->cached, gen);
  return 0;
}

// ---------------------------------------------------------------- batched steps
// A step runs at most its budget of positions (s->budget, at most and by
// default LLM_BATCH), so that every matrix is read once per step
// (llm_matmul takes up to LLM_BATCH positions at once) and each position
// gets exactly the arithmetic it gets alone (the matmul treats positions
// independently; attention, norms and the recurrences run per position,
// on the position's own cache), whatever the budget. The plan:
// - every request in decode (its prompt all run) runs its next position:
//   a running request gets one id per step, whatever else is in the batch;
// - requests in prefill share the positions left in r[]'s order (oldest
//   first, or ai_daemon's: the kernel's scheduling policy), each taking
//   as much of its prompt as fits (a chunk), but leaving one position for
//   every later request in prefill. nr <= the budget, so every request
//   moves every step, and a long prompt never stalls the others: it
//   takes only what the decoders and the requests before it leave.

// Positions each of r[0..nr) runs this step, of budget (the plan above).
static void
batch_plan(struct llm_req **r, int nr, int budget, int *take)
{
  int left = budget, nprefill = 0;
  for (int i = 0; i < nr; i++) {
    take[i] = r[i]->fed >= r[i]->n ? 1 : 0;
    left -= take[i];
    nprefill += !take[i];
  }
  for (int i = 0; i < nr; i++) {
    if (take[i])
      continue;
    int c = r[i]->n - r[i]->fed, room = left - --nprefill;
    take[i] = c < room ? c : room;
    left -= take[i];
  }
}

// Append request r's next id: r->sampler's choice from its logits (row k
// of s->logits; greedy: the head's id, user/llm/sample.c); r is done at
// predict ids or after a stop id.
static void
req_next(struct llm_runtime *rt, struct llm_session *s, struct llm_req *r, int greedy, int k)
{
  int V = rt->cfg.vocab_size;
  int id =
      llm_sampler_next(r->sampler, s->logits + (uint64)k * V, V, greedy, r->kv->seq + r->n, r->gen);
  r->kv->seq[r->n + r->gen++] = id;
  r->done = r->gen >= r->predict || llm_is_stop(r->sampler, id);
}

void
llm_batch_step(const struct llm_model *md, struct llm_runtime *rt, struct llm_session *s,
    struct llm_req **r, int nr)
{
  struct llm_step st = { 0 };
  int take[LLM_MAXCACHE], at[LLM_MAXCACHE], ids[LLM_MAXCACHE];
  struct llm_req *who[LLM_MAXCACHE];
  batch_plan(r, nr, s->budget > 0 && s->budget < LLM_BATCH ? s->budget : LLM_BATCH, take);
  for (int i = 0; i < nr; i++)
    for (int j = 0; j < take[i]; j++) {
      st.kv[st.n] = r[i]->kv;
      st.pos[st.n++] = r[i]->fed + j;
    }
  md->forward(rt, s, &st);
  int nh = 0, p = 0;
  for (int i = 0; i < nr; i++) {
    p += take[i];
    r[i]->fed += take[i];
    llm_kv_publish(&r[i]->kv->tab, r[i]->kv->seq, r[i]->fed);
    if (r[i]->fed == r[i]->n + r[i]->gen) { // its last known id is run
      at[nh] = p - 1;
      who[nh++] = r[i];
    }
  }
  llm_heads(rt, s, at, nh, ids);
  for (int k = 0; k < nh; k++)
    req_next(rt, s, who[k], ids[k], k);
}
