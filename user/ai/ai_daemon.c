// ai_daemon: the AI service's worker (kernel/ai/ai_table.c).
//
//   ai_daemon [--ready-fd FD] [--batch B] [--kv-blocks N] [--prefix-cache on|off] [--mmap off]
//             [ASSET_DIR]
//   (ASSET_DIR: default /AI/SMOL, else /AI/QWEN; --mmap off: the weights are
//   read into the heap, not mapped: user/llm/loader.c)
//
// Each batched step runs on the runtime's thread pool, one thread per
// hart that the host runs at once (user/llm/pool.c measures it); the
// workers sleep between requests. The host's free cores change (another
// program on the host, or in the guest, while the daemon started), so
// before it sleeps for work, with nothing queued, the daemon measures
// again if the last measurement is RESIZE_US old, and says so when the
// count changes. The measurement takes 40-60 ms. One that found fewer
// threads than harts may have fallen on a moment the host ran something
// else (a client between two phases of a benchmark), and the daemon is
// idle only between busy periods: so while the pool has fewer threads
// than harts it measures again between steps too, RESIZE_SOON_US after
// a measurement that found fewer (the first one at start included), then
// at twice the wait each time the count stays low, up to RESIZE_US
// (docs/PERF_NOTES.md, "a pool sized at a busy moment").
// Loads the model once, with the runtime and models of llmrun_smol /
// llmrun_qwen (CFG.BIN's model_kind, read by the runtime's loader, picks
// which), registers with the kernel as the worker, then serves forever,
// up to B requests at once (iteration-level, "continuous" batching; B is
// AI_BATCH (kernel/include/aisvc.h) unless --batch says otherwise; --batch 1 serves one
// request at a time, for comparison). With --ready-fd, one byte
// is written to fd N once registered, and N closed: init waits for it
// before starting the shell. If the model cannot be loaded, it says so
// once and idles (init would restart it every second). If another worker
// is registered (aitest takes the role for its deterministic cases), the
// daemon keeps the model and retries every second.
//
// The scheduler (docs/AI_SERVICE.md, sections 9 and 11, say why; the
// policy that decides lives in the kernel, kernel/ai/ai_sched.c):
// - Places: B requests run at once, each on a sequence of its own whose KV
//   cache is a block table into one pool of blocks (user/llm/kvcache.c;
//   --kv-blocks N, boot argument aikv=N; default a share of the free
//   memory, said at start), never more places than the pool holds full
//   windows of. The daemon may hold more requests than it runs: a request
//   the policy paused keeps its blocks in the pool and its block table (in
//   this process's memory, as they were: nothing is copied), so once every
//   table is held and B requests are held, one spare table more is made
//   (LLM_MAXKV at most, and no more requests held than the pool has full
//   windows for, so every held request can always get its blocks). A
//   request holds its table from its admission to its end; the next
//   request gets it. With prefix reuse (on unless --prefix-cache off, boot
//   argument aicache=0) a request takes its prompt's longest cached prefix
//   from the pool and runs only the rest: a chat's next turn, or the
//   common system line of requests in one batch; its blocks go back to the
//   pool when it ends, its completed ones stay cached until evicted (least
//   recently used).
// - Admission, before every step, while a table is free: with nothing
//   held the daemon sleeps in ai_next; otherwise it takes requests with
//   ai_take, which never blocks and starts the request the policy picks
//   while fewer than B run, or beyond that only one that a running
//   request yields to (preemption).
// - The plan, before every step (ai_plan): the daemon tells the kernel
//   the requests it holds and how far each is; the kernel answers them in
//   the policy's order, how many of them run this step (the others are
//   paused) and the step's budget (aichunk, at most LLM_BATCH positions).
// - The step: one batched forward pass over the running requests
//   (llm_batch_step): every request in decode contributes its next
//   position, requests in prefill share the rest of the budget in the
//   policy's order, in chunks (so a long prompt never stalls the
//   decoders); all matrices are read once per step for all of them.
// - Reports, after every step, for every held request: the new id
//   (ai_emit: streaming readers see it at once), or an empty ai_emit
//   during prefill or while paused; either answers -AIE_NOREQ once the
//   request was cancelled or its owner exited, and the daemon drops it:
//   its cache is free for the next step. A request that has all its ids,
//   or whose last id is one of its stop ids (struct ai_opts), gets
//   ai_complete; one the runtime refuses gets ai_fail.
// - Each request chooses its ids with its own sampler (struct ai_opts:
//   greedy, or temperature, top-k, top-p and seed as llmrun_* takes them),
//   so its ids are those llmrun_* gives alone, whatever else is in the
//   batch and however often it is paused. The samplers share one
//   workspace: the runtime samples the requests of a step one after
//   another. Penalties and biases (struct ai_opts, in millionths) go to
//   the sampler as they are; a request with logprobs gets each id's record
//   (ai_logprob) just before the id.

#include "user/lib/user.h"
#include "kernel/include/fcntl.h"
#include "kernel/include/aisvc.h"
#include "user/llm/session.h"
#include "user/llm/pool.h"
#include "user/llm/kernels_vec.h"
#include "user/llm/smol.h"
#include "user/llm/qwen.h"

#define RESIZE_US      10000000UL // measure the pool again after this long, when idle
#define RESIZE_SOON_US 1000000UL  // the first wait after a count below the harts

_Static_assert(AI_BATCH <= LLM_MAXCACHE, "AI_BATCH above the session's caches");
_Static_assert(AI_CHUNK_MAX <= LLM_BATCH, "the kernel's step budget above a forward pass");
_Static_assert(AI_NSLOT <= LLM_MAXKV, "a request per slot could not keep its cache");

// One held request (running or paused).
struct running {
  int reqid;
  int reported;         // ids handed to the kernel (ai_emit)
  struct llm_req r;     // the runtime's view: cache, prompt, progress
  struct llm_sampler g; // the request's options: sampler and stop ids
};

static struct running run[LLM_MAXKV];  // in the last plan's order
static int nrun, places;               // held requests; B
static uint64 pool_sized_at;           // when llm_pool_start last measured
static uint64 resize_wait = RESIZE_US; // the wait from then to the next measurement
static int harts;                      // the guest's harts (nharts, once)
static struct llm_sampler work;        // the samplers' shared workspace (cand, cum)

// The model for dir's CFG.BIN (version 1 files are all Llama); 0 after a
// message if it cannot be read or checked.
static const struct llm_model *
model_for(const char *dir)
{
  struct llm_config cfg;
  if (llm_config_load(dir, LLM_MODEL_ANY, &cfg) < 0) {
    fprintf(2, "ai_daemon: %s: no readable CFG.BIN with a known model_kind\n", dir);
    return 0;
  }
  return cfg.model_kind == LLM_MODEL_QWEN ? &llm_model_qwen : &llm_model_smol;
}

// AI_SMOL_DIR if it holds a model, else AI_QWEN_DIR.
static const char *
default_dir(void)
{
  int fd = open(AI_SMOL_DIR "/CFG.BIN", O_RDONLY);
  if (fd >= 0) {
    close(fd);
    return AI_SMOL_DIR;
  }
  return AI_QWEN_DIR;
}

// Register, retrying while another worker holds the role.
static int
register_worker(const struct llm_config *g)
{
  int said = 0, r;
  while ((r = ai_register(g->vocab_size, g->runtime_seq_len)) == -AIE_BUSY) {
    if (!said)
      fprintf(2, "ai_daemon: another worker is registered; retrying every second\n");
    said = 1;
    sleep(10);
  }
  if (r < 0)
    fprintf(2, "ai_daemon: cannot register: %s\n", ai_strerror(r));
  return r;
}

// A free cache: one no held request holds.
static struct llm_cache *
free_cache(struct llm_session *s)
{
  for (int c = 0; c < s->ncache; c++) {
    int used = 0;
    for (int i = 0; i < nrun; i++)
      used |= run[i].r.kv == &s->kv[c];
    if (!used)
      return &s->kv[c];
  }
  return 0;
}

// g: the sampler for options o (kernel-checked), as llmrun_* sets it up
// from the same options typed as decimals; vocab is the model's. Returns 0,
// or -1 if g needs the workspace and there is none.
static int
sampler_for(struct llm_sampler *g, const struct ai_opts *o, int vocab)
{
  memset(g, 0, sizeof(*g));
  g->temp = (double)o->temp_micro / (double)AI_MICRO;
  g->top_k = o->top_k >= (uint32)vocab ? 0 : (int)o->top_k; // k >= vocab keeps all
  g->top_p = o->top_p_micro == 0 ? 1.0 : (double)o->top_p_micro / (double)AI_MICRO;
  g->seed = o->seed;
  for (int i = 0; i < o->nstop; i++)
    g->stop[i] = (int)o->stop[i]; // below the vocab size (kernel-checked)
  g->nstop = o->nstop;
  g->presence_micro = o->presence_micro;
  g->frequency_micro = o->frequency_micro;
  for (int i = 0; i < o->nbias; i++) {
    g->bias_id[i] = (int)o->bias[i].id; // below the vocab size (kernel-checked)
    g->bias_micro[i] = o->bias[i].micro;
  }
  g->nbias = o->nbias;
  g->logprobs = o->logprobs > 0;
  g->top_logprobs = o->logprobs > 0 ? o->logprobs - 1 : 0;
  g->cand = work.cand;
  g->cum = work.cum;
  g->adj = work.adj;
  llm_sampler_reset(g);
  return llm_sampler_needs_work(g) && work.cand == 0 ? -1 : 0;
}

// Blocks of the KV pool one request's whole window (runtime_seq_len
// positions) may take: every request held, running or paused, can grow
// to its window, so the daemon holds no more requests than the pool has
// windows for.
static int
window_blocks(const struct llm_runtime *rt)
{
  return (rt->cfg.runtime_seq_len + LLM_KV_BLOCK - 1) / LLM_KV_BLOCK;
}

// Requests the daemon may hold, running or paused: a cache each, and no
// more than the pool has full windows for, so that every held request can
// grow to its window (what ai_plan's caches says to the kernel).
static int
holdable(const struct llm_session *s, const struct llm_runtime *rt)
{
  int windows = s->pool.nblocks / window_blocks(rt);
  return s->ncache < windows ? s->ncache : windows;
}

// Tell the kernel the KV pool's counters and, for a request u (or 0),
// how much of its prompt came from the pool (ai_query, ai_table and
// ai top show them).
static void
kv_report(struct llm_session *s, struct running *u)
{
  const struct llm_kvstats *k = &s->pool.st;
  struct ai_kvstat st = { s->pool.nblocks, k->used, k->cached, k->free, LLM_KV_BLOCK, s->pool.reuse,
    k->requests, k->prompt, k->hits, k->evictions };
  int r = ai_kvreport(u ? u->reqid : 0, u ? u->r.cached : 0, &st);
  if (r < 0 && r != -AIE_NOREQ)
    fprintf(2, "ai_daemon: kvreport: %s\n", ai_strerror(r));
}

// Start job in a free place, or fail it if the runtime refuses it.
static void
admit(struct llm_runtime *rt, struct llm_session *s, struct ai_job *job)
{
  static int ids[AI_MAX_PROMPT];
  struct running *u = &run[nrun];
  for (int i = 0; i < job->count; i++)
    ids[i] = job->tokens[i] > 0x7fffffff ? -1 : (int)job->tokens[i];
  if (sampler_for(&u->g, &job->opts, rt->cfg.vocab_size) < 0) {
    ai_fail(job->reqid, -AIE_NOMEM);
    return;
  }
  if (llm_req_start(rt, &u->r, free_cache(s), ids, job->count, job->predict) < 0) {
    ai_fail(job->reqid, -AIE_RUNTIME);
    return;
  }
  u->reqid = job->reqid;
  u->reported = 0;
  nrun++;
  kv_report(s, u);
}

// (Re)starts the thread pool with as many threads as the host now runs
// at once and sets the wait until the next measurement (design comment):
// `before` is the count it had (the harts at start). Returns the count.
static int
size_pool(int before)
{
  llm_pool_stop();
  llm_pool_start(0);
  pool_sized_at = time_us();
  int now = llm_pool_threads();
  if (now >= harts)
    resize_wait = RESIZE_US;
  else if (now < before)
    resize_wait = RESIZE_SOON_US; // it just fell: look again soon
  else
    resize_wait = 2 * resize_wait < RESIZE_US ? 2 * resize_wait : RESIZE_US;
  return now;
}

// Measures the pool again if it was sized resize_wait ago or more, and
// prints a change. Only between steps; `why` says when ("while idle",
// "between steps").
static void
resize_pool(const char *why)
{
  if (time_us() - pool_sized_at < resize_wait)
    return;
  int before = llm_pool_threads(), now = size_pool(before);
  if (now != before)
    printf("ai_daemon: threads %d -> %d (measured again %s)\n", before, now, why);
}

// The next request: one already queued (ai_take never blocks) or, with
// none running, sleep for one, first resizing the pool if due.
static int
next_request(struct ai_job *job)
{
  int r = ai_take(job, places);
  if (r != 0 || nrun > 0)
    return r;
  resize_pool("while idle");
  return ai_next(job);
}

// Take requests while one more may be held (holdable): sleep for one if
// none is held, never block otherwise. Exits when this process is no
// longer the worker. Then, if every cache is held and at least B
// requests, one spare cache for a request that preempts (design comment).
static void
admit_all(struct llm_runtime *rt, struct llm_session *s)
{
  static struct ai_job job;
  while (nrun < holdable(s, rt)) {
    int r = next_request(&job);
    if (r == -AIE_NOTWORKER) {
      fprintf(2, "ai_daemon: no longer the worker; exiting\n");
      exit(1);
    }
    if (r == 0)
      return;
    if (r < 0) {
      fprintf(2, "ai_daemon: next: %s\n", ai_strerror(r));
      if (nrun == 0)
        sleep(100);
      return;
    }
    admit(rt, s, &job);
  }
  if (nrun == s->ncache && nrun >= places && s->ncache < LLM_MAXKV &&
      (s->ncache + 1) * window_blocks(rt) <= s->pool.nblocks)
    llm_session_add_caches(s, rt, s->ncache + 1);
}

// The record of u's latest id (its sampler's) to the kernel, in
// millionths, before the id itself.
static void
send_logprob(struct running *u)
{
  const struct llm_logprob *l = &u->g.last;
  struct ai_logprob rec = { (uint32)l->id, llm_lp_micro(l->lp), l->ntop };
  for (int i = 0; i < l->ntop; i++) {
    rec.top[i].id = (uint32)l->top_id[i];
    rec.top[i].lp = llm_lp_micro(l->top_lp[i]);
  }
  int r = ai_logprob(u->reqid, &rec);
  if (r < 0 && r != -AIE_NOREQ)
    fprintf(2, "ai_daemon: request %d: logprob: %s\n", u->reqid, ai_strerror(r));
}

// Hand request i's new ids to the kernel (nothing new during prefill: then
// only ask whether to go on), and complete it once it has them all.
// Returns 1 if it ended (done, or no longer wanted), else 0.
static int
report(struct running *u)
{
  static uint32 out[AI_MAX_PREDICT];
  const int *gen = u->r.kv->seq + u->r.n;
  int k = u->r.gen - u->reported; // 0 or 1: a step gives a request at most one id
  for (int i = 0; i < k; i++)
    out[i] = gen[u->reported + i];
  if (k == 1 && u->g.logprobs)
    send_logprob(u);
  int r = ai_emit(u->reqid, out, k);
  if (r == -AIE_NOREQ)
    return 1; // cancelled, or its owner exited: stop computing it
  if (r < 0)
    fprintf(2, "ai_daemon: request %d: emit: %s\n", u->reqid, ai_strerror(r));
  u->reported = u->r.gen;
  if (!u->r.done)
    return 0;
  for (int i = 0; i < u->r.gen; i++)
    out[i] = gen[i];
  r = ai_complete(u->reqid, out, u->r.gen);
  if (r < 0 && r != -AIE_NOREQ)
    fprintf(2, "ai_daemon: request %d: complete: %s\n", u->reqid, ai_strerror(r));
  return 1;
}

// Puts run[] in the order of plan p (which names each held request once)
// and returns how many of them run this step; the step's budget goes to
// s. If the kernel refuses the plan, the first B held run, oldest first.
static int
plan(const struct llm_runtime *rt, struct llm_session *s)
{
  static struct ai_plan p;
  static struct running was[LLM_MAXKV];
  p.places = places;
  p.caches = holdable(s, rt);
  p.n = nrun;
  for (int i = 0; i < nrun; i++) {
    p.e[i].reqid = run[i].reqid;
    p.e[i].fed = run[i].r.fed;
    was[i] = run[i];
  }
  int r = ai_plan(&p);
  if (r < 0) {
    fprintf(2, "ai_daemon: plan: %s\n", ai_strerror(r));
    s->budget = LLM_BATCH;
    return nrun < places ? nrun : places;
  }
  for (int i = 0; i < nrun; i++)
    for (int k = 0; k < nrun; k++)
      if (was[k].reqid == p.e[i].reqid)
        run[i] = was[k];
  s->budget = p.chunk;
  return p.run;
}

// One step for the requests the plan runs, then the reports of all held
// ones; the ended ones leave (the others keep their order).
static void
step(const struct llm_model *md, struct llm_runtime *rt, struct llm_session *s)
{
  struct llm_req *rq[LLM_MAXKV];
  int n = plan(rt, s);
  for (int i = 0; i < nrun; i++) {
    run[i].r.sampler = &run[i].g; // run[] moves: point at its place now
    rq[i] = &run[i].r;
  }
  llm_batch_step(md, rt, s, rq, n);
  int kept = 0;
  for (int i = 0; i < nrun; i++)
    if (!report(&run[i]))
      run[kept++] = run[i];
    else
      llm_req_end(&run[i].r); // its blocks back to the pool
  if (kept < nrun)
    kv_report(s, 0);
  nrun = kept;
}

// The model cannot be loaded: rather than exit and be restarted by init
// every second (a message each time), tell init to go on and stay idle.
// Submits get AIE_NOWORKER; kill this process to try again.
static void __attribute__((noreturn)) idle(int ready_fd)
{
  fprintf(2, "ai_daemon: not serving; fix the assets, then kill pid %d to retry\n", getpid());
  if (ready_fd >= 0)
    close(ready_fd);
  for (;;)
    sleep(1000);
}

// Serve until this process is no longer the worker.
static void
serve(const struct llm_model *md, struct llm_runtime *rt, struct llm_session *s)
{
  for (;;) {
    admit_all(rt, s);
    if (nrun > 0)
      step(md, rt, s);
    if (llm_pool_threads() < harts)
      resize_pool("between steps");
  }
}

// The daemon's options (see the top of the file).
struct options {
  int ready_fd;    // -1: none
  int batch;       // B: places at most, 1..AI_BATCH
  int kv_blocks;   // the KV pool's blocks; 0: a share of the free memory
  int reuse;       // prefix reuse on
  const char *dir; // the model's assets
};

// Reads argv into o. Returns 0, or -1 after the usage line (after the
// option, if one is unknown).
static int
parse_options(int argc, char **argv, struct options *o)
{
  int i = 1;
  *o = (struct options){ -1, AI_BATCH, 0, 1, 0 };
  for (; i + 1 < argc && argv[i][0] == '-'; i += 2) {
    if (strcmp(argv[i], "--ready-fd") == 0)
      o->ready_fd = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--batch") == 0)
      o->batch = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--kv-blocks") == 0 && (o->kv_blocks = atoi(argv[i + 1])) > 0)
      ;
    else if (strcmp(argv[i], "--prefix-cache") == 0 && strcmp(argv[i + 1], "on") == 0)
      o->reuse = 1;
    else if (strcmp(argv[i], "--prefix-cache") == 0 && strcmp(argv[i + 1], "off") == 0)
      o->reuse = 0;
    else if (strcmp(argv[i], "--mmap") == 0 && strcmp(argv[i + 1], "off") == 0)
      llm_map_weights = 0; // read the weights into the heap (docs/VM.md)
    else
      break;
  }
  if (i < argc && argv[i][0] == '-') {
    fprintf(2, "ai_daemon: unknown option %s\n", argv[i]);
    o->batch = 0;
  }
  if (o->batch < 1 || o->batch > AI_BATCH) {
    fprintf(2,
        "usage: ai_daemon [--ready-fd FD] [--batch 1..%d] [--kv-blocks N] "
        "[--prefix-cache on|off] [--mmap off] [ASSET_DIR]\n",
        AI_BATCH);
    return -1;
  }
  o->dir = i < argc ? argv[i] : default_dir();
  return 0;
}

// Loads o's model into rt and s with its caches, KV pool and sampler
// workspace, and sets places: o's batch, fewer if memory or the pool's
// full windows do not allow it (said so). Idles if the model cannot be
// loaded. Returns the model.
static const struct llm_model *
load(const struct options *o, struct llm_runtime *rt, struct llm_session *s)
{
  const struct llm_model *md = model_for(o->dir);
  if (md == 0 || llm_session_init(s, rt, o->dir, md->model_kind) < 0)
    idle(o->ready_fd);
  places = llm_session_add_caches(s, rt, o->batch);
  if (places < o->batch)
    fprintf(2, "ai_daemon: memory for %d of %d KV caches: serving %d at once\n", places, o->batch,
        places);
  if (llm_session_pool(s, rt, o->kv_blocks, o->reuse, 0) < 0)
    idle(o->ready_fd);
  if (places > holdable(s, rt)) {
    places = holdable(s, rt);
    fprintf(
        2, "ai_daemon: the kv pool holds %d full windows: serving %d at once\n", places, places);
  }
  if (llm_sampler_alloc(&work, rt->cfg.vocab_size) < 0)
    fprintf(2,
        "ai_daemon: no memory for the sampler: sampled requests will fail "
        "(out of memory); boot with more RAM to serve them\n");
  return md;
}

// Parses the options, checks the worker right (before loading a model
// for nothing), loads the model, sizes the pool, registers, says so (and
// signals ready_fd), then serves. Exit status 2 for bad options, 1 if it
// cannot register.
int
main(int argc, char **argv)
{
  static struct llm_runtime rt;
  static struct llm_session s;
  struct options o;
  if (parse_options(argc, argv, &o) < 0)
    return 2;
  if (!ai_right(0)) {
    fprintf(2,
        "ai_daemon: cannot register: %s; only the ai_daemon that init starts may "
        "serve (docs/AI_SERVICE.md, rule 13)\n",
        ai_strerror(AIE_PERM));
    return 1;
  }
  llm_prog = "ai_daemon";
  const struct llm_model *md = load(&o, &rt, &s);
  harts = nharts();
  size_pool(harts); // as many threads as the machine runs at once
  if (register_worker(&rt.cfg) < 0)
    return 1;
  printf("ai_daemon: pid %d serving %s (vocab %d, runtime_seq_len %d), load %lu ms, batch %d, "
         "kernels %s, threads %d\n",
      getpid(), o.dir, rt.cfg.vocab_size, rt.cfg.runtime_seq_len, s.tm.init_us / 1000, places,
      llm_kernels_name(), llm_pool_threads());
  kv_report(&s, 0);
  if (o.ready_fd >= 0) {
    write(o.ready_fd, "r", 1);
    close(o.ready_fd);
  }
  serve(md, &rt, &s);
  return 0;
}
