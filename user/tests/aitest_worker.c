// aitest's phase 3 (aitest.c): aitest as the worker, so that every state
// is reached on purpose: query in each state, buffers, ownership, the cap,
// backpressure, owner exit, kills, streaming, options, ai_take's fairness
// and the worker's rules.

#include "user/tests/aitest.h"

// ---------------------------------------------------------------- phase 3

// query in each state (queued, running, done, failed), the worker's
// refused reports, and a result given once.
void
states(void)
{
  struct ai_status st, sb;
  int a = sub(P, 3, 3), b = sub(Q, 2, 2);
  ai_query(a, &st);
  ai_query(b, &sb);
  result("query: queued, first in the queue",
      st.state == AI_QUEUED && st.queue_pos == 0 && st.reqid == a && st.tokens == 0 &&
          st.result_len == 0,
      st.state);
  result("query: queued, second in the queue", sb.state == AI_QUEUED && sb.queue_pos == 1,
      sb.queue_pos);
  int t = take();
  ai_progress(a, 2);
  ai_query(a, &st);
  ai_query(b, &sb);
  result("worker: ai_next returns the oldest request with its prompt",
      t == a && job.count == 3 && job.predict == 3 && job.tokens[2] == 3, t);
  result("query: running, with tokens so far",
      st.state == AI_RUNNING && st.tokens == 2 && st.queue_pos == -1 &&
          st.start_time >= st.submit_time && st.first_time != 0,
      st.tokens);
  result("query: the next request moves up the queue", sb.queue_pos == 0, sb.queue_pos);
  expect("worker: complete with more ids than predicted refused", finish(a, 4), -AIE_BADARG);
  expect("worker: complete with a bad ids pointer refused", ai_complete(a, BADADDR, 3), -AIE_FAULT);
  expect("worker: the request stays running after refused reports", state_of(a), AI_RUNNING);
  uint32 ids[3] = { 11, 2222, 3 };
  ai_complete(a, ids, 3);
  ai_query(a, &st);
  result("query: done, with result_len",
      st.state == AI_DONE && st.result_len == 9 && st.tokens == 3 &&
          st.finish_time >= st.first_time && st.total_us >= st.ttft_us,
      st.state);
  ai_query(a, &st);
  result("query twice changes nothing", st.state == AI_DONE && st.result_len == 9, st.state);
  int n = ai_wait(a, buf, sizeof(buf));
  result("wait: result is the ids as text", n == 9 && strcmp(buf, "11 2222 3") == 0, n);
  expect("one-shot: a second wait gets AIE_NOREQ", ai_wait(a, buf, sizeof(buf)), -AIE_NOREQ);
  expect("one-shot: a query after the wait gets AIE_NOREQ", state_of(a), -AIE_NOREQ);
  take();
  ai_fail(b, -AIE_TOKEN);
  ai_query(b, &sb);
  result("query: failed, with err", sb.state == AI_FAILED && sb.err == -AIE_TOKEN, sb.err);
  expect("failed: wait reports err", ai_wait(b, buf, sizeof(buf)), -AIE_TOKEN);
  expect("failed: reported once, then no such request", ai_wait(b, buf, sizeof(buf)), -AIE_NOREQ);
  int c = sub(P, 3, 1);
  take();
  ai_fail(c, 7);
  expect("failed: a code the worker should not use becomes AIE_RUNTIME",
      ai_wait(c, buf, sizeof(buf)), -AIE_RUNTIME);
  expect("states: nothing left in the table", used(), 0);
  drain();
}

// ai_table in each state, reached on purpose as the worker: a request of
// ours running, one of ours and one of a child's queued behind it; then
// done, then collected.
void
table_states(void)
{
  struct filler f = { 0 };
  int me = getpid(), done0 = info().completed;
  int a = sub(P, 3, 3), b = sub(Q, 2, 2);
  filler_start(&f, 1);
  take();
  ai_progress(a, 2);
  int r = ai_table(&view, sizeof(view));
  int sa = view_slot(a), sb = view_slot(b), sc = view.nqueued == 2 ? view.fifo[1] : 0;
  struct ai_slot_view *w = &view.slot[sa < 0 ? 0 : sa];
  result("table: running: state, owner, sizes, progress and times",
      r == 0 && sa >= 0 && w->state == AI_RUNNING && w->owner == me && w->prompt_len == 3 &&
          w->predict == 3 && w->tokens == 2 && w->submit_time <= w->start_time &&
          w->first_time >= w->start_time && w->finish_time == 0 && view.now >= w->first_time,
      r);
  result("table: queued: the FIFO in order, ours then the child's",
      sb >= 0 && view.nqueued == 2 && view.fifo[0] == sb && view.slot[sb].state == AI_QUEUED &&
          view.slot[sc].state == AI_QUEUED && view.slot[sc].owner == f.pid &&
          view.slot[sb].start_time == 0,
      view.nqueued);
  result("table: the batch is the worker's running slot",
      view.worker_pid == me && view.nbatch == 1 && view.batch[0] == sa, view.nbatch);
  result("table: another owner's reqid never visible (the child's request)",
      view.slot[sc].reqid == 0 && f.last > 0, view.slot[sc].reqid);
  expect("table: another owner's reqid never visible (a child sees none of ours)", view_child(), 0);
  result("table: consistent", view_consistent(), 0);
  finish(a, 3);
  ai_table(&view, sizeof(view));
  w = &view.slot[sa < 0 ? 0 : sa];
  result("table: done: out of the batch, all ids, finish time, one more completed",
      w->state == AI_DONE && w->reqid == a && w->tokens == 3 && w->finish_time >= w->first_time &&
          view.nbatch == 0 && view.completed == done0 + 1,
      w->state);
  ai_wait(a, buf, sizeof(buf));
  ai_table(&view, sizeof(view));
  w = &view.slot[sa < 0 ? 0 : sa];
  result("table: after the wait the slot is free and blank",
      w->state == AI_FREE && w->owner == 0 && w->reqid == 0 && w->tokens == 0 && view_slot(a) < 0,
      w->state);
  filler_stop(&f);
  drain();
  ai_table(&view, sizeof(view));
  result("table: empty after the owners left",
      view_count(AI_FREE) == AI_NSLOT && view.nqueued == 0 && view.nbatch == 0, view.nqueued);
}

// ai_wait into a buffer too small or bad: refused, the result kept; then
// exactly as large.
void
buffers(void)
{
  int a = sub(P, 3, 3);
  take();
  finish(a, 3); // "10 11 12": 8 bytes
  expect("small buffer: out_cap 7 < result_len fails", ai_wait(a, buf, 7), -AIE_TOOSMALL);
  expect("small buffer: the result is kept", state_of(a), AI_DONE);
  expect("bad out pointer: fails with AIE_FAULT", ai_wait(a, BADADDR, 100), -AIE_FAULT);
  expect("bad out pointer: the result is kept", state_of(a), AI_DONE);
  memset(buf, 'x', sizeof(buf));
  int n = ai_wait(a, buf, 8);
  result("retry with out_cap == result_len: 8 bytes, no NUL written",
      n == 8 && memcmp(buf, "10 11 12x", 9) == 0, n);
  a = sub(P, 3, 2);
  take();
  finish(a, 2);
  memset(buf, 'x', sizeof(buf));
  n = ai_wait(a, buf, sizeof(buf));
  result("larger out_cap is fine: text and a NUL", n == 5 && strcmp(buf, "10 11") == 0, n);
  drain();
}

// A freed slot's new request gets a new id; the old one is unknown to
// every call.
void
reqids(void)
{
  int a = sub(P, 3, 1), ok = 1, prev = a;
  ai_cancel(a);
  int b = sub(P, 3, 1);
  result("reqid: a new request in the freed slot gets a new id", b > a, b);
  expect("reqid: the old id gets AIE_NOREQ from wait", ai_wait(a, buf, sizeof(buf)), -AIE_NOREQ);
  expect("reqid: the old id gets AIE_NOREQ from query", state_of(a), -AIE_NOREQ);
  expect("reqid: the old id gets AIE_NOREQ from cancel", ai_cancel(a), -AIE_NOREQ);
  expect("reqid: the new request is untouched", state_of(b), AI_QUEUED);
  ai_cancel(b);
  prev = b;
  for (int i = 0; i < 40; i++) {
    int r = sub(P, 3, 1);
    ok = ok && r > prev;
    prev = r;
    ai_cancel(r);
  }
  result("reqid: 40 submits through reused slots, ids always new", ok, prev);
  nmine = 0;
}

// Runs query, wait and cancel on reqid in a child; its exit status is 0
// when all three got AIE_NOTOWNER.
static int
foreign_child(int reqid)
{
  int pid = fork();
  if (pid == 0) {
    struct ai_status st;
    int ok = ai_query(reqid, &st) == -AIE_NOTOWNER &&
        ai_wait(reqid, buf, sizeof(buf)) == -AIE_NOTOWNER && ai_cancel(reqid) == -AIE_NOTOWNER;
    exit(ok ? 0 : 1);
  }
  int st = -1;
  wait_for(pid, 100, &st);
  return st;
}

// Only the owner may query, wait for or cancel a request: a child, the
// parent and a sibling get AIE_NOTOWNER.
void
ownership(void)
{
  struct filler f = { 0 };
  struct ai_status st;
  int a = sub(P, 3, 1);
  expect("ownership: a child gets AIE_NOTOWNER (query, wait, cancel)", foreign_child(a), 0);
  filler_start(&f, 1);
  int b = f.last;
  int ok = ai_query(b, &st) == -AIE_NOTOWNER && ai_wait(b, buf, sizeof(buf)) == -AIE_NOTOWNER &&
      ai_cancel(b) == -AIE_NOTOWNER;
  result("ownership: the parent gets AIE_NOTOWNER (query, wait, cancel)", ok, b);
  expect("ownership: a sibling gets AIE_NOTOWNER (query, wait, cancel)", foreign_child(b), 0);
  expect("ownership: knowing a reqid granted nothing", state_of(a), AI_QUEUED);
  // a done request is protected the same way
  take();
  finish(a, 1);
  expect("ownership: a child cannot take a done result", foreign_child(a), 0);
  expect("ownership: the owner still gets it", ai_wait(a, buf, sizeof(buf)), 2);
  filler_stop(&f);
  drain();
}

// AI_PERPROC live requests per process: one more gets AIE_WOULDBLOCK at
// once, others may still submit; an owner of requests gets AIE_FULL
// from a full table rather than sleep.
void
cap(void)
{
  int ok = 1;
  for (int i = 0; i < AI_PERPROC; i++)
    ok = ok && sub(P, 3, 1) > 0;
  result("cap: AI_PERPROC submits succeed", ok, nmine);
  uint64 t0 = time_us();
  expect("cap: one more gets AIE_WOULDBLOCK at once", ai_submit(P, 3, 1), -AIE_WOULDBLOCK);
  result("cap: without blocking", time_us() - t0 < 1000000, 0);
  struct filler f = { 0 }, g = { 0 };
  expect("cap: another process may still submit", filler_start(&f, 1), 1);
  filler_stop(&f);
  drain();
  // Owning requests, a process does not sleep on a full table: it could be
  // waiting for itself, or with others for each other.
  for (int i = 0; i < AI_PERPROC - 1; i++)
    sub(P, 3, 1);
  filler_start(&f, AI_PERPROC);
  filler_start(&g, AI_NSLOT - 2 * AI_PERPROC + 1);
  t0 = time_us();
  int r = used() == AI_NSLOT ? ai_submit(P, 3, 1) : -1;
  result("full table: an owner of requests gets AIE_FULL, not sleep",
      r == -AIE_FULL && time_us() - t0 < 1000000, r);
  filler_stop(&f);
  filler_stop(&g);
  drain();
}

// A running request whose owner exited: a child submits it, aitest takes
// it, the child exits.
static int
make_orphan(void)
{
  struct filler f = { 0 };
  filler_start(&f, 1);
  int r = take();
  filler_stop(&f);
  ntaken--; // freed by finish/resign, not by drain
  return info().orphans == 1 ? r : -1;
}

// Frees one slot of a full table the way `how` says (own: our
// AI_PERPROC requests, orphan: a running orphan, f: the filler).
static void
release_one(int how, int *own, int orphan, struct filler *f)
{
  if (how == BY_WAIT || how == BY_FAILED) {
    int r = take(); // own[0]: the oldest
    if (how == BY_WAIT)
      finish(r, 1);
    else
      ai_fail(r, AIE_RUNTIME);
    ai_wait(own[0], buf, sizeof(buf));
  } else if (how == BY_CANCEL)
    ai_cancel(own[0]);
  else if (how == BY_EXIT)
    filler_stop(f);
  else if (how == BY_ORPHAN)
    finish(orphan, 1);
  else {
    ai_register(0, 0); // the worker goes: its orphan is freed
    ai_register(vocab, seqlen);
  }
}

// A submitter blocked on a full table is woken when one slot is freed
// the way `how` says, and gets a reqid.
void
backpressure(const char *name, int how)
{
  struct filler f = { 0 };
  int own[AI_PERPROC], st = -1, ok = 0, b = 0, orphan = 0;
  if (how >= BY_ORPHAN && (orphan = make_orphan()) < 0)
    goto out;
  for (int i = 0; i < AI_PERPROC; i++)
    own[i] = sub(P, 3, 1);
  filler_start(&f, AI_NSLOT - AI_PERPROC - (orphan > 0));
  if (used() != AI_NSLOT)
    goto out;
  b = submitter();
  if (wait_for(b, 5, &st)) // it must block while the table is full
    goto out;
  release_one(how, own, orphan, &f);
  // Woken, it submits: that works, or (how == BY_DEATH, if it runs in the
  // instant without a worker) fails at once with AIE_NOWORKER.
  ok = wait_for(b, 100, &st) && (st == 0 || (how == BY_DEATH && st == AIE_NOWORKER));
  b = 0;
out:
  result(name, ok, st);
  stop(b);
  filler_stop(&f);
  drain();
}

// An owner's exit frees its queued, done and failed requests at once
// and its running one when the worker reports it.
void
owner_exit(void)
{
  struct filler f = { 0 };
  struct ai_info in;
  filler_start(&f, 4); // a: running, b: done, c: failed, d: queued
  int a = take(), b = take(), c = take();
  finish(b, 1);
  ai_fail(c, AIE_RUNTIME);
  filler_stop(&f);
  in = info();
  result("owner exit: queued, done and failed requests freed",
      in.used == 1 && in.queued == 0 && in.done == 0 && in.failed == 0, in.used);
  result("owner exit: the running request is orphaned", in.running == 1 && in.orphans == 1,
      in.orphans);
  expect("owner exit: the worker may still report progress", ai_progress(a, 1), 0);
  expect("owner exit: the orphan's completion is accepted", finish(a, 1), 0);
  expect("owner exit: its result is dropped, slot freed", used(), 0);
  // a process killed with requests in every state
  ntaken = 0;
  filler_start(&f, 3);
  take();
  finish(take(), 1);
  kill(f.pid);
  filler_stop(&f);
  in = info();
  result(
      "owner killed: all but the running request freed", in.used == 1 && in.orphans == 1, in.used);
  for (int i = 0; i < ntaken; i++)
    finish(taken[i], 1);
  ntaken = 0;
  expect("owner killed: nothing left after the worker reports", used(), 0);
  drain();
}

// A process killed while blocked in submit or in wait returns and exits,
// and leaves no slot behind.
void
kills(void)
{
  struct filler f = { 0 };
  int st = -1;
  for (int i = 0; i < AI_PERPROC; i++)
    sub(P, 3, 1);
  filler_start(&f, AI_NSLOT - AI_PERPROC);
  int b = submitter();
  int blocked = !wait_for(b, 5, &st);
  kill(b);
  int gone = wait_for(b, 100, &st);
  result("kill while blocked in submit: it returns and exits", blocked && gone, st);
  expect("kill while blocked in submit: nothing left behind", used(), AI_NSLOT);
  filler_stop(&f);
  drain();

  int pid = fork();
  if (pid == 0) {
    int r = ai_submit(P, 3, 1);
    ai_wait(r, buf, sizeof(buf));
    exit(0);
  }
  blocked = !wait_for(pid, 5, &st) && info().queued == 1;
  kill(pid);
  gone = wait_for(pid, 100, &st);
  result("kill while blocked in wait: it returns and exits", blocked && gone, st);
  expect("kill while blocked in wait: its request is reclaimed", used(), 0);
}

// Worker-side rules, with a second worker process W.
// A child that owns a request of 2 ids and streams it: it sends the reqid
// on fd[1], then reads id by id (each read blocks: queued, running, then
// until the end); exit status 0 if it saw 21, 22, the end, and the text.
static int
streaming_child(int *fd)
{
  int pid = fork();
  if (pid == 0) {
    uint32 got[4];
    int r = ai_submit(P, 3, 2);
    write(fd[1], &r, sizeof(r));
    int ok = ai_stream(r, got, 0, 4) == 1 && got[0] == 21;
    ok = ok && ai_stream(r, got + 1, 1, 4) == 1 && got[1] == 22;
    ok = ok && ai_stream(r, got, 2, 4) == 0;
    ok = ok && ai_wait(r, buf, sizeof(buf)) == 5;
    exit(ok ? 0 : 1);
  }
  return pid;
}

// Streaming, ai_take and ai_emit with aitest as the worker: every state.
void
streaming(void)
{
  uint32 ids[8], two[2] = { 21, 22 }, three[3] = { 21, 22, 23 }, bad[3] = { 21, 99, 23 };
  int fd[2], st = -1, r;
  expect("take: nothing queued: 0 at once", ai_take(&job, 8), 0);
  expect("take: places < 1 refused", ai_take(&job, 0), -AIE_BADARG);
  int a = sub(P, 3, 3);
  expect("stream: from < 0 refused", ai_stream(a, ids, -1, 8), -AIE_BADARG);
  r = ai_take(&job, 8);
  result("take: a queued request, now RUNNING", r == a && state_of(a) == AI_RUNNING, r);
  expect("emit: no id yet: go on", ai_emit(a, two, 0), 0);
  expect("emit: two ids", ai_emit(a, two, 2), 0);
  int n = ai_stream(a, ids, 0, 8);
  result("stream: running: the ids so far", n == 2 && ids[0] == 21 && ids[1] == 22, n);
  n = ai_stream(a, ids, 1, 1);
  result("stream: running: from 1, cap 1", n == 1 && ids[0] == 22, n);
  expect("emit: beyond predict refused", ai_emit(a, three, 2), -AIE_BADARG);
  expect("complete: must begin with the emitted ids", ai_complete(a, bad, 3), -AIE_BADARG);
  expect("complete: with the emitted ids first", ai_complete(a, three, 3), 0);
  n = ai_stream(a, ids, 2, 8);
  result("stream: done: the rest", n == 1 && ids[0] == 23, n);
  expect("stream: done: 0 at the end", ai_stream(a, ids, 3, 8), 0);
  expect("stream: never consumes: wait gets the text", ai_wait(a, buf, sizeof(buf)), 8);
  expect("stream: collected: no such request", ai_stream(a, ids, 0, 8), -AIE_NOREQ);
  a = sub(P, 3, 3);
  ai_take(&job, 8);
  ai_emit(a, two, 1);
  ai_fail(a, AIE_RUNTIME);
  n = ai_stream(a, ids, 0, 8);
  result("stream: failed: the ids it produced", n == 1 && ids[0] == 21, n);
  expect("stream: failed: then its code", ai_stream(a, ids, 1, 8), -AIE_RUNTIME);
  expect("stream: failed: kept for wait, which reports it once", ai_wait(a, buf, sizeof(buf)),
      -AIE_RUNTIME);
  a = sub(P, 3, 3);
  ai_take(&job, 8);
  int u = used();
  ai_cancel(a);
  expect("emit: a cancelled running request: stop (AIE_NOREQ)", ai_emit(a, two, 0), -AIE_NOREQ);
  expect("emit: ...its slot is free at once", used(), u - 1);
  pipe(fd);
  int pid = streaming_child(fd);
  read(fd[0], &a, sizeof(a));
  int blocked = !wait_for(pid, 5, &st);
  r = ai_take(&job, 8);
  sleep(2);
  blocked = blocked && !wait_for(pid, 5, &st);
  ai_emit(r, two, 1);
  sleep(5);
  ai_emit(r, two + 1, 1);
  sleep(5);
  ai_complete(r, two, 2);
  result("stream: blocks while queued and running, wakes at each id and at the end",
      r == a && blocked && wait_for(pid, 200, &st) && st == 0, st);
  close(fd[0]);
  close(fd[1]);
}

// Options (ai_submit_opts) with aitest as the worker: the job carries
// them, and a request may complete with fewer ids than predict.
void
stop_ids(void)
{
  uint32 three[3] = { 10, 11, 12 };
  struct ai_opts o = { .nstop = 2,
    .stop = { 11, 700 },
    .temp_micro = 800000,
    .top_k = 40,
    .top_p_micro = 950000,
    .seed = 12345678901234567890UL };
  int a = ai_submit_opts(P, 3, 5, &o);
  if (a > 0 && nmine < 64)
    mine[nmine++] = a;
  int r = take();
  result("stop ids: the job carries them",
      r == a && job.opts.nstop == 2 && job.opts.stop[0] == 11 && job.opts.stop[1] == 700,
      job.opts.nstop);
  result("options: the job carries the sampler's",
      job.opts.temp_micro == 800000 && job.opts.top_k == 40 && job.opts.top_p_micro == 950000 &&
          job.opts.seed == 12345678901234567890UL,
      job.opts.top_k);
  expect("stop ids: the worker completes with 2 of 5 ids", ai_complete(a, three, 2), 0);
  int n = ai_wait(a, buf, sizeof(buf));
  result("stop ids: the result has those ids", n == 5 && strcmp(buf, "10 11") == 0, n);
  a = sub(P, 3, 2);
  take();
  struct ai_opts zero = { .tenant = getpid() }; // a request's tenant is its submitter by default
  result("options: ai_submit's job has none (greedy, no stop ids)",
      memcmp(&job.opts, &zero, sizeof(zero)) == 0, job.opts.nstop);
  ai_complete(a, three, 2);
  ai_wait(a, buf, sizeof(buf));
}

// Fairness as the worker with 4 places (bound 2 per process while others
// wait): aitest queues 3, a child 2; the order taken is aitest's first
// two, the child's two, then (once a place is free) aitest's third.
void
fairness(void)
{
  struct filler f = { 0 };
  int p1 = sub(P, 3, 1), p2 = sub(P, 3, 1), p3 = sub(P, 3, 1), got[5];
  filler_start(&f, 2);
  for (int k = 0; k < 4; k++)
    got[k] = ai_take(&job, 4);
  expect("fairness: no fifth start with 4 places taken (fifo never preempts)", ai_take(&job, 4), 0);
  finish(got[0], 1);
  got[4] = ai_take(&job, 4);
  result("fairness: at most B/2 running per process while others wait",
      got[0] == p1 && got[1] == p2 && got[2] == f.last - 1 && got[3] == f.last && got[4] == p3,
      got[2]);
  for (int k = 1; k < 5; k++)
    finish(got[k], 1);
  ai_wait(p1, buf, sizeof(buf));
  ai_wait(p2, buf, sizeof(buf));
  ai_wait(p3, buf, sizeof(buf));
  filler_stop(&f);
  expect("fairness: the table is empty again", wait_used(0, 100), 0);
}

// The worker right (docs/AI_SERVICE.md, rule 13), with no worker
// registered: a child that dropped it gets AIE_PERM from ai_register, and
// so does its own child (fork copies the flag); the parent keeps it.
// Exit status bit 0: the child's register, bit 1: its flag, bit 2: the
// grandchild's register.
static int
dropped_child(void)
{
  int pid = fork();
  if (pid == 0) {
    int bad = 0, st = -1;
    ai_right(1);
    bad |= ai_register(vocab, seqlen) != -AIE_PERM;
    bad |= (ai_right(0) != 0) << 1;
    int g = fork();
    if (g == 0)
      exit(ai_register(vocab, seqlen) == -AIE_PERM ? 0 : 1);
    wait_for(g, 100, &st);
    bad |= (st != 0) << 2;
    exit(bad);
  }
  int st = -1;
  wait_for(pid, 100, &st);
  return st;
}

// Registers the calling process as the worker. ai_daemon, which init
// started again after take_over killed it, asks for the role every
// second, so a moment with no worker may go to it: it is then killed
// (init starts it again later) and the caller tries again, for 5 s.
// Returns ai_register's last answer.
static int
claim_worker(void)
{
  uint64 t0 = time_us();
  int r;
  while ((r = ai_register(vocab, seqlen)) == -AIE_BUSY && time_us() - t0 < 5000000) {
    int daemon = info().worker_pid;
    if (daemon > 0)
      kill(daemon);
  }
  return r;
}

// The worker's rules: the worker right; a second worker sleeps while the
// queue is empty, is woken by a submit and serves; a worker killed with a
// request running fails it and leaves the queue to the next worker.
void
worker_rules(void)
{
  int st = -1;
  expect("right: a process that dropped the worker right gets AIE_PERM (and its child too)",
      dropped_child(), 0);
  result("right: the refusals registered nobody: the worker is still this process",
      info().worker_pid == getpid(), info().worker_pid);
  expect("right: the parent keeps it", ai_right(0), 1);
  ai_register(0, 0);
  int w = fork();
  if (w == 0) { // W: register, serve one request, exit
    claim_worker();
    int r = ai_next(&job);
    exit(r > 0 && finish(r, 2) == 0 ? 0 : 1);
  }
  for (int i = 0; i < 50 && info().worker_pid != w; i++)
    sleep(1);
  int asleep = info().worker_pid == w && !wait_for(w, 5, &st);
  result("worker: sleeps while the queue is empty", asleep, st);
  int a = sub(P, 3, 2);
  int woke = wait_for(w, 100, &st) && st == 0;
  result("worker: a submit wakes it", woke, st);
  expect("worker: its result reaches the caller", ai_wait(a, buf, sizeof(buf)), 5);
  // W2 takes a request and is killed before it reports.
  w = fork();
  if (w == 0) {
    claim_worker();
    ai_next(&job);
    ai_progress(job.reqid, 1);
    for (;;)
      sleep(100);
  }
  for (int i = 0; i < 50 && info().worker_pid != w; i++)
    sleep(1);
  a = sub(P, 3, 2);
  int b = sub(Q, 2, 2);
  for (int i = 0; i < 50 && state_of(a) != AI_RUNNING; i++)
    sleep(1);
  stop(w);
  expect("worker death: the running request fails with AIE_WORKERDIED",
      ai_wait(a, buf, sizeof(buf)), -AIE_WORKERDIED);
  expect("worker death: a queued request stays queued", state_of(b), AI_QUEUED);
  result("worker death: the dead worker is no longer registered", info().worker_pid != w,
      info().worker_pid);
  expect("worker: a new worker may register", claim_worker(), 0);
  int r = take();
  finish(r, 2);
  result("worker death: the queued request is served by the new worker",
      r == b && ai_wait(b, buf, sizeof(buf)) == 5, r);
  expect(
      "worker: next with a bad job pointer refused", (sub(P, 3, 1), ai_next(BADADDR)), -AIE_FAULT);
  struct ai_status s;
  ai_query(mine[nmine - 1], &s);
  result("worker: ...and the request is back at the queue's head",
      s.state == AI_QUEUED && s.queue_pos == 0, s.state);
  drain();
}
