// aitest's phases 2 and 4 (aitest.c): with the real ai_daemon serving,
// end to end, batching, bad arguments; then the restarted daemon and its
// death in the middle of a request.

#include "user/tests/aitest.h"

// ---------------------------------------------------------------- phase 2

char first_result[AI_RESULT_MAX + 1];

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

// With the real worker: ai_call's text, query without blocking, the
// times, the same result by submit and wait; then stop ids and sampling.
void
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
void
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

// Every bad argument of ai_submit and ai_submit_opts refused with its code.
static void
bad_submits(void)
{
  static uint32 big[AI_MAX_PROMPT + 1];
  uint32 t[2] = { 1, vocab };
  uint32 t2[2] = { 1, 0xffffffff };
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
}

// Bad reqids, capacities and pointers of the callers' other calls refused
// with their codes.
static void
bad_caller_calls(void)
{
  struct ai_status st;
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
}

// With a worker other than aitest: ai_call's too small and bad buffers,
// and the worker's calls and the role refused to aitest.
static void
bad_non_worker(void)
{
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

// Every bad argument refused (those that need a worker other than aitest
// only when one serves); the worker keeps running and still serves, and no
// slot leaked.
void
bad_arguments(void)
{
  int pid = info().worker_pid;
  bad_submits();
  bad_caller_calls();
  if (pid != getpid()) // (ai_call needs a worker other than aitest)
    bad_non_worker();
  expect("bad: register with vocab -5", ai_register(-5, 10), -AIE_BADARG);
  struct ai_info in = info();
  result("bad input: the worker keeps running, no slot leaked",
      in.worker_pid == pid && in.used == 0, in.used);
  if (pid != getpid()) {
    int r = ai_call(P, 3, 4, buf, sizeof(buf));
    result("bad input: the worker still serves", r > 0 && strcmp(buf, first_result) == 0, r);
  }
}

// Kills the daemon and takes the worker role before its restart does.
int
take_over(int daemon)
{
  kill(daemon);
  uint64 t0 = time_us();
  int r = -AIE_BUSY;
  while (r == -AIE_BUSY && time_us() - t0 < 5000000)
    r = ai_register(vocab, seqlen);
  return expect("take over the worker role from the killed daemon", r, 0);
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

// Phase 4: the restarted daemon (not old) registers; killed while it runs
// a batch that fills its places, its caller gets AIE_WORKERDIED and the
// queued requests are served whole by the next daemon.
void
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
