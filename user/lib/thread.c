// Threads for guest programs, over the kernel's thread and futex calls
// (kernel/core/thread.c, docs/THREADS.md).
//
// uthread_create allocates the new thread's stack (UTHREAD_STACK bytes)
// with malloc and puts a struct ustart (the function and its argument)
// at its top; the thread starts in uthread_entry, which calls the
// function and passes its result to thread_exit. uthread_join waits with
// thread_join and frees the stack, found in a small table by thread id.
//
// A mutex is one futex word: 0 free, 1 held, 2 held with waiters (so an
// unlock without waiters costs no system call). A barrier counts arrivals
// and bumps a generation word; waiters spin on it for spin_us (a partner
// on another hart usually arrives within microseconds), then sleep in
// futex_wait. The last arrival wakes sleepers only if there are any. The
// kernel interrupts an idle hart to run a woken thread, but a sleep and a
// wake-up still cost two system calls and a context switch each (a few
// hundred microseconds under QEMU), so a barrier crossed thousands of
// times a second should spin longer than the usual gap between crossings.
#include "user/lib/user.h"

#define UTHREAD_STACK   (64 * 1024)
#define MAXUTHREADS     64
#define BARRIER_SPIN_US 50 // barrier_init's default

struct ustart {
  uint64 (*fn)(void *);
  void *arg;
};

static struct {
  int tid;
  char *stack;
} stacks[MAXUTHREADS];
static struct mutex stacks_lock;

// A new thread starts here: it runs s's function and exits with its result.
static void __attribute__((noreturn)) uthread_entry(struct ustart *s)
{
  thread_exit(s->fn(s->arg));
  for (;;)
    ;
}

// Starts fn(arg) in a new thread. Returns its id, or a negative error
// (-ENOMEM, -EAGAIN when MAXUTHREADS run already or the kernel's process
// table is full).
int
uthread_create(uint64 (*fn)(void *), void *arg)
{
  char *stack = malloc(UTHREAD_STACK);
  int slot, tid;

  if (stack == 0)
    return -ENOMEM;
  mutex_lock(&stacks_lock);
  for (slot = 0; slot < MAXUTHREADS && stacks[slot].stack; slot++)
    ;
  if (slot == MAXUTHREADS) {
    mutex_unlock(&stacks_lock);
    free(stack);
    return -EAGAIN;
  }
  struct ustart *s = (struct ustart *)(stack + UTHREAD_STACK) - 1;
  s->fn = fn;
  s->arg = arg;
  tid = thread_create((void (*)(void *))uthread_entry, s, s);
  if (tid < 0) {
    free(stack);
  } else {
    stacks[slot].tid = tid;
    stacks[slot].stack = stack;
  }
  mutex_unlock(&stacks_lock);
  return tid;
}

// Waits for thread tid, stores its result in *result (if result is not
// 0) and frees its stack. Returns 0 or thread_join's error.
int
uthread_join(int tid, uint64 *result)
{
  int err = thread_join(tid, result);

  if (err < 0)
    return err;
  mutex_lock(&stacks_lock);
  for (int i = 0; i < MAXUTHREADS; i++) {
    if (stacks[i].stack && stacks[i].tid == tid) {
      free(stacks[i].stack);
      stacks[i].stack = 0;
    }
  }
  mutex_unlock(&stacks_lock);
  return 0;
}

// Takes m, sleeping on its futex while another thread holds it.
void
mutex_lock(struct mutex *m)
{
  uint32 c = 0;

  if (__atomic_compare_exchange_n(&m->word, &c, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
    return;
  // Contended: mark it 2 so the holder's unlock wakes us.
  if (c != 2)
    c = __atomic_exchange_n(&m->word, 2, __ATOMIC_ACQUIRE);
  while (c != 0) {
    futex_wait(&m->word, 2);
    c = __atomic_exchange_n(&m->word, 2, __ATOMIC_ACQUIRE);
  }
}

// Releases m, waking one waiter if any.
void
mutex_unlock(struct mutex *m)
{
  if (__atomic_exchange_n(&m->word, 0, __ATOMIC_RELEASE) == 2)
    futex_wake(&m->word, 1);
}

// Makes b a barrier for n threads.
void
barrier_init(struct barrier *b, int n)
{
  b->n = n;
  b->count = 0;
  b->gen = 0;
  b->sleepers = 0;
  b->spin_us = BARRIER_SPIN_US;
}

// Waits until n threads (barrier_init) have called it; then all return.
void
barrier_wait(struct barrier *b)
{
  uint32 gen = __atomic_load_n(&b->gen, __ATOMIC_ACQUIRE);

  if (__atomic_add_fetch(&b->count, 1, __ATOMIC_ACQ_REL) == b->n) {
    __atomic_store_n(&b->count, 0, __ATOMIC_RELAXED);
    __atomic_add_fetch(&b->gen, 1, __ATOMIC_RELEASE);
    if (__atomic_load_n(&b->sleepers, __ATOMIC_ACQUIRE) > 0)
      futex_wake(&b->gen, MAXUTHREADS);
    return;
  }
  uint64 t0 = time_us();
  do {
    for (int i = 0; i < 64; i++)
      if (__atomic_load_n(&b->gen, __ATOMIC_ACQUIRE) != gen)
        return;
  } while (time_us() - t0 < b->spin_us);
  __atomic_add_fetch(&b->sleepers, 1, __ATOMIC_ACQ_REL);
  while (__atomic_load_n(&b->gen, __ATOMIC_ACQUIRE) == gen)
    futex_wait(&b->gen, gen);
  __atomic_sub_fetch(&b->sleepers, 1, __ATOMIC_ACQ_REL);
}
