// The clock of a session (user/llm/profile.c): the times the timing line
// reports, and with --profile the time each part of the forward pass took
// (matmuls, attention) and the pool's statistics, printed per phase as the
// profile lines (their format atop user/llm/session.c). The layers charge
// their parts here; the session and the CLI print the lines.
#ifndef AISVC_LLM_PROFILE_H
#define AISVC_LLM_PROFILE_H

#include "kernel/include/types.h"

struct llm_timing {
  uint64 load_us, init_us;   // llm_runtime_init, llm_session_init
  uint64 matmul_us, attn_us; // --profile: time inside each part
  int profile;
};

// --profile: llm_clock() starts a span (0 when not profiling), llm_charge
// adds the time since it to *part (a field of t).
uint64 llm_clock(const struct llm_timing *t);
void llm_charge(const struct llm_timing *t, uint64 *part, uint64 since);
// --profile: the two lines of a phase that took total us for `tokens`
// tokens, from t's parts and the pool's statistics gathered since the last
// call (both then start again from 0).
void llm_profile_lines(struct llm_timing *t, const char *phase, uint64 total, int tokens);

#endif
