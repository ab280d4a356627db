// Choosing the next token. Greedy (the default) is the first index of the
// largest logit, as the runtime always did. With a temperature T > 0 the
// token is drawn, and every step below is exact, so that a seed gives the
// same ids as pyaisvc/sampling.py given the same logits (and the guest's
// logits equal the reference's bit for bit, docs/ARITHMETIC.md):
//
//  1. Order: id a comes before id b when logit[a] > logit[b], or when they
//     are equal and a < b (ties go to the lower id). The top_k first ids
//     are the candidates (top_k 0: all), best first.
//  2. Weights: w_i = exp((logit_i - logit_best) / T) with our exp
//     (kernels.c, the reference's polynomial), then the integer
//     W_i = floor(w_i * 2^32) (the best gets exactly 2^32). From here on
//     everything is integer: no float rounding can change a choice.
//  3. Top-p: with C_i the cumulative sums of W in candidate order and
//     C the last, keep the fewest candidates whose C_i reaches
//     ceil(top_p * C) (top_p * C a double; top_p 1 keeps all).
//  4. Draw: r = next() mod C_kept, where next() is the generator below;
//     the token is the first candidate with C_i > r. (The modulo's bias
//     is below 2^-14 and the same on both sides.)
//
// The generator is splitmix64 over a 64-bit state that starts at the seed
// for every request: add 0x9E3779B97F4A7C15, then mix the sum with two
// xor-shift-multiply rounds and a final xor-shift. One draw per token.
// Its output is well spread for any seed, including 0 and small ones.

#include "user/lib/user.h"
#include "user/llm/kernels.h"
#include "user/llm/sample.h"

int
llm_sampler_alloc(struct llm_sampler *sp, int vocab)
{
  sp->cand = malloc(vocab * sizeof(int));
  sp->cum = malloc(vocab * sizeof(uint64));
  if (sp->cand == 0 || sp->cum == 0) {
    llm_sampler_free(sp);
    return -1;
  }
  return 0;
}

void
llm_sampler_free(struct llm_sampler *sp)
{
  free(sp->cand);
  free(sp->cum);
  sp->cand = 0;
  sp->cum = 0;
}

void
llm_sampler_reset(struct llm_sampler *sp)
{
  sp->rng = sp->seed;
}

// The generator's next 64 bits.
static uint64
next_rand(struct llm_sampler *sp)
{
  uint64 z = (sp->rng += 0x9E3779B97F4A7C15UL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9UL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBUL;
  return z ^ (z >> 31);
}

// Does id a come before id b (step 1)?
static int
before(const double *l, int a, int b)
{
  return l[a] > l[b] || (l[a] == l[b] && a < b);
}

// Restore the heap h[0..n) below slot i: every parent comes after its
// children, so h[0] is the last of the kept candidates.
static void
sift_down(const double *l, int *h, int n, int i)
{
  for (;;) {
    int c = 2 * i + 1;
    if (c >= n)
      return;
    if (c + 1 < n && before(l, h[c], h[c + 1]))
      c++;
    if (!before(l, h[i], h[c]))
      return;
    int t = h[i];
    h[i] = h[c];
    h[c] = t;
    i = c;
  }
}

// The k first ids of the order into cand[0..k), best first: a heap of
// the k best so far, then sorted in place.
static void
top_candidates(const double *l, int vocab, int *cand, int k)
{
  for (int i = 0; i < k; i++)
    cand[i] = i;
  for (int i = k / 2 - 1; i >= 0; i--)
    sift_down(l, cand, k, i);
  for (int id = k; id < vocab; id++)
    if (before(l, id, cand[0])) {
      cand[0] = id;
      sift_down(l, cand, k, 0);
    }
  for (int n = k - 1; n > 0; n--) {
    int t = cand[0];
    cand[0] = cand[n];
    cand[n] = t;
    sift_down(l, cand, n, 0);
  }
}

// The number of candidates top-p keeps out of k (step 3).
static int
top_p_count(const struct llm_sampler *sp, int k)
{
  uint64 total = sp->cum[k - 1];
  if (sp->top_p >= 1.0)
    return k;
  double x = sp->top_p * (double)total;
  uint64 t = (uint64)x;
  if ((double)t < x)
    t++;
  int n = 0;
  while (n < k - 1 && sp->cum[n] < t)
    n++;
  return n + 1;
}

int
llm_sample(struct llm_sampler *sp, const double *logits, int vocab)
{
  int k = sp->top_k > 0 && sp->top_k < vocab ? sp->top_k : vocab;
  top_candidates(logits, vocab, sp->cand, k);
  double best = logits[sp->cand[0]];
  uint64 sum = 0;
  for (int i = 0; i < k; i++) {
    double w = llm_exp((logits[sp->cand[i]] - best) / sp->temp);
    sum += (uint64)(w * 4294967296.0);
    sp->cum[i] = sum;
  }
  int n = top_p_count(sp, k);
  uint64 r = next_rand(sp) % sp->cum[n - 1];
  int i = 0;
  while (sp->cum[i] <= r)
    i++;
  return sp->cand[i];
}

int
llm_is_stop(const struct llm_sampler *sp, int id)
{
  for (int i = 0; sp && i < sp->nstop; i++)
    if (sp->stop[i] == id)
      return 1;
  return 0;
}
