// aitest's cases of the window per tenant and of paused requests under a
// full queue (docs/AI_SERVICE.md rule 6 and section 11), with aitest as
// the worker (user/tests/aitest.c runs them in its scheduling phase):
// - the bound of live requests applies per process and tenant: one
//   process may own AI_PERPROC per tenant, up to the table's AI_NSLOT,
//   and the two refusals (the tenant's bound, the table full) have codes
//   of their own;
// - a paused request resumes while the queue stays full, under every
//   policy, after the step budget fell under 8 running requests;
// - fair gives a returning tenant no credit for another's idle time.

#include "user/lib/user.h"
#include "kernel/include/aisvc.h"
#include "user/tests/aitest.h"

// Cancels every request aitest submitted (queued ones are freed at once).
static void
cancel_mine(void)
{
  for (int i = 0; i < nmine; i++)
    ai_cancel(mine[i]);
  nmine = 0;
}

// The window per tenant: AI_PERPROC requests for tenant 1, one more
// refused with AIE_WOULDBLOCK; another tenant's still accepted up to the
// full table, which then answers AIE_FULL at once; requests that name no
// tenant and those that name the caller's pid are one tenant.
void
tenant_window(void)
{
  int ok = 1, own = getpid();
  set_sched("fifo", AI_CHUNK_MAX);
  for (int k = 0; k < AI_PERPROC; k++)
    ok = ok && sub_tp(3, 1, 1, 0) > 0;
  result("window: AI_PERPROC live requests for one tenant", ok, nmine);
  expect(
      "window: one more for that tenant gets AIE_WOULDBLOCK", sub_tp(3, 1, 1, 0), -AIE_WOULDBLOCK);
  for (int k = 0; k < AI_NSLOT - AI_PERPROC; k++)
    ok = ok && sub_tp(3, 1, 2, 0) > 0;
  result("window: another tenant's requests of the same process fill the table",
      ok && used() == AI_NSLOT, used());
  uint64 t0 = time_us();
  int r = sub_tp(3, 1, 3, 0);
  result("window: the full table answers AIE_FULL at once, to an owner of requests",
      r == -AIE_FULL && time_us() - t0 < 1000000, r);
  cancel_mine();
  ok = 1;
  for (int k = 0; k < AI_PERPROC; k++)
    ok = ok && sub_tp(3, 1, k % 2 ? own : 0, 0) > 0;
  expect("window: no tenant and the caller's pid are one tenant", ok ? sub_tp(3, 1, 0, 0) : 0,
      -AIE_WOULDBLOCK);
  cancel_mine();
  expect("window: the table empty again", wait_used(0, 100), 0);
}

// Requests of t[0..n) that are still live.
static int
live_of(const int *t, int n)
{
  int k = 0;
  for (int i = 0; i < n; i++)
    k += state_of(t[i]) > 0;
  return k;
}

// A child that keeps AI_PERPROC requests of tenant 1 queued (predict ids
// each): it waits for each in turn and submits it again, until killed.
static int
queue_keeper(int predict)
{
  int pid = fork();
  if (pid != 0)
    return pid;
  struct ai_opts o;
  int r[AI_PERPROC];
  memset(&o, 0, sizeof(o));
  o.tenant = 1;
  for (int i = 0; i < AI_PERPROC; i++)
    r[i] = ai_submit_opts(LONGP, 1, predict, &o);
  for (int i = 0;; i = (i + 1) % AI_PERPROC) {
    ai_wait(r[i], buf, sizeof(buf));
    r[i] = ai_submit_opts(LONGP, 1, predict, &o);
  }
}

// Under policy: 8 requests of tenant 1 run on 8 places; the step budget
// drops to 2 (`ai sched POLICY 2` while 8 run), which pauses 6 of them,
// while a child keeps 8 more of tenant 1 queued, the table full. Every one
// of the 8 must resume and end within a bound of steps (8 requests of 7
// positions on 2 places, twice over), however full the queue stays.
void
resume_full(const char *policy)
{
  int t1[AI_PERPROC], pred = 6, steps, full = 0;
  char name[96];
  set_sched(policy, AI_CHUNK_MAX);
  nhs = 0;
  for (int k = 0; k < AI_PERPROC; k++)
    t1[k] = sub_tp(1, pred, 1, 0);
  sim_admit(8, 9);
  sim_step(8, 9);
  set_sched(policy, 2);
  int keeper = queue_keeper(pred);
  for (int k = 0; k < 100 && used() < AI_NSLOT; k++) // its 8 queued
    sleep(1);
  for (steps = 0; steps < AI_PERPROC * (1 + pred) + 20 && live_of(t1, AI_PERPROC) > 0; steps++) {
    full |= used() == AI_NSLOT;
    sim_admit(8, 9);
    sim_step(8, 9);
    collect();
  }
  snprintf(name, sizeof(name),
      "resume: %s: 6 paused by a budget of 2 all resume and end while the queue stays full",
      policy);
  result(name, full && live_of(t1, AI_PERPROC) == 0, live_of(t1, AI_PERPROC));
  stop(keeper);
  set_sched(policy, AI_CHUNK_MAX);
  sim_drain(8, 9);
  snprintf(name, sizeof(name), "resume: %s: the table empty again", policy);
  expect(name, wait_used(0, 100), 0);
}

// Fair and a returning tenant: tenants 2 and 3 are served a little beside
// tenant 1 and go idle; tenant 1 is served on. Tenant 2 returns with 4
// requests: it starts at tenant 1's counter, not at idle tenant 3's, so
// the two stay within fair's bound of each other from then on.
void
fair_return(void)
{
  int places = 4, caches = 8, worst = 0, pred = seqlen - 2 < 60 ? seqlen - 2 : 60;
  set_sched("fair", AI_CHUNK_MAX);
  nhs = 0;
  for (int k = 0; k < 4; k++)
    sub_tp(1, pred, 1, 0);
  sim_admit(places, caches);
  sim_step(places, caches);
  int b = sub_tp(1, 2, 2, 0), c = sub_tp(1, 2, 3, 0);
  for (int k = 0; k < 100 && (state_of(b) != AI_DONE || state_of(c) != AI_DONE); k++) {
    sim_admit(places, caches);
    sim_step(places, caches);
  }
  collect();
  for (int k = 0; k < pred / 2; k++) // tenant 1 alone: its counter grows
    sim_step(places, caches);
  uint64 a0 = served[0];
  served[1] = 0;
  for (int k = 0; k < 4; k++)
    sub_tp(1, pred / 2, 2, 0);
  int ok = fair_gap(places, caches, a0, &worst);
  printf("fair: a returning tenant: largest service difference %d weighted tokens\n", worst);
  result("fair: a returning tenant starts at the backlogged tenants' least counter, not an idle "
         "one's",
      ok, worst);
  collect();
  expect("fair: returning: the table empty again", wait_used(0, 100), 0);
}
