// The AI service: a bounded table of requests, a FIFO of slot indexes and
// one resident worker process (user/ai/ai_daemon.c) that keeps the model
// loaded and serves several requests at once (iteration-level batching).
// This file owns the table and the FIFO: every change of a slot's state
// happens here, by the rules below, with ai.lock held. The calls live in
// ai_request.c (the callers': fetch, sleep, copy out) and ai_worker.c (the
// worker's), their system-call wrappers in sysai.c; ai_table.h is what
// they share.
//
//   caller --ai_submit--> slot[] + fifo[] --ai_next / ai_take--> worker
//   caller <--ai_wait / ai_query / ai_stream-- slot
//   anyone <--ai_table-- every slot's public fields, the FIFO, the batch
//                    <--ai_emit / ai_progress / ai_complete / ai_fail-- worker
//
// The slot holds the request (who owns it, its state, prompt, result and
// times); the FIFO holds only the order in which queued slots are served.
// One spinlock, ai.lock, guards all of it. There are three kinds of
// sleeper, each on its own channel and each woken by whoever changes the
// condition it waits for:
//   - a submitter waits for a free slot (&ai.freed): every path that frees
//     a slot goes through slot_free(), which wakes them;
//   - the worker waits for a queued request (&ai.queued): submit wakes it;
//   - a caller of ai_wait waits for its request to finish (the slot
//     itself): complete, fail and the worker's death wake it.
// Every sleep sits in a loop that rechecks its condition and returns
// -AIE_INTR once the caller is killed; the killed process then exits, and
// ai_exit() reclaims whatever it owned.
//
// Design choices (docs/AI_SERVICE.md states the contract and the reasons):
// - Reqids never run out and never alias a live request. The kernel counts
//   submits in a 64-bit sequence (no wrap in any uptime) and maps each
//   sequence number to the user API's positive int by reqid_of(): 1..max,
//   then 1 again, where max is AI_REQID_MAX = 2^31-1 (the boot argument
//   ai.reqid_max=N lowers it, for tests of the wrap). reqid_next() skips
//   every id that a live request still has (queued, running, orphaned, or
//   finished and not yet waited for): at most AI_NSLOT ids are live and
//   max > AI_NSLOT, so a free one is found within AI_NSLOT + 1 steps. An
//   id is issued again only after 2^31-1 later submits, and only once its
//   request is gone; a process that kept such a stale id can reach a new
//   request with it only if it owns that request too, because every call
//   checks ownership by pid (rule 1), so another process's request gets
//   AIE_NOTOWNER. Calls find a slot by scanning the 16 slots for its reqid.
// - Ownership is the submitter's pid: proc.c never reuses a pid.
// - No deadlock in submit: a finished request's slot is freed only by its
//   owner's wait, so a submitter that slept while owning requests could
//   wait for itself, and several such submitters for each other (each
//   holding done results the others need). Hence submit sleeps on a full
//   table only when the caller owns no request; a caller that owns some
//   gets AIE_FULL at once and should wait for one of its own first.
//   Sleepers then hold no slots, and every held slot is freed by a process
//   that is not asleep in submit.
// - Besides, a process may own at most AI_PERPROC live requests (queued,
//   running, or finished and not yet waited for) for one tenant: the next
//   submit for that tenant gets AIE_WOULDBLOCK even if slots are free. A
//   request's tenant is its submitter's pid unless it names one, so a
//   process that names none cannot fill the table; the gateway, one
//   process serving many HTTP users, names each user's tenant and may own
//   AI_PERPROC requests per user, up to the table's AI_NSLOT, so that the
//   policy sees every waiting request of every user (docs/AI_SERVICE.md,
//   rule 6). A full table answers AIE_FULL to a submitter that owns
//   requests (above), so the two refusals are told apart.
// - "No worker": while no worker is registered, submit fails at once with
//   AIE_NOWORKER, so a new request never waits for a worker that may not
//   come (an image without models, or a daemon that cannot load). Requests
//   already queued when the worker died stay queued for the one init
//   restarts; during that restart (the model loading) new submits get
//   AIE_NOWORKER and may be retried.
// - Cancel frees a queued or finished request at once; a running one is
//   orphaned, as on owner exit, and dropped when the worker reports.
// - ai_call is submit + wait in the kernel, and never leaves a request
//   behind: it takes its result page before submitting (no memory: nothing
//   is queued), and any failed wait cancels the request, since the caller
//   never saw its reqid and could neither retry nor cancel it.
// - The worker hands over the generated ids and the kernel writes the
//   text, so the result always has llmrun's format. Progress is a token
//   count; the first report of >= 1 token times the first token.
// - Times in struct ai_status are the caller's view, from submit.
// - ai_table shows anyone the whole table (for ai top and the host's live
//   view): states, owners, sizes, progress and times, which ai_info
//   already summed up, but never a prompt, a result or an id generated,
//   and a reqid only to its owner (a reqid names a request to the calls;
//   rule 1 makes it useless to others, and hiding it costs nothing).
// - No copy to or from user memory happens under ai.lock: data goes
//   through the kernel stack or a kalloc'd page (never for ai_complete, so
//   that a finished request cannot be stranded by a lack of memory), and after the lock is
//   taken again the slot is looked up again by its reqid.
// - If the worker gives ai_next a bad address, the request goes back to
//   the head of the FIFO: it was not the request's fault.
// - The worker role needs the AI worker right, a per-process flag
//   (proc.ai_right, on the main thread): the first process holds it,
//   fork copies it, exec keeps it, and ai_right(1) drops it for good (no
//   call gives it back). init keeps it for ai_daemon and drops it in the
//   shell's child before the exec, so a program started at the console
//   gets AIE_PERM from ai_register, also while the real worker restarts
//   (a boot with aiworker=console lets the shell keep it: the tests that
//   act as the worker). Only registering checks it: every other worker
//   call checks that the caller is the registered worker.
// - One worker at a time; registering while another lives gets AIE_BUSY
//   (ai_daemon then retries every second). ai_register(0, 0) resigns, with
//   the same effect as the worker's death: aitest uses it to hand the role
//   back after running its cases as the worker itself.
// - The worker may run several requests at once: each report names its
//   reqid, and its death fails all of them. ai_take never blocks, so a
//   worker with running requests admits new ones between its steps; which
//   request starts, in which order the worker's requests share a step and
//   whether one is paused for another is the scheduling policy's
//   (ai_sched.c; docs/AI_SERVICE.md sections 9 and 11). A paused request
//   stays RUNNING in its slot.
// - ai_emit reports ids as they are produced and tells the worker to stop
//   an orphan (cancelled, or owner gone), freeing its slot at once: the
//   worker emits for every running request after every step, so an
//   orphan costs at most one more step. The ids stay in the slot, so
//   ai_stream lets the owner read them while the request runs; streaming
//   never frees anything (ai_wait still collects the result).
// - A request may carry options (ai_submit_opts, struct ai_opts): up to
//   AI_MAX_STOP stop ids and the sampler's settings. The kernel checks
//   them (stop ids below the vocab size, top_p at most 1) and hands them to
//   the worker with the job; the worker completes the request after the
//   first stop id it generates (fewer ids than predict), and draws each id
//   with the request's own sampler. Which ids end a turn belongs to the
//   model's chat format, which the submitter knows. Penalties, biases
//   and logprobs are options too (docs/AI_SERVICE.md, section 10); the
//   worker reports an id's log-probability record (slot_logprob) just
//   before the id, and the slot keeps them beside the ids for the owner.
// - ai.lock is statically initialised; ai_init() only reads the boot
//   argument.
// Lock order: ai.lock, then a p->lock (killed(), sleep(), wakeup()).

#include "kernel/include/types.h"
#include "kernel/include/param.h"
#include "kernel/include/riscv.h"
#include "kernel/include/spinlock.h"
#include "kernel/include/proc.h"
#include "kernel/include/defs.h"
#include "kernel/ai/ai_table.h"

// At boot: fifo, the largest step, no prompt budget but the step's (ai_sched.c).
struct ai_table ai = { .lock = { 0, "ai", 0 },
  .seq = 1,
  .reqid_max = AI_REQID_MAX,
  .policy = &sched_fifo,
  .chunk = AI_CHUNK_MAX,
  .prefill = AI_CHUNK_MAX };

// Boot, before any process: the boot argument ai.reqid_max=N (AI_NSLOT <
// N <= AI_REQID_MAX) makes reqids wrap after N instead, so that tests can
// reach the wrap.
void
ai_init(void)
{
  uint64 max;

  if (bootarg_num("ai.reqid_max", AI_NSLOT + 1, AI_REQID_MAX, &max)) {
    ai.reqid_max = max;
    printf("ai: reqids wrap after %d (ai.reqid_max)\n", ai.reqid_max);
  }
}

// Microseconds since boot.
uint64
now_us(void)
{
  return r_time() / (TIMEBASE_HZ / 1000000);
}

// ---------------------------------------------------------------- the FIFO
// It never overflows: every entry is a different slot.

// Queues slot i at the FIFO's tail.
static void
fifo_push(int i)
{
  ai.fifo[(ai.head + ai.nqueued) % AI_NSLOT] = i;
  ai.nqueued++;
}

// Queues slot i at the FIFO's head (it runs next under fifo).
static void
fifo_push_front(int i)
{
  ai.head = (ai.head + AI_NSLOT - 1) % AI_NSLOT;
  ai.fifo[ai.head] = i;
  ai.nqueued++;
}

// Slot i's place in the FIFO (0 = the oldest), or -1.
static int
fifo_pos(int i)
{
  for (int k = 0; k < ai.nqueued; k++)
    if (ai.fifo[(ai.head + k) % AI_NSLOT] == i)
      return k;
  return -1;
}

// Whether slot a runs before slot b under the policy in force: the lower
// key (the policy's own rank, struct ai_policy), ties in submit order.
int
slot_first(struct ai_slot *a, struct ai_slot *b)
{
  int64 ka = ai.policy->key(a), kb = ai.policy->key(b);

  return ka != kb ? ka < kb : a->seq < b->seq;
}

// Queued slot i's place in the policy's order (0 = next): how many queued
// slots run before it (slot_first).
static int
queue_rank(int i)
{
  int n = 0;

  for (int k = 0; k < ai.nqueued; k++)
    n += slot_first(&ai.slot[fifo_at(k)], &ai.slot[i]);
  return n;
}

// Takes slot i out of the FIFO, keeping the others' order.
static void
fifo_remove(int i)
{
  int k = fifo_pos(i);

  if (k < 0)
    panic("fifo_remove: not queued");
  for (; k < ai.nqueued - 1; k++)
    ai.fifo[(ai.head + k) % AI_NSLOT] = ai.fifo[(ai.head + k + 1) % AI_NSLOT];
  ai.nqueued--;
}

// The oldest queued slot, or -1 if none is queued.
int
fifo_oldest(void)
{
  return ai.nqueued > 0 ? ai.fifo[ai.head] : -1;
}

// The k-th queued slot (0 = the oldest); k < ai.nqueued.
int
fifo_at(int k)
{
  return ai.fifo[(ai.head + k) % AI_NSLOT];
}

// Requests of owner pid that the worker runs.
int
running_count(int pid)
{
  int n = 0;

  for (struct ai_slot *s = ai.slot; s < &ai.slot[AI_NSLOT]; s++)
    if (s->state == AI_RUNNING && s->owner == pid)
      n++;
  return n;
}

// ---------------------------------------------------------------- finding slots

// The live slot of reqid, or 0. Orphans (owner gone) only if orphans_too.
struct ai_slot *
slot_find(int reqid, int orphans_too)
{
  for (struct ai_slot *s = ai.slot; s < &ai.slot[AI_NSLOT]; s++)
    if (s->state != AI_FREE && s->reqid == reqid && (s->owner != 0 || orphans_too))
      return s;
  return 0;
}

// The caller's request reqid, or 0 with *err set to -AIE_NOREQ or
// -AIE_NOTOWNER. A request belongs to the process (its main thread's
// pid), so any of its threads may use it (rule 1).
struct ai_slot *
slot_owned(int reqid, int *err)
{
  struct ai_slot *s = slot_find(reqid, 0);

  if (s == 0) {
    *err = -AIE_NOREQ;
    return 0;
  }
  if (s->owner != myprocess()->pid) {
    *err = -AIE_NOTOWNER;
    return 0;
  }
  return s;
}

// The request reqid that the calling worker runs, or 0 with *err set to
// -AIE_NOTWORKER or -AIE_NOREQ.
struct ai_slot *
slot_running(int reqid, int *err)
{
  int pid = myproc()->pid;
  struct ai_slot *s;

  if (ai.worker != pid) {
    *err = -AIE_NOTWORKER;
    return 0;
  }
  s = slot_find(reqid, 1);
  if (s == 0 || s->state != AI_RUNNING || s->runner != pid) {
    *err = -AIE_NOREQ;
    return 0;
  }
  return s;
}

// A free slot, or 0 when the table is full.
struct ai_slot *
slot_unused(void)
{
  for (struct ai_slot *s = ai.slot; s < &ai.slot[AI_NSLOT]; s++)
    if (s->state == AI_FREE)
      return s;
  return 0;
}

// Live requests (orphans not counted) that process pid owns: all of them
// (tenant 0) or those for that tenant.
int
owned_count(int pid, int tenant)
{
  int n = 0;

  for (struct ai_slot *s = ai.slot; s < &ai.slot[AI_NSLOT]; s++)
    if (s->state != AI_FREE && s->owner == pid && (tenant == 0 || s->opts.tenant == tenant))
      n++;
  return n;
}

// ---------------------------------------------------------------- reqids

// The reqid of sequence number seq (>= 1): 1..max, then 1 again.
static int
reqid_of(uint64 seq, int max)
{
  return 1 + (int)((seq - 1) % (uint64)max);
}

// Takes sequence numbers until one maps to a reqid that no live request
// (orphans included) has, and returns that reqid. Ends within AI_NSLOT + 1
// steps, since ai.reqid_max > AI_NSLOT.
static int
reqid_next(void)
{
  int id;

  do
    id = reqid_of(ai.seq++, ai.reqid_max);
  while (slot_find(id, 1) != 0);
  return id;
}

// ---------------------------------------------------------------- the caller's side

// Checks request q of the calling process (its tenant set) against the
// worker's model and the bound of live requests per process and tenant.
// Returns 0 or a negative code.
int
submit_check(const struct submission *q)
{
  if (ai.worker == 0)
    return -AIE_NOWORKER;
  for (int i = 0; i < q->count; i++)
    if (q->ids[i] >= ai.vocab)
      return -AIE_TOKEN;
  for (int i = 0; i < q->opts.nstop; i++)
    if (q->opts.stop[i] >= ai.vocab)
      return -AIE_TOKEN;
  for (int i = 0; i < q->opts.nbias; i++)
    if (q->opts.bias[i].id >= ai.vocab)
      return -AIE_TOKEN;
  if (q->count + q->predict > ai.seq_len)
    return -AIE_TOOLONG;
  if (owned_count(myprocess()->pid, q->opts.tenant) >= AI_PERPROC)
    return -AIE_WOULDBLOCK;
  return 0;
}

// Free slot s takes request q of the calling process: QUEUED at the FIFO's
// tail, with a new reqid, and the worker is woken. Returns the reqid.
int
slot_queue(struct ai_slot *s, const struct submission *q)
{
  memset(s, 0, offsetof(struct ai_slot, prompt)); // the arrays: see struct ai_slot
  s->state = AI_QUEUED;
  s->reqid = reqid_next();
  s->owner = myprocess()->pid;
  s->count = q->count;
  s->predict = q->predict;
  s->opts = q->opts;
  s->seq = ai.seq;
  s->submit_time = now_us();
  memmove(s->prompt, q->ids, q->count * sizeof(uint32));
  fifo_push(s - ai.slot);
  if (ai.policy->arrive)
    ai.policy->arrive(s);
  wakeup(&ai.queued);
  return s->reqid;
}

// Every path that frees a slot comes here, so submitters are always woken.
void
slot_free(struct ai_slot *s)
{
  s->state = AI_FREE;
  s->reqid = 0;
  s->owner = 0;
  s->runner = 0;
  wakeup(&ai.freed);
}

// The owner lets go of s: a queued request leaves the FIFO and is freed, a
// finished one is freed, a running one is orphaned: the worker's report
// will free it. A thread of the owner asleep in ai_stream on s wakes and
// finds the request gone.
void
slot_abandon(struct ai_slot *s)
{
  wakeup(s);
  if (s->state == AI_RUNNING) {
    s->owner = 0;
    return;
  }
  if (s->state == AI_QUEUED)
    fifo_remove(s - ai.slot);
  slot_free(s);
}

// to - from, or 0 while either time is unknown (0) or they are out of order.
static uint64
span(uint64 from, uint64 to)
{
  return from != 0 && to >= from ? to - from : 0;
}

// s as its owner sees it (ai_query).
void
status_fill(struct ai_slot *s, struct ai_status *st)
{
  st->reqid = s->reqid;
  st->state = s->state;
  st->err = s->state == AI_FAILED ? -s->err : 0;
  st->result_len = s->state == AI_DONE ? s->result_len : 0;
  st->queue_pos = s->state == AI_QUEUED ? queue_rank(s - ai.slot) : -1;
  st->tokens = s->tokens;
  st->prompt_len = s->count;
  st->predict = s->predict;
  st->submit_time = s->submit_time;
  st->start_time = s->start_time;
  st->first_time = s->first_time;
  st->finish_time = s->finish_time;
  st->queued_us = span(s->submit_time, s->start_time);
  st->ttft_us = s->first_time ? span(s->submit_time, s->first_time) : 0;
  st->total_us = s->finish_time ? span(s->submit_time, s->finish_time) : 0;
  st->cached = s->cached;
}

// The whole table as the calling process may see it (ai_table): every
// slot without its prompt and result, the reqid of the caller's requests
// only; the queued slots in the policy's order; the slots the registered
// worker runs this step.
void
view_fill(struct ai_table_view *v)
{
  int me = myprocess()->pid;

  memset(v, 0, sizeof(*v));
  v->now = now_us();
  v->worker_pid = ai.worker;
  v->completed = ai.completed;
  v->kv = ai.kv;
  for (int k = 0; k < ai.nqueued; k++)
    v->fifo[queue_rank(fifo_at(k))] = fifo_at(k);
  v->nqueued = ai.nqueued;
  for (int i = 0; i < AI_NSLOT; i++) {
    struct ai_slot *s = &ai.slot[i];
    struct ai_slot_view *w = &v->slot[i];
    w->state = s->state;
    if (s->state == AI_FREE)
      continue;
    w->reqid = s->owner == me ? s->reqid : 0;
    w->owner = s->owner;
    w->prompt_len = s->count;
    w->predict = s->predict;
    w->tokens = s->tokens;
    w->cached = s->cached;
    w->submit_time = s->submit_time;
    w->start_time = s->start_time;
    w->first_time = s->first_time;
    w->finish_time = s->finish_time;
    w->tenant = s->opts.tenant;
    w->priority = s->opts.priority;
    w->paused = s->state == AI_RUNNING && s->paused;
    w->pauses = s->pauses;
    if (s->state == AI_RUNNING && ai.worker != 0 && s->runner == ai.worker && !s->paused)
      v->batch[v->nbatch++] = i;
  }
  safestrcpy(v->policy, ai.policy->name, sizeof(v->policy));
  v->chunk = ai.chunk;
  v->prefill = ai.prefill;
}

// ---------------------------------------------------------------- the worker's side

// The calling worker starts queued slot i: out of the FIFO, RUNNING (and
// paused, if `paused`: the next ai_plan decides whose place it takes),
// and copied into job, whose every other byte (the ids past count,
// padding) is zero: the worker sees no stale kernel memory. Returns its
// reqid.
int
slot_start(int i, struct ai_job *job, int paused)
{
  struct ai_slot *s = &ai.slot[i];

  memset(job, 0, sizeof(*job));
  fifo_remove(i);
  s->state = AI_RUNNING;
  s->runner = myproc()->pid;
  s->start_time = now_us();
  s->started = ++ai.starts;
  s->paused = paused;
  job->reqid = s->reqid;
  job->count = s->count;
  job->predict = s->predict;
  job->opts = s->opts;
  memmove(job->tokens, s->prompt, s->count * sizeof(uint32));
  return s->reqid;
}

// The calling worker could not take job reqid (bad address): back to the
// FIFO's head, or freed if its owner left meanwhile.
void
slot_unstart(int reqid)
{
  struct ai_slot *s = slot_find(reqid, 1);

  if (s == 0 || s->state != AI_RUNNING || s->runner != myproc()->pid)
    return;
  if (s->owner == 0) {
    slot_free(s);
    return;
  }
  s->state = AI_QUEUED;
  s->runner = 0;
  s->start_time = 0;
  s->started = 0;
  s->paused = 0;
  fifo_push_front(s - ai.slot);
}

// Running s has generated ntokens ids (at most its predict count counts);
// the first report of >= 1 stamps the first-token time.
void
slot_progress(struct ai_slot *s, int ntokens)
{
  if (ntokens > s->predict)
    ntokens = s->predict;
  if (ntokens > s->tokens)
    s->tokens = ntokens;
  if (ntokens >= 1 && s->first_time == 0)
    s->first_time = now_us();
}

// Running s produced the n (>= 0) ids after those it emitted: they are
// kept for ai_stream and wake its readers. Returns 0; -AIE_NOREQ for an
// orphan, which is freed (the worker should stop computing it);
// -AIE_BADARG for more ids than s may generate.
int
slot_emit(struct ai_slot *s, const uint32 *ids, int n)
{
  if (s->owner == 0) {
    slot_free(s);
    return -AIE_NOREQ;
  }
  if (s->nids + n > s->predict)
    return -AIE_BADARG;
  if (n == 0)
    return 0;
  memmove(s->ids + s->nids, ids, n * sizeof(uint32));
  s->nids += n;
  if (s->nids > s->tokens)
    s->tokens = s->nids;
  if (s->first_time == 0)
    s->first_time = now_us();
  wakeup(s);
  return 0;
}

// Running s, submitted with logprobs, gets r: the record of the id it
// emits next (the worker reports it just before that id, so a reader
// woken by the id finds it). Returns 0; -AIE_BADARG if s has no logprobs,
// the record is not for its next id, or r's ids or count are out of range.
int
slot_logprob(struct ai_slot *s, const struct ai_logprob *r)
{
  if (s->opts.logprobs == 0 || s->nlp != s->nids || s->nlp >= s->predict ||
      r->ntop != s->opts.logprobs - 1 || r->id >= ai.vocab)
    return -AIE_BADARG;
  for (int i = 0; i < r->ntop; i++)
    if (r->top[i].id >= ai.vocab)
      return -AIE_BADARG;
  s->lp[s->nlp++] = *r;
  return 0;
}

// Writes v in decimal at dst (no NUL); returns the digits written.
static int
put_uint(char *dst, uint32 v)
{
  char tmp[10];
  int n = 0;

  do {
    tmp[n++] = '0' + v % 10;
    v /= 10;
  } while (v != 0);
  for (int i = 0; i < n; i++)
    dst[i] = tmp[n - 1 - i];
  return n;
}

// The ids already emitted for s are the first of ids[0..n).
static int
emitted_prefix(struct ai_slot *s, const uint32 *ids, int n)
{
  if (n < s->nids)
    return 0;
  for (int i = 0; i < s->nids; i++)
    if (ids[i] != s->ids[i])
      return 0;
  return 1;
}

// Running s ends with the n generated ids: the result is their decimal
// text joined by single spaces, as llmrun prints it. An orphan is freed.
// Returns 0, or -AIE_BADARG (s unchanged) for more ids than s may
// generate or ids that do not begin with those emitted.
int
slot_complete(struct ai_slot *s, const uint32 *ids, int n)
{
  if (n > s->predict || !emitted_prefix(s, ids, n))
    return -AIE_BADARG;
  s->finish_time = now_us();
  if (s->first_time == 0)
    s->first_time = s->finish_time;
  s->tokens = n;
  ai.completed++;
  if (s->owner == 0) {
    slot_free(s);
    return 0;
  }
  memmove(s->ids, ids, n * sizeof(uint32));
  s->nids = n;
  int len = 0;
  for (int i = 0; i < n; i++) {
    if (i > 0)
      s->result[len++] = ' ';
    len += put_uint(s->result + len, ids[i]);
  }
  s->result[len] = 0;
  s->result_len = len;
  s->state = AI_DONE;
  wakeup(s);
  return 0;
}

// s ends with error code err (positive); an orphan is freed.
void
slot_fail(struct ai_slot *s, int err)
{
  s->finish_time = now_us();
  if (s->owner == 0) {
    slot_free(s);
    return;
  }
  s->state = AI_FAILED;
  s->err = err;
  wakeup(s);
}

// The worker pid is gone (exit or resignation): the requests it was
// running fail with AIE_WORKERDIED; queued ones stay for the next worker.
void
worker_gone(int pid)
{
  ai.worker = 0;
  for (struct ai_slot *s = ai.slot; s < &ai.slot[AI_NSLOT]; s++)
    if (s->state == AI_RUNNING && s->runner == pid)
      slot_fail(s, AIE_WORKERDIED);
}

// exit() calls this for every process: its requests are reclaimed
// (slot_abandon; a thread that ends alone owns none, since requests are
// its process's), and if it is the worker, the requests it was running
// fail with AIE_WORKERDIED; queued ones stay for the next worker.
// Takes and releases ai.lock.
void
ai_exit(struct proc *p)
{
  acquire(&ai.lock);
  for (struct ai_slot *s = ai.slot; s < &ai.slot[AI_NSLOT]; s++)
    if (s->state != AI_FREE && s->owner == p->pid)
      slot_abandon(s);
  if (ai.worker == p->pid)
    worker_gone(p->pid);
  release(&ai.lock);
}
