// Scheduling policy shortest: least remaining work first, as a skip-join
// multi-level feedback queue with aging.
// - Remaining work: prompt positions still to run plus ids still to
//   generate (at most; a stop id may end a request sooner). Its level is
//   its bit length (1..9 for the 510 positions a request has at most): a
//   request enters at the level of its size, not at the top (skip-join,
//   so a long prompt never passes through the levels meant for short
//   ones), and rises a level each time its remaining work halves.
// - key: submit time + AI_SHORT_US << level, lower first: within a level,
//   first come first served; between levels, a request of level l is
//   worth a wait of AI_SHORT_US << l, so a long request is passed only by
//   the shorter requests that arrive while it is young (aging).
// - pick: the queued request with the least key; ties in submit order.
// - The step's order is the key's: the shortest request's prefill gets
//   the step's positions first, so a short prompt behind a long one runs
//   in one step, not one position per step.
// - yields: a running request gives its place to a waiting one with a
//   lower key. A running request's key only falls, a waiting one's never
//   changes, so a swap is never undone before the newcomer ran.
// - whole_prompt: the most urgent request's prompt, when the step holds
//   the rest of it, runs whole; the others wait that step (ai_sched.c).
// Work-conserving. Starvation bound: a request submitted at t with
// remaining work R ranks before every request submitted after
// t + AI_SHORT_US << bitlen(R) (at most 5.12 s after, for R < 512).

#include "kernel/include/types.h"
#include "kernel/include/param.h"
#include "kernel/include/spinlock.h"
#include "kernel/include/defs.h"
#include "kernel/ai/ai_table.h"

// Prompt positions still to run plus ids still to generate.
static int
remaining(struct ai_slot *s)
{
  int prompt = s->fed < s->count ? s->count - s->fed : 0;

  return prompt + s->predict - s->tokens;
}

// The bit length of n >= 0.
static int
bitlen(int n)
{
  int l = 0;

  for (; n > 0; n >>= 1)
    l++;
  return l;
}

// pick: the queued request with the least key, ties in submit order.
static int
shortest_pick(int places)
{
  return sched_least_queued();
}

// key: submit time + AI_SHORT_US << the bit length of the remaining work.
static int64
shortest_key(struct ai_slot *s)
{
  return (int64)s->submit_time + ((int64)AI_SHORT_US << bitlen(remaining(s)));
}

// yields: to a waiting request that ranks first.
static int
shortest_yields(struct ai_slot *r, struct ai_slot *w)
{
  return slot_first(w, r);
}

const struct ai_policy sched_shortest = {
  .name = "shortest",
  .whole_prompt = 1,
  .pick = shortest_pick,
  .key = shortest_key,
  .yields = shortest_yields,
};
