// Scheduling policy fair: fair share between tenants (struct ai_opts'
// tenant; the submitter's pid by default) by tokens served, in the manner
// of a Virtual Token Counter.
// - Each backlogged tenant (with a queued or held request) has a counter
//   of the weighted tokens it was served: AI_FAIR_WPROMPT per prompt
//   position, AI_FAIR_WGEN per generated id (charged at every ai_plan).
//   A tenant that becomes backlogged starts at the least counter of the
//   tenants backlogged already (0 if none): idle time earns no credit, and
//   a newcomer is never behind the others by more than they are behind
//   each other. A tenant with no request left is idle: its counter is no
//   floor for the others, and its entry is forgotten once a newcomer
//   needs the room. The counters start afresh when the policy is chosen.
// - key: the tenant's counter: the least served tenant's requests start
//   first (pick; ties in submit order) and get the step's prefill
//   positions first.
// - yields: a running request of tenant R gives its place to a waiting
//   one of tenant W != R when W runs at least two places fewer than R and
//   is not ahead of it (counter W <= counter R), or when W is behind R by
//   more than AI_FAIR_SLACK weighted tokens. So a tenant arriving while
//   another holds every place gets one at the next step, places are
//   shared evenly between tenants with work for them, and the slack keeps
//   two tenants from trading a place at every step.
// - whole_prompt: the most urgent request's prompt, when the step holds
//   the rest of it, runs whole; the others wait that step (ai_sched.c).
// Work-conserving: a tenant alone gets every place. Bound (checked by
// aitest on crafted floods): two tenants that stay backlogged with work
// for every place are served within AI_FAIR_SLACK + 2 x AI_CHUNK_MAX x
// AI_FAIR_WGEN weighted tokens of each other.

#include "kernel/include/types.h"
#include "kernel/include/param.h"
#include "kernel/include/spinlock.h"
#include "kernel/include/defs.h"
#include "kernel/ai/ai_table.h"

struct tenant {
  int id;
  uint64 served; // weighted tokens (the counter)
};

static struct tenant tn[AI_NSLOT]; // the backlogged tenants (ai.lock)
static int ntn;

// Whether tenant id has a queued or held request other than except.
static int
backlogged(int id, struct ai_slot *except)
{
  for (struct ai_slot *s = ai.slot; s < &ai.slot[AI_NSLOT]; s++)
    if (s != except && s->opts.tenant == id && (s->state == AI_QUEUED || s->state == AI_RUNNING))
      return 1;
  return 0;
}

// Forgets the tenants with no request left but `except`'s.
static void
forget_idle(struct ai_slot *except)
{
  int kept = 0;

  for (int i = 0; i < ntn; i++)
    if (backlogged(tn[i].id, except) || tn[i].id == except->opts.tenant)
      tn[kept++] = tn[i];
  ntn = kept;
}

// The least counter of the backlogged tenants but id, 0 if none. An idle
// tenant's entry may stay until a newcomer needs its room, but its counter
// is no floor: it would give a returning tenant credit for idle time.
static uint64
least_served(int id)
{
  uint64 least = 0;
  int any = 0;

  for (int i = 0; i < ntn; i++)
    if (tn[i].id != id && backlogged(tn[i].id, 0) && (!any || tn[i].served < least)) {
      least = tn[i].served;
      any = 1;
    }
  return least;
}

// Slot s's tenant's entry, made for it (at the least counter) if it has
// none. There is room: every entry but s's tenant's has a live request.
static struct tenant *
tenant_of(struct ai_slot *s)
{
  int id = s->opts.tenant;

  for (int i = 0; i < ntn; i++)
    if (tn[i].id == id)
      return &tn[i];
  forget_idle(s);
  tn[ntn].id = id;
  tn[ntn].served = least_served(id);
  return &tn[ntn++];
}

// Requests of tenant id that run this step.
static int
places_of(int id)
{
  int n = 0;

  for (struct ai_slot *s = ai.slot; s < &ai.slot[AI_NSLOT]; s++)
    n += s->state == AI_RUNNING && s->runner == ai.worker && !s->paused && s->opts.tenant == id;
  return n;
}

// arrive: a tenant that becomes backlogged with s starts no lower than
// the least counter of the backlogged others.
static void
fair_arrive(struct ai_slot *s)
{
  if (backlogged(s->opts.tenant, s))
    return;
  struct tenant *t = tenant_of(s);
  uint64 least = least_served(t->id);
  if (t->served < least)
    t->served = least;
}

// charge: s's tenant was served prompt positions and gen ids, weighted.
static void
fair_charge(struct ai_slot *s, int prompt, int gen)
{
  tenant_of(s)->served += (uint64)prompt * AI_FAIR_WPROMPT + (uint64)gen * AI_FAIR_WGEN;
}

// reset: the policy was chosen: every counter starts afresh.
static void
fair_reset(void)
{
  ntn = 0;
}

// pick: the least served tenant's queued request, ties in submit order.
static int
fair_pick(int places)
{
  return sched_least_queued();
}

// key: s's tenant's counter.
static int64
fair_key(struct ai_slot *s)
{
  return (int64)tenant_of(s)->served;
}

// yields: running r gives its place to waiting w of another tenant that
// runs two places fewer and is not ahead, or is behind by the slack.
static int
fair_yields(struct ai_slot *r, struct ai_slot *w)
{
  int tr = r->opts.tenant, tw = w->opts.tenant;

  if (tr == tw)
    return 0;
  uint64 cr = tenant_of(r)->served, cw = tenant_of(w)->served;
  if (places_of(tw) + 1 < places_of(tr) && cw <= cr)
    return 1;
  return cw + AI_FAIR_SLACK < cr;
}

const struct ai_policy sched_fair = {
  .name = "fair",
  .whole_prompt = 1,
  .pick = fair_pick,
  .key = fair_key,
  .yields = fair_yields,
  .arrive = fair_arrive,
  .charge = fair_charge,
  .reset = fair_reset,
};
