// Choosing the next token from the logits (user/llm/sample.c): greedy, or
// sampled with temperature, top-k and top-p from a seeded generator, after
// optional penalties and biases, so that a seed always gives the same ids,
// equal to pyaisvc/model/sampling.py's; and, on request, each id's
// log-probability with the most likely alternatives.
#ifndef AISVC_LLM_SAMPLE_H
#define AISVC_LLM_SAMPLE_H

#include "kernel/include/types.h"

#define LLM_MAX_STOP  8       // --stop ids per run
#define LLM_MAX_BIAS  8       // --logit-bias pairs per run (AI_MAX_BIAS for the service)
#define LLM_MAX_TOPLP 5       // most alternatives a log-probability record lists
#define LLM_MICRO     1000000 // 1.0 in the penalties' and biases' millionths

// One generated id's log-probabilities under the model's own distribution
// (the raw logits: before penalties, biases, temperature, top-k, top-p).
struct llm_logprob {
  int id;                    // the generated id
  double lp;                 // its log-probability
  int ntop;                  // entries in top_id, top_lp (the sampler's top_logprobs)
  int top_id[LLM_MAX_TOPLP]; // the most likely ids, best first (ties: lower id first)
  double top_lp[LLM_MAX_TOPLP];
};

struct llm_sampler {
  double temp;  // 0: greedy (the first maximum), else the temperature
  int top_k;    // keep the k most likely ids (0: the whole vocabulary)
  double top_p; // then the fewest whose weights reach top_p of the total
  uint64 seed;  // the generator restarts from it at every request
  int stop[LLM_MAX_STOP];
  int nstop; // generation ends after any of stop[0..nstop) is chosen
  // penalties and biases, in millionths (rule 0 atop sample.c)
  int64 presence_micro, frequency_micro;
  int nbias;
  int bias_id[LLM_MAX_BIAS];
  int64 bias_micro[LLM_MAX_BIAS];
  int logprobs;            // 1: fill `last` for every id chosen
  int top_logprobs;        // 0..LLM_MAX_TOPLP alternatives in it
  struct llm_logprob last; // the record of the latest id (logprobs)
  uint64 rng;              // the generator's state
  int *cand;               // (vocab) candidate ids, best first
  uint64 *cum;             // (vocab) their cumulative integer weights
  double *adj;             // (vocab) the logits after penalties and biases
};

// Allocate the workspace for a vocabulary of vocab ids. Returns 0, or -1
// if out of memory.
int llm_sampler_alloc(struct llm_sampler *sp, int vocab);
void llm_sampler_free(struct llm_sampler *sp);
// Does sp need the workspace (sampling, penalties, biases or logprobs)?
int llm_sampler_needs_work(const struct llm_sampler *sp);

// Restart the generator from the seed (at the start of each request).
void llm_sampler_reset(struct llm_sampler *sp);

// A token drawn from the logits by the rule atop sample.c (sp->temp > 0;
// greedy choice is llm_head's).
int llm_sample(struct llm_sampler *sp, const double *logits, int vocab);

// The next id of a request whose ids generated so far are gen[0..ngen),
// from the raw logits of its position (not changed), greedy being the
// head's choice: the rule atop sample.c with sp's options (sp 0: greedy).
// With sp->logprobs, sp->last describes the id returned. sp's workspace
// must be allocated when llm_sampler_needs_work(sp).
int llm_sampler_next(
    struct llm_sampler *sp, const double *logits, int vocab, int greedy, const int *gen, int ngen);

// lp in millionths, rounded to nearest (ties to even), clamped to int32:
// how log-probabilities leave the runtime (printed, or to the AI service).
int llm_lp_micro(double lp);

// Is id one of sp's stop ids? (0 when sp is 0)
int llm_is_stop(const struct llm_sampler *sp, int id);

#endif
