// Choosing the next token from the logits (user/llm/sample.c): greedy, or
// sampled with temperature, top-k and top-p from a seeded generator, so
// that a seed always gives the same ids, equal to pyaisvc/sampling.py's.
#ifndef AISVC_LLM_SAMPLE_H
#define AISVC_LLM_SAMPLE_H

#include "kernel/include/types.h"

#define LLM_MAX_STOP 8 // --stop ids per run

struct llm_sampler {
  double temp;  // 0: greedy (the first maximum), else the temperature
  int top_k;    // keep the k most likely ids (0: the whole vocabulary)
  double top_p; // then the fewest whose weights reach top_p of the total
  uint64 seed;  // the generator restarts from it at every request
  int stop[LLM_MAX_STOP];
  int nstop;   // generation ends after any of stop[0..nstop) is chosen
  uint64 rng;  // the generator's state
  int *cand;   // (vocab) candidate ids, best first
  uint64 *cum; // (vocab) their cumulative integer weights
};

// Allocate the workspace for a vocabulary of vocab ids. Returns 0, or -1
// if out of memory.
int llm_sampler_alloc(struct llm_sampler *sp, int vocab);
void llm_sampler_free(struct llm_sampler *sp);

// Restart the generator from the seed (at the start of each request).
void llm_sampler_reset(struct llm_sampler *sp);

// A token drawn from the logits by the rule atop sample.c (sp->temp > 0;
// greedy choice is llm_head's).
int llm_sample(struct llm_sampler *sp, const double *logits, int vocab);

// Is id one of sp's stop ids? (0 when sp is 0)
int llm_is_stop(const struct llm_sampler *sp, int id);

#endif
