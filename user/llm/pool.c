// The runtime's thread pool: token-exact parallel steps.
//
// llm_pool_start creates the workers once. The caller (thread 0) posts a
// step (function, argument, item count) cut into chunks: contiguous item
// ranges fixed by the item and thread counts alone. Every thread, thread
// 0 included, claims chunks one at a time from a shared counter and runs
// them until none is left; thread 0 returns when the last chunk is done.
//
// Why claim rather than give each thread a fixed part: a step then ends
// when its work is done, not when every thread has had a turn. A thread
// the host does not run just now (more harts than host cores, or another
// process on its hart) claims nothing, and the threads that run take its
// share. With fixed parts, every one of the ~150 steps of a SmolLM2 token
// waited for the slowest-scheduled vCPU (docs/THREADS.md, "Measured").
//
// The claim word holds the step's number in its high half and the next
// chunk in its low half, so a thread still busy with an old step can never
// claim a chunk of the next one: its compare-and-swap fails. A successful
// claim means the step is not finished, so fn, arg and the item count are
// still that step's: thread 0 rewrites them only after the last chunk.
//
// Waiting (workers for the next step, thread 0 for the last chunk) spins
// first, then sleeps in futex_wait. The spin adapts (wait_change): a wait
// that a spin would have caught makes the next spin twice as long as it,
// a wait that was longer halves it. With a free host core per hart, waits
// are short and spins stay long (a sleep and wake-up cost two system
// calls and a context switch); with more harts than cores, waits are long
// and spins shrink, so waiting vCPUs give their host core to working ones.
//
// Every item is computed by the same code on the same inputs whichever
// thread runs it: results do not depend on the number of threads.

#include "user/lib/user.h"
#include "user/llm/loader.h"
#include "user/llm/pool.h"

#define POOL_SPIN_MAX_US  1000 // the longest spin before sleeping
#define CHUNKS_PER_THREAD 4    // chunks per step: enough to even out, few claims

static struct {
  int n; // threads, the caller included
  int tids[LLM_MAX_THREADS];
  // the posted step (written by thread 0 between steps only)
  void (*fn)(void *, int, int, int);
  void *arg;
  int items, chunks;
  int grain;      // chunks start at multiples of grain
  int units;      // items / grain, rounded up
  uint64 claim;   // (step << 32) | next chunk to claim
  uint32 step;    // the posted step's number: workers wait on it
  uint32 done;    // chunks of this step finished: thread 0 waits on it
  uint32 idle;    // workers asleep on step
  uint32 waiting; // 1 while thread 0 sleeps on done
  uint64 spin_now[LLM_MAX_THREADS];
  int quit;
  int profile;
  struct llm_pool_stats st;
} pool = { .n = 1 };

// Waits until *word != old: spins up to thread t's learned spin, then
// sleeps in futex_wait counted in *sleepers (the waker calls futex_wake
// only if it is non-zero). Adapts the spin (design comment). Returns the
// time waited, in microseconds.
static uint64
wait_change(uint32 *word, uint32 old, uint32 *sleepers, int t)
{
  uint64 t0 = time_us(), waited;
  do {
    for (int i = 0; i < 64; i++)
      if (__atomic_load_n(word, __ATOMIC_ACQUIRE) != old)
        goto learn;
  } while (time_us() - t0 < pool.spin_now[t]);
  __atomic_add_fetch(sleepers, 1, __ATOMIC_SEQ_CST);
  while (__atomic_load_n(word, __ATOMIC_SEQ_CST) == old)
    futex_wait(word, old);
  __atomic_sub_fetch(sleepers, 1, __ATOMIC_SEQ_CST);
learn:
  waited = time_us() - t0;
  if (waited <= POOL_SPIN_MAX_US / 2)
    pool.spin_now[t] = 2 * waited;
  else
    pool.spin_now[t] /= 2;
  return waited;
}

// The first item of chunk k of the posted step (k = chunks: the end).
static int
chunk_start(int k)
{
  long i = (long)pool.units * k / pool.chunks * pool.grain;
  return i < pool.items ? (int)i : pool.items;
}

// Claims and runs chunks of step `step` as thread t until none is left.
static void
run_chunks(uint32 step, int t)
{
  for (;;) {
    uint64 c = __atomic_load_n(&pool.claim, __ATOMIC_ACQUIRE);
    int k = (int)(uint32)c;
    if ((uint32)(c >> 32) != step || k >= pool.chunks)
      return;
    if (!__atomic_compare_exchange_n(&pool.claim, &c, c + 1, 0, __ATOMIC_ACQ_REL,
            __ATOMIC_ACQUIRE))
      continue;
    int lo = chunk_start(k), hi = chunk_start(k + 1);
    uint64 t0 = pool.profile ? time_us() : 0;
    pool.fn(pool.arg, lo, hi, t);
    if (pool.profile)
      pool.st.busy_us[t] += time_us() - t0;
    if (__atomic_add_fetch(&pool.done, 1, __ATOMIC_SEQ_CST) == (uint32)pool.chunks &&
        __atomic_load_n(&pool.waiting, __ATOMIC_SEQ_CST))
      futex_wake(&pool.done, 1);
  }
}

static uint64
worker(void *arg)
{
  int t = (int)(uint64)arg;
  uint32 seen = __atomic_load_n(&pool.step, __ATOMIC_ACQUIRE);
  for (;;) {
    uint64 w = wait_change(&pool.step, seen, &pool.idle, t);
    if (pool.profile)
      pool.st.wait_us[t] += w;
    seen = __atomic_load_n(&pool.step, __ATOMIC_ACQUIRE);
    if (pool.quit)
      return 0;
    run_chunks(seen, t);
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
  for (int t = 0; t < n; t++)
    pool.spin_now[t] = POOL_SPIN_MAX_US;
  for (int t = 1; t < n; t++) {
    int tid = uthread_create(worker, (void *)(uint64)t);
    if (tid < 0) {
      fprintf(2, "%s: thread %d: %s; running %d threads\n", llm_prog, t, strerror(tid), t);
      n = t;
      break;
    }
    pool.tids[t] = tid;
  }
  pool.n = n;
  return n;
}

// Makes the workers see a new step number (after the step's fields are
// written), waking those asleep.
static void
post(void)
{
  uint32 step = pool.step + 1;
  __atomic_store_n(&pool.claim, (uint64)step << 32, __ATOMIC_RELEASE);
  __atomic_store_n(&pool.step, step, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&pool.idle, __ATOMIC_SEQ_CST) > 0)
    futex_wake(&pool.step, LLM_MAX_THREADS);
}

void
llm_pool_stop(void)
{
  if (pool.n == 1)
    return;
  pool.quit = 1;
  pool.chunks = 0;
  pool.units = 1;
  post();
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
llm_pool_run(void (*fn)(void *arg, int lo, int hi, int t), void *arg, int n, int grain)
{
  if (pool.n == 1) {
    fn(arg, 0, n, 0);
    return;
  }
  int units = (n + grain - 1) / grain, chunks = pool.n * CHUNKS_PER_THREAD;
  pool.fn = fn;
  pool.arg = arg;
  pool.items = n;
  pool.grain = grain;
  pool.units = units;
  pool.chunks = chunks < units ? chunks : units;
  pool.done = 0;
  post();
  run_chunks(pool.step, 0);
  uint32 d;
  uint64 w = 0;
  while ((d = __atomic_load_n(&pool.done, __ATOMIC_SEQ_CST)) != (uint32)pool.chunks)
    w += wait_change(&pool.done, d, &pool.waiting, 0);
  if (pool.profile)
    pool.st.wait_us[0] += w;
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
