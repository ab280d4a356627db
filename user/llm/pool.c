// The runtime's thread pool: token-exact parallel steps.
//
// llm_pool_start creates the workers once; each loops: wait at the start
// barrier, run its part of the posted step, wait at the end barrier. The
// caller (thread 0) posts a step (function, argument, item count), crosses
// the start barrier, runs part 0 and waits at the end barrier, so a step
// costs two barrier crossings and nothing else is shared. The barriers
// (user/lib/thread.c) spin briefly, then sleep in futex_wait, so idle
// workers between requests cost no hart.
//
// Parts are contiguous index ranges fixed by the thread count, and every
// item is computed by the same code on the same inputs whichever thread
// runs it: results do not depend on the number of threads.

#include "user/lib/user.h"
#include "user/llm/loader.h"
#include "user/llm/pool.h"

#define POOL_SPIN_US 1000

static struct {
  int n; // threads, the caller included
  int tids[LLM_MAX_THREADS];
  struct barrier start, done;
  // the posted step
  void (*fn)(void *, int, int, int);
  void *arg;
  int items;
  int quit;
  int profile;
  struct llm_pool_stats st;
} pool = { .n = 1 };

// Thread t's part of the posted step, then the end barrier; times both
// under --profile.
static void
run_part(int t)
{
  int lo = (int)((long)pool.items * t / pool.n);
  int hi = (int)((long)pool.items * (t + 1) / pool.n);
  uint64 t0 = pool.profile ? time_us() : 0;
  if (lo < hi)
    pool.fn(pool.arg, lo, hi, t);
  uint64 t1 = pool.profile ? time_us() : 0;
  barrier_wait(&pool.done);
  if (pool.profile) {
    pool.st.busy_us[t] += t1 - t0;
    pool.st.wait_us[t] += time_us() - t1;
  }
}

static uint64
worker(void *arg)
{
  int t = (int)(uint64)arg;
  for (;;) {
    barrier_wait(&pool.start);
    if (pool.quit)
      return 0;
    run_part(t);
  }
}

int
llm_pool_start(int n)
{
  if (n > LLM_MAX_THREADS)
    n = LLM_MAX_THREADS;
  if (n < 1)
    n = 1;
  pool.quit = 0;
  pool.n = 1;
  if (n == 1)
    return 1;
  barrier_init(&pool.start, n);
  barrier_init(&pool.done, n);
  // Steps follow each other within tens of microseconds (the serial
  // parts: norms, quantising, the K/V cache), and the two halves of a step
  // finish within a few hundred of each other: with a 1 ms spin a decode
  // token of SmolLM2 (151 steps) sleeps about once instead of 150 times
  // with 200 us (docs/PERF_NOTES.md fact 18). Much longer spins measured
  // slower: a spinning vCPU takes host time from the one doing the work
  // when the host has other work too.
  pool.start.spin_us = pool.done.spin_us = POOL_SPIN_US;
  for (int t = 1; t < n; t++) {
    int tid = uthread_create(worker, (void *)(uint64)t);
    if (tid < 0) {
      fprintf(2, "%s: thread %d: %s; running %d threads\n", llm_prog, t, strerror(tid), t);
      n = t;
      break;
    }
    pool.tids[t] = tid;
  }
  // If fewer started, shrink the barriers: the workers waiting at the
  // start barrier count fewer than n, so none can have passed it.
  pool.start.n = n;
  pool.done.n = n;
  pool.n = n;
  return n;
}

void
llm_pool_stop(void)
{
  if (pool.n == 1)
    return;
  pool.quit = 1;
  barrier_wait(&pool.start);
  for (int t = 1; t < pool.n; t++)
    uthread_join(pool.tids[t], 0);
  pool.n = 1;
}

int
llm_pool_threads(void)
{
  return pool.n;
}

void
llm_pool_run(void (*fn)(void *arg, int lo, int hi, int t), void *arg, int n)
{
  if (pool.n == 1) {
    fn(arg, 0, n, 0);
    return;
  }
  pool.fn = fn;
  pool.arg = arg;
  pool.items = n;
  barrier_wait(&pool.start);
  run_part(0);
  pool.st.steps++;
}

void
llm_pool_profile(int on)
{
  pool.profile = on;
}

void
llm_pool_take_stats(struct llm_pool_stats *st)
{
  *st = pool.st;
  memset(&pool.st, 0, sizeof(pool.st));
}
