// gateway: the kernel AI service for the host, over the port device.
//
//   gateway        (started by init when /port exists and the worker is up)
//
// It speaks the frames of docs/GATEWAY.md on /port: each line the host
// sends is one frame; the answers are lines too. The main thread reads
// and checks the frames, submits the requests (ai_submit_opts: those whose
// S frames came in one read together, after the read) and cancels
// (ai_cancel); one thread per live request follows it with ai_stream,
// sends its ids in T frames as the worker produces them (each id's
// log-probability record first, in an L frame, if asked), and
// ends it with one E frame (timings from ai_query, then ai_wait frees the
// kernel's slot) or one X frame. At most GW_LIVE_MAX (the kernel's table)
// requests are live; each carries its HTTP user's tenant, and the kernel
// lets one process own AI_PERPROC live requests per tenant
// (docs/AI_SERVICE.md rule 6), so the policy sees every user's requests
// and the worker batches them.
//
// Every frame line is written whole under out_lock (one write per line),
// so the threads' frames never interleave. The gateway's own requests,
// held[], are guarded by held_lock (the kernel's table, all processes'
// requests, is what send_kernel_table sends for V): a rid is live from its
// S until its thread has collected it (then C for it is refused with
// GW_NOT_LIVE), and a cancel and that collection never race (the thread
// checks the cancelled flag under the lock). No call that may block is
// made under held_lock, which the main thread takes for every frame.
//
// Anything the host sends is checked at one place, handle_line and the
// parsers it calls: a frame that is not exactly right is answered with X
// (a GW_* code of gateway.h or the kernel's AIE_* code) and skipped; the
// gateway goes on. A refused S frame's X names its rid whenever the rid
// can be read, so the host fails that request at once. It holds no AI
// worker right (init drops it).

#include "user/lib/user.h"
#include "kernel/include/fcntl.h"
#include "kernel/include/aisvc.h"
#include "user/ai/gateway.h"

#define FRAME_ID_LEN 11 // " 4294967295": a space and an id

// One request the gateway holds (or a free entry).
struct live {
  enum { FREE, LIVE, ENDED } state; // ENDED: its thread has finished but is not joined
  int rid;                          // the host's id
  int reqid;                        // the kernel's
  int tid;                          // its stream thread
  struct ai_opts opts;              // for telling stop from length
  int cancelled;                    // C arrived: the thread ends it with E cancel
  struct ai_status at_cancel;       // ai_query just before ai_cancel
};

static int port;
static struct mutex out_lock;         // one frame line at a time on the port
static struct mutex held_lock;        // held[]
static struct live held[GW_LIVE_MAX]; // the gateway's own requests, by entry

// Writes one frame line (without its newline) to the port, whole.
static void
send_line(char *line)
{
  int n = strlen(line), w;

  line[n] = '\n'; // every buffer passed in has room for it
  mutex_lock(&out_lock);
  for (int off = 0; off <= n; off += w)
    if ((w = write(port, line + off, n + 1 - off)) <= 0)
      break; // the port failed: the host will see the frame missing
  mutex_unlock(&out_lock);
  line[n] = 0;
}

// X rid code words: a refused frame or a failed request (why 0: a code
// without words).
static void
send_error(int rid, int code, const char *why)
{
  char line[160];

  snprintf(line, sizeof(line) - 1, "X %d %d %s", rid, code, why ? why : "request failed");
  send_line(line);
}

// ---------------------------------------------------------------- one request's thread

// Appends " id" for each of ids[0..n) to line (which has room for it).
static char *
put_ids(char *p, uint32 *ids, int n)
{
  for (int i = 0; i < n; i++)
    p += snprintf(p, FRAME_ID_LEN + 1, " %u", ids[i]);
  return p;
}

// L rid id lp ntop id lp ...: the log-probability record of one id.
static void
send_logprob(int rid, const struct ai_logprob *r)
{
  char line[48 + AI_MAX_TOPLP * 24];
  char *p = line + snprintf(line, 48, "L %d %u %d %d", rid, r->id, r->lp, r->ntop);
  for (int i = 0; i < r->ntop && i < AI_MAX_TOPLP; i++)
    p += snprintf(p, 24, " %u %d", r->top[i].id, r->top[i].lp);
  send_line(line);
}

// The records of request l's ids [from, from+k) in L frames (none when
// it asked for none).
static void
send_logprobs(struct live *l, int from, int k)
{
  static struct ai_logprob lp[GW_LIVE_MAX][AI_MAX_PREDICT]; // one row per entry of held[]
  struct ai_logprob *rec = lp[l - held];
  int n = 0, got;

  if (l->opts.logprobs == 0)
    return;
  while (n < k && (got = ai_logprobs(l->reqid, rec + n, from + n, k - n)) > 0)
    n += got;
  for (int i = 0; i < n; i++)
    send_logprob(l->rid, &rec[i]);
}

// Why request l ended, for its E frame: a stop id as its last id, else it
// ran to predict.
static const char *
finish_word(struct live *l, uint32 last, int gen)
{
  for (int i = 0; i < l->opts.nstop; i++)
    if (gen > 0 && last == l->opts.stop[i])
      return "stop";
  return "length";
}

// Sends request l's E frame.
static void
send_end(struct live *l, const char *finish, int gen, struct ai_status *st)
{
  char line[160];

  snprintf(line, sizeof(line) - 1, "E %d %s %d %d %lu %lu %lu %d", l->rid, finish, gen,
      st->prompt_len, st->queued_us, st->ttft_us, st->total_us, st->cached);
  send_line(line);
}

// Collects request l once its stream returned k <= 0 (0: done, every id
// read): with held_lock held, so it never blocks: ai_wait (which frees
// the kernel's slot) only once ai_query says the request ended; one whose
// stream failed while it runs (k a code of the call, as out of memory) is
// cancelled. Returns 0 with its status in *st, or the code for its X.
static int
collect_end(struct live *l, int k, struct ai_status *st)
{
  char text[AI_RESULT_MAX + 1];

  memset(st, 0, sizeof(*st));
  if (ai_query(l->reqid, st) < 0 || (st->state != AI_DONE && st->state != AI_FAILED)) {
    ai_cancel(l->reqid);
    return k < 0 ? -k : AIE_NOREQ;
  }
  int r = ai_wait(l->reqid, text, sizeof(text));
  return r < 0 ? -r : 0;
}

// Follows request l (a thread of its own): its ids in T frames as they
// come, then its end. The entry becomes ENDED before the last frame goes
// out, so the host may reuse the rid as soon as it reads that frame; the
// main thread reuses the entry only after joining this thread.
static uint64
stream(void *arg)
{
  struct live *l = arg;
  uint32 ids[AI_MAX_PREDICT], last = 0;
  char line[16 + AI_MAX_PREDICT * FRAME_ID_LEN];
  struct ai_status st;
  int from = 0, k, code = 0;

  while ((k = ai_stream(l->reqid, ids, from, AI_MAX_PREDICT)) > 0) {
    send_logprobs(l, from, k);
    char *p = line + snprintf(line, 16, "T %d", l->rid);
    put_ids(p, ids, k);
    send_line(line);
    from += k;
    last = ids[k - 1];
  }
  mutex_lock(&held_lock);
  int cancelled = l->cancelled;
  if (cancelled)
    st = l->at_cancel; // ai_cancel freed the kernel's slot
  else
    code = collect_end(l, k, &st);
  l->state = ENDED;
  mutex_unlock(&held_lock);
  if (cancelled)
    send_end(l, "cancel", from, &st);
  else if (code)
    send_error(l->rid, code, ai_strerror(code));
  else
    send_end(l, finish_word(l, last, from), from, &st);
  return 0;
}

// ---------------------------------------------------------------- frames from the host

// Parses word w as a decimal number 0..max. Returns 0, or -1 if it is not
// one (empty, a sign, another character, or above max). The bound is exact
// for every max up to 2^64-1: v * 10 + d <= max is tested as v <= (max - d)
// / 10 only once d <= max, so max - d never wraps.
static int
parse_num(const char *w, uint64 max, uint64 *out)
{
  uint64 v = 0;

  if (*w == 0)
    return -1;
  for (; *w; w++) {
    if (*w < '0' || *w > '9')
      return -1;
    uint64 d = *w - '0';
    if (d > max || v > (max - d) / 10)
      return -1;
    v = v * 10 + d;
  }
  *out = v;
  return 0;
}

// Parses word w as a signed decimal number -max..max into *out. Returns
// 0, or -1 if it is not one.
static int
parse_signed(const char *w, uint64 max, int32 *out)
{
  uint64 v;

  if (parse_num(w + (*w == '-'), max, &v) < 0)
    return -1;
  *out = *w == '-' ? -(int32)v : (int32)v;
  return 0;
}

// The S frame's penalty, bias and logprobs words from w[i] on into o (the
// kernel checks the ranges). Returns the index after them, or -1 if they
// are malformed.
static int
parse_adjust(char **w, int n, int i, struct ai_opts *o)
{
  uint64 x;

  if (i + GW_S_ADJUST > n || parse_signed(w[i], 0x7fffffff, &o->presence_micro) < 0 ||
      parse_signed(w[i + 1], 0x7fffffff, &o->frequency_micro) < 0 ||
      parse_num(w[i + 2], 0x7fffffff, &x) < 0)
    return -1;
  o->logprobs = x;
  if (parse_num(w[i + 3], AI_MAX_BIAS, &x) < 0)
    return -1;
  o->nbias = x;
  i += GW_S_ADJUST;
  for (int b = 0; b < o->nbias; b++, i += 2) {
    uint64 id;
    if (i + 2 > n || parse_num(w[i], 0xffffffff, &id) < 0 ||
        parse_signed(w[i + 1], 0x7fffffff, &o->bias[b].micro) < 0)
      return -1;
    o->bias[b].id = id;
  }
  return i;
}

// A parsed S frame.
struct submit {
  int rid, predict, nprompt;
  struct ai_opts opts;
  uint32 prompt[AI_MAX_PROMPT];
};

// The S frame's numbers before nstop, w[1..GW_S_HEAD): rid predict
// temp_micro top_k top_p_micro seed tenant priority, into s. Returns 0, or
// GW_MALFORMED with *why set (s->rid is then the rid, or 0 if it could
// not be read).
static int
parse_head(char **w, int n, struct submit *s, const char **why)
{
  static const uint64 max[GW_S_HEAD - 1] = { GW_RID_MAX, 0x7fffffff, 0xffffffff, 0xffffffff,
    0xffffffff, 0xffffffffffffffffULL, 0x7fffffff, 0x7fffffff };
  uint64 v[GW_S_HEAD - 1];

  for (int i = 0; i < GW_S_HEAD - 1; i++) {
    if (1 + i >= n || parse_num(w[1 + i], max[i], &v[i]) < 0 || (i == 0 && v[0] == 0)) {
      *why = i == 0 ? "malformed: no rid (1.." GW_STR(GW_RID_MAX) ")"
                    : "malformed: a field is not a number in range";
      return GW_MALFORMED;
    }
    if (i == 0)
      s->rid = v[0];
  }
  s->predict = v[1];
  s->opts.temp_micro = v[2];
  s->opts.top_k = v[3];
  s->opts.top_p_micro = v[4];
  s->opts.seed = v[5];
  s->opts.tenant = v[6];   // 0: the gateway's pid (the kernel's default)
  s->opts.priority = v[7]; // the kernel checks the range (AIE_PRIORITY)
  return 0;
}

// The S frame's nstop and stop ids, from w[GW_S_HEAD] on, into o.
// Returns the index after them, or -1 if they are malformed.
static int
parse_stops(char **w, int n, struct ai_opts *o)
{
  int i = GW_S_HEAD;
  uint64 x;

  if (i >= n || parse_num(w[i], AI_MAX_STOP, &x) < 0)
    return -1;
  o->nstop = x;
  for (int k = 0; k < o->nstop; k++) {
    if (++i >= n || parse_num(w[i], 0xffffffff, &x) < 0)
      return -1;
    o->stop[k] = x;
  }
  return i + 1;
}

// The S frame's last words, nprompt and the prompt ids from w[i] on, into
// s. Returns 0, or an error code with *why set.
static int
parse_prompt(char **w, int n, int i, struct submit *s, const char **why)
{
  uint64 x;

  if (i >= n || parse_num(w[i], 0xffffffff, &x) < 0) {
    *why = "malformed: nprompt is missing or not a number";
    return GW_MALFORMED;
  }
  if (x < 1 || x > AI_MAX_PROMPT) {
    *why = ai_strerror(AIE_COUNT);
    return AIE_COUNT;
  }
  s->nprompt = x;
  if (n != i + 1 + s->nprompt) {
    *why = "malformed: the prompt ids do not match nprompt";
    return GW_MALFORMED;
  }
  for (int j = 0; j < s->nprompt; j++) {
    if (parse_num(w[i + 1 + j], 0xffffffff, &x) < 0) {
      *why = "malformed: a prompt id is not a number";
      return GW_MALFORMED;
    }
    s->prompt[j] = x;
  }
  return 0;
}

// Parses the S frame's words w[0..n) (w[0] is "S"; gateway.h gives their
// order) into s. Returns 0, or an error code with *why set (s->rid is
// then the rid, or 0 if it could not be read).
static int
parse_submit(char **w, int n, struct submit *s, const char **why)
{
  int i, code;

  memset(s, 0, sizeof(*s));
  if ((code = parse_head(w, n, s, why)) != 0)
    return code;
  if ((i = parse_stops(w, n, &s->opts)) < 0) {
    *why = "malformed: nstop is not 0.." AI_STR(AI_MAX_STOP) ", or a stop id is not a number";
    return GW_MALFORMED;
  }
  if ((i = parse_adjust(w, n, i, &s->opts)) < 0) {
    *why = "malformed: presence frequency logprobs nbias (id bias)... after the stop ids";
    return GW_MALFORMED;
  }
  return parse_prompt(w, n, i, s, why);
}

// Joins the thread of an ENDED entry (it has sent its last frame or is
// about to), making the entry FREE. Only the main thread calls it, with
// no lock held: no other thread changes an ENDED entry.
static void
reap(struct live *l)
{
  uthread_join(l->tid, 0);
  l->state = FREE;
}

// The live entry for rid, or 0. Caller holds held_lock.
static struct live *
find_live(int rid)
{
  for (int i = 0; i < GW_LIVE_MAX; i++)
    if (held[i].state == LIVE && held[i].rid == rid)
      return &held[i];
  return 0;
}

// The S frames read but not yet submitted: those that arrived together
// (in one read of the port) are submitted together, so the worker finds
// them all in its queue when it next takes a batch, rather than starting
// one request's step while the others are still being read. Only the main
// thread touches them.
static struct submit pending[GW_LIVE_MAX];
static int npending;

// Submits one parsed request and starts its thread; X for a rid that is
// live, a full window or the kernel's refusal.
static void
submit_one(struct submit *s)
{
  struct live *l = 0;
  int code, live = 0;

  mutex_lock(&held_lock);
  for (int i = 0; i < GW_LIVE_MAX; i++) {
    live += held[i].state == LIVE;
    if (held[i].state != LIVE && (!l || l->state != FREE))
      l = &held[i];
  }
  code = find_live(s->rid) ? GW_RID_LIVE : live >= GW_LIVE_MAX ? GW_FULL : 0;
  mutex_unlock(&held_lock);
  if (code) {
    send_error(s->rid, code,
        code == GW_RID_LIVE ? "rid is already live" : "all " GW_STR(GW_LIVE_MAX) " are live");
    return;
  }
  if (l->state == ENDED)
    reap(l);
  int reqid = ai_submit_opts(s->prompt, s->nprompt, s->predict, &s->opts);
  if (reqid < 0) {
    send_error(s->rid, -reqid, ai_strerror(reqid));
    return;
  }
  mutex_lock(&held_lock);
  *l = (struct live){ LIVE, s->rid, reqid, 0, s->opts, 0 };
  mutex_unlock(&held_lock);
  // l->tid is read only by reap, in this thread, so it may be set after
  // the thread started (and perhaps already ended).
  int tid = uthread_create(stream, l);
  if (tid < 0) {
    ai_cancel(reqid);
    mutex_lock(&held_lock);
    l->state = FREE;
    mutex_unlock(&held_lock);
    send_error(s->rid, AIE_NOMEM, "cannot start a thread for the request");
    return;
  }
  l->tid = tid;
}

// Submits every kept S frame, in the order they came.
static void
submit_pending(void)
{
  for (int i = 0; i < npending; i++)
    submit_one(&pending[i]);
  npending = 0;
}

// S: parses the frame and keeps it for submit_pending (submitting the
// ones kept first when there is no room for it); X for a malformed one.
static void
do_submit(char **w, int n)
{
  const char *why;
  int code;

  if (npending == GW_LIVE_MAX)
    submit_pending();
  struct submit *s = &pending[npending];
  if ((code = parse_submit(w, n, s, &why)) != 0) {
    send_error(s->rid, code, why);
    return;
  }
  npending++;
}

// C rid: cancels a live request; its thread sends E rid cancel.
static void
do_cancel(char **w, int n)
{
  uint64 rid = 0;
  struct live *l;

  if (n != 2 || parse_num(w[1], GW_RID_MAX, &rid) < 0 || rid == 0) {
    send_error(0, GW_MALFORMED, "malformed: C takes one rid");
    return;
  }
  mutex_lock(&held_lock);
  if ((l = find_live(rid)) != 0 && !l->cancelled) {
    memset(&l->at_cancel, 0, sizeof(l->at_cancel));
    ai_query(l->reqid, &l->at_cancel);
    l->cancelled = 1;
    ai_cancel(l->reqid);
  } else {
    l = 0;
  }
  mutex_unlock(&held_lock);
  if (!l)
    send_error(rid, GW_NOT_LIVE, "rid is not live");
}

// R: the gateway is ready; the model's limits, the window (the live
// requests it holds per tenant: the kernel's AI_PERPROC; GW_LIVE_MAX in
// all), and the nonce of the hello it answers (none when it says so by
// itself at start).
static void
send_ready(const char *nonce)
{
  struct ai_info in;
  char line[128];
  int len;

  memset(&in, 0, sizeof(in));
  ai_info(&in);
  len = snprintf(line, sizeof(line) - 1, "R gateway %d %d %d %d", GW_VERSION, in.vocab, in.seq_len,
      AI_PERPROC);
  if (nonce)
    snprintf(line + len, sizeof(line) - 1 - len, " %s", nonce);
  send_line(line);
}

// H [nonce]: answered with R, echoing the nonce (a number 0..2^63-1).
static void
do_hello(char **w, int n)
{
  uint64 nonce;

  if (n > 2 || (n == 2 && parse_num(w[1], GW_NONCE_MAX, &nonce) < 0)) {
    send_error(0, GW_MALFORMED, "malformed: H takes at most a nonce 0..2^63-1");
    return;
  }
  send_ready(n == 2 ? w[1] : 0);
}

// I: the kernel's table at a glance, and the worker's KV cache (from
// ai_table: its pool's blocks and counters, docs/KVCACHE.md).
static void
send_info(void)
{
  static struct ai_table_view v; // only the main thread handles frames
  struct ai_info in;
  char line[256];

  memset(&in, 0, sizeof(in));
  memset(&v, 0, sizeof(v));
  ai_info(&in);
  ai_table(&v, sizeof(v));
  snprintf(line, sizeof(line) - 1, "I %d %d %d %d %d %d %d %d %d %d %d %lu %lu %lu", in.used,
      in.queued, in.running, in.done, in.failed, in.completed, in.worker_pid, v.kv.blocks,
      v.kv.used, v.kv.cached, v.kv.free, v.kv.evictions, v.kv.hits, v.kv.prompt);
  send_line(line);
}

// The host's rid of the gateway's request reqid (ai_table shows the
// gateway the reqids of its own requests only), or 0.
static int
rid_of_reqid(int reqid)
{
  int rid = 0;

  mutex_lock(&held_lock);
  for (int i = 0; i < GW_LIVE_MAX && reqid != 0; i++)
    if (held[i].state != FREE && held[i].reqid == reqid)
      rid = held[i].rid;
  mutex_unlock(&held_lock);
  return rid;
}

// V: the kernel's whole table (ai_table) in one line: the time, the worker,
// the scheduling policy and its budgets, the FIFO, the batch, then every
// slot; a kernel reqid never leaves the guest, the host's rid stands for the
// gateway's own requests.
static void
send_kernel_table(void)
{
  static struct ai_table_view v; // only the main thread handles frames
  static char line[GW_LINE_MAX];
  int len, cap = sizeof(line) - 1;

  memset(&v, 0, sizeof(v));
  ai_table(&v, sizeof(v));
  len = snprintf(line, cap, "V %lu %d %d %s %d %d %d", v.now, v.worker_pid, v.completed, v.policy,
      v.chunk, v.prefill, v.nqueued);
  for (int k = 0; k < v.nqueued; k++)
    len += snprintf(line + len, cap - len, " %d", v.fifo[k]);
  len += snprintf(line + len, cap - len, " %d", v.nbatch);
  for (int k = 0; k < v.nbatch; k++)
    len += snprintf(line + len, cap - len, " %d", v.batch[k]);
  for (int i = 0; i < AI_NSLOT; i++) {
    struct ai_slot_view *w = &v.slot[i];
    len += snprintf(line + len, cap - len, " %d %d %d %d %d %d %lu %lu %lu %lu %d %d %d %d %d",
        w->state, w->owner, rid_of_reqid(w->reqid), w->prompt_len, w->predict, w->tokens,
        w->submit_time, w->start_time, w->first_time, w->finish_time, w->cached, w->tenant,
        w->priority, w->paused, w->pauses);
  }
  send_line(line);
}

// The rid of line when it is an S frame whose rid can be read ("S rid"
// and a space or the end, rid 1..GW_RID_MAX), else 0: what a refusal of
// the whole line names, so that the host fails that request at once.
static int
frame_rid(const char *line)
{
  char word[12];
  uint64 rid;
  int k = 0;

  if (line[0] != 'S' || line[1] != ' ')
    return 0;
  for (line += 2; *line && *line != ' ' && k < (int)sizeof(word) - 1; line++)
    word[k++] = *line;
  word[k] = 0;
  if ((*line && *line != ' ') || parse_num(word, GW_RID_MAX, &rid) < 0)
    return 0;
  return rid;
}

// Handles one frame line (no newline, NUL-terminated, only printable
// ASCII checked by the caller). No frame has more words than the longest
// S frame (GW_S_WORDS_MAX).
static void
handle_line(char *line)
{
  static char *w[GW_S_WORDS_MAX];
  int n = 0, rid = frame_rid(line);
  char *p = line;

  for (;;) { // words separated by exactly one space
    if (n == GW_S_WORDS_MAX || *p == 0 || *p == ' ') {
      send_error(rid, GW_MALFORMED, "malformed: empty word or too many words");
      return;
    }
    w[n++] = p;
    while (*p && *p != ' ')
      p++;
    if (*p == 0)
      break;
    *p++ = 0;
  }
  if (strcmp(w[0], "S") == 0) {
    do_submit(w, n);
    return;
  }
  submit_pending(); // the frames before this one act first
  if (strcmp(w[0], "C") == 0)
    do_cancel(w, n);
  else if (strcmp(w[0], "H") == 0)
    do_hello(w, n);
  else if (strcmp(w[0], "I") == 0 && n == 1)
    send_info();
  else if (strcmp(w[0], "V") == 0 && n == 1)
    send_kernel_table();
  else
    send_error(0, GW_MALFORMED, "malformed: unknown frame");
}

// Opens /port, says R, then reads the host's bytes for ever: each line a
// frame for handle_line (one too long, or with a byte that is not
// printable ASCII, refused whole), and the S frames of each read
// submitted together after it. Exits if the port fails.
int
main(int argc, char *argv[])
{
  static char buf[GW_LINE_MAX + 1], in[GW_LINE_MAX];
  int len = 0, skipping = 0, bad = 0;

  if (argc != 1) {
    fprintf(2, "usage: gateway (init starts it; docs/GATEWAY.md)\n");
    exit(2);
  }
  if ((port = open("/port", O_RDWR)) < 0) {
    fprintf(2, "gateway: cannot open /port: %s\n", strerror(port));
    exit(1);
  }
  send_ready(0); // lost if no host listens yet: the host sends H
  for (;;) {
    int n = read(port, in, sizeof(in));
    if (n <= 0) {
      fprintf(2, "gateway: read /port: %s\n", strerror(n));
      exit(1);
    }
    for (int i = 0; i < n; i++) {
      char c = in[i];
      if (c == '\n') {
        buf[len] = 0;
        if (skipping)
          send_error(frame_rid(buf), GW_MALFORMED,
              "malformed: line longer than " GW_STR(GW_LINE_MAX) " bytes");
        else if (bad)
          send_error(frame_rid(buf), GW_MALFORMED, "malformed: a byte that is not printable ASCII");
        else
          handle_line(buf);
        len = skipping = bad = 0;
      } else if (len == GW_LINE_MAX - 1) {
        skipping = 1; // the newline would not fit: drop the rest of the line
      } else {
        bad |= c < ' ' || c > '~';
        buf[len++] = c;
      }
    }
    submit_pending(); // the S frames of this read, together
  }
}
