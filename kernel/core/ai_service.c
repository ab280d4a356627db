// The AI service: a bounded table of requests, a FIFO of slot indexes and
// one resident worker process (user/ai/ai_daemon.c) that keeps the model
// loaded and serves several requests at once (iteration-level batching).
//
//   caller --ai_submit--> slot[] + fifo[] --ai_next / ai_take--> worker
//   caller <--ai_wait / ai_query / ai_stream-- slot
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
//   gets AIE_WOULDBLOCK at once and should wait for one of its own first.
//   Sleepers then hold no slots, and every held slot is freed by a process
//   that is not asleep in submit.
// - Besides, a process may own at most AI_PERPROC (< AI_NSLOT) live
//   requests (queued, running, or finished and not yet waited for): the
//   next submit gets AIE_WOULDBLOCK even if slots are free, so one process
//   cannot fill the table.
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
//   worker with running requests admits new ones between its steps; it
//   picks the oldest queued request whose owner runs fewer than half the
//   worker's places, else the oldest (one process cannot take every place
//   while others wait; docs/AI_SERVICE.md section 9 gives the policy).
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
//   model's chat format, which the submitter knows.
// - ai.lock is statically initialised; ai_init() only reads the boot
//   argument.
// Lock order: ai.lock, then a p->lock (killed(), sleep(), wakeup()).

#include "kernel/include/types.h"
#include "kernel/include/param.h"
#include "kernel/include/riscv.h"
#include "kernel/include/spinlock.h"
#include "kernel/include/proc.h"
#include "kernel/include/defs.h"
#include "kernel/include/aisvc.h"

struct ai_slot {
  // ai.lock must be held when using these:
  int state; // AI_FREE .. AI_FAILED
  int reqid;
  int owner;                                               // submitter's pid; 0 once orphaned
  int runner;                                              // the worker's pid while RUNNING
  int err;                                                 // FAILED: the positive AIE_ code
  int count, predict;                                      // prompt ids, ids to generate
  struct ai_opts opts;                                     // stop ids, sampler
  int tokens;                                              // ids generated so far
  int result_len;                                          // DONE: bytes of result
  uint64 submit_time, start_time, first_time, finish_time; // us, 0 = not yet
  uint32 prompt[AI_MAX_PROMPT];
  int nids;                       // ids[] known so far (ai_emit, ai_complete)
  uint32 ids[AI_MAX_PREDICT];     // the generated ids, for ai_stream
  char result[AI_RESULT_MAX + 1]; // "id id ...", NUL-terminated
};

static struct {
  struct spinlock lock;

  // ai.lock must be held when using these:
  struct ai_slot slot[AI_NSLOT];
  int fifo[AI_NSLOT]; // indexes of QUEUED slots, oldest at head
  int head, nqueued;
  int worker;         // pid of the registered worker, 0 if none
  int worker_seen;    // a worker has registered since boot
  int vocab, seq_len; // its model's limits
  uint64 seq;         // the next submit's sequence number (from 1)
  int reqid_max;      // reqids run 1..reqid_max, then wrap (reqid_of)
  int completed;      // requests completed since boot
  char freed, queued; // sleep channels (only their addresses matter)
} ai = { .lock = { 0, "ai", 0 }, .seq = 1, .reqid_max = AI_REQID_MAX };

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

static uint64
now_us(void)
{
  return r_time() / (TIMEBASE_HZ / 1000000);
}

// ---------------------------------------------------------------- the FIFO
// It never overflows: every entry is a different slot.

static void
fifo_push(int i)
{
  ai.fifo[(ai.head + ai.nqueued) % AI_NSLOT] = i;
  ai.nqueued++;
}

static void
fifo_push_front(int i)
{
  ai.head = (ai.head + AI_NSLOT - 1) % AI_NSLOT;
  ai.fifo[ai.head] = i;
  ai.nqueued++;
}

static int
fifo_pop(void)
{
  int i = ai.fifo[ai.head];

  ai.head = (ai.head + 1) % AI_NSLOT;
  ai.nqueued--;
  return i;
}

// Slot i's place in the FIFO (0 = next), or -1.
static int
fifo_pos(int i)
{
  for (int k = 0; k < ai.nqueued; k++)
    if (ai.fifo[(ai.head + k) % AI_NSLOT] == i)
      return k;
  return -1;
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

// ---------------------------------------------------------------- slots
// All with ai.lock held.

// The live slot of reqid, or 0. Orphans (owner gone) only if orphans_too.
static struct ai_slot *
slot_find(int reqid, int orphans_too)
{
  for (struct ai_slot *s = ai.slot; s < &ai.slot[AI_NSLOT]; s++)
    if (s->state != AI_FREE && s->reqid == reqid && (s->owner != 0 || orphans_too))
      return s;
  return 0;
}

// The reqid of sequence number seq (>= 1): 1..max, then 1 again.
static int
reqid_of(uint64 seq, int max)
{
  return 1 + (int)((seq - 1) % (uint64)max);
}

// Takes sequence numbers until one maps to a reqid that no live request
// (orphans included) has, and returns that reqid. Ends within AI_NSLOT + 1
// steps, since ai.reqid_max > AI_NSLOT. ai.lock held.
static int
reqid_next(void)
{
  int id;

  do
    id = reqid_of(ai.seq++, ai.reqid_max);
  while (slot_find(id, 1) != 0);
  return id;
}

// The caller's request reqid, or 0 with *err set to -AIE_NOREQ or
// -AIE_NOTOWNER. A request belongs to the process (its main thread's
// pid), so any of its threads may use it (rule 1).
static struct ai_slot *
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

static int
owned_count(int pid)
{
  int n = 0;

  for (struct ai_slot *s = ai.slot; s < &ai.slot[AI_NSLOT]; s++)
    if (s->state != AI_FREE && s->owner == pid)
      n++;
  return n;
}

// Every path that frees a slot comes here, so submitters are always woken.
static void
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
static void
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

// s ends with error code err (positive); an orphan is freed.
static void
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

// s ends with the generated ids: the result is their decimal text joined
// by single spaces, as llmrun prints it. An orphan is freed.
static void
slot_done(struct ai_slot *s, const uint32 *ids, int n)
{
  s->finish_time = now_us();
  if (s->first_time == 0)
    s->first_time = s->finish_time;
  s->tokens = n;
  ai.completed++;
  if (s->owner == 0) {
    slot_free(s);
    return;
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
}

static uint64
span(uint64 from, uint64 to)
{
  return from != 0 && to >= from ? to - from : 0;
}

static void
status_fill(struct ai_slot *s, struct ai_status *st)
{
  st->reqid = s->reqid;
  st->state = s->state;
  st->err = s->state == AI_FAILED ? -s->err : 0;
  st->result_len = s->state == AI_DONE ? s->result_len : 0;
  st->queue_pos = s->state == AI_QUEUED ? fifo_pos(s - ai.slot) : -1;
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
}

// ---------------------------------------------------------------- callers

// A request as submitted: prompt ids, how many to generate at most, and
// its options.
struct submission {
  uint32 ids[AI_MAX_PROMPT];
  int count, predict;
  struct ai_opts opts;
};

// Checks a request against the worker's model. ai.lock held.
static int
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
  if (q->count + q->predict > ai.seq_len)
    return -AIE_TOOLONG;
  if (owned_count(myprocess()->pid) >= AI_PERPROC)
    return -AIE_WOULDBLOCK;
  return 0;
}

// Takes a free slot (sleeping while there is none, if the caller owns no
// request) and queues the request in it. Returns the reqid or a negative
// code. ai.lock held.
static int
submit_locked(const struct submission *q)
{
  struct proc *p = myproc();
  struct ai_slot *s;
  int err;

  for (;;) {
    if ((err = submit_check(q)) < 0)
      return err;
    for (s = ai.slot; s < &ai.slot[AI_NSLOT] && s->state != AI_FREE; s++)
      ;
    if (s < &ai.slot[AI_NSLOT])
      break;
    if (owned_count(myprocess()->pid) > 0) // see "No deadlock" above
      return -AIE_WOULDBLOCK;
    if (killed(p))
      return -AIE_INTR;
    sleep(&ai.freed, &ai.lock);
  }
  int reqid = reqid_next();
  memset(s, 0, sizeof(*s) - sizeof(s->result));
  s->state = AI_QUEUED;
  s->reqid = reqid;
  s->owner = myprocess()->pid;
  s->count = q->count;
  s->predict = q->predict;
  s->opts = q->opts;
  s->submit_time = now_us();
  memmove(s->prompt, q->ids, q->count * sizeof(uint32));
  fifo_push(s - ai.slot);
  wakeup(&ai.queued);
  return s->reqid;
}

// Queues count prompt ids at user address tokens, to generate predict at
// most, with the struct ai_opts at user address opts (0: greedy, no stop
// ids). Returns the reqid (> 0) or a negative AIE_ code. Blocks while the
// table is full (AIE_WOULDBLOCK instead if the caller owns requests).
// Takes and releases ai.lock.
int
ai_submit(uint64 tokens, int count, int predict, uint64 opts)
{
  struct submission q; // 1 KiB of the 16 KiB kernel stack
  pagetable_t pt = myproc()->pagetable;

  if (count < 1 || count > AI_MAX_PROMPT)
    return -AIE_COUNT;
  if (predict < 1 || predict > AI_MAX_PREDICT)
    return -AIE_PREDICT;
  memset(&q.opts, 0, sizeof(q.opts));
  if (copyin(pt, (char *)q.ids, tokens, count * sizeof(uint32)) < 0 ||
      (opts != 0 && copyin(pt, (char *)&q.opts, opts, sizeof(q.opts)) < 0))
    return -AIE_FAULT;
  if (q.opts.nstop < 0 || q.opts.nstop > AI_MAX_STOP || q.opts.top_p_micro > AI_MICRO)
    return -AIE_BADARG;
  q.count = count;
  q.predict = predict;
  acquire(&ai.lock);
  int r = submit_locked(&q);
  release(&ai.lock);
  return r;
}

// Sleeps until the caller's request reqid is finished. A failed one is
// freed and its code returned. A done one is copied into buf and its
// length returned; the slot stays until the copy to the user succeeded.
// ai.lock held.
static int
wait_locked(int reqid, char *buf, int cap)
{
  struct proc *p = myproc();
  struct ai_slot *s;
  int err;

  for (;;) {
    if ((s = slot_owned(reqid, &err)) == 0)
      return err;
    if (s->state == AI_FAILED) {
      err = -s->err;
      slot_free(s);
      return err;
    }
    if (s->state == AI_DONE)
      break;
    if (killed(p))
      return -AIE_INTR;
    sleep(s, &ai.lock);
  }
  if (cap < s->result_len)
    return -AIE_TOOSMALL;
  memmove(buf, s->result, s->result_len + 1);
  return s->result_len;
}

// Waits for request reqid and copies its result to user address out
// through buf, a kalloc'd page (see ai_wait). Returns what ai_wait does.
// Takes and releases ai.lock.
static int
wait_through(int reqid, uint64 out, int cap, char *buf)
{
  int err;

  acquire(&ai.lock);
  int len = wait_locked(reqid, buf, cap);
  release(&ai.lock);
  if (len < 0)
    return len;
  if (copyout(myproc()->pagetable, out, buf, len < cap ? len + 1 : len) < 0)
    return -AIE_FAULT;
  // The lock was dropped: look the slot up again.
  acquire(&ai.lock);
  struct ai_slot *s = slot_owned(reqid, &err);
  if (s != 0 && s->state == AI_DONE)
    slot_free(s);
  release(&ai.lock);
  return len;
}

// Waits for request reqid and copies its result to user address out (at
// most cap bytes: the text, and a NUL if it fits). Returns the text's
// length, the failed request's code, or another negative code; on
// AIE_TOOSMALL and AIE_FAULT the result stays for a retry. Takes and
// releases ai.lock.
int
ai_wait(int reqid, uint64 out, int cap)
{
  char *buf;

  if (cap < 0)
    return -AIE_BADARG;
  if ((buf = kalloc()) == 0) // AI_RESULT_MAX + 1 <= PGSIZE
    return -AIE_NOMEM;
  int len = wait_through(reqid, out, cap, buf);
  kfree(buf);
  return len;
}

// Copies the state of the caller's request reqid to user address dst.
// Never blocks, never changes anything. Returns 0 or a negative code.
int
ai_query(int reqid, uint64 dst)
{
  struct ai_status st;
  struct ai_slot *s;
  int err = 0;

  memset(&st, 0, sizeof(st));
  acquire(&ai.lock);
  if ((s = slot_owned(reqid, &err)) != 0)
    status_fill(s, &st);
  release(&ai.lock);
  if (s == 0)
    return err;
  if (copyout(myproc()->pagetable, dst, (char *)&st, sizeof(st)) < 0)
    return -AIE_FAULT;
  return 0;
}

// Gives up the caller's request reqid (see slot_abandon). Returns 0 or a
// negative code.
int
ai_cancel(int reqid)
{
  struct ai_slot *s;
  int err = 0;

  acquire(&ai.lock);
  if ((s = slot_owned(reqid, &err)) != 0)
    slot_abandon(s);
  release(&ai.lock);
  return s != 0 ? 0 : err;
}

// Submit, then wait. Returns what ai_wait returns. The page the result
// passes through is taken before the submit, so running out of memory
// queues nothing; after the submit, any failure of the wait cancels the
// request (the caller never saw its reqid; a failed request is freed
// already and the cancel finds nothing).
int
ai_call(uint64 tokens, int count, int predict, uint64 out, int cap)
{
  char *buf;

  if (cap < 0)
    return -AIE_BADARG;
  if ((buf = kalloc()) == 0)
    return -AIE_NOMEM;
  int r = ai_submit(tokens, count, predict, 0);
  if (r > 0) {
    int reqid = r;
    if ((r = wait_through(reqid, out, cap, buf)) < 0)
      ai_cancel(reqid);
  }
  kfree(buf);
  return r;
}

// Copies a summary of the table to user address dst. Returns 0 or
// -AIE_FAULT.
int
ai_info(uint64 dst)
{
  struct ai_info in;

  memset(&in, 0, sizeof(in));
  in.nslot = AI_NSLOT;
  in.perproc = AI_PERPROC;
  acquire(&ai.lock);
  for (struct ai_slot *s = ai.slot; s < &ai.slot[AI_NSLOT]; s++) {
    in.used += s->state != AI_FREE;
    in.queued += s->state == AI_QUEUED;
    in.running += s->state == AI_RUNNING;
    in.done += s->state == AI_DONE;
    in.failed += s->state == AI_FAILED;
    in.orphans += s->state == AI_RUNNING && s->owner == 0;
  }
  in.worker_pid = ai.worker;
  in.worker_seen = ai.worker_seen;
  in.vocab = ai.vocab;
  in.seq_len = ai.seq_len;
  in.completed = ai.completed;
  release(&ai.lock);
  if (copyout(myproc()->pagetable, dst, (char *)&in, sizeof(in)) < 0)
    return -AIE_FAULT;
  return 0;
}

// ---------------------------------------------------------------- the worker

// The worker pid is gone (exit or resignation): the requests it was
// running fail with AIE_WORKERDIED; queued ones stay for the next worker.
// ai.lock held.
static void
worker_gone(int pid)
{
  ai.worker = 0;
  for (struct ai_slot *s = ai.slot; s < &ai.slot[AI_NSLOT]; s++)
    if (s->state == AI_RUNNING && s->runner == pid)
      slot_fail(s, AIE_WORKERDIED);
}

// Makes the caller the worker, for a model with vocab ids and room for
// seq_len positions; (0, 0) resigns, as if the worker died. Returns 0,
// -AIE_PERM (the caller lacks the worker right), -AIE_BADARG, -AIE_BUSY,
// or -AIE_NOTWORKER (resigning a role it lacks).
int
ai_register(int vocab, int seq_len)
{
  int pid = myproc()->pid, r = 0;

  if (vocab == 0 && seq_len == 0) {
    acquire(&ai.lock);
    if (ai.worker == pid)
      worker_gone(pid);
    else
      r = -AIE_NOTWORKER;
    release(&ai.lock);
    return r;
  }
  if (!myprocess()->ai_right)
    return -AIE_PERM;
  if (vocab < 1 || seq_len < 2)
    return -AIE_BADARG;
  acquire(&ai.lock);
  if (ai.worker != 0 && ai.worker != pid) {
    r = -AIE_BUSY;
  } else {
    ai.worker = pid;
    ai.worker_seen = 1;
    ai.vocab = vocab;
    ai.seq_len = seq_len;
  }
  release(&ai.lock);
  return r;
}

// Whether the calling process holds the AI worker right (1 or 0), after
// giving it up for good if drop is non-zero. The flag is the process's
// own (its main thread's): only the process itself and fork write it.
int
ai_right(int drop)
{
  struct proc *l = myprocess();

  if (drop)
    l->ai_right = 0;
  return l->ai_right;
}

// The calling worker starts s (already out of the FIFO): RUNNING, and
// copied into job. Returns its reqid. ai.lock held.
static int
slot_start(struct ai_slot *s, struct ai_job *job)
{
  s->state = AI_RUNNING;
  s->runner = myproc()->pid;
  s->start_time = now_us();
  job->reqid = s->reqid;
  job->count = s->count;
  job->predict = s->predict;
  job->opts = s->opts;
  memmove(job->tokens, s->prompt, s->count * sizeof(uint32));
  return s->reqid;
}

// Sleeps until a request is queued, then marks the oldest RUNNING and
// copies it into job. Returns its reqid or a negative code. ai.lock held.
static int
next_locked(struct ai_job *job)
{
  struct proc *p = myproc();

  for (;;) {
    if (ai.worker != p->pid)
      return -AIE_NOTWORKER;
    if (ai.nqueued > 0)
      break;
    if (killed(p))
      return -AIE_INTR;
    sleep(&ai.queued, &ai.lock);
  }
  return slot_start(&ai.slot[fifo_pop()], job);
}

// The worker could not take job reqid (bad address): back to the FIFO's
// head, or freed if its owner left meanwhile. ai.lock held.
static void
next_undo(int reqid)
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
  fifo_push_front(s - ai.slot);
}

// Worker only: waits for the next request and copies it (struct ai_job)
// to user address dst. Returns its reqid or a negative code.
int
ai_next(uint64 dst)
{
  struct ai_job *job;

  if ((job = kalloc()) == 0) // sizeof(struct ai_job) <= PGSIZE
    return -AIE_NOMEM;
  acquire(&ai.lock);
  int r = next_locked(job);
  release(&ai.lock);
  if (r > 0 && copyout(myproc()->pagetable, dst, (char *)job, sizeof(*job)) < 0) {
    acquire(&ai.lock);
    next_undo(r);
    release(&ai.lock);
    r = -AIE_FAULT;
  }
  kfree(job);
  return r;
}

// The request reqid that the calling worker runs, or 0 with *err set.
// ai.lock held.
static struct ai_slot *
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

// Worker only: ntokens ids of request reqid are generated. Returns 0 or a
// negative code.
int
ai_progress(int reqid, int ntokens)
{
  struct ai_slot *s;
  int err = 0;

  acquire(&ai.lock);
  if ((s = slot_running(reqid, &err)) != 0) {
    if (ntokens > s->predict)
      ntokens = s->predict;
    if (ntokens > s->tokens)
      s->tokens = ntokens;
    if (ntokens >= 1 && s->first_time == 0)
      s->first_time = now_us();
  }
  release(&ai.lock);
  return s != 0 ? 0 : err;
}

// The ids already emitted for s are the first of ids[0..n). ai.lock held.
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

// Worker only: request reqid generated the n ids at user address ids
// (beginning with those it emitted). Returns 0 or a negative code. The ids
// come through the kernel stack, not a kalloc'd page: out of memory, the
// worker could only give up, and the request would stay RUNNING with its
// caller asleep in ai_wait.
int
ai_complete(int reqid, uint64 ids, int n)
{
  uint32 buf[AI_MAX_PREDICT]; // 1 KiB of the 16 KiB kernel stack
  struct ai_slot *s;
  int err = 0;

  if (n < 1 || n > AI_MAX_PREDICT)
    return -AIE_BADARG;
  if (copyin(myproc()->pagetable, (char *)buf, ids, n * sizeof(uint32)) < 0)
    return -AIE_FAULT;
  acquire(&ai.lock);
  if ((s = slot_running(reqid, &err)) != 0 && (n > s->predict || !emitted_prefix(s, buf, n)))
    err = -AIE_BADARG;
  else if (s != 0)
    slot_done(s, buf, n);
  release(&ai.lock);
  return err;
}

// Worker only: request reqid failed with code err (either sign). Codes
// that describe a request (bad count, predict, token, too long, out of
// memory) are kept; any other becomes AIE_RUNTIME. Returns 0 or a
// negative code.
int
ai_fail(int reqid, int err)
{
  struct ai_slot *s;
  int r = 0;

  if (err < 0)
    err = -err;
  if (err != AIE_COUNT && err != AIE_PREDICT && err != AIE_TOKEN &&
      err != AIE_TOOLONG && err != AIE_NOMEM)
    err = AIE_RUNTIME;
  acquire(&ai.lock);
  if ((s = slot_running(reqid, &r)) != 0)
    slot_fail(s, err);
  release(&ai.lock);
  return r;
}

// ---------------------------------------------------------------- batching and streaming
// A worker that runs several requests at once (ai_daemon) takes new ones
// without blocking while it has running ones (ai_take, with fairness
// between processes), reports each id as it is produced (ai_emit), and
// learns from ai_emit, at its next step, that a request was cancelled or
// lost its owner. Callers read the ids so far with ai_stream.

// Requests of owner pid that the worker runs. ai.lock held.
static int
running_count(int pid)
{
  int n = 0;

  for (struct ai_slot *s = ai.slot; s < &ai.slot[AI_NSLOT]; s++)
    if (s->state == AI_RUNNING && s->owner == pid)
      n++;
  return n;
}

// The slot to start next for a worker with `places` places: the oldest
// queued request whose owner runs fewer than places/2 (at least 1), else
// the oldest: a process gets more than half the places only while nobody
// else's request waits. -1 if none is queued. ai.lock held.
static int
fair_pick(int places)
{
  int cap = places / 2 > 1 ? places / 2 : 1;

  if (ai.nqueued == 0)
    return -1;
  for (int k = 0; k < ai.nqueued; k++) {
    int i = ai.fifo[(ai.head + k) % AI_NSLOT];
    if (running_count(ai.slot[i].owner) < cap)
      return i;
  }
  return ai.fifo[ai.head];
}

// Worker only, never blocks: starts the request fair_pick chooses for a
// worker with `places` places (its batch size, >= 1) and copies it
// (struct ai_job) to user address dst. Returns its reqid, 0 if none is
// queued, or a negative code.
int
ai_take(uint64 dst, int places)
{
  struct ai_job *job;
  int r, i;

  if (places < 1)
    return -AIE_BADARG;
  if ((job = kalloc()) == 0)
    return -AIE_NOMEM;
  acquire(&ai.lock);
  if (ai.worker != myproc()->pid) {
    r = -AIE_NOTWORKER;
  } else if ((i = fair_pick(places)) < 0) {
    r = 0;
  } else {
    fifo_remove(i);
    r = slot_start(&ai.slot[i], job);
  }
  release(&ai.lock);
  if (r > 0 && copyout(myproc()->pagetable, dst, (char *)job, sizeof(*job)) < 0) {
    acquire(&ai.lock);
    next_undo(r);
    release(&ai.lock);
    r = -AIE_FAULT;
  }
  kfree(job);
  return r;
}

// Worker only: request reqid produced the n (>= 0) ids at user address
// ids, after those already emitted; they wake its ai_stream readers, and
// the first stamps the first-token time. n == 0 only asks whether to go
// on. Returns 0 while the request is wanted; -AIE_NOREQ once it is not
// (cancelled, or its owner exited: the slot is freed by this call, and
// the worker should stop computing it), or another negative code.
int
ai_emit(int reqid, uint64 ids, int n)
{
  uint32 buf[AI_MAX_PREDICT]; // 1 KiB of the 16 KiB kernel stack
  struct ai_slot *s;
  int err = 0;

  if (n < 0 || n > AI_MAX_PREDICT)
    return -AIE_BADARG;
  if (n > 0 && copyin(myproc()->pagetable, (char *)buf, ids, n * sizeof(uint32)) < 0)
    return -AIE_FAULT;
  acquire(&ai.lock);
  if ((s = slot_running(reqid, &err)) == 0) {
    // err says why
  } else if (s->owner == 0) {
    slot_free(s);
    err = -AIE_NOREQ;
  } else if (s->nids + n > s->predict) {
    err = -AIE_BADARG;
  } else if (n > 0) {
    memmove(s->ids + s->nids, buf, n * sizeof(uint32));
    s->nids += n;
    if (s->nids > s->tokens)
      s->tokens = s->nids;
    if (s->first_time == 0)
      s->first_time = now_us();
    wakeup(s);
  }
  release(&ai.lock);
  return err;
}

// Sleeps until the caller's request reqid has more than `from` ids or has
// ended, then copies up to cap of ids[from..] into buf. Returns how many,
// 0 at the end of a done request, the code of a failed one. ai.lock held.
static int
stream_locked(int reqid, uint32 *buf, int from, int cap)
{
  struct proc *p = myproc();
  struct ai_slot *s;
  int err;

  for (;;) {
    if ((s = slot_owned(reqid, &err)) == 0)
      return err;
    if (s->nids > from)
      break;
    if (s->state == AI_FAILED)
      return -s->err;
    if (s->state == AI_DONE)
      return 0;
    if (killed(p))
      return -AIE_INTR;
    sleep(s, &ai.lock);
  }
  int n = s->nids - from < cap ? s->nids - from : cap;
  memmove(buf, s->ids + from, n * sizeof(uint32));
  return n;
}

// Copies ids [from, from+k) of the caller's request reqid to user address
// dst (k <= cap), blocking until k >= 1 or the request has ended; never
// frees anything (ai_wait still collects the result). Returns k; 0 once
// the request is done and all its ids were read; a failed request's code
// (it stays for ai_wait); or another negative code.
int
ai_stream(int reqid, uint64 dst, int from, int cap)
{
  uint32 *buf;

  if (from < 0 || cap < 1)
    return -AIE_BADARG;
  if (cap > AI_MAX_PREDICT)
    cap = AI_MAX_PREDICT;
  if ((buf = kalloc()) == 0) // AI_MAX_PREDICT ids <= PGSIZE
    return -AIE_NOMEM;
  acquire(&ai.lock);
  int n = stream_locked(reqid, buf, from, cap);
  release(&ai.lock);
  if (n > 0 && copyout(myproc()->pagetable, dst, (char *)buf, n * sizeof(uint32)) < 0)
    n = -AIE_FAULT;
  kfree(buf);
  return n;
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

// ---------------------------------------------------------------- system calls
// Arguments as in user/lib/user.h.

uint64
sys_ai_submit(void)
{
  uint64 tokens;
  int count, predict;

  argaddr(0, &tokens);
  argint(1, &count);
  argint(2, &predict);
  return ai_submit(tokens, count, predict, 0);
}

uint64
sys_ai_submit_opts(void)
{
  uint64 tokens, opts;
  int count, predict;

  argaddr(0, &tokens);
  argint(1, &count);
  argint(2, &predict);
  argaddr(3, &opts);
  return ai_submit(tokens, count, predict, opts);
}

uint64
sys_ai_wait(void)
{
  uint64 out;
  int reqid, cap;

  argint(0, &reqid);
  argaddr(1, &out);
  argint(2, &cap);
  return ai_wait(reqid, out, cap);
}

uint64
sys_ai_query(void)
{
  uint64 st;
  int reqid;

  argint(0, &reqid);
  argaddr(1, &st);
  return ai_query(reqid, st);
}

uint64
sys_ai_call(void)
{
  uint64 tokens, out;
  int count, predict, cap;

  argaddr(0, &tokens);
  argint(1, &count);
  argint(2, &predict);
  argaddr(3, &out);
  argint(4, &cap);
  return ai_call(tokens, count, predict, out, cap);
}

uint64
sys_ai_cancel(void)
{
  int reqid;

  argint(0, &reqid);
  return ai_cancel(reqid);
}

uint64
sys_ai_info(void)
{
  uint64 dst;

  argaddr(0, &dst);
  return ai_info(dst);
}

uint64
sys_ai_register(void)
{
  int vocab, seq_len;

  argint(0, &vocab);
  argint(1, &seq_len);
  return ai_register(vocab, seq_len);
}

uint64
sys_ai_right(void)
{
  int drop;

  argint(0, &drop);
  return ai_right(drop);
}

uint64
sys_ai_next(void)
{
  uint64 dst;

  argaddr(0, &dst);
  return ai_next(dst);
}

uint64
sys_ai_progress(void)
{
  int reqid, n;

  argint(0, &reqid);
  argint(1, &n);
  return ai_progress(reqid, n);
}

uint64
sys_ai_complete(void)
{
  uint64 ids;
  int reqid, n;

  argint(0, &reqid);
  argaddr(1, &ids);
  argint(2, &n);
  return ai_complete(reqid, ids, n);
}

uint64
sys_ai_fail(void)
{
  int reqid, err;

  argint(0, &reqid);
  argint(1, &err);
  return ai_fail(reqid, err);
}

uint64
sys_ai_take(void)
{
  uint64 dst;
  int places;

  argaddr(0, &dst);
  argint(1, &places);
  return ai_take(dst, places);
}

uint64
sys_ai_emit(void)
{
  uint64 ids;
  int reqid, n;

  argint(0, &reqid);
  argaddr(1, &ids);
  argint(2, &n);
  return ai_emit(reqid, ids, n);
}

uint64
sys_ai_stream(void)
{
  uint64 dst;
  int reqid, from, cap;

  argint(0, &reqid);
  argaddr(1, &dst);
  argint(2, &from);
  argint(3, &cap);
  return ai_stream(reqid, dst, from, cap);
}
