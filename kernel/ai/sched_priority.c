// Scheduling policy priority: the highest priority first (struct ai_opts'
// priority, 0..AI_PRIO_MAX), with aging so nothing waits without bound.
// - key: submit time - priority x AI_AGING_US, lower first: a request's
//   effective priority is its priority plus its age in units of
//   AI_AGING_US, so waiting raises it; the key never changes.
// - pick: the queued request with the least key; ties in submit order.
// - key is also the step's order: prefill positions go to the most
//   urgent first.
// - yields: a running request gives its place to a waiting one with a
//   lower key (the worker has a free KV cache to hold both): keys are
//   fixed, so two requests never trade places back and forth.
// - whole_prompt: the most urgent request's prompt, when the step holds
//   the rest of it, runs whole; the others wait that step (ai_sched.c).
// Work-conserving (the plan fills every place). Starvation bound: a
// request of priority p submitted at t ranks before every request
// submitted after t + (AI_PRIO_MAX - p) x AI_AGING_US, whatever its
// priority: from then on it waits only for the finitely many requests
// that were submitted before that instant.

#include "kernel/include/types.h"
#include "kernel/include/param.h"
#include "kernel/include/spinlock.h"
#include "kernel/include/defs.h"
#include "kernel/ai/ai_table.h"

// pick: the queued request with the least key, ties in submit order.
static int
priority_pick(int places)
{
  return sched_least_queued();
}

// key: submit time - priority x AI_AGING_US.
static int64
priority_key(struct ai_slot *s)
{
  return (int64)s->submit_time - (int64)s->opts.priority * AI_AGING_US;
}

// yields: to a waiting request that ranks first.
static int
priority_yields(struct ai_slot *r, struct ai_slot *w)
{
  return slot_first(w, r);
}

const struct ai_policy sched_priority = {
  .name = "priority",
  .whole_prompt = 1,
  .pick = priority_pick,
  .key = priority_key,
  .yields = priority_yields,
};
