// The AI service's calls for its worker (docs/AI_SERVICE.md section 3):
// register (which needs the AI worker right, ai_right), next and take (a
// request to run), progress, emit, complete and fail (reports on a running
// request). Every call but ai_register and ai_right checks that the
// caller is the registered worker. A worker that runs several requests at
// once (ai_daemon) takes new ones without blocking while it has running
// ones (ai_take, by the scheduling policy: ai_sched.c, which also answers
// ai_plan, the order and the places of its next step), reports
// each id as it is produced (ai_emit), and learns from ai_emit, at its
// next step, that a request was cancelled or lost its owner. As in
// ai_request.c, no copy to or from user memory happens under ai.lock; the
// table and its rules are ai_table.c's.

#include "kernel/include/types.h"
#include "kernel/include/param.h"
#include "kernel/include/riscv.h"
#include "kernel/include/spinlock.h"
#include "kernel/include/proc.h"
#include "kernel/include/defs.h"
#include "kernel/ai/ai_table.h"

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
    ai.caches = 0; // until its first ai_plan
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

// Sleeps until a request is queued, then starts the one the policy picks
// into job. Returns its reqid or a negative code. ai.lock held.
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
  return slot_start(ai.policy->pick(0), job, 0);
}

// Hands job, started as request r (> 0) or not started (r <= 0), to the
// worker at user address dst, and frees job. A bad address puts the
// request back at the FIFO's head (slot_unstart): it was not the
// request's fault. Returns r, or -AIE_FAULT. Takes and releases ai.lock.
static int
job_out(int r, struct ai_job *job, uint64 dst)
{
  if (r > 0 && copyout(myproc()->pagetable, dst, (char *)job, sizeof(*job)) < 0) {
    acquire(&ai.lock);
    slot_unstart(r);
    release(&ai.lock);
    r = -AIE_FAULT;
  }
  kfree(job);
  return r;
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
  return job_out(r, job, dst);
}

// Worker only, never blocks: starts the request the policy chooses for a
// worker with `places` places (its batch size, >= 1; sched_take) and
// copies it (struct ai_job) to user address dst. Returns its reqid, 0 if
// none is to start, or a negative code.
int
ai_take(uint64 dst, int places)
{
  struct ai_job *job;
  int r, i, paused;

  if (places < 1)
    return -AIE_BADARG;
  if ((job = kalloc()) == 0)
    return -AIE_NOMEM;
  acquire(&ai.lock);
  if (ai.worker != myproc()->pid)
    r = -AIE_NOTWORKER;
  else if ((i = sched_take(places, &paused)) < 0)
    r = 0;
  else
    r = slot_start(i, job, paused);
  release(&ai.lock);
  return job_out(r, job, dst);
}

// Worker only: ntokens ids of request reqid are generated. Returns 0 or a
// negative code.
int
ai_progress(int reqid, int ntokens)
{
  struct ai_slot *s;
  int err = 0;

  acquire(&ai.lock);
  if ((s = slot_running(reqid, &err)) != 0)
    slot_progress(s, ntokens);
  release(&ai.lock);
  return err;
}

// The calling worker reports the n (0..AI_MAX_PREDICT) ids at user
// address ids for request reqid, which it runs: report (slot_emit or
// slot_complete) applies them to its slot. Returns report's result, or
// -AIE_BADARG for n out of range, -AIE_FAULT, -AIE_NOTWORKER or
// -AIE_NOREQ. The ids come through the kernel stack, not a kalloc'd page:
// out of memory, the worker could only give up, and a completed request
// would stay RUNNING with its caller asleep in ai_wait.
static int
report_ids(int reqid, uint64 ids, int n, int (*report)(struct ai_slot *, const uint32 *, int))
{
  uint32 buf[AI_MAX_PREDICT]; // 1 KiB of the 16 KiB kernel stack
  struct ai_slot *s;
  int err;

  if (n < 0 || n > AI_MAX_PREDICT)
    return -AIE_BADARG;
  if (n > 0 && copyin(myproc()->pagetable, (char *)buf, ids, n * sizeof(uint32)) < 0)
    return -AIE_FAULT;
  acquire(&ai.lock);
  if ((s = slot_running(reqid, &err)) != 0)
    err = report(s, buf, n);
  release(&ai.lock);
  return err;
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
  return report_ids(reqid, ids, n, slot_emit);
}

// Worker only: the log-probability record (struct ai_logprob at user
// address rec) of the id request reqid emits next (slot_logprob). Returns
// 0, -AIE_FAULT, -AIE_NOTWORKER, -AIE_NOREQ or -AIE_BADARG.
int
ai_logprob(int reqid, uint64 rec)
{
  struct ai_logprob r; // 52 bytes of the kernel stack
  struct ai_slot *s;
  int err;

  if (copyin(myproc()->pagetable, (char *)&r, rec, sizeof(r)) < 0)
    return -AIE_FAULT;
  acquire(&ai.lock);
  if ((s = slot_running(reqid, &err)) != 0)
    err = slot_logprob(s, &r);
  release(&ai.lock);
  return err;
}

// Worker only: request reqid generated the n (>= 1) ids at user address
// ids (beginning with those it emitted). Returns 0 or a negative code
// (report_ids).
int
ai_complete(int reqid, uint64 ids, int n)
{
  if (n < 1)
    return -AIE_BADARG;
  return report_ids(reqid, ids, n, slot_complete);
}

// Worker only: its KV cache's counters are *st (user address), and
// request reqid (0: none) took `cached` of its prompt positions from it
// (kept within 0..prompt length). Returns 0 or a negative code.
int
ai_kvreport(int reqid, int cached, uint64 st)
{
  struct ai_kvstat k;
  struct ai_slot *s;
  int err = 0;

  if (copyin(myproc()->pagetable, (char *)&k, st, sizeof(k)) < 0)
    return -AIE_FAULT;
  acquire(&ai.lock);
  if (ai.worker != myproc()->pid)
    err = -AIE_NOTWORKER;
  else {
    ai.kv = k;
    if (reqid != 0 && (s = slot_running(reqid, &err)) != 0)
      s->cached = cached < 0 ? 0 : cached > s->count ? s->count : cached;
  }
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
  if (err != AIE_COUNT && err != AIE_PREDICT && err != AIE_TOKEN && err != AIE_TOOLONG &&
      err != AIE_NOMEM)
    err = AIE_RUNTIME;
  acquire(&ai.lock);
  if ((s = slot_running(reqid, &r)) != 0)
    slot_fail(s, err);
  release(&ai.lock);
  return r;
}
