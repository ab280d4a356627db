// The runtime's thread pool: token-exact parallel steps.
//
// llm_pool_start creates the workers once. The caller (thread 0) posts a
// step (function, argument, item count) cut into chunks: contiguous item
// ranges fixed by the item and thread counts alone, shrinking towards the
// end of the step (cut_chunks). Every thread, thread 0 included, claims
// chunks one at a time from a shared counter and runs them until none is
// left; thread 0 returns when the last chunk is done.
//
// Why claim rather than give each thread a fixed part: a step then ends
// when its work is done, not when every thread has had a turn. A thread
// the host does not run just now (more harts than host cores, or another
// process on its hart) claims nothing, and the threads that run take its
// share. With fixed parts, every one of the ~150 steps of a SmolLM2 token
// waited for the slowest-scheduled vCPU (docs/THREADS.md, "Measured").
//
// The claim word holds the step's number (high 32 bits), its chunk count
// (16 bits) and the next chunk to claim (low 16 bits), and a thread decides
// from that one word alone whether a chunk is left: a thread still busy
// with an old step can never claim a chunk of the next one, because its
// compare-and-swap fails. A successful claim means the step is not
// finished, so fn, arg, the item count and the chunk bounds are still that
// step's: thread 0 rewrites them only after the last chunk. (The chunk count must come from
// the word too: a thread that read pool.chunks after the claim saw step S
// fully claimed could find step S+1's larger count, written before
// post(), and claim a chunk that does not exist; the step's done count
// would then overshoot and thread 0 return early or wait forever. The
// host test tests/host/poolstress.c runs steps of changing sizes to catch
// such races.)
//
// Waiting (workers for the next step, thread 0 for the last chunk) spins
// first, then sleeps in futex_wait. The spin adapts (wait_change): a wait
// longer than half the longest spin halves it; a shorter one can only
// lengthen it, to twice that wait. With a free host core per hart, waits
// are short and spins stay long (a sleep and wake-up cost two system
// calls and a context switch); with more harts than cores, waits are long
// and spins shrink, so waiting vCPUs give their host core to working ones.
// (A short wait must not shorten the spin: the waits of one token differ
// by step, a few microseconds after one, tens after the next, and a spin
// set to twice the last wait slept about 30 times a token.)
//
// Sizing: by default (llm_pool_start(0)) the pool starts one thread per
// hart, then measures how many run at once: for 20 ms every thread reads
// the clock in a loop, and a gap between two reads is time the host did
// not run its vCPU. Harts that share a host core (more harts than the
// host has cores, or a busy host) lose time so, and the pool keeps as
// many threads as the cores' worth of time they got: with every thread on
// a core of its own, no step waits for a vCPU the host has stopped
// (docs/THREADS.md, "Measured"). One window can fall on a moment when the
// host ran something else (a 4-hart guest on a 2-core host then counts
// one thread), or on one when it ran more of the vCPUs than it has cores
// for a while (the largest of several windows can then count three);
// so the pool measures two windows and keeps their count if they agree,
// else the median of three: one odd window, either way, does not decide.
// --threads N skips the measurement.
//
// Every item is computed by the same code on the same inputs whichever
// thread runs it: results do not depend on the number of threads.

#include "user/lib/user.h"
#include "user/llm/loader.h"
#include "user/llm/pool.h"

#define POOL_SPIN_MAX_US 1000        // the longest spin before sleeping
#define MAX_CHUNKS       128         // chunks per step, at most
#define CALIBRATE_US     20000       // how long the threads measure to size the pool
#define CALIB_OVER       0xffffffffU // calib_go: no more windows
#define STOLEN_GAP_US    50          // a longer gap between clock reads: not running

static struct {
  int n; // threads, the caller included
  int tids[LLM_MAX_THREADS];
  // the posted step (written by thread 0 between steps only)
  void (*fn)(void *, int, int, int);
  void *arg;
  int items, chunks;
  int grain;                  // chunks start at multiples of grain
  int bounds[MAX_CHUNKS + 1]; // chunk k: units [bounds[k], bounds[k+1])
  uint64 claim;               // step << 32 | chunks << 16 | next chunk to claim
  uint32 step;                // the posted step's number: workers wait on it
  uint32 done;                // chunks of this step finished: thread 0 waits on it
  uint32 idle;                // workers asleep on step
  uint32 waiting;             // 1 while thread 0 sleeps on done
  uint64 spin_now[LLM_MAX_THREADS];
  int keep; // workers t >= keep return at the next post
  // sizing the pool by measurement (llm_pool_start(0))
  int calibrating;
  uint64 calib_start, calib_end; // when every thread counts
  uint64 calib[LLM_MAX_THREADS]; // how long each worker ran in the window
  uint32 calib_ready;            // workers ready to measure
  uint32 calib_go;               // the window to measure (1, 2, ...) or CALIB_OVER
  uint32 calib_done;             // worker measurements made, all windows
  int profile;
  uint64 step_end; // when the last step handed over ended (0: none yet)
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
  if (pool.profile)
    pool.st.sleeps[t]++;
  while (__atomic_load_n(word, __ATOMIC_SEQ_CST) == old)
    futex_wait(word, old);
  __atomic_sub_fetch(sleepers, 1, __ATOMIC_SEQ_CST);
learn:
  waited = time_us() - t0;
  if (waited > POOL_SPIN_MAX_US / 2)
    pool.spin_now[t] /= 2;
  else if (2 * waited > pool.spin_now[t])
    pool.spin_now[t] = 2 * waited;
  return waited;
}

// The first item of chunk k of the posted step (k = chunks: the end).
static int
chunk_start(int k)
{
  long i = (long)pool.bounds[k] * pool.grain;
  return i < pool.items ? (int)i : pool.items;
}

// Cuts the step's units (items / grain, rounded up) into chunks that
// shrink as the step goes: each takes 1/(2n) of the units left, at least
// one. The first chunks are long (few claims), the last ones short, so
// the other threads soon run out of work at the end and thread 0 waits
// little for the last chunk.
static void
cut_chunks(int units)
{
  int k = 0, left = units;
  pool.bounds[0] = 0;
  while (left > 0) {
    int c = k == MAX_CHUNKS - 1 ? left : left / (2 * pool.n);
    left -= c > 0 ? c : 1;
    pool.bounds[++k] = units - left;
  }
  pool.chunks = k;
}

// Claims and runs chunks of step `step` as thread t until none is left.
static void
run_chunks(uint32 step, int t)
{
  for (;;) {
    uint64 c = __atomic_load_n(&pool.claim, __ATOMIC_ACQUIRE);
    int k = (int)(c & 0xffff);
    if ((uint32)(c >> 32) != step || k >= (int)((c >> 16) & 0xffff))
      return;
    if (!__atomic_compare_exchange_n(&pool.claim, &c, c + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
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

// Microseconds of [start, end) in which the calling thread ran: it spins
// reading the clock, and a gap of more than STOLEN_GAP_US between two
// reads is time the host did not run this vCPU (one turn takes tens).
// The window's edges count too: a thread whose first reading comes late
// did not run from start to it, and one stopped just before end did not
// run from its last reading to end (each was once counted as running, and
// four harts on two host cores sometimes measured 2.6 cores and started a
// third thread: 2x slower tokens).
static uint64
running_us(uint64 start, uint64 end)
{
  uint64 last = start, stolen = 0;
  for (;;) {
    uint64 now = time_us();
    if (now < start)
      continue;
    uint64 upto = now < end ? now : end;
    if (now - last > STOLEN_GAP_US)
      stolen += upto - last;
    last = upto;
    if (now >= end)
      break;
  }
  return end - start > stolen ? end - start - stolen : 0;
}

// Worker t's part of sizing the pool: how long it ran in each window
// thread 0 opens (calib_go = 1, 2, ...), until thread 0 ends them.
static void
measure_windows(int t)
{
  __atomic_add_fetch(&pool.calib_ready, 1, __ATOMIC_RELEASE);
  for (uint32 w = 1;; w++) {
    uint32 go;
    while ((go = __atomic_load_n(&pool.calib_go, __ATOMIC_ACQUIRE)) < w)
      ;
    if (go == CALIB_OVER)
      return;
    pool.calib[t] = running_us(pool.calib_start, pool.calib_end);
    __atomic_add_fetch(&pool.calib_done, 1, __ATOMIC_RELEASE);
  }
}

// Worker thread t of the pool: measures its windows while the pool
// calibrates, then runs its chunks of every new step, sleeping between
// them, until the pool keeps fewer than t + 1 threads.
static uint64
worker(void *arg)
{
  int t = (int)(uint64)arg;
  uint32 seen = __atomic_load_n(&pool.step, __ATOMIC_ACQUIRE);
  if (pool.calibrating)
    measure_windows(t);
  for (;;) {
    uint64 w = wait_change(&pool.step, seen, &pool.idle, t);
    if (pool.profile)
      pool.st.wait_us[t] += w;
    seen = __atomic_load_n(&pool.step, __ATOMIC_ACQUIRE);
    if (t >= pool.keep)
      return 0;
    run_chunks(seen, t);
  }
}

// Makes the workers see a new step number (after the step's fields are
// written), waking those asleep.
static void
post(void)
{
  uint32 step = pool.step + 1;
  __atomic_store_n(&pool.claim, (uint64)step << 32 | (uint64)pool.chunks << 16, __ATOMIC_RELEASE);
  __atomic_store_n(&pool.step, step, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&pool.idle, __ATOMIC_SEQ_CST) > 0)
    futex_wake(&pool.step, LLM_MAX_THREADS);
}

// Ends the workers keep .. n-1 (an empty step that they leave on).
static void
stop_from(int keep)
{
  pool.keep = keep;
  pool.chunks = 0;
  post();
  for (int t = keep; t < pool.n; t++)
    uthread_join(pool.tids[t], 0);
  pool.n = keep;
}

// Window w of the measurement: all n threads spin in one common window of
// CALIBRATE_US and each measures how much of it the host let it run; the
// sum is the host cores the harts got (two on a 2-core host, whether the
// guest has 2 harts or 4). Returns that many threads, 1 to n.
static int
window_threads(uint32 w)
{
  int n = pool.n;
  pool.calib_start = time_us() + 1000; // time for the workers to see go
  pool.calib_end = pool.calib_start + CALIBRATE_US;
  __atomic_store_n(&pool.calib_go, w, __ATOMIC_RELEASE);
  uint64 sum = running_us(pool.calib_start, pool.calib_end);
  while (__atomic_load_n(&pool.calib_done, __ATOMIC_ACQUIRE) != w * (uint32)(n - 1))
    ;
  for (int t = 1; t < n; t++)
    sum += pool.calib[t];
  // Rounded up from 0.6: two harts on a free 2-core host measure 1.85-2.0
  // cores, four harts on it 2.1-2.5.
  int p = (int)((sum + CALIBRATE_US * 2 / 5) / CALIBRATE_US);
  return p < 1 ? 1 : p > n ? n : p;
}

// The median of a, b and c.
static int
median3(int a, int b, int c)
{
  int lo = a < b ? a : b, hi = a < b ? b : a;
  if (c < lo)
    return lo;
  return c > hi ? hi : c;
}

// How many of the pool's n threads the machine runs at once, once every
// worker is ready: two windows' count if they agree, else the median of
// three (design comment).
static int
parallel_threads(void)
{
  int n = pool.n;
  while (__atomic_load_n(&pool.calib_ready, __ATOMIC_ACQUIRE) != (uint32)(n - 1))
    ;
  int a = window_threads(1), b = window_threads(2);
  int p = a == b ? a : median3(a, b, window_threads(3));
  __atomic_store_n(&pool.calib_go, CALIB_OVER, __ATOMIC_RELEASE);
  return p;
}

int
llm_pool_start(int n)
{
  int measure = (n == 0);
  if (measure)
    n = nharts();
  if (n > LLM_MAX_THREADS)
    n = LLM_MAX_THREADS;
  pool.n = 1;
  if (n <= 1)
    return 1;
  pool.keep = n;
  pool.calibrating = measure;
  pool.calib_ready = pool.calib_go = pool.calib_done = 0;
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
  if (measure && n > 1) {
    int p = parallel_threads();
    if (p < n)
      stop_from(p);
  }
  return pool.n;
}

void
llm_pool_stop(void)
{
  if (pool.n > 1)
    stop_from(1);
}

int
llm_pool_threads(void)
{
  return pool.n;
}

void
llm_pool_run(void (*fn)(void *arg, int lo, int hi, int t), void *arg, int n, int grain)
{
  if (pool.n == 1 || n <= grain) { // one chunk: no hand-over
    fn(arg, 0, n, 0);
    return;
  }
  if (pool.profile && pool.step_end)
    pool.st.serial_us += time_us() - pool.step_end;
  pool.fn = fn;
  pool.arg = arg;
  pool.items = n;
  pool.grain = grain;
  cut_chunks((n + grain - 1) / grain);
  pool.done = 0;
  post();
  run_chunks(pool.step, 0);
  uint32 d;
  uint64 w = 0;
  while ((d = __atomic_load_n(&pool.done, __ATOMIC_SEQ_CST)) != (uint32)pool.chunks)
    w += wait_change(&pool.done, d, &pool.waiting, 0);
  if (pool.profile) {
    pool.st.wait_us[0] += w;
    pool.step_end = time_us();
  }
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
  pool.step_end = 0;
}
