// The clock of a session: spans charged to the forward pass's parts, and
// the profile lines of a phase (profile.h; the lines' format atop
// user/llm/session.c). The layers charge their parts here and the session
// and the CLI print the lines; this file calls only the thread pool, for
// its statistics.

#include "user/lib/user.h"
#include "user/llm/loader.h"
#include "user/llm/pool.h"
#include "user/llm/profile.h"

// (contracts in user/llm/profile.h)
uint64
llm_clock(const struct llm_timing *t)
{
  return t->profile ? time_us() : 0;
}

void
llm_charge(const struct llm_timing *t, uint64 *part, uint64 since)
{
  if (t->profile)
    *part += time_us() - since;
}

// (contract in user/llm/profile.h)
void
llm_profile_lines(struct llm_timing *t, const char *phase, uint64 total, int tokens)
{
  uint64 known = t->matmul_us + t->attn_us;
  fprintf(2, "%s: profile phase=%s matmul_us=%lu attn_us=%lu other_us=%lu tokens=%d\n", llm_prog,
      phase, t->matmul_us, t->attn_us, total > known ? total - known : 0, tokens);
  t->matmul_us = t->attn_us = 0;
  struct llm_pool_stats st;
  llm_pool_take_stats(&st);
  char busy[16 * LLM_MAX_THREADS], wait[16 * LLM_MAX_THREADS], sleeps[16 * LLM_MAX_THREADS];
  int nb = 0, nw = 0, ns = 0, n = llm_pool_threads();
  for (int i = 0; i < n; i++) {
    nb += snprintf(busy + nb, sizeof(busy) - nb, i ? ",%lu" : "%lu", st.busy_us[i]);
    nw += snprintf(wait + nw, sizeof(wait) - nw, i ? ",%lu" : "%lu", st.wait_us[i]);
    ns += snprintf(sleeps + ns, sizeof(sleeps) - ns, i ? ",%lu" : "%lu", st.sleeps[i]);
  }
  fprintf(2,
      "%s: profile phase=%s threads=%d steps=%lu busy_us=%s wait_us=%s sleeps=%s serial_us=%lu\n",
      llm_prog, phase, n, st.steps, busy, wait, sleeps, st.serial_us);
}
