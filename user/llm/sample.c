// Choosing the next token. Greedy (the default) is the first index of the
// largest logit, as the runtime always did. With a temperature T > 0 the
// token is drawn, and every step below is exact, so that a seed gives the
// same ids as pyaisvc/model/sampling.py given the same logits (and the guest's
// logits equal the reference's bit for bit, docs/ARITHMETIC.md):
//
//  0. Penalties and biases (OpenAI's definitions): id j's adjustment is
//     the integer A_j = bias_j - c_j * frequency - (c_j > 0) * presence,
//     all in millionths (int64, exact), where c_j counts j among the ids
//     generated so far in this request (the prompt's ids do not count,
//     as OpenAI counts the text it sampled) and bias_j sums the
//     --logit-bias pairs naming j. Each id with A_j != 0 gets
//     logit_j + (double)A_j / 10^6 (one division, one addition: correctly
//     rounded on both sides); the others keep their logit. Greedy is then
//     the first maximum of these logits, and steps 1-4 draw from them.
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
//
// Log-probabilities are those of the model's own distribution, the raw
// logits at temperature 1 (OpenAI's convention: neither the penalties nor
// the biases, the temperature, top-k or top-p change them). With m the
// first maximum logit, S = the sum of exp(logit_i - m) over i = 0, 1, ...
// in that order (our exp), lp_i = (logit_i - m) - log(S) (our log). The
// top N are the first N ids of the order of step 1. Exact like the rest:
// pyaisvc/model/sampling.py computes the same doubles.
#include "user/lib/user.h"
#include "user/llm/kernels.h"
#include "user/llm/sample.h"

int
llm_sampler_alloc(struct llm_sampler *sp, int vocab)
{
  sp->cand = malloc(vocab * sizeof(int));
  sp->cum = malloc(vocab * sizeof(uint64));
  sp->adj = malloc(vocab * sizeof(double));
  if (sp->cand == 0 || sp->cum == 0 || sp->adj == 0) {
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
  free(sp->adj);
  sp->cand = 0;
  sp->cum = 0;
  sp->adj = 0;
}

// Does sp change the logits (step 0)?
static int
adjusts(const struct llm_sampler *sp)
{
  return sp->nbias > 0 || sp->presence_micro != 0 || sp->frequency_micro != 0;
}

int
llm_sampler_needs_work(const struct llm_sampler *sp)
{
  return sp->temp > 0 || sp->logprobs || adjusts(sp);
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

// The first index of gen[0..n) holding id, or n.
static int
first_of(const int *gen, int n, int id)
{
  int i = 0;
  while (i < n && gen[i] != id)
    i++;
  return i;
}

// Step 0's integer A_id (millionths) for a request that generated
// gen[0..ngen).
static int64
adjustment(const struct llm_sampler *sp, int id, const int *gen, int ngen)
{
  int64 a = 0, c = 0;
  for (int i = 0; i < sp->nbias; i++)
    if (sp->bias_id[i] == id)
      a += sp->bias_micro[i];
  for (int i = 0; i < ngen; i++)
    c += gen[i] == id;
  return a - c * sp->frequency_micro - (c > 0 ? sp->presence_micro : 0);
}

// adj = the logits after step 0: a copy, then each id that has a bias or
// was generated gets its adjustment once.
static void
adjust(const struct llm_sampler *sp, const double *logits, double *adj, int vocab, const int *gen,
    int ngen)
{
  memmove(adj, logits, vocab * sizeof(double));
  int pen = sp->presence_micro != 0 || sp->frequency_micro != 0;
  for (int i = 0; i < sp->nbias; i++) {
    int id = sp->bias_id[i];
    if (first_of(sp->bias_id, i, id) < i || (pen && first_of(gen, ngen, id) < ngen))
      continue; // counted at its first pair, or with the generated ids
    int64 a = adjustment(sp, id, gen, ngen);
    if (a != 0)
      adj[id] = logits[id] + (double)a / (double)LLM_MICRO;
  }
  for (int i = 0; pen && i < ngen; i++) {
    int id = gen[i];
    if (first_of(gen, i, id) < i)
      continue;
    int64 a = adjustment(sp, id, gen, ngen);
    if (a != 0)
      adj[id] = logits[id] + (double)a / (double)LLM_MICRO;
  }
}

// The first n (>= 1) ids of step 1's order over all of l[0..vocab) into
// id[0..n), best first: one pass keeping the n best in order, comparing
// integer keys (llm_order_key) rather than doubles.
static void
top_n(const double *l, int vocab, int *id, int n)
{
  int64 key[LLM_MAX_TOPLP];
  int have = 0;
  for (int j = 0; j < vocab; j++) {
    int64 k = llm_order_key(l[j]);
    if (have == n && k <= key[n - 1])
      continue; // not better than the last kept (equal: the lower id stays)
    int i = have < n ? have++ : n - 1;
    while (i > 0 && key[i - 1] < k) {
      key[i] = key[i - 1];
      id[i] = id[i - 1];
      i--;
    }
    key[i] = k;
    id[i] = j;
  }
}

// sp->last's top entries and *m, *logs: the first maximum m of the raw
// logits and log(S), S = sum of exp(l_i - m) in id order (the rule above).
static void
logprob_norm(struct llm_sampler *sp, const double *l, int vocab, double *m, double *logs)
{
  struct llm_logprob *r = &sp->last;
  int best[LLM_MAX_TOPLP] = { 0 };
  int n = sp->top_logprobs > 0 ? sp->top_logprobs : 1;
  top_n(l, vocab, best, n);
  *m = l[best[0]];
  double sum = 0.0;
  for (int j = 0; j < vocab; j++)
    sum = sum + llm_exp(l[j] - *m);
  *logs = llm_log(sum);
  r->ntop = sp->top_logprobs;
  for (int i = 0; i < r->ntop; i++) {
    r->top_id[i] = best[i];
    r->top_lp[i] = (l[best[i]] - *m) - *logs;
  }
}

// The first index of the largest of l[0..vocab).
static int
first_max(const double *l, int vocab)
{
  int best = 0;
  int64 kb = llm_order_key(l[0]);
  for (int j = 1; j < vocab; j++) {
    int64 k = llm_order_key(l[j]);
    if (k > kb) {
      kb = k;
      best = j;
    }
  }
  return best;
}

int
llm_sampler_next(
    struct llm_sampler *sp, const double *logits, int vocab, int greedy, const int *gen, int ngen)
{
  if (sp == 0)
    return greedy;
  double m = 0, logs = 0;
  if (sp->logprobs)
    logprob_norm(sp, logits, vocab, &m, &logs);
  const double *l = logits;
  if (adjusts(sp)) {
    adjust(sp, logits, sp->adj, vocab, gen, ngen);
    l = sp->adj;
  }
  int id = greedy;
  if (sp->temp > 0)
    id = llm_sample(sp, l, vocab);
  else if (l != logits)
    id = first_max(l, vocab);
  if (sp->logprobs) {
    sp->last.id = id;
    sp->last.lp = (logits[id] - m) - logs;
  }
  return id;
}

int
llm_lp_micro(double lp)
{
  double v = lp * (double)LLM_MICRO;
  if (v <= -2147483648.0)
    return -2147483647 - 1;
  if (v >= 2147483647.0)
    return 2147483647;
  return (int)llm_rint(v);
}

int
llm_is_stop(const struct llm_sampler *sp, int id)
{
  for (int i = 0; sp && i < sp->nstop; i++)
    if (sp->stop[i] == id)
      return 1;
  return 0;
}
