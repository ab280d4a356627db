// aitest: conformance suite of the kernel AI service (docs/AI_SERVICE.md).
//
// One "PASS name" or "FAIL name (got ...)" line per rule, then
// "N passed, M failed". Phases:
//   1. no worker since boot (an image without models): submit fails at once;
//   2. with the real ai_daemon: ai_call end to end, timing, batching (a
//      full batch, a request queued behind it, a cancel and an owner exit
//      mid-batch freeing places within a step), every bad argument (the
//      worker must keep running);
//   3. aitest takes the worker role itself (it kills the daemon, whose
//      restart then waits for the role) so that every state can be reached
//      on purpose: query in each state, one-shot, buffers, failures,
//      ownership, the cap, backpressure woken by each kind of slot release,
//      owner exit, kill in submit and wait, streaming in every state,
//      ai_take's fairness, the scheduling policies (their order, aging,
//      preemption, fair's bound, the step budget, switching under load),
//      the worker's sleep and death; ai_table in each state (and
//      snapshots taken while phase 2's batch runs);
//   4. it gives the role back; the restarted ai_daemon serves again, and is
//      killed in the middle of a request: its caller gets AIE_WORKERDIED
//      and the queued requests are served by the next daemon;
//   5. no slot leaked: the table is empty and fills to AI_NSLOT again.
// Phases 3 and 4 act as the worker, so aitest needs the AI worker right:
// boot with aiworker=console (rule 13); without it aitest says so and
// fails at once.
// Children report through their exit status; waits on children are bounded.

#include "user/lib/user.h"
#include "kernel/include/aisvc.h"
#include "user/tests/aitest.h"

#define BADADDR  ((void *)0x80000000UL) // kernel memory, never user memory
#define BADADDR2 ((void *)-1L)

static int npass, nfail;
static uint32 P[3] = { 1, 2, 3 };
static uint32 Q[2] = { 9, 8 };
char buf[AI_RESULT_MAX + 1];
struct ai_job job;
int vocab = 1000, seqlen = 64; // the fake worker's model
int mine[64], nmine;           // requests aitest submitted
static int taken[64], ntaken;  // requests aitest took as the worker

int
result(const char *name, int ok, int got)
{
  if (ok) {
    npass++;
    printf("PASS %s\n", name);
  } else {
    nfail++;
    printf("FAIL %s (got %d)\n", name, got);
  }
  return ok;
}

int
expect(const char *name, int got, int want)
{
  return result(name, got == want, got);
}

static struct ai_info
info(void)
{
  struct ai_info in;
  memset(&in, 0, sizeof(in));
  ai_info(&in);
  return in;
}

int
used(void)
{
  return info().used;
}

static int
sub(const uint32 *ids, int n, int predict)
{
  int r = ai_submit(ids, n, predict);
  if (r > 0 && nmine < 64)
    mine[nmine++] = r;
  return r;
}

// As the worker: take the oldest queued request (call only when one is).
static int
take(void)
{
  int r = ai_next(&job);
  if (r > 0 && ntaken < 64)
    taken[ntaken++] = r;
  return r;
}

// As the worker: complete reqid with n ids 10, 11, 12, ...
int
finish(int reqid, int n)
{
  static uint32 ids[AI_MAX_PREDICT];
  for (int i = 0; i < n && i < AI_MAX_PREDICT; i++)
    ids[i] = 10 + i;
  return ai_complete(reqid, ids, n);
}

int
state_of(int reqid)
{
  struct ai_status st;
  int r = ai_query(reqid, &st);
  return r < 0 ? r : st.state;
}

// ---------------------------------------------------------------- children

static int zpid[64], zst[64], nz; // children reaped while waiting for another

// wait(), keeping any child other than pid for a later wait_for.
static int
reap_until(int pid, int *status)
{
  int st, w;
  while ((w = wait(&st)) > 0 && w != pid)
    if (nz < 64) {
      zpid[nz] = w;
      zst[nz++] = st;
    }
  if (w == pid && status)
    *status = st;
  return w;
}

// Waits up to ticks for child pid: 1 (and *status) if it exited, else 0.
static int
wait_for(int pid, int ticks, int *status)
{
  int st, w, timer, done = 0, tdone = 0;
  for (int i = 0; i < nz; i++)
    if (zpid[i] == pid) {
      if (status)
        *status = zst[i];
      zpid[i] = 0;
      return 1;
    }
  if ((timer = fork()) == 0) {
    sleep(ticks);
    exit(0);
  }
  while (!done && !tdone && (w = wait(&st)) > 0) {
    if (w == pid) {
      done = 1;
      if (status)
        *status = st;
    } else if (w == timer)
      tdone = 1;
    else if (nz < 64) {
      zpid[nz] = w;
      zst[nz++] = st;
    }
  }
  if (!tdone) {
    kill(timer);
    reap_until(timer, 0);
  }
  return done;
}

// Kills child pid (if running) and reaps it.
void
stop(int pid)
{
  if (pid > 0) {
    kill(pid);
    wait_for(pid, 100, 0);
  }
}

// A child that submits n requests, reports how many it got and its last
// reqid, then stays until filler_stop writes to ctl.
struct filler {
  int pid, ctl, count, last;
};

static int
filler_start(struct filler *f, int n)
{
  int rp[2], cp[2], msg[2] = { -1, 0 };
  pipe(rp);
  pipe(cp);
  if ((f->pid = fork()) == 0) {
    close(rp[0]);
    close(cp[1]);
    msg[0] = 0;
    for (int i = 0; i < n; i++)
      if ((msg[1] = ai_submit(P, 3, 1)) > 0)
        msg[0]++;
    write(rp[1], msg, sizeof(msg));
    read(cp[0], msg, 1);
    exit(0);
  }
  close(rp[1]);
  close(cp[0]);
  read(rp[0], msg, sizeof(msg));
  close(rp[0]);
  f->ctl = cp[1];
  f->count = msg[0];
  f->last = msg[1];
  return f->count;
}

static void
filler_stop(struct filler *f)
{
  if (f->pid > 0) {
    // A byte, not just the close: other children hold copies of ctl.
    write(f->ctl, "x", 1);
    close(f->ctl);
    wait_for(f->pid, 100, 0);
  }
  f->pid = 0;
}

// A child that submits once; exit status 0 if it got a reqid.
static int
submitter(void)
{
  int pid = fork();
  if (pid == 0) {
    int r = ai_submit(P, 3, 1);
    exit(r > 0 ? 0 : -r);
  }
  return pid;
}

// Leaves the table empty: as the worker, fail every queued request and
// every one it took; cancel its own.
static void
drain(void)
{
  struct ai_info in;
  for (int guard = 0; guard < 64; guard++) {
    in = info();
    if (in.queued == 0 || in.worker_pid != getpid())
      break;
    int r = take();
    if (r < 0)
      break;
  }
  for (int i = 0; i < ntaken; i++)
    ai_fail(taken[i], AIE_RUNTIME);
  for (int i = 0; i < nmine; i++)
    ai_cancel(mine[i]);
  ntaken = nmine = 0;
}

// ---------------------------------------------------------------- ai_table

static struct ai_table_view view;

// The slot of the caller's request reqid in view, or -1.
static int
view_slot(int reqid)
{
  for (int i = 0; i < AI_NSLOT; i++)
    if (view.slot[i].state != AI_FREE && view.slot[i].reqid == reqid)
      return i;
  return -1;
}

// Slots in state st in view.
static int
view_count(int st)
{
  int n = 0;
  for (int i = 0; i < AI_NSLOT; i++)
    n += view.slot[i].state == st;
  return n;
}

// Does view hold together: the FIFO names each QUEUED slot once, the batch
// each RUNNING one (a real worker serves), free slots are blank, progress
// is within predict and the times come in order?
static int
view_consistent(void)
{
  int seen[AI_NSLOT] = { 0 };
  if (view.nqueued != view_count(AI_QUEUED) || view.nbatch != view_count(AI_RUNNING))
    return 0;
  for (int k = 0; k < view.nqueued; k++)
    if (view.slot[view.fifo[k]].state != AI_QUEUED || seen[view.fifo[k]]++)
      return 0;
  for (int k = 0; k < view.nbatch; k++)
    if (view.slot[view.batch[k]].state != AI_RUNNING || seen[view.batch[k]]++)
      return 0;
  for (int i = 0; i < AI_NSLOT; i++) {
    struct ai_slot_view *w = &view.slot[i];
    if (w->state == AI_FREE && (w->owner || w->reqid || w->predict || w->submit_time))
      return 0;
    if (w->state == AI_FREE)
      continue;
    if (w->tokens < 0 || w->tokens > w->predict || w->submit_time == 0 || w->submit_time > view.now)
      return 0;
    if (w->state >= AI_RUNNING && w->start_time < w->submit_time)
      return 0;
    if (w->first_time && w->first_time < w->start_time)
      return 0;
    if (w->state == AI_DONE && w->finish_time < w->first_time)
      return 0;
  }
  return 1;
}

// A child that owns nothing: exit status 0 if ai_table shows it the
// owners of the used slots but none of their reqids.
static int
view_child(void)
{
  int pid = fork();
  if (pid == 0) {
    int ok = ai_table(&view, sizeof(view)) == 0 && view_count(AI_FREE) < AI_NSLOT;
    for (int i = 0; i < AI_NSLOT; i++)
      ok = ok && view.slot[i].reqid == 0 &&
          (view.slot[i].state == AI_FREE || view.slot[i].owner != 0);
    exit(ok ? 0 : 1);
  }
  int st = -1;
  wait_for(pid, 100, &st);
  return st;
}

// ---------------------------------------------------------------- phase 1

static void
no_worker(void)
{
  uint64 t0 = time_us();
  expect("no worker: submit fails at once with AIE_NOWORKER", ai_submit(P, 3, 1), -AIE_NOWORKER);
  expect("no worker: ai_call fails with AIE_NOWORKER", ai_call(P, 3, 1, buf, sizeof(buf)),
      -AIE_NOWORKER);
  result("no worker: without blocking", time_us() - t0 < 1000000, (int)(time_us() - t0));
  expect("no worker: worker-only call ai_next refused", ai_next(&job), -AIE_NOTWORKER);
  expect("no worker: no slot taken", used(), 0);
}

// ---------------------------------------------------------------- phase 2

static int
is_id_text(const char *s, int len, int n)
{
  int words = 0;
  for (int i = 0; i < len; i++) {
    if (s[i] == ' ' && (i == 0 || s[i - 1] == ' ' || i == len - 1))
      return 0;
    if (s[i] != ' ' && (s[i] < '0' || s[i] > '9'))
      return 0;
    if (s[i] != ' ' && (i == 0 || s[i - 1] == ' '))
      words++;
  }
  return words == n && s[len] == 0;
}

static char first_result[AI_RESULT_MAX + 1];

// With the real worker: a request that stops at its call's second id ends
// there (at the first time that id comes), and its ids are the call's.
static void
real_stop(void)
{
  uint32 want[4], stop;
  char *p = first_result, text[64];
  for (int i = 0; i < 4; i++)
    want[i] = (uint32)strtol(p, &p, 10);
  stop = want[1];
  int len = 0, k = 0;
  do
    len += snprintf(text + len, sizeof(text) - len, k ? " %u" : "%u", want[k]);
  while (want[k++] != stop);
  struct ai_opts o = { .nstop = 1, .stop = { stop } };
  int r = ai_submit_opts(P, 3, 4, &o);
  int n = r > 0 ? ai_wait(r, buf, sizeof(buf)) : r;
  result("stop id: the real worker ends the request at it", n == len && strcmp(buf, text) == 0, n);
}

// The real worker samples with a request's options: a seed gives the same
// ids every time, also with other requests in the batch, and temperature 0
// is greedy (pyaisvc's tests check the ids against the reference's).
static void
real_sampling(void)
{
  static char a[AI_RESULT_MAX + 1], b[AI_RESULT_MAX + 1];
  struct ai_opts hot = { .temp_micro = 1300000, .top_k = 100, .top_p_micro = 900000, .seed = 3 };
  struct ai_opts cold = { .top_k = 5, .seed = 9 }; // temperature 0
  int r1 = ai_submit_opts(P, 3, 6, &hot);
  int r2 = ai_submit_opts(P, 3, 6, &hot);
  int r3 = ai_submit_opts(P, 3, 4, &cold);
  int n1 = r1 > 0 ? ai_wait(r1, a, sizeof(a)) : r1;
  int n2 = r2 > 0 ? ai_wait(r2, b, sizeof(b)) : r2;
  result("sampling: one seed, the same ids, side by side in a batch",
      n1 > 0 && n1 == n2 && strcmp(a, b) == 0, n2);
  int n3 = r3 > 0 ? ai_wait(r3, a, sizeof(a)) : r3;
  result("sampling: temperature 0 is greedy", n3 > 0 && strcmp(a, first_result) == 0, n3);
}

static void
real_worker(void)
{
  struct ai_status st;
  int n = ai_call(P, 3, 4, first_result, sizeof(first_result));
  result("call: result is 4 decimal ids separated by single spaces",
      n > 0 && is_id_text(first_result, n, 4), n);
  int r = ai_submit(P, 3, 4);
  uint64 t0 = time_us();
  int q = ai_query(r, &st);
  result("query never blocks (real worker)", q == 0 && time_us() - t0 < 50000, q);
  for (int i = 0; i < 600 && state_of(r) != AI_DONE; i++)
    sleep(1);
  ai_query(r, &st);
  result("timing: submit <= start <= first token <= finish, ttft and total set",
      st.state == AI_DONE && st.submit_time && st.submit_time <= st.start_time &&
          st.start_time <= st.first_time && st.first_time <= st.finish_time && st.ttft_us > 0 &&
          st.total_us >= st.ttft_us && st.tokens == 4,
      st.state);
  n = ai_wait(r, buf, sizeof(buf));
  result("call and submit + wait give the same result", n > 0 && strcmp(buf, first_result) == 0, n);
  real_stop();
  real_sampling();
}

// Waits up to ticks for request reqid to leave state `from`; its state.
static int
wait_leave(int reqid, int from, int ticks)
{
  int s = state_of(reqid);
  for (int i = 0; i < ticks && s == from; i++) {
    sleep(1);
    s = state_of(reqid);
  }
  return s;
}

// Waits up to ticks for the table to hold `n` used slots and no orphan.
int
wait_used(int n, int ticks)
{
  struct ai_info in = info();
  for (int i = 0; i < ticks && (in.used != n || in.orphans != 0); i++) {
    sleep(1);
    in = info();
  }
  return in.used;
}

// A child whose request queues behind the full batch: it says when it is
// submitted (a byte on fd[1]), then sends its start time (8 bytes) once
// the request is done and collected; exit status 0 if the result is the
// one expected for Q.
static int
queued_child(int *fd)
{
  int pid = fork();
  if (pid == 0) {
    struct ai_status st;
    int r = ai_submit(Q, 2, 4);
    write(fd[1], "q", 1);
    while (ai_query(r, &st) == 0 && st.state < AI_DONE)
      sleep(1);
    int n = ai_wait(r, buf, sizeof(buf));
    write(fd[1], &st.start_time, sizeof(st.start_time));
    exit(n > 0 && is_id_text(buf, n, 4) ? 0 : 1);
  }
  return pid;
}

// A child that owns two long requests and exits once both run or queue.
static int
exiting_child(int predict)
{
  int pid = fork();
  if (pid == 0) {
    int a = ai_submit(P, 3, predict), b = ai_submit(Q, 2, predict);
    wait_leave(a, AI_QUEUED, 500);
    exit(a > 0 && b > 0 ? 0 : 1);
  }
  return pid;
}

// While the real worker runs our full batch: every snapshot ai_table
// takes holds together, shows our 8 requests in the batch, and no
// request's progress goes backwards from one snapshot to the next.
static void
table_snapshots(const int *big)
{
  int last[AI_PERPROC] = { 0 }, ok = 1, inbatch = 0, moved = 0;
  for (int round = 0; round < 200 && ok; round++) {
    ok = ai_table(&view, sizeof(view)) == 0 && view_consistent();
    for (int k = 0; k < AI_PERPROC && ok; k++) {
      int i = view_slot(big[k]);
      ok = i >= 0 && view.slot[i].owner == getpid() && view.slot[i].tokens >= last[k];
      moved += ok && view.slot[i].tokens > last[k];
      if (ok)
        last[k] = view.slot[i].tokens;
    }
    if (round == 0)
      for (int k = 0; k < view.nbatch; k++)
        inbatch += view.slot[view.batch[k]].owner == getpid();
    if (round % 20 == 0)
      sleep(1);
  }
  result("table: 200 snapshots while a batch runs each hold together, progress never "
         "goes back",
      ok && moved > 0, moved);
  expect("table: the batch holds our 8 running requests", inbatch, AI_PERPROC);
}

// Batching with the real daemon (AI_BATCH = AI_PERPROC = 8 places): a
// full batch, a request queued behind it, a cancel that frees a place at
// the next step, an owner exiting mid-batch.
static void
batching_real(void)
{
  int big[AI_PERPROC], fd[2], st = -1, predict = seqlen - 3 < 200 ? seqlen - 3 : 200;
  uint64 qstart = 0;
  for (int k = 0; k < AI_PERPROC; k++)
    big[k] = ai_submit(P, 3, predict);
  for (int k = 0; k < AI_PERPROC; k++)
    wait_leave(big[k], AI_QUEUED, 1000);
  expect("batch: a full batch runs at once (8 running)", info().running, AI_PERPROC);
  table_snapshots(big);
  pipe(fd);
  int pid = queued_child(fd);
  char x;
  read(fd[0], &x, 1);
  struct ai_info in = info();
  result("batch: full, the next request queues", in.queued == 1 && in.running == AI_PERPROC,
      in.queued);
  ai_cancel(big[AI_PERPROC - 1]);
  read(fd[0], &qstart, sizeof(qstart));
  int exited = wait_for(pid, 1000, &st);
  int later = 1;
  for (int k = 0; k < AI_PERPROC - 1; k++) {
    struct ai_status s;
    ai_query(big[k], &s);
    later = later && (s.state == AI_RUNNING || s.finish_time > qstart);
  }
  result("cancel: a running request's place goes to the queued one at once "
         "(it runs and finishes while the batch goes on)",
      exited && st == 0 && qstart != 0 && later, st);
  expect(
      "cancel: the orphan is freed within a step", wait_used(AI_PERPROC - 1, 200), AI_PERPROC - 1);
  close(fd[0]);
  close(fd[1]);
  pid = exiting_child(predict);
  exited = wait_for(pid, 1000, &st);
  result("owner exit mid-batch: its requests are freed within a step",
      exited && st == 0 && wait_used(AI_PERPROC - 1, 200) == AI_PERPROC - 1, st);
  int running = 1;
  for (int k = 0; k < AI_PERPROC - 1; k++)
    running = running && wait_leave(big[k], AI_QUEUED, 0) >= AI_RUNNING;
  result("owner exit mid-batch: the other requests go on", running, 0);
  for (int k = 0; k < AI_PERPROC - 1; k++)
    ai_cancel(big[k]);
  expect("batch: cancelled, the table empties within a step", wait_used(0, 200), 0);
}

// Penalties, biases and logprobs out of range (docs/AI_SERVICE.md,
// section 10): refused at submit; the records' reader checks its range.
static void
bad_adjust_options(void)
{
  struct ai_logprob rec;
  static const struct {
    const char *what;
    struct ai_opts o;
  } bad[] = {
    { "bad: presence penalty above 2", { .presence_micro = AI_PENALTY_MAX + 1 } },
    { "bad: frequency penalty below -2", { .frequency_micro = -AI_PENALTY_MAX - 1 } },
    { "bad: bias count -1", { .nbias = -1 } },
    { "bad: bias count above AI_MAX_BIAS", { .nbias = AI_MAX_BIAS + 1 } },
    { "bad: bias above 100", { .nbias = 1, .bias = { { 1, AI_BIAS_MAX + 1 } } } },
    { "bad: logprobs above 1 + AI_MAX_TOPLP", { .logprobs = AI_MAX_TOPLP + 2 } },
    { "bad: logprobs -1", { .logprobs = -1 } },
  };
  for (int i = 0; i < (int)(sizeof(bad) / sizeof(bad[0])); i++)
    expect(bad[i].what, ai_submit_opts(P, 3, 1, &bad[i].o), -AIE_BADARG);
  struct ai_opts o = { .nbias = 1, .bias = { { vocab, 0 } } };
  expect("bad: bias id == vocab", ai_submit_opts(P, 3, 1, &o), -AIE_TOKEN);
  expect("bad: logprobs from -1", ai_logprobs(1, &rec, -1, 1), -AIE_BADARG);
  expect("bad: logprobs cap 0", ai_logprobs(1, &rec, 0, 0), -AIE_BADARG);
  expect("bad: logprobs of a reqid never issued", ai_logprobs(0x7ffffff0, &rec, 0, 1), -AIE_NOREQ);
}

static void
bad_arguments(void)
{
  static uint32 big[AI_MAX_PROMPT + 1];
  uint32 t[2] = { 1, vocab };
  uint32 t2[2] = { 1, 0xffffffff };
  struct ai_status st;
  int pid = info().worker_pid;
  int count = seqlen - 1 < AI_MAX_PROMPT ? seqlen - 1 : AI_MAX_PROMPT;

  for (int i = 0; i <= AI_MAX_PROMPT; i++)
    big[i] = 1;
  expect("bad: token count 0", ai_submit(P, 0, 1), -AIE_COUNT);
  expect("bad: token count -1", ai_submit(P, -1, 1), -AIE_COUNT);
  expect("bad: token count 256", ai_submit(big, AI_MAX_PROMPT + 1, 1), -AIE_COUNT);
  expect("bad: predict 0", ai_submit(P, 3, 0), -AIE_PREDICT);
  expect("bad: predict -5", ai_submit(P, 3, -5), -AIE_PREDICT);
  expect("bad: predict 256", ai_submit(P, 3, AI_MAX_PREDICT + 1), -AIE_PREDICT);
  expect("bad: token id == vocab", ai_submit(t, 2, 1), -AIE_TOKEN);
  expect("bad: token id 2^32-1", ai_submit(t2, 2, 1), -AIE_TOKEN);
  expect("bad: prompt + predict > runtime_seq_len", ai_submit(big, count, seqlen - count + 1),
      -AIE_TOOLONG);
  expect("bad: tokens pointer in kernel memory", ai_submit(BADADDR, 3, 1), -AIE_FAULT);
  expect("bad: tokens pointer -1", ai_submit(BADADDR2, 3, 1), -AIE_FAULT);
  expect("bad: tokens past the end of memory", ai_submit((uint32 *)sbrk(0) - 1, 3, 1), -AIE_FAULT);
  struct ai_opts o = { .nstop = -1 };
  expect("bad: stop count -1", ai_submit_opts(P, 3, 1, &o), -AIE_BADARG);
  o.nstop = AI_MAX_STOP + 1;
  expect("bad: stop count above AI_MAX_STOP", ai_submit_opts(P, 3, 1, &o), -AIE_BADARG);
  o.nstop = 1;
  o.stop[0] = t[1];
  expect("bad: stop id == vocab", ai_submit_opts(P, 3, 1, &o), -AIE_TOKEN);
  memset(&o, 0, sizeof(o));
  o.top_p_micro = AI_MICRO + 1;
  expect("bad: top_p above 1", ai_submit_opts(P, 3, 1, &o), -AIE_BADARG);
  bad_adjust_options();
  expect("bad: options pointer in kernel memory",
      ai_submit_opts(P, 3, 1, (struct ai_opts *)BADADDR), -AIE_FAULT);
  expect("bad: options past the end of memory",
      ai_submit_opts(P, 3, 1, (struct ai_opts *)((char *)sbrk(0) - 8)), -AIE_FAULT);
  expect("bad: wait on reqid 0", ai_wait(0, buf, sizeof(buf)), -AIE_NOREQ);
  expect("bad: wait on reqid -1", ai_wait(-1, buf, sizeof(buf)), -AIE_NOREQ);
  expect("bad: wait on a reqid never issued", ai_wait(0x7fffffff, buf, sizeof(buf)), -AIE_NOREQ);
  expect("bad: query on a reqid never issued", ai_query(0x7ffffff0, &st), -AIE_NOREQ);
  expect("bad: cancel of a reqid never issued", ai_cancel(0x7ffffff0), -AIE_NOREQ);
  expect("bad: wait with out_cap -1", ai_wait(1, buf, -1), -AIE_BADARG);
  int r = ai_submit(P, 3, 1);
  expect("bad: query with a bad status pointer", ai_query(r, BADADDR), -AIE_FAULT);
  ai_cancel(r);
  expect("bad: ai_info with a bad pointer", ai_info(BADADDR), -AIE_FAULT);
  expect("bad: ai_table with a bad pointer", ai_table(BADADDR, sizeof(view)), -AIE_FAULT);
  expect("bad: ai_table past the end of memory",
      ai_table((struct ai_table_view *)((char *)sbrk(0) - 8), sizeof(view)), -AIE_FAULT);
  expect(
      "bad: ai_table with a size below the view's", ai_table(&view, sizeof(view) - 1), -AIE_BADARG);
  expect("bad: ai_table with size -1", ai_table(&view, -1), -AIE_BADARG);
  expect("bad: ai_call with out_cap -1", ai_call(P, 3, 1, buf, -1), -AIE_BADARG);
  if (pid != getpid()) { // (ai_call needs a worker other than aitest)
    expect("bad: ai_call with out_cap 1 (too small; cancelled)", ai_call(P, 3, 4, buf, 1),
        -AIE_TOOSMALL);
    expect("bad: ai_call with a bad out pointer (cancelled)", ai_call(P, 3, 1, BADADDR, 100),
        -AIE_FAULT);
    expect("bad: ai_next by a non-worker", ai_next(&job), -AIE_NOTWORKER);
    expect("bad: ai_progress by a non-worker", ai_progress(1, 1), -AIE_NOTWORKER);
    expect("bad: ai_complete by a non-worker", ai_complete(1, P, 1), -AIE_NOTWORKER);
    expect("bad: ai_fail by a non-worker", ai_fail(1, AIE_RUNTIME), -AIE_NOTWORKER);
    expect("bad: register while a worker is registered", ai_register(vocab, seqlen), -AIE_BUSY);
    expect("bad: resign without the role", ai_register(0, 0), -AIE_NOTWORKER);
  }
  expect("bad: register with vocab -5", ai_register(-5, 10), -AIE_BADARG);
  struct ai_info in = info();
  result("bad input: the worker keeps running, no slot leaked",
      in.worker_pid == pid && in.used == 0, in.used);
  if (pid != getpid()) {
    r = ai_call(P, 3, 4, buf, sizeof(buf));
    result("bad input: the worker still serves", r > 0 && strcmp(buf, first_result) == 0, r);
  }
}

// Kills the daemon and takes the worker role before its restart does.
static int
take_over(int daemon)
{
  kill(daemon);
  uint64 t0 = time_us();
  int r = -AIE_BUSY;
  while (r == -AIE_BUSY && time_us() - t0 < 5000000)
    r = ai_register(vocab, seqlen);
  return expect("take over the worker role from the killed daemon", r, 0);
}

// ---------------------------------------------------------------- phase 3

static void
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
static void
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

static void
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

static void
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

static void
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

static void
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

enum { BY_WAIT, BY_CANCEL, BY_EXIT, BY_FAILED, BY_ORPHAN, BY_DEATH };

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

static void
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

static void
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

static void
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
static void
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
static void
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
static void
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

static void
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

// ---------------------------------------------------------------- phase 4

// A child that owns requests b = (P, 4 ids) and c = (Q, 4 ids), queued
// behind the batch that fills the worker's places: it says when they are
// submitted (a byte on rp), waits for the go (a byte on cp: the worker was
// killed), then checks them; exit status bit 0: b was still queued (or
// served), bit 1: b got first_result, bit 2: c got 4 ids.
static int
queued_pair(int *rp, int *cp)
{
  int pid = fork();
  if (pid == 0) {
    char x = 0;
    int b = ai_submit(P, 3, 4), c = ai_submit(Q, 2, 4), st = 0;
    write(rp[1], &x, 1);
    read(cp[0], &x, 1);
    int sb = state_of(b);
    st |= sb == AI_QUEUED || sb == AI_RUNNING || sb == AI_DONE;
    int n = ai_wait(b, buf, sizeof(buf));
    st |= (n > 0 && strcmp(buf, first_result) == 0) << 1;
    n = ai_wait(c, buf, sizeof(buf));
    st |= (n > 0 && is_id_text(buf, n, 4)) << 2;
    exit(st);
  }
  return pid;
}

static void
real_worker_death(int old)
{
  struct ai_status st;
  int r = -1, rp[2], cp[2], big[AI_PERPROC], status = 0;
  for (int i = 0; i < 600 && ((r = info().worker_pid) == 0 || r == old); i++)
    sleep(1);
  result("the restarted ai_daemon registers again", r != 0 && r != old, r);
  // Fill every place of the batching daemon with long requests (at most
  // AI_BATCH = AI_PERPROC run at once), so that the pair stays queued.
  int predict = seqlen - 3 < 200 ? seqlen - 3 : 200;
  for (int k = 0; k < AI_PERPROC; k++)
    big[k] = ai_submit(P, 3, predict);
  for (int i = 0, k = 0; i < 6000 && k < AI_PERPROC; i++) {
    if (ai_query(big[k], &st) < 0 || st.state != AI_QUEUED)
      k++;
    else
      sleep(1);
  }
  for (int i = 0; i < 6000; i++) {
    if (ai_query(big[0], &st) < 0 || (st.state == AI_RUNNING && st.tokens >= 1))
      break;
    sleep(1);
  }
  pipe(rp);
  pipe(cp);
  int pid = queued_pair(rp, cp);
  char x;
  read(rp[0], &x, 1);
  kill(r);
  expect("real worker killed mid-request: the caller gets AIE_WORKERDIED",
      ai_wait(big[0], buf, sizeof(buf)), -AIE_WORKERDIED);
  for (int k = 1; k < AI_PERPROC; k++)
    ai_wait(big[k], buf, sizeof(buf));
  write(cp[1], &x, 1);
  int exited = wait_for(pid, 6000, &status);
  result("real worker killed: queued requests kept", exited && (status & 1), status);
  result("real worker killed: the restarted daemon serves the queue, same result",
      exited && (status & 2), status);
  result("real worker killed: ...every queued request", exited && (status & 4), status);
  close(rp[0]);
  close(rp[1]);
  close(cp[0]);
  close(cp[1]);
}

// ---------------------------------------------------------------- scheduling
// The policies (docs/AI_SERVICE.md section 11) with aitest as the worker:
// the settings and their bad values, each policy's order on crafted
// queues, aging, preemption (pause, resume, cancel and owner exit while
// paused), fair's bound under a flood, the step budget, and switching the
// policy under load. A simulated worker (sim_*) plans and steps as
// ai_daemon does, and counts what each tenant was served.

uint32 LONGP[AI_MAX_PROMPT]; // a long prompt of small ids

struct held hs[AI_NSLOT];
int nhs;
struct ai_plan plan;
uint64 served[2]; // weighted tokens served to tenants 1 and 2 (fair)

int
set_sched(const char *name, int chunk)
{
  struct ai_sched a;
  memset(&a, 0, sizeof(a));
  strncpy(a.policy, name, sizeof(a.policy) - 1);
  a.chunk = chunk;
  return ai_sched(&a);
}

// Sets the prompt budget (aiprefill) alone.
static int
set_prefill(int prefill)
{
  struct ai_sched a;
  memset(&a, 0, sizeof(a));
  a.prefill = prefill;
  return ai_sched(&a);
}

// Submits n ids of LONGP to generate predict, with a tenant and a
// priority.
int
sub_tp(int n, int predict, int tenant, int priority)
{
  struct ai_opts o;
  memset(&o, 0, sizeof(o));
  o.tenant = tenant;
  o.priority = priority;
  int r = ai_submit_opts(LONGP, n, predict, &o);
  if (r > 0 && nmine < 64)
    mine[nmine++] = r;
  return r;
}

// As ai_daemon admits: ai_take while fewer than caches are held. Returns
// how many it took.
int
sim_admit(int places, int caches)
{
  int n = 0, r;
  while (nhs < caches && (r = ai_take(&job, places)) > 0) {
    hs[nhs++] = (struct held){ r, job.count, job.predict, job.opts.tenant, 0, 0 };
    n++;
  }
  return n;
}

// hs[] in the order of the plan's answer.
static void
sim_reorder(void)
{
  struct held was[AI_NSLOT];
  memmove(was, hs, sizeof(hs));
  for (int i = 0; i < nhs; i++)
    for (int k = 0; k < nhs; k++)
      if (was[k].reqid == plan.e[i].reqid)
        hs[i] = was[k];
}

// Request h runs `take` positions: weighted service for its tenant, an id
// when all its known ids are run, completion at predict. Returns 1 when
// it completed.
static int
sim_run(struct held *h, int take)
{
  int prompt = h->fed < h->count ? (h->count - h->fed < take ? h->count - h->fed : take) : 0;
  uint32 id;
  h->fed += take;
  if (h->tenant == 1 || h->tenant == 2)
    served[h->tenant - 1] += prompt * AI_FAIR_WPROMPT + (take - prompt) * AI_FAIR_WGEN;
  if (h->fed != h->count + h->gen)
    return ai_emit(h->reqid, 0, 0) == -AIE_NOREQ;
  id = 10 + h->gen++;
  if (ai_emit(h->reqid, &id, 1) == -AIE_NOREQ)
    return 1; // cancelled, or its owner exited
  if (h->gen < h->predict)
    return 0;
  finish(h->reqid, h->gen);
  return 1;
}

// One step as ai_daemon's: plan, then the running requests take their
// positions (decoders 1, prefill the rest of the budget in the plan's
// order, one left for each later one), the paused ones only ask whether to
// go on; finished and dropped ones leave. Returns the plan's run count or
// its error.
int
sim_step(int places, int caches)
{
  int take[AI_NSLOT], left, npre = 0, kept = 0;
  plan.places = places;
  plan.caches = caches;
  plan.n = nhs;
  for (int i = 0; i < nhs; i++) {
    plan.e[i].reqid = hs[i].reqid;
    plan.e[i].fed = hs[i].fed;
  }
  int r = ai_plan(&plan);
  if (r < 0)
    return r;
  sim_reorder();
  left = plan.chunk;
  for (int i = 0; i < plan.run; i++) {
    take[i] = hs[i].fed >= hs[i].count ? 1 : 0;
    left -= take[i];
    npre += !take[i];
  }
  for (int i = 0; i < plan.run; i++)
    if (!take[i]) {
      int c = hs[i].count - hs[i].fed, room = left - --npre;
      take[i] = c < room ? c : room;
      left -= take[i];
    }
  for (int i = 0; i < nhs; i++) {
    int gone = i < plan.run ? sim_run(&hs[i], take[i]) : ai_emit(hs[i].reqid, 0, 0) == -AIE_NOREQ;
    if (!gone)
      hs[kept++] = hs[i];
  }
  nhs = kept;
  return plan.run;
}

// Collects every request aitest submitted that is done (ai_wait).
void
collect(void)
{
  int kept = 0;
  for (int i = 0; i < nmine; i++)
    if (state_of(mine[i]) == AI_DONE)
      ai_wait(mine[i], buf, sizeof(buf));
    else if (state_of(mine[i]) > 0)
      mine[kept++] = mine[i];
  nmine = kept;
}

// Steps until nothing is held or queued (at most 2000 steps); returns
// the steps run.
int
sim_drain(int places, int caches)
{
  int steps = 0;
  for (; steps < 2000; steps++) {
    sim_admit(places, caches);
    if (nhs == 0)
      break;
    sim_step(places, caches);
  }
  collect();
  return steps;
}

// The slot of our request reqid in v, or 0.
static struct ai_slot_view *
view_of(struct ai_table_view *v, int reqid)
{
  for (int i = 0; i < AI_NSLOT; i++)
    if (v->slot[i].state != AI_FREE && v->slot[i].reqid == reqid)
      return &v->slot[i];
  return 0;
}

// The settings: read by anyone, set only with the worker right; every bad
// value refused with its own code, and nothing changed.
static void
sched_settings(void)
{
  struct ai_sched a;
  memset(&a, 0, sizeof(a));
  int r = ai_sched(&a);
  result("sched: read: fifo and AI_CHUNK_MAX (both budgets) at boot",
      r == 0 && strcmp(a.policy, "fifo") == 0 && a.chunk == AI_CHUNK_MAX &&
          a.prefill == AI_CHUNK_MAX,
      r);
  expect("sched: bad: an unknown policy (AIE_POLICY)", set_sched("lottery", 0), -AIE_POLICY);
  expect("sched: bad: chunk -1 (AIE_CHUNK)", set_sched("", -1), -AIE_CHUNK);
  expect("sched: bad: chunk above AI_CHUNK_MAX", set_sched("fair", AI_CHUNK_MAX + 1), -AIE_CHUNK);
  expect("sched: bad: prefill -1 (AIE_CHUNK)", set_prefill(-1), -AIE_CHUNK);
  expect("sched: bad: prefill above AI_CHUNK_MAX", set_prefill(AI_CHUNK_MAX + 1), -AIE_CHUNK);
  expect("sched: bad: settings pointer in kernel memory", ai_sched(BADADDR), -AIE_FAULT);
  memset(&a, 0, sizeof(a));
  ai_sched(&a);
  result("sched: bad values change nothing",
      strcmp(a.policy, "fifo") == 0 && a.chunk == AI_CHUNK_MAX && a.prefill == AI_CHUNK_MAX,
      a.chunk);
  int pid = fork();
  if (pid == 0) {
    ai_right(1);
    struct ai_sched c;
    memset(&c, 0, sizeof(c));
    int ok =
        set_sched("fair", 0) == -AIE_PERM && ai_sched(&c) == 0 && strcmp(c.policy, "fifo") == 0;
    exit(ok ? 0 : 1);
  }
  int st = -1;
  result("sched: without the worker right: read yes, set AIE_PERM",
      wait_for(pid, 100, &st) && st == 0, st);
  expect("sched: set shortest, chunk 4", set_sched("shortest", 4), 0);
  memset(&a, 0, sizeof(a));
  ai_sched(&a);
  static struct ai_table_view v;
  ai_table(&v, sizeof(v));
  result("sched: the table shows the policy and chunk",
      strcmp(v.policy, "shortest") == 0 && v.chunk == 4 && a.chunk == 4, v.chunk);
  set_sched("fifo", AI_CHUNK_MAX);
  int u = used();
  expect("bad: priority -1 (AIE_PRIORITY)", sub_tp(3, 1, 0, -1), -AIE_PRIORITY);
  expect("bad: priority above AI_PRIO_MAX", sub_tp(3, 1, 0, AI_PRIO_MAX + 1), -AIE_PRIORITY);
  expect("bad: tenant -1 (AIE_BADARG)", sub_tp(3, 1, -1, 0), -AIE_BADARG);
  expect("bad: no slot taken by refused submits", used(), u);
  int d = sub_tp(3, 1, 0, 7), t = sub_tp(3, 1, 77, 0);
  ai_table(&v, sizeof(v));
  struct ai_slot_view *wd = view_of(&v, d), *wt = view_of(&v, t);
  result("tenant: the submitter's pid by default, else the one given; priority shown",
      wd && wt && wd->tenant == getpid() && wt->tenant == 77 && wd->priority == 7, d);
  int r1 = take(), r2 = take();
  result("tenant: the job carries tenant and priority", r1 == d && r2 == t && job.opts.tenant == 77,
      job.opts.tenant);
  expect("plan: bad pointer", ai_plan(BADADDR), -AIE_FAULT);
  memset(&plan, 0, sizeof(plan));
  plan.places = 0;
  plan.caches = 4;
  expect("plan: places 0 refused", ai_plan(&plan), -AIE_BADARG);
  plan.places = 2;
  plan.n = 1;
  plan.e[0].reqid = 999999;
  expect("plan: a request the worker does not run (AIE_NOREQ)", ai_plan(&plan), -AIE_NOREQ);
  plan.n = 2;
  plan.e[0].reqid = plan.e[1].reqid = d;
  expect("plan: a request named twice refused", ai_plan(&plan), -AIE_BADARG);
  plan.n = 1;
  plan.e[0].fed = 5;
  expect("plan: positions beyond prompt + predict refused", ai_plan(&plan), -AIE_BADARG);
  plan.e[0].fed = 2;
  ai_plan(&plan);
  plan.e[0].fed = 1;
  expect("plan: positions that go back refused", ai_plan(&plan), -AIE_BADARG);
  pid = fork();
  if (pid == 0)
    exit(ai_plan(&plan) == -AIE_NOTWORKER ? 0 : 1);
  result("plan: another process gets AIE_NOTWORKER", wait_for(pid, 100, &st) && st == 0, st);
  finish(d, 1);
  finish(t, 1);
  collect();
}

// The order each policy starts a crafted queue in: a..d submitted in
// this order with the sizes and priorities below; ai_take with 8 places
// takes all four.
static void
sched_order(const char *policy, const char *name, const int *want)
{
  int big = seqlen - 3 < 40 ? seqlen - 3 : 40, r[4], got[4];
  set_sched(policy, 0);
  r[0] = sub_tp(3, big, 0, 0);     // a: long, lowest priority
  r[1] = sub_tp(3, 1, 0, 5);       // b: short, high
  r[2] = sub_tp(3, 1, 0, 5);       // c: as b, later
  r[3] = sub_tp(3, big / 2, 0, 2); // d: medium
  int ok = 1;
  for (int k = 0; k < 4; k++) {
    got[k] = ai_take(&job, 8);
    ok = ok && got[k] == r[want[k]];
  }
  result(name, ok, got[0]);
  for (int k = 0; k < 4; k++)
    finish(r[k], 1);
  collect();
}

// Fair's order: tenant 1 was served, tenant 2 not: tenant 2's request
// starts first although it came last.
static void
fair_order(void)
{
  set_sched("fair", 0);
  int a = sub_tp(3, 2, 1, 0), b = sub_tp(3, 2, 1, 0), c = sub_tp(3, 2, 2, 0);
  nhs = 0;
  int first = ai_take(&job, 1);
  hs[nhs++] = (struct held){ first, job.count, job.predict, job.opts.tenant, 0, 0 };
  sim_step(1, 1); // tenant 1 is served 3 prompt positions
  sim_step(1, 1);
  int next = ai_take(&job, 8), last = ai_take(&job, 8);
  result("fair: the least served tenant's request starts first, though it came last",
      first == a && next == c && last == b, next);
  hs[nhs++] = (struct held){ next, 3, 2, 2, 0, 0 };
  hs[nhs++] = (struct held){ last, 3, 2, 1, 0, 0 };
  sim_drain(8, 8);
  expect("fair: all served, the table empty again", wait_used(0, 100), 0);
}

// Aging: with one place, a low-priority (or long) request behind a flood
// of urgent ones submitted one per tick: every request started before it
// was submitted within the policy's bound after it, and it does start.
static void
aging(const char *policy, const char *name, int low_n, int low_pred, int low_pri, int hi_pri,
    uint64 bound)
{
  struct ai_status st;
  set_sched(policy, 0);
  int low = sub_tp(low_n, low_pred, 0, low_pri), passed = 0, ok = 1, got = 0;
  ai_query(low, &st);
  uint64 t0 = st.submit_time;
  for (int k = 0; k < 100 && got != low; k++) {
    int h = sub_tp(3, 1, 0, hi_pri);
    if ((got = ai_take(&job, 1)) != low) {
      ai_query(got, &st);
      ok = ok && st.submit_time < t0 + bound;
      passed++;
      finish(got, 1);
    } else {
      ai_cancel(h);
    }
    collect();
    sleep(1);
  }
  result(name, ok && got == low && passed >= 1, passed);
  if (got == low)
    finish(low, 1);
  collect();
  while (ai_take(&job, 8) > 0) // the flood's last requests
    finish(job.reqid, 1);
  collect();
  expect("aging: the table empty again", wait_used(0, 100), 0);
}

// Preemption under priority: two low requests run on 2 places; a high
// one starts paused (a cache is free) and the next plan pauses the later
// low one at the step boundary; it resumes when the high one ends.
static void
preempt(void)
{
  static struct ai_table_view v;
  set_sched("priority", 0);
  nhs = 0;
  int lp = seqlen - 3 < 120 ? seqlen - 3 : 120;
  int l1 = sub_tp(3, lp, 0, 0), l2 = sub_tp(3, lp, 0, 0);
  sim_admit(2, 4);
  sim_step(2, 4);
  int h = sub_tp(3, 2, 0, 50);
  int took = sim_admit(2, 4);
  sim_step(2, 4);
  ai_table(&v, sizeof(v));
  struct ai_slot_view *w = view_of(&v, l2);
  result("preempt: a more urgent request takes the least urgent one's place",
      took == 1 && plan.run == 2 && plan.e[0].reqid == h && plan.e[1].reqid == l1 &&
          plan.e[2].reqid == l2,
      plan.run);
  result("preempt: the paused request keeps its slot, out of the batch",
      w && w->state == AI_RUNNING && w->paused && w->pauses == 1 && v.nbatch == 2, v.nbatch);
  sim_step(2, 4); // h completes (2 ids)
  sim_step(2, 4);
  result("preempt: it resumes when a place is free",
      plan.run == 2 && plan.e[0].reqid == l1 && plan.e[1].reqid == l2, plan.e[1].reqid);
  // paused and resumed many times: a high request arrives 10 times, runs
  // (and ends) in one step; the next step l2 resumes
  for (int k = 0; k < 10; k++) {
    sub_tp(3, 1, 0, 60);
    sim_admit(2, 4);
    sim_step(2, 4);
    sim_step(2, 4);
    collect(); // (AI_PERPROC live requests at most)
  }
  ai_table(&v, sizeof(v));
  w = view_of(&v, l2);
  result("preempt: paused and resumed 10 more times, still running",
      w && w->state == AI_RUNNING && w->pauses == 11, w ? w->pauses : -1);
  for (int k = 0; k < 1000 && nhs > 0; k++)
    sim_step(2, 4);
  int n = ai_wait(l2, buf, sizeof(buf)), ids = n > 0;
  for (int i = 0; i < n; i++)
    ids += buf[i] == ' ';
  result("preempt: the paused request completes with all its ids", ids == lp, ids);
  collect();
  // cancel while paused
  int c1 = sub_tp(3, 30, 0, 0), c2 = sub_tp(3, 30, 0, 0);
  sim_admit(1, 2);
  sim_step(1, 2);
  int hh = sub_tp(3, 30, 0, 40);
  sim_admit(1, 2);
  sim_step(1, 2);
  ai_table(&v, sizeof(v));
  w = view_of(&v, c1);
  int paused = w && w->paused;
  ai_cancel(c1);
  sim_step(1, 2);
  result("preempt: cancel while paused: freed at the worker's next report",
      paused && nhs == 1 && hs[0].reqid == hh && state_of(c1) == -AIE_NOREQ, nhs);
  ai_cancel(hh);
  ai_cancel(c2);
  sim_step(1, 2);
  sim_drain(1, 2);
  // owner exit while paused: a child's low request is paused by ours
  int fd[2], cr = 0;
  pipe(fd);
  int pid = fork();
  if (pid == 0) {
    int r = sub_tp(3, 30, 0, 0);
    write(fd[1], &r, sizeof(r));
    for (;;) // until killed
      sleep(100);
  }
  read(fd[0], &cr, sizeof(cr));
  sim_admit(1, 2);
  sim_step(1, 2);
  int mh = sub_tp(3, 30, 0, 40);
  sim_admit(1, 2);
  sim_step(1, 2);
  ai_table(&v, sizeof(v));
  paused = v.nbatch == 1 && nhs == 2 && plan.e[0].reqid == mh;
  kill(pid);
  wait_for(pid, 100, 0);
  sim_step(1, 2);
  result("preempt: owner exit while paused: freed at the worker's next report",
      paused && nhs == 1 && hs[0].reqid == mh, nhs);
  ai_cancel(mh);
  sim_step(1, 2);
  sim_drain(1, 2);
  close(fd[0]);
  close(fd[1]);
  expect("preempt: 0 slots used after cancels and exits while paused", wait_used(0, 100), 0);
}

// Fair under a flood: tenant 1 holds 4 places with 4 requests, tenant 2
// arrives with 4: it gets places at the next step, the places end up
// shared, and the weighted service of the two, counted from tenant 2's
// arrival, stays within fair's bound while both have work.
static void
fair_flood(void)
{
  int places = 4, caches = 8, worst = 0, ok = 1;
  uint64 a0, bound = AI_FAIR_SLACK + 2 * AI_CHUNK_MAX * AI_FAIR_WGEN;
  int pred = seqlen - 1 < 30 ? seqlen - 1 : 30;
  set_sched("fair", 0);
  nhs = 0;
  for (int k = 0; k < 4; k++)
    sub_tp(1, pred, 1, 0);
  sim_admit(places, caches);
  for (int k = 0; k < 3; k++)
    sim_step(places, caches);
  a0 = served[0];
  served[1] = 0;
  for (int k = 0; k < 4; k++)
    sub_tp(1, pred, 2, 0);
  sim_admit(places, caches);
  sim_step(places, caches);
  int t2 = 0;
  for (int i = 0; i < plan.run; i++)
    t2 += hs[i].tenant == 2;
  result(
      "fair: a tenant arriving while another holds every place runs at the next step", t2 >= 1, t2);
  ok = fair_gap(places, caches, a0, &worst);
  printf("fair: largest service difference %d weighted tokens (bound %lu)\n", worst, bound);
  result("fair: service difference between two flooding tenants within the bound", ok, worst);
  collect();
  expect("fair: the table empty again", wait_used(0, 100), 0);
}

// Steps the simulated worker until it holds nothing (at most 2000 steps):
// whether tenants 1 and 2 were served within fair's bound of each other
// while both had requests held (tenant 1 counted from a0, tenant 2 from
// 0) and every step ran as many as it could; *worst is their largest
// difference then.
int
fair_gap(int places, int caches, uint64 a0, int *worst)
{
  uint64 bound = AI_FAIR_SLACK + 2 * AI_CHUNK_MAX * AI_FAIR_WGEN;
  int ok = 1;

  *worst = 0;
  for (int k = 0; k < 2000 && nhs > 0; k++) {
    int a = 0, b = 0;
    for (int i = 0; i < nhs; i++) {
      a += hs[i].tenant == 1;
      b += hs[i].tenant == 2;
    }
    int64 diff = (int64)(served[0] - a0) - (int64)served[1];
    if (diff < 0)
      diff = -diff;
    if (a > 0 && b > 0 && diff > *worst)
      *worst = diff;
    ok = ok && !(a > 0 && b > 0 && diff > bound);
    sim_admit(places, caches);
    int before = nhs, run = sim_step(places, caches);
    ok = ok && run == (before < places ? before : places); // work-conserving
  }
  return ok;
}

// The step budget: chunk 3 runs at most 3 requests (and 3 positions) per
// step, whatever the places.
static void
budget(void)
{
  set_sched("fifo", 3);
  nhs = 0;
  for (int k = 0; k < 5; k++)
    sub_tp(3, 2, 0, 0);
  sim_admit(8, 8);
  sim_step(8, 8);
  result("budget: chunk 3: 3 requests start and run per step, the plan says 3",
      nhs == 3 && plan.run == 3 && plan.chunk == 3, plan.run);
  sim_drain(8, 8);
  set_sched("fifo", AI_CHUNK_MAX);
  expect("budget: all served, the table empty again", wait_used(0, 100), 0);
}

// whole_prompt: under shortest with a budget of 4, three requests decode;
// a 3-id request ranks first and runs its whole prompt in one step, with
// one decoder beside it (the other two wait that step, not paused).
static void
whole_prompt(void)
{
  static struct ai_table_view v;
  set_sched("shortest", 4);
  nhs = 0;
  for (int k = 0; k < 3; k++)
    sub_tp(1, 40, 0, 0);
  sim_admit(8, 8);
  sim_step(8, 8);
  int s = sub_tp(3, 1, 0, 0);
  sim_admit(8, 8);
  int r = sim_step(8, 8);
  ai_table(&v, sizeof(v));
  result("whole prompt: a short request ranked first runs its prompt in one step, beside one "
         "decoder",
      r == 2 && plan.e[0].reqid == s && state_of(s) == AI_DONE && v.nbatch == 3, r);
  sim_drain(8, 8);
  set_sched("fifo", AI_CHUNK_MAX);
  expect("whole prompt: the table empty again", wait_used(0, 100), 0);
}

// The prompt budget: with aiprefill=1 under fifo, one request decodes
// and two wait to feed their prompts: a step runs the decoder and the
// older prompt, 2 positions, and the younger waits (not paused) until
// the older has fed its prompt; every request is served whole.
static void
prompt_budget(void)
{
  static struct ai_table_view v;
  set_prefill(1);
  nhs = 0;
  int d = sub_tp(1, 30, 0, 0);
  sim_admit(8, 8);
  sim_step(8, 8); // d's prompt: from now on it decodes
  int a = sub_tp(6, 1, 0, 0), b = sub_tp(6, 1, 0, 0);
  sim_admit(8, 8);
  int r = sim_step(8, 8);
  ai_table(&v, sizeof(v));
  struct ai_slot_view *wb = view_of(&v, b);
  result("prompt budget 1: beside a decoder a step runs it and the older prompt, 2 positions",
      r == 2 && plan.chunk == 2 && plan.e[0].reqid == d && plan.e[1].reqid == a, r);
  result("prompt budget 1: the younger prompt waits that step, running, not paused",
      wb && wb->state == AI_RUNNING && !wb->paused && v.prefill == 1, wb ? wb->paused : -1);
  for (int k = 0; k < 5; k++)
    sim_step(8, 8);
  int fed_b = -1;
  for (int i = 0; i < nhs; i++)
    if (hs[i].reqid == b)
      fed_b = hs[i].fed;
  result(
      "prompt budget 1: the younger starts once the older has fed its prompt", fed_b == 0, fed_b);
  sim_drain(8, 8);
  set_prefill(AI_CHUNK_MAX);
  int ok = 1;
  for (int i = 0; i < nmine; i++)
    ok = ok && (mine[i] != d && mine[i] != a && mine[i] != b);
  result("prompt budget 1: all three served whole and collected", ok, nmine);
  expect("prompt budget: the table empty again", wait_used(0, 100), 0);
}

// Switching the policy at every step while requests of two tenants and
// several priorities are queued, running and paused: every request ends
// with all its ids.
static void
switching(void)
{
  static const char *names[] = { "fifo", "priority", "shortest", "fair" };
  int r[8], ok = 1;
  nhs = 0;
  for (int k = 0; k < 8; k++)
    r[k] = sub_tp(1 + k % 3, 2 + k, 1 + k % 2, k * 10);
  for (int step = 0; step < 500; step++) {
    set_sched(names[step % 4], 0);
    sim_admit(3, 5);
    if (nhs == 0)
      break;
    sim_step(3, 5);
  }
  for (int k = 0; k < 8; k++)
    ok = ok && ai_wait(r[k], buf, sizeof(buf)) > 0;
  nmine = 0;
  result("switch: the policy changed at every step: all 8 requests done", ok, nhs);
  set_sched("fifo", AI_CHUNK_MAX);
  expect("switch: the table empty again", wait_used(0, 100), 0);
}

static void
scheduling(void)
{
  static const int fifo_want[] = { 0, 1, 2, 3 }, prio_want[] = { 1, 2, 3, 0 },
                   short_want[] = { 1, 2, 3, 0 };
  for (int i = 0; i < AI_MAX_PROMPT; i++)
    LONGP[i] = 1 + i % 50;
  sched_settings();
  sched_order("fifo", "fifo: submit order, priorities ignored", fifo_want);
  sched_order("priority", "priority: highest first, ties in submit order", prio_want);
  sched_order("shortest", "shortest: least work first, ties in submit order", short_want);
  fair_order();
  aging("priority", "aging: priority 0 under a flood of 3s starts within 3 x AI_AGING_US", 3, 1, 0,
      3, 3 * (uint64)AI_AGING_US);
  int lp = seqlen - 3 < 40 ? seqlen - 3 : 40, lvl = 0;
  for (int n = 3 + lp; n > 0; n >>= 1)
    lvl++;
  aging("shortest",
      "aging: a long request under a flood of short ones starts within its level's "
      "bound",
      3, lp, 0, 0, (uint64)AI_SHORT_US << lvl);
  preempt();
  fair_flood();
  budget();
  whole_prompt();
  prompt_budget();
  switching();
  tenant_window();
  for (int i = 0; i < 4; i++)
    resume_full((const char *[]){ "fifo", "priority", "shortest", "fair" }[i]);
  fair_return();
  set_sched("fifo", AI_CHUNK_MAX);
}

// ---------------------------------------------------------------- phase 5

static void
no_leak(void)
{
  struct filler f = { 0 };
  expect("no leak: the table is empty", used(), 0);
  int ok = 1;
  for (int i = 0; i < AI_PERPROC; i++)
    ok = ok && sub(P, 3, 1) > 0;
  ok = ok && filler_start(&f, AI_NSLOT - AI_PERPROC) == AI_NSLOT - AI_PERPROC;
  result("no leak: the table fills to AI_NSLOT again", ok && used() == AI_NSLOT, used());
  filler_stop(&f);
  for (int i = 0; i < nmine; i++)
    ai_cancel(mine[i]);
  nmine = 0;
  for (int i = 0; i < 100 && used() != 0; i++) // an orphan may still be running
    sleep(1);
  expect("no leak: empty again", used(), 0);
}

int
main(void)
{
  struct ai_info in = info();
  int daemon = in.worker_pid;
  printf("aitest: worker pid %d, vocab %d, runtime_seq_len %d\n", daemon, in.vocab, in.seq_len);
  if (!ai_right(0)) {
    printf("aitest: this process lacks the AI worker right, which its cases need: boot with "
           "aiworker=console (make qemu BOOTARGS=aiworker=console; docs/AI_SERVICE.md, rule "
           "13)\n");
    expect("the AI worker right", 0, 1);
    printf("%d passed, %d failed\n", npass, nfail);
    return 1;
  }
  if (!in.worker_seen)
    no_worker();
  if (daemon) {
    vocab = in.vocab;
    seqlen = in.seq_len;
    real_worker();
    batching_real();
    bad_arguments();
    if (!take_over(daemon))
      goto done;
  } else {
    expect("become the worker (no daemon)", ai_register(vocab, seqlen), 0);
    bad_arguments();
  }
  states();
  table_states();
  buffers();
  reqids();
  ownership();
  cap();
  backpressure("backpressure: a blocked submitter is woken by a wait", BY_WAIT);
  backpressure("backpressure: ... by a cancel", BY_CANCEL);
  backpressure("backpressure: ... by an owner exit", BY_EXIT);
  backpressure("backpressure: ... by waiting for a failed request", BY_FAILED);
  backpressure("backpressure: ... by an orphan's completion", BY_ORPHAN);
  backpressure("backpressure: ... by the worker's death (orphan freed)", BY_DEATH);
  owner_exit();
  kills();
  streaming();
  stop_ids();
  fairness();
  scheduling();
  worker_rules();
  if (daemon) {
    ai_register(0, 0);
    real_worker_death(daemon);
  }
done:
  no_leak();
  if (!daemon) {
    ai_register(0, 0);
    expect("no worker again: submit fails at once", ai_submit(P, 3, 1), -AIE_NOWORKER);
  }
  printf("%d passed, %d failed\n", npass, nfail);
  return nfail != 0;
}
