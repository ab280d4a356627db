// The AI service's scheduler: who runs first (docs/AI_SERVICE.md section
// 10, docs/SCHEDULING.md the lab). A policy makes three decisions through
// one small table of functions (struct ai_policy, ai_table.h), one file
// each (sched_fifo.c, sched_priority.c, sched_shortest.c, sched_fair.c):
//   - pick: which queued request the worker starts next (ai_next, ai_take);
//   - key: the rank of the worker's requests, lower first: the step's
//     order, in which requests in prefill share the step's positions (the
//     worker's chunk plan, user/llm/session.c, takes them in this order);
//   - yields: whether a running request gives its place to a waiting one.
// This file applies them; the policies know nothing of the worker.
//
// The worker holds more requests than it runs at once: a KV cache each
// (ai_plan's caches, one per slot it may hold, memory permitting) for at
// most `places` running ones (ai_plan's places, ai_take's). Before every
// step it calls ai_plan with the requests it holds and how far each is
// (positions fed); the kernel charges what was served since the last plan
// to the policy (charge), then chooses the W = min(places, chunk)
// requests that run this step:
//   1. those that ran last step keep running, the least urgent (highest
//      key) paused first while more than W run (the budget was lowered);
//   2. paused ones resume, most urgent first, while fewer than W run:
//      no place stays empty while a held request waits (work-conserving);
//   3. while a paused request finds a running one that yields to it, the
//      two swap: the running one is paused at this iteration boundary. It
//      keeps its slot (RUNNING, paused) and the worker keeps its KV cache,
//      so it resumes where it stopped and its ids are those it gets alone.
// and answers them in rank order (the running ones first). A policy with
// whole_prompt set lets its most urgent request finish a prompt that fits
// in the step at once: when that request is in prefill with at most chunk
// positions left, only as many of the others run this step as positions
// remain (in rank order; the rest wait one step, not paused): a short
// request then gets its first id after one step, not one position per step
// behind the decoders, and a decoder waits one step for each such request.
//
// The prompt budget (prefill < chunk) bounds what a step costs a decoder:
// in a step in which some running request decodes (its prompt all run),
// the requests in prefill share at most prefill positions, so the first
// prefill of them in rank order run and the others wait that step (not
// paused); the step runs at most min(chunk, decoders + prefill)
// positions. A step's time grows with its positions under QEMU
// (docs/PERF_NOTES.md, "a decoder's gap is the step's positions"), so a
// decoder's time between ids then grows by at most prefill positions'
// time while a long prompt is fed, which is fed that much slower: the
// lab's trade between time between tokens and first-token time. A whole
// prompt (above) is not bounded so.
//
// ai_take starts a queued request while the worker holds fewer than W
// requests: a place a paused request will take back at the next plan is
// not free, so a paused request resumes however full the queue stays, and
// after a switch (a lower budget, another policy) the held requests run
// before new ones. Beyond that, while the worker has a free cache, it
// starts one only if some held request yields to it: it then starts
// paused, and the next plan swaps it in.
//
// The settings (ai_sched): the policy, fifo at boot (init passes the boot
// argument aisched=NAME), the step budget, chunk positions per step,
// AI_CHUNK_MAX at boot (aichunk=N), and the prompt budget, AI_CHUNK_MAX
// (no bound but the step's) at boot (aiprefill=N). Anyone reads them;
// only the holder of the AI worker right sets them. A switch takes effect at the next
// decision: queued requests stay queued, held ones held, none is lost;
// the new policy starts its own accounting (reset).

#include "kernel/include/types.h"
#include "kernel/include/param.h"
#include "kernel/include/riscv.h"
#include "kernel/include/spinlock.h"
#include "kernel/include/proc.h"
#include "kernel/include/defs.h"
#include "kernel/ai/ai_table.h"

static const struct ai_policy *policies[] = { &sched_fifo, &sched_priority, &sched_shortest,
  &sched_fair };

// The queued slot that runs first (slot_first), or -1 if none is queued.
int
sched_least_queued(void)
{
  int best = -1;

  for (int k = 0; k < ai.nqueued; k++) {
    int i = fifo_at(k);
    if (best < 0 || slot_first(&ai.slot[i], &ai.slot[best]))
      best = i;
  }
  return best;
}

// Whether slot s is held by the registered worker.
static int
held(struct ai_slot *s)
{
  return s->state == AI_RUNNING && s->runner == ai.worker;
}

// The requests the worker holds, running or paused.
static int
held_count(void)
{
  int n = 0;

  for (struct ai_slot *s = ai.slot; s < &ai.slot[AI_NSLOT]; s++)
    n += held(s);
  return n;
}

// The requests run at once by a worker with `places` places.
static int
width(int places)
{
  return places < ai.chunk ? places : ai.chunk;
}

// ai_take's choice for a worker with `places` places: the queued slot to
// start, or -1; *paused says whether it starts paused (the design comment
// above). A place the worker's held requests do not fill is free; one
// that a paused request will take back at the next plan is not, so a
// paused request resumes however many wait in the queue.
int
sched_take(int places, int *paused)
{
  int all, i = ai.policy->pick(places);

  if (i < 0)
    return -1;
  all = held_count();
  *paused = 0;
  if (all < width(places))
    return i;
  if (all >= ai.caches)
    return -1;
  for (struct ai_slot *r = ai.slot; r < &ai.slot[AI_NSLOT]; r++)
    if (held(r) && ai.policy->yields(r, &ai.slot[i])) {
      *paused = 1;
      return i;
    }
  return -1;
}

// ---------------------------------------------------------------- the plan

// The most urgent (want_first) or least urgent of s[0..n) with paused ==
// p, or -1.
static int
extreme(struct ai_slot **s, int n, int p, int want_first)
{
  int x = -1;

  for (int k = 0; k < n; k++)
    if (s[k]->paused == p && (x < 0 || slot_first(s[k], s[x]) == want_first))
      x = k;
  return x;
}

// Pauses running s at this step boundary, counting it (slot and table).
static void
plan_pause(struct ai_slot *s)
{
  s->paused = 1;
  s->pauses++;
  ai.pauses++;
}

// A paused request of s[0..n) that a running one yields to: swaps the
// two, the least urgent such running one paused. Returns 1 if it did.
static int
swap_one(struct ai_slot **s, int n)
{
  for (int w = 0; w < n; w++) {
    if (!s[w]->paused)
      continue;
    int r = -1;
    for (int k = 0; k < n; k++)
      if (!s[k]->paused && ai.policy->yields(s[k], s[w]) && (r < 0 || slot_first(s[r], s[k])))
        r = k;
    if (r >= 0) {
      plan_pause(s[r]);
      s[w]->paused = 0;
      return 1;
    }
  }
  return 0;
}

// Steps 1-3 of the design comment on the worker's requests s[0..n), for
// W running at most.
static void
choose(struct ai_slot **s, int n, int W)
{
  int running = 0, k;

  for (k = 0; k < n; k++)
    running += !s[k]->paused;
  for (; running > W; running--)
    plan_pause(s[extreme(s, n, 0, 0)]);
  for (; running < W && (k = extreme(s, n, 1, 1)) >= 0; running++)
    s[k]->paused = 0;
  for (int swaps = 0; swaps < AI_NSLOT && swap_one(s, n); swaps++)
    ;
}

// Sorts s[0..n) (and e[] with it): running ones first, each part in rank
// order. n <= AI_NSLOT: insertion sort.
static void
order(struct ai_slot **s, struct ai_plan_entry *e, int n)
{
  for (int i = 1; i < n; i++)
    for (int k = i; k > 0; k--) {
      struct ai_slot *a = s[k - 1], *b = s[k];
      int before = a->paused != b->paused ? b->paused < a->paused : slot_first(b, a);
      if (!before)
        break;
      s[k - 1] = b;
      s[k] = a;
      struct ai_plan_entry t = e[k - 1];
      e[k - 1] = e[k];
      e[k] = t;
    }
}

// Whether slot s is in prefill: some of its prompt is still to run.
static int
in_prefill(struct ai_slot *s)
{
  return s->fed < s->count;
}

// Under whole_prompt, when the first of the running s[0..running) (rank
// order) is in prefill with at most chunk left: how many run this step,
// it and as many others as positions remain after its prompt. Else -1.
static int
whole_prompt_count(struct ai_slot **s, int running)
{
  if (!ai.policy->whole_prompt || running == 0 || !in_prefill(s[0]))
    return -1;
  int left = ai.chunk - (s[0]->count - s[0]->fed);
  if (left < 0)
    return -1;
  return 1 + (running - 1 < left ? running - 1 : left);
}

// The prompt budget (the design comment) on the running s[0..running)
// and their entries e[]: when some of them decode, the requests in
// prefill past the first ai.prefill (rank order) move after the others,
// which keep their order, and *chunk (the step's positions) is lowered to
// the decoders' and the budget's. Returns how many run this step.
static int
prompt_budget(struct ai_slot **s, struct ai_plan_entry *e, int running, int *chunk)
{
  struct ai_slot *wait_s[AI_NSLOT];
  struct ai_plan_entry wait_e[AI_NSLOT];
  int decoding = 0, prompts = 0, run = 0, nwait = 0;

  for (int k = 0; k < running; k++)
    decoding += !in_prefill(s[k]);
  if (decoding == 0 || ai.prefill >= ai.chunk)
    return running;
  for (int k = 0; k < running; k++) {
    if (in_prefill(s[k]) && prompts++ >= ai.prefill) {
      wait_s[nwait] = s[k];
      wait_e[nwait++] = e[k];
    } else {
      s[run] = s[k];
      e[run++] = e[k];
    }
  }
  for (int k = 0; k < nwait; k++) {
    s[run + k] = wait_s[k];
    e[run + k] = wait_e[k];
  }
  if (decoding + ai.prefill < *chunk)
    *chunk = decoding + ai.prefill;
  return run;
}

// Checks plan p's entries (requests the calling worker runs, each once,
// progress that only grows) and fills s[] with their slots. Returns 0 or a
// negative code.
static int
plan_check(struct ai_plan *p, struct ai_slot **s)
{
  int err = 0;

  if (p->places < 1 || p->caches < p->places || p->n < 0 || p->n > AI_NSLOT)
    return -AIE_BADARG;
  for (int k = 0; k < p->n; k++) {
    if ((s[k] = slot_running(p->e[k].reqid, &err)) == 0)
      return err;
    for (int j = 0; j < k; j++)
      if (s[j] == s[k])
        return -AIE_BADARG;
    if (p->e[k].fed < s[k]->fed || p->e[k].fed > s[k]->count + s[k]->predict)
      return -AIE_BADARG;
  }
  return 0;
}

// What each request was served since the last plan goes to the policy.
static void
plan_charge(struct ai_plan *p, struct ai_slot **s)
{
  for (int k = 0; k < p->n; k++) {
    int was = s[k]->fed, now = p->e[k].fed, n = s[k]->count;
    int prompt = (now < n ? now : n) - (was < n ? was : n);
    if (ai.policy->charge)
      ai.policy->charge(s[k], prompt, now - was - prompt);
    s[k]->fed = now;
  }
}

// Worker only: the plan of its next step (struct ai_plan) at user address
// dst, in and out. Returns 0, or -AIE_FAULT, -AIE_NOTWORKER, -AIE_NOREQ
// (an entry it does not run), -AIE_BADARG.
int
ai_plan(uint64 dst)
{
  struct ai_plan p; // 150 bytes of the kernel stack
  struct ai_slot *s[AI_NSLOT];
  pagetable_t pt = myproc()->pagetable;

  if (copyin(pt, (char *)&p, dst, sizeof(p)) < 0)
    return -AIE_FAULT;
  acquire(&ai.lock);
  int err = ai.worker != myproc()->pid ? -AIE_NOTWORKER : plan_check(&p, s);
  if (err == 0) {
    ai.caches = p.caches;
    plan_charge(&p, s);
    choose(s, p.n, width(p.places));
    order(s, p.e, p.n);
    int running = 0, whole;
    while (running < p.n && !s[running]->paused)
      running++;
    p.chunk = ai.chunk;
    if ((whole = whole_prompt_count(s, running)) >= 0)
      p.run = whole;
    else
      p.run = prompt_budget(s, p.e, running, &p.chunk);
  }
  release(&ai.lock);
  if (err == 0 && copyout(pt, dst, (char *)&p, sizeof(p)) < 0)
    err = -AIE_FAULT;
  return err;
}

// ---------------------------------------------------------------- settings

// The policy named name (NUL-terminated), or 0.
static const struct ai_policy *
policy_named(const char *name)
{
  for (int i = 0; i < NELEM(policies); i++)
    if (strncmp(policies[i]->name, name, AI_POLICY_LEN) == 0)
      return policies[i];
  return 0;
}

// Applies the settings at user address u (struct ai_sched: a policy
// name, "" to keep it; a chunk and a prompt budget, 0 to keep each),
// which needs the AI worker right, and writes the settings in force back
// there. Returns 0, or -AIE_FAULT, -AIE_PERM, -AIE_POLICY, -AIE_CHUNK
// (either budget out of range); nothing changes unless all is well.
int
ai_sched(uint64 u)
{
  struct ai_sched in;
  const struct ai_policy *pol = 0;
  pagetable_t pt = myproc()->pagetable;

  if (copyin(pt, (char *)&in, u, sizeof(in)) < 0)
    return -AIE_FAULT;
  in.policy[AI_POLICY_LEN - 1] = 0;
  if ((in.policy[0] != 0 || in.chunk != 0 || in.prefill != 0) && !myprocess()->ai_right)
    return -AIE_PERM;
  if (in.policy[0] != 0 && (pol = policy_named(in.policy)) == 0)
    return -AIE_POLICY;
  if (in.chunk < 0 || in.chunk > AI_CHUNK_MAX || in.prefill < 0 || in.prefill > AI_CHUNK_MAX)
    return -AIE_CHUNK;
  acquire(&ai.lock);
  if (pol != 0 && pol != ai.policy) {
    ai.policy = pol;
    if (pol->reset)
      pol->reset();
  }
  if (in.chunk != 0)
    ai.chunk = in.chunk;
  if (in.prefill != 0)
    ai.prefill = in.prefill;
  safestrcpy(in.policy, ai.policy->name, sizeof(in.policy));
  in.chunk = ai.chunk;
  in.prefill = ai.prefill;
  release(&ai.lock);
  if (copyout(pt, u, (char *)&in, sizeof(in)) < 0)
    return -AIE_FAULT;
  return 0;
}
