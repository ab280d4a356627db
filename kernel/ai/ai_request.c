// The AI service's calls for any process (docs/AI_SERVICE.md section 3):
// submit, wait, query, cancel, call, info, table and stream. Each checks what it
// can without the lock, copies its input from user memory, takes ai.lock
// to act on the table (ai_table.c, whose header comment gives the rules),
// and copies its output to user memory after releasing it: no copy to or
// from user memory happens under ai.lock. Data passes through the kernel
// stack or a kalloc'd page, and a slot is looked up again by its reqid
// whenever the lock was dropped. Every sleep is a loop that rechecks its
// condition and returns -AIE_INTR once the caller is killed.

#include "kernel/include/types.h"
#include "kernel/include/param.h"
#include "kernel/include/riscv.h"
#include "kernel/include/spinlock.h"
#include "kernel/include/proc.h"
#include "kernel/include/defs.h"
#include "kernel/ai/ai_table.h"

// Takes a free slot (sleeping while there is none, if the caller owns no
// request; -AIE_FULL at once if it owns some) and queues the request in
// it. Returns the reqid or a negative code. ai.lock held.
static int
submit_locked(const struct submission *q)
{
  struct proc *p = myproc();
  struct ai_slot *s;
  int err;

  for (;;) {
    if ((err = submit_check(q)) < 0)
      return err;
    if ((s = slot_unused()) != 0)
      return slot_queue(s, q);
    if (owned_count(myprocess()->pid, 0) > 0) // "No deadlock in submit", ai_table.c
      return -AIE_FULL;
    if (killed(p))
      return -AIE_INTR;
    sleep(&ai.freed, &ai.lock);
  }
}

// Whether options o are in range (the ids are checked against the model
// by submit_check): stop and bias counts, top_p, penalties, biases, and
// logprobs (docs/AI_SERVICE.md, section 10).
static int
opts_valid(const struct ai_opts *o)
{
  if (o->nstop < 0 || o->nstop > AI_MAX_STOP || o->top_p_micro > AI_MICRO || o->nbias < 0 ||
      o->nbias > AI_MAX_BIAS || o->logprobs < 0 || o->logprobs > 1 + AI_MAX_TOPLP || o->tenant < 0)
    return 0;
  if (o->presence_micro < -AI_PENALTY_MAX || o->presence_micro > AI_PENALTY_MAX ||
      o->frequency_micro < -AI_PENALTY_MAX || o->frequency_micro > AI_PENALTY_MAX)
    return 0;
  for (int i = 0; i < o->nbias; i++)
    if (o->bias[i].micro < -AI_BIAS_MAX || o->bias[i].micro > AI_BIAS_MAX)
      return 0;
  return 1;
}

// Queues count prompt ids at user address tokens, to generate predict at
// most, with the struct ai_opts at user address opts (0: greedy, no stop
// ids). Returns the reqid (> 0) or a negative AIE_ code. Blocks while the
// table is full (AIE_FULL instead if the caller owns requests). A request
// that names no tenant is the caller's pid's. Takes and releases ai.lock.
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
  if (!opts_valid(&q.opts))
    return -AIE_BADARG;
  if (q.opts.priority < 0 || q.opts.priority > AI_PRIO_MAX)
    return -AIE_PRIORITY;
  if (q.opts.tenant == 0)
    q.opts.tenant = myprocess()->pid;
  q.count = count;
  q.predict = predict;
  acquire(&ai.lock);
  int r = submit_locked(&q);
  release(&ai.lock);
  return r;
}

// Sleeps until the caller's request reqid has more than `from` ids or has
// ended (DONE or FAILED). Returns its slot, or 0 with *err set to
// -AIE_NOREQ, -AIE_NOTOWNER or -AIE_INTR. ai.lock held.
static struct ai_slot *
owned_await(int reqid, int from, int *err)
{
  struct proc *p = myproc();
  struct ai_slot *s;

  while ((s = slot_owned(reqid, err)) != 0) {
    if (s->nids > from || s->state == AI_DONE || s->state == AI_FAILED)
      return s;
    if (killed(p)) {
      *err = -AIE_INTR;
      return 0;
    }
    sleep(s, &ai.lock);
  }
  return 0;
}

// Sleeps until the caller's request reqid is finished. A failed one is
// freed and its code returned. A done one is copied into buf and its
// length returned; the slot stays until the copy to the user succeeded.
// ai.lock held.
static int
wait_locked(int reqid, char *buf, int cap)
{
  struct ai_slot *s;
  int err;

  // No request has more than AI_MAX_PREDICT ids: only its end wakes this.
  if ((s = owned_await(reqid, AI_MAX_PREDICT, &err)) == 0)
    return err;
  if (s->state == AI_FAILED) {
    err = -s->err;
    slot_free(s);
    return err;
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
  in.pauses = ai.pauses;
  release(&ai.lock);
  if (copyout(myproc()->pagetable, dst, (char *)&in, sizeof(in)) < 0)
    return -AIE_FAULT;
  return 0;
}

// Copies the public state of the whole table (struct ai_table_view),
// taken in one go under ai.lock, to user address dst, which has room for
// size bytes. Never blocks, never changes anything. Returns 0;
// -AIE_BADARG if size is below the structure's size; -AIE_FAULT.
int
ai_table(uint64 dst, int size)
{
  struct ai_table_view v; // about 1 KiB of the kernel stack

  if (size < (int)sizeof(v))
    return -AIE_BADARG;
  acquire(&ai.lock);
  view_fill(&v);
  release(&ai.lock);
  if (copyout(myproc()->pagetable, dst, (char *)&v, sizeof(v)) < 0)
    return -AIE_FAULT;
  return 0;
}

// Sleeps until the caller's request reqid has more than `from` ids or has
// ended, then copies up to cap of ids[from..] into buf. Returns how many,
// 0 at the end of a done request, the code of a failed one. ai.lock held.
static int
stream_locked(int reqid, uint32 *buf, int from, int cap)
{
  struct ai_slot *s;
  int err;

  if ((s = owned_await(reqid, from, &err)) == 0)
    return err;
  if (s->nids <= from)
    return s->state == AI_FAILED ? -s->err : 0;
  int n = s->nids - from < cap ? s->nids - from : cap;
  memmove(buf, s->ids + from, n * sizeof(uint32));
  return n;
}

// Copies the log-probability records [from, from+k) of the caller's
// request reqid to user address dst (k <= cap), those of the ids emitted
// so far; never blocks (ai_stream waits for ids), never frees anything.
// Returns k (0: none at from yet, or the request has no logprobs),
// -AIE_BADARG for from < 0 or cap < 1, or another negative code.
int
ai_logprobs(int reqid, uint64 dst, int from, int cap)
{
  struct ai_logprob *buf;
  struct ai_slot *s;
  int n = 0;

  if (from < 0 || cap < 1)
    return -AIE_BADARG;
  if (cap > (int)(PGSIZE / sizeof(struct ai_logprob)))
    cap = PGSIZE / sizeof(struct ai_logprob);
  if ((buf = kalloc()) == 0)
    return -AIE_NOMEM;
  acquire(&ai.lock);
  if ((s = slot_owned(reqid, &n)) != 0) {
    int have = s->nlp < s->nids ? s->nlp : s->nids;
    n = have > from ? (have - from < cap ? have - from : cap) : 0;
    memmove(buf, s->lp + from, n * sizeof(*buf));
  }
  release(&ai.lock);
  if (n > 0 && copyout(myproc()->pagetable, dst, (char *)buf, n * sizeof(*buf)) < 0)
    n = -AIE_FAULT;
  kfree(buf);
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
