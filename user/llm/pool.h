// The runtime's thread pool (user/llm/pool.c): started once per process,
// it splits a range of independent items (a matmul's output rows, attention
// heads) across its threads and returns when all are done.
#ifndef AISVC_LLM_POOL_H
#define AISVC_LLM_POOL_H

#define LLM_MAX_THREADS 8

// Per-thread time under --profile: busy (running chunks) and waiting:
// thread 0 for the step's last chunk, a worker for the next step; and how
// many of those waits ended in futex_wait (a spin did not last). serial_us:
// thread 0's time from the end of one step to the start of the next (steps
// of one chunk included), when the workers have nothing to run: the part
// of the time more threads cannot shorten.
struct llm_pool_stats {
  uint64 busy_us[LLM_MAX_THREADS];
  uint64 wait_us[LLM_MAX_THREADS];
  uint64 sleeps[LLM_MAX_THREADS];
  uint64 steps;
  uint64 serial_us;
};

// Start n - 1 worker threads (n in 1..LLM_MAX_THREADS; the caller is
// thread 0), or with n = 0 as many as the machine runs at once: one per
// hart, fewer if the harts share host cores (measured in two or three
// windows of 20 ms: 2 on a 2-core host with 4 harts). Returns the number
// of threads running, at least 1: a thread that cannot be created leaves
// the pool smaller, with a message.
int llm_pool_start(int n);
// Stop and join the workers.
void llm_pool_stop(void);
// Threads in the pool (1 when not started).
int llm_pool_threads(void);

// Run fn(arg, lo, hi, t) over [0, n), cut into chunks (contiguous ranges
// starting at multiples of grain) that the threads claim in turn, so a
// thread t may run several chunks of one step, in any order; returns when
// every chunk is done. Each item must depend only on its index and on
// memory no other item writes (t picks the thread's own scratch memory),
// so the result is the same for any thread count and any assignment of
// chunks to threads. A step of one chunk (n <= grain) runs on the caller
// at once, without waking anyone.
void llm_pool_run(void (*fn)(void *arg, int lo, int hi, int t), void *arg, int n, int grain);

// --profile: measure (on) and read-and-reset the per-thread times.
void llm_pool_profile(int on);
void llm_pool_take_stats(struct llm_pool_stats *st);

#endif
