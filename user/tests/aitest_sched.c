// aitest's scheduling cases (part of phase 3, aitest.c): the policies
// (docs/AI_SERVICE.md section 11) with aitest as the worker: the settings
// and their bad values, each policy's order on crafted queues, aging,
// preemption (pause, resume, cancel and owner exit while paused), fair's
// bound under a flood, the step budget, and switching the policy under
// load. A simulated worker (sim_*) plans and steps as ai_daemon does, and
// counts what each tenant was served.

#include "user/tests/aitest.h"

uint32 LONGP[AI_MAX_PROMPT]; // a long prompt of small ids
struct held hs[AI_NSLOT];
int nhs;
struct ai_plan plan;
uint64 served[2]; // weighted tokens served to tenants 1 and 2 (fair)

// Sets the policy name and the step budget chunk (0: keep); ai_sched's answer.
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

// The settings at boot (fifo, both budgets AI_CHUNK_MAX); every bad value
// refused with its own code, and nothing changed.
static void
sched_bad_settings(void)
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
}

// The settings are read by anyone but set only with the worker right; a
// policy and chunk set show in the table. Leaves fifo and AI_CHUNK_MAX.
static void
sched_set_right(void)
{
  static struct ai_table_view v;
  struct ai_sched a;
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
  ai_table(&v, sizeof(v));
  result("sched: the table shows the policy and chunk",
      strcmp(v.policy, "shortest") == 0 && v.chunk == 4 && a.chunk == 4, v.chunk);
  set_sched("fifo", AI_CHUNK_MAX);
}

// A submit's tenant and priority: bad ones refused (no slot taken), the
// ones given shown in the table and carried by the job. Leaves two of our
// requests taken as the worker: *d (priority 7), then *t (tenant 77).
static void
sched_tenant(int *d, int *t)
{
  static struct ai_table_view v;
  int u = used();
  expect("bad: priority -1 (AIE_PRIORITY)", sub_tp(3, 1, 0, -1), -AIE_PRIORITY);
  expect("bad: priority above AI_PRIO_MAX", sub_tp(3, 1, 0, AI_PRIO_MAX + 1), -AIE_PRIORITY);
  expect("bad: tenant -1 (AIE_BADARG)", sub_tp(3, 1, -1, 0), -AIE_BADARG);
  expect("bad: no slot taken by refused submits", used(), u);
  *d = sub_tp(3, 1, 0, 7);
  *t = sub_tp(3, 1, 77, 0);
  ai_table(&v, sizeof(v));
  struct ai_slot_view *wd = view_of(&v, *d), *wt = view_of(&v, *t);
  result("tenant: the submitter's pid by default, else the one given; priority shown",
      wd && wt && wd->tenant == getpid() && wt->tenant == 77 && wd->priority == 7, *d);
  int r1 = take(), r2 = take();
  result("tenant: the job carries tenant and priority",
      r1 == *d && r2 == *t && job.opts.tenant == 77, job.opts.tenant);
}

// ai_plan's bad plans, for d, a 3-id request of 1 id the worker runs: each
// refused with its code, and from another process AIE_NOTWORKER.
static void
sched_bad_plans(int d)
{
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
  int st = -1, pid = fork();
  if (pid == 0)
    exit(ai_plan(&plan) == -AIE_NOTWORKER ? 0 : 1);
  result("plan: another process gets AIE_NOTWORKER", wait_for(pid, 100, &st) && st == 0, st);
}

// The settings, a submit's tenant and priority, and ai_plan's checks.
static void
sched_settings(void)
{
  int d, t;
  sched_bad_settings();
  sched_set_right();
  sched_tenant(&d, &t);
  sched_bad_plans(d);
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
// low one at the step boundary; it resumes when the high one ends, and
// again after 10 more pauses, and completes whole.
static void
preempt_place(void)
{
  static struct ai_table_view v;
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
}

// A request cancelled while paused (one place, two caches) is freed at the
// worker's next report.
static void
preempt_cancel(void)
{
  static struct ai_table_view v;
  int c1 = sub_tp(3, 30, 0, 0), c2 = sub_tp(3, 30, 0, 0);
  sim_admit(1, 2);
  sim_step(1, 2);
  int hh = sub_tp(3, 30, 0, 40);
  sim_admit(1, 2);
  sim_step(1, 2);
  ai_table(&v, sizeof(v));
  struct ai_slot_view *w = view_of(&v, c1);
  int paused = w && w->paused;
  ai_cancel(c1);
  sim_step(1, 2);
  result("preempt: cancel while paused: freed at the worker's next report",
      paused && nhs == 1 && hs[0].reqid == hh && state_of(c1) == -AIE_NOREQ, nhs);
  ai_cancel(hh);
  ai_cancel(c2);
  sim_step(1, 2);
  sim_drain(1, 2);
}

// A child's low request, paused by ours, is freed at the worker's next
// report after the child is killed.
static void
preempt_exit(void)
{
  static struct ai_table_view v;
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
  int paused = v.nbatch == 1 && nhs == 2 && plan.e[0].reqid == mh;
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
}

// Preemption under priority: pause and resume, cancel and owner exit while
// paused; no slot left used.
static void
preempt(void)
{
  set_sched("priority", 0);
  nhs = 0;
  preempt_place();
  preempt_cancel();
  preempt_exit();
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

// Every scheduling case, ending under fifo with AI_CHUNK_MAX.
void
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
