// fuzz's AI service calls (fuzz.c): a caller's (submit, wait, query,
// cancel, the table, the settings, and the worker-only ones it is
// refused), any process's (stream, logprobs, the right), and the AI
// worker process that serves every request with bad calls in between.

#include "user/tests/fuzz.h"

// Settings for ai_sched: a policy name (good, unknown, empty or not
// terminated) and a step budget (good, 0 to keep, or out of range).
static void
sched_args(struct ai_sched *s)
{
  static const char *names[] = { AI_SCHED_FIFO, AI_SCHED_PRIORITY, AI_SCHED_SHORTEST, AI_SCHED_FAIR,
    "", "lottery", "fifoX", "FIFO" };
  static const int chunks[] = { 0, 1, 4, AI_CHUNK_MAX, AI_CHUNK_MAX + 1, -1, 0x7fffffff };

  memset(s, 0, sizeof(*s));
  if (chance(10))
    memset(s->policy, 'f', sizeof(s->policy)); // no NUL
  else
    strcpy(s->policy, names[pick(NELEM(names))]);
  s->chunk = chunks[pick(NELEM(chunks))];
  s->prefill = chunks[pick(NELEM(chunks))];
}

static const int preds[] = { 0, 1, 2, AI_MAX_PREDICT, AI_MAX_PREDICT + 1, -1 };

// ai_submit or ai_submit_opts of count tokens (0 ids when the pointer is
// of any kind, else ids 0 in scratch), any predict, options of any bytes.
static void
submit_args(struct call *c, int count)
{
  c->nr = SYS_ai_submit;
  dataptr(c, 0, count > 0 && count <= AI_MAX_PROMPT ? count * 4 : 0, 0);
  if (chance(50))
    memset((char *)(c->a[0] = okptr(AI_MAX_PROMPT * 4)), 0, AI_MAX_PROMPT * 4);
  c->a[1] = count;
  c->a[2] = preds[pick(NELEM(preds))];
  c->nodata = 0;    // a submit that fails the token copy is an error; one that succeeds was fine
  if (chance(50)) { // with options (any bytes): refused only at a bad pointer (0: none)
    int kind;
    c->nr = SYS_ai_submit_opts;
    c->a[3] = anyptr(&kind);
    if (kind == P_BAD)
      c->nodata = 1;
  }
}

// ai_call of count ids 0 (no ids unless our worker serves), blocking like
// submit + wait, into a result buffer of any kind.
static void
call_args(struct call *c, int count)
{
  c->nr = SYS_ai_call;
  c->a[0] = okptr(AI_MAX_PROMPT * 4);
  memset((char *)c->a[0], 0, AI_MAX_PROMPT * 4);
  c->a[1] = aiblock ? count : 0;
  c->a[2] = preds[pick(NELEM(preds))];
  dataptr(c, 3, 1, 1);
  c->a[4] = chance(70) ? AI_RESULT_MAX + 1 : anylen();
  c->datacount = 1;
}

// A worker-only call from a caller, which refuses it (never ai_next: one
// that succeeds would take a request).
static void
worker_only_args(struct call *c)
{
  static const long worker[] = { SYS_ai_register, SYS_ai_progress, SYS_ai_complete, SYS_ai_fail,
    SYS_ai_take, SYS_ai_emit, SYS_ai_logprob, SYS_ai_kvreport, SYS_ai_plan };
  c->nr = worker[pick(NELEM(worker))];
  c->a[0] = c->nr == SYS_ai_register ? (chance(50) ? 0 : pick(100000)) : anyreqid();
  c->a[1] = c->nr == SYS_ai_register ? (chance(50) ? 0 : pick(1000)) : okptr(1024);
  c->a[2] = pick(300);
  if (c->nr == SYS_ai_take) // (job, places)
    c->a[0] = okptr(sizeof(struct ai_job));
  if (c->nr == SYS_ai_plan)
    c->a[0] = okptr(sizeof(struct ai_plan));
}

// AI calls a caller makes. Waits only on requests that a worker serves.
void
call_ai(struct call *c)
{
  static const int counts[] = { 0, 1, 3, AI_MAX_PROMPT, AI_MAX_PROMPT + 1, -1, 0x7fffffff };
  int count = counts[pick(NELEM(counts))];

  if (!aiblock && count > 0 && count <= AI_MAX_PROMPT)
    count = 0; // a real worker would run it for seconds: only bad submits

  switch (pick(10)) {
  case 0:
  case 1: submit_args(c, count); break;
  case 2: // wait: blocks only if the reqid is ours and queued, and a worker serves
    c->nr = SYS_ai_wait;
    c->a[0] = aiblock ? anyreqid() : -1;
    dataptr(c, 1, 1, 1);
    c->a[2] = chance(70) ? AI_RESULT_MAX + 1 : anylen();
    c->datacount = 1;
    break;
  case 3:
    c->nr = SYS_ai_query;
    c->a[0] = anyreqid();
    dataptr(c, 1, sizeof(struct ai_status), 1);
    break;
  case 4:
    c->nr = SYS_ai_cancel;
    c->a[0] = anyreqid();
    break;
  case 5:
    c->nr = SYS_ai_info;
    dataptr(c, 0, sizeof(struct ai_info), 1);
    break;
  case 7: // a size below the view's is refused before the pointer is used
    c->nr = SYS_ai_table;
    c->a[1] = chance(70) ? sizeof(struct ai_table_view) + pick(2) * pick(4096) : anylen();
    dataptr(c, 0,
        (long)(int)c->a[1] >= (long)sizeof(struct ai_table_view) ? sizeof(struct ai_table_view) : 0,
        1);
    break;
  case 8: // the scheduling settings: read, or set (a name of the list, or any bytes)
    c->nr = SYS_ai_sched;
    if (chance(50))
      sched_args((struct ai_sched *)(c->a[0] = okptr(sizeof(struct ai_sched))));
    else
      dataptr(c, 0, sizeof(struct ai_sched), 1);
    break;
  case 6: call_args(c, count); break;
  default: worker_only_args(c); break;
  }
}

// ai_stream, ai_logprobs and ai_right, which any process may call. A
// stream read blocks only until the request has an id at `from` or ends:
// only on requests of our own that a worker serves (with a real worker,
// submits are all bad). ai_logprobs never blocks.
void
call_ai_any(struct call *c)
{
  static const int froms[] = { 0, 1, AI_MAX_PREDICT - 1, AI_MAX_PREDICT, -1, 0x7fffffff };

  if (chance(30)) {
    c->nr = SYS_ai_right;
    c->a[0] = chance(50) ? 0 : rnd(); // non-zero drops it: workers never register
    return;
  }
  long cap = anylen();
  c->nr = SYS_ai_stream;
  c->a[0] = aiblock ? anyreqid() : -1;
  if (chance(30)) {
    c->nr = SYS_ai_logprobs;
    c->a[0] = anyreqid();
  }
  c->a[2] = froms[pick(NELEM(froms))];
  c->a[3] = cap;
  dataptr(c, 1, cap, 1);
  c->datacount = 1;
}

// Finishes request reqid that the worker took: completes it with up to
// predict ids, or fails it.
static void
finish(int reqid, int predict)
{
  uint32 ids[AI_MAX_PREDICT];
  int n;

  if (chance(30)) {
    ai_fail(reqid, anyreqid());
    return;
  }
  n = 1 + pick(predict);
  for (int i = 0; i < n; i++)
    ids[i] = pick(1000);
  if (ai_complete(reqid, ids, n) < 0)
    ai_fail(reqid, AIE_RUNTIME);
}

// ai_plan's argument for the worker running reqid: a plan of 0..3 entries
// (reqid, or any id; any progress) and places, or a pointer of any kind.
// A plan it accepts only reorders and may pause reqid: the request still
// ends when the worker completes it.
static void
plan_args(struct call *c, int reqid)
{
  static const int places[] = { 0, 1, 8, -1, 0x7fffffff };
  struct ai_plan *p;

  if (chance(30)) {
    dataptr(c, 0, sizeof(struct ai_plan), 1);
    return;
  }
  p = (struct ai_plan *)(c->a[0] = okptr(sizeof(struct ai_plan)));
  memset(p, 0, sizeof(*p));
  p->places = places[pick(NELEM(places))];
  p->caches = places[pick(NELEM(places))];
  p->n = chance(80) ? pick(4) : anylen();
  for (int i = 0; i < 3; i++) {
    p->e[i].reqid = chance(60) ? reqid : anyreqid();
    p->e[i].fed = chance(50) ? pick(8) : anylen();
  }
}

// Bad and good worker-side calls while request reqid runs; none of them
// ends it (a complete with n = -1 is refused; fail is redirected; emit
// adds ids, or is refused). ai_take gets only pointers it must refuse, so
// it takes nothing (should it take a request, that is a failed check, and
// the request is finished too, so that its caller's wait ends).
static void
worker_noise(int reqid)
{
  static const long nrs[] = { SYS_ai_progress, SYS_ai_complete, SYS_ai_fail, SYS_ai_emit,
    SYS_ai_take, SYS_ai_logprob, SYS_ai_plan };
  struct call c;
  int kind;

  for (int k = pick(4); k > 0; k--) {
    memset(&c, 0, sizeof(c));
    c.nr = nrs[pick(NELEM(nrs))];
    c.a[0] = chance(50) ? reqid : anyreqid();
    c.a[1] = c.nr == SYS_ai_progress ? (uint64)pick(300) : anyptr(&kind);
    c.a[2] = anylen();
    if (c.nr == SYS_ai_complete && c.a[0] == (uint64)reqid)
      c.a[2] = -1;
    if (c.nr == SYS_ai_fail && c.a[0] == (uint64)reqid)
      c.nr = SYS_ai_progress;
    if (c.nr == SYS_ai_take) {
      do
        c.a[0] = anyptr(&kind);
      while (kind != P_BAD && kind != P_NULL && kind != P_RO);
      c.a[1] = pick(10);
      c.nodata = 1;
      c.datacount = 1;
    }
    if (c.nr == SYS_ai_plan)
      plan_args(&c, reqid);
    long r = run(&c);
    if (c.nr == SYS_ai_take && r > 0)
      finish(r, 1);
  }
}

// The AI worker: registers (unless another worker serves), tells the
// parent through ready, then serves every request: takes it (sometimes
// with a bad job pointer first, which puts it back), makes bad worker-side
// calls, and completes or fails it. It stops at the parent's stop request.
void __attribute__((noreturn)) aiworker_main(uint64 seed, int ready)
{
  struct ai_job *job;
  struct call c;
  int r, kind, stop = 0;

  setup(seed);
  rep.index = -1;
  r = ai_register(1000, 600);
  write(ready, &r, sizeof(r));
  close(ready);
  if (r < 0)
    exit(0);
  while (!stop) {
    memset(&c, 0, sizeof(c));
    c.nr = SYS_ai_next;
    kind = P_OK;
    c.a[0] = chance(10) ? anyptr(&kind) : okptr(sizeof(*job));
    c.nodata = kind == P_BAD || kind == P_NULL || kind == P_RO;
    c.datacount = 1;
    if ((r = run(&c)) <= 0)
      continue;
    job = (struct ai_job *)c.a[0]; // the kernel wrote it: valid memory
    stop = job->count == 1 && job->tokens[0] == STOP_TOKEN;
    if (!stop)
      worker_noise(r);
    finish(r, job->predict);
  }
  ai_register(0, 0);
  send_report();
  exit(0);
}
