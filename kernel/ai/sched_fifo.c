// Scheduling policy fifo (the default): first come, first served, with a
// cap per process while others wait.
// - pick: the oldest queued request whose owner runs fewer than half the
//   worker's places (at least 1), else the oldest: one process gets more
//   than half the places only while nobody else's request waits. With no
//   limit given (ai_next, nothing running), the oldest.
// - key: the order of starting: the step's prefill positions go to the
//   request that started first, one position left for each later one.
// - yields: never: a started request keeps its place to its end, and
//   the worker never holds more requests than it runs.
// Work-conserving; a queued request waits only for those ahead of it in
// the FIFO (and passes a process's requests beyond the cap).

#include "kernel/include/types.h"
#include "kernel/include/param.h"
#include "kernel/include/spinlock.h"
#include "kernel/include/defs.h"
#include "kernel/ai/ai_table.h"

// pick: the oldest queued request whose owner runs fewer than half the
// places, else the oldest (with no limit given, the oldest).
static int
fifo_pick(int places)
{
  int cap = places / 2 > 1 ? places / 2 : 1;

  if (places == 0)
    return fifo_oldest();
  for (int k = 0; k < ai.nqueued; k++) {
    int i = fifo_at(k);
    if (running_count(ai.slot[i].owner) < cap)
      return i;
  }
  return fifo_oldest();
}

// key: the start order.
static int64
fifo_key(struct ai_slot *s)
{
  return (int64)s->started;
}

// yields: never.
static int
fifo_yields(struct ai_slot *r, struct ai_slot *w)
{
  return 0;
}

const struct ai_policy sched_fifo = {
  .name = "fifo",
  .pick = fifo_pick,
  .key = fifo_key,
  .yields = fifo_yields,
};
