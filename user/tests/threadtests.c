// threadtests: the self-test of kernel threads and futexes
// (kernel/core/thread.c, docs/THREADS.md).
//
//   threadtests          run every case
//   threadtests NAME...  only the named cases
//
// The runner is usertests' (harness.c): one line per case ("test NAME:
// OK" or "test NAME: FAILED (why)"), then the leak checks (free pages and
// free process slots, so also kernel stacks, before and after), "N passed,
// N failed" and, when none failed, "ALL TESTS PASSED". A lost wakeup
// shows as a hang, which the host test's timeout catches.

#include "user/lib/user.h"
#include "kernel/include/param.h"
#include "kernel/include/fcntl.h"
#include "kernel/include/stat.h"
#include "kernel/include/sysinfo.h"
#include "user/tests/harness.h"

// ---------------------------------------------------------------- helpers

static uint64
twice(void *arg)
{
  return 2 * (uint64)arg;
}

// Sleeps in futex_wait on a word nobody changes: only a kill ends it.
static volatile uint32 never;
static uint64 __attribute__((noreturn)) sleep_forever(void *arg)
{
  (void)arg;
  for (;;)
    futex_wait(&never, 0);
}

static volatile uint64 spins;
static uint64 __attribute__((noreturn)) spin_forever(void *arg)
{
  (void)arg;
  for (;;)
    __atomic_add_fetch(&spins, 1, __ATOMIC_RELAXED);
}

static int
start(uint64 (*fn)(void *), void *arg)
{
  int tid = uthread_create(fn, arg);

  expect(tid > 0, "uthread_create returned %d (%s)", tid, strerror(tid));
  return tid;
}

// ---------------------------------------------------------------- cases

// Many threads, in rounds, each returning a value its joiner checks.
static void
t_createjoin(void)
{
  int tids[16];

  for (int round = 0; round < 8; round++) {
    for (int i = 0; i < 16; i++)
      tids[i] = start(twice, (void *)(uint64)(round * 100 + i));
    for (int i = 15; i >= 0; i--) {
      uint64 r = 0;
      int err = uthread_join(tids[i], &r);
      expect(err == 0, "join %d: %s", tids[i], strerror(err));
      expect(r == 2 * (uint64)(round * 100 + i), "thread %d returned %lu", i, r);
    }
  }
  expect(nharts() >= 1 && nharts() <= NCPU, "nharts() = %d", nharts());
}

// join and futex argument checks.
static void
t_badargs(void)
{
  uint64 r;
  int tid = start(twice, (void *)1);

  expect(thread_join(getpid(), &r) == -EINVAL, "joining itself did not fail");
  expect(uthread_join(tid, &r) == 0 && r == 2, "join failed");
  expect(thread_join(tid, &r) == -ESRCH, "a second join of %d did not fail with ESRCH", tid);
  expect(thread_join(999999, &r) == -ESRCH, "joining no thread did not fail");
  tid = start(twice, (void *)1);
  expect(thread_join(tid, (uint64 *)1) == -EFAULT, "a bad result pointer did not fail");
  expect(uthread_join(tid, 0) == 0, "the thread was lost after -EFAULT");
  expect(thread_create((void (*)(void *))twice, 0, (void *)0x1008) == -EINVAL,
      "a misaligned stack was accepted");
  static uint32 w = 5;
  expect(futex_wait(&w, 4) == -EAGAIN, "futex_wait on a changed word slept");
  expect(futex_wait((uint32 *)((char *)&w + 1), 5) == -EINVAL, "a misaligned futex");
  expect(futex_wait((uint32 *)0, 0) == -EFAULT, "futex_wait on null");
  expect(futex_wake((uint32 *)0x7ffff000, 1) == -EFAULT, "futex_wake on an unmapped page");
  expect(futex_wake(&w, 1) == 0, "futex_wake woke someone");
}

// Memory written by one thread is seen by the others; a mutex keeps a
// shared counter exact.
static struct mutex count_lock;
static volatile long counter;
static int shared[8];

static uint64
add_many(void *arg)
{
  int me = (int)(uint64)arg;

  shared[me] = me + 1000;
  for (int i = 0; i < 20000; i++) {
    mutex_lock(&count_lock);
    counter = counter + 1;
    mutex_unlock(&count_lock);
  }
  return 0;
}

static void
t_shared(void)
{
  int tids[4];

  for (int i = 0; i < 4; i++)
    tids[i] = start(add_many, (void *)(uint64)i);
  for (int i = 0; i < 4; i++)
    uthread_join(tids[i], 0);
  expect(counter == 4 * 20000, "counter %ld, expected %d", counter, 4 * 20000);
  for (int i = 0; i < 4; i++)
    expect(shared[i] == i + 1000, "shared[%d] = %d", i, shared[i]);
}

// Ping-pong through one futex word, many times: a lost wakeup hangs.
// Then a barrier of 4 threads, whose every round checks all arrived.
static volatile uint32 turn;
static struct barrier bar;
static volatile int arrived[4];

static uint64
pong(void *arg)
{
  (void)arg;
  for (int i = 0; i < 3000; i++) {
    while (__atomic_load_n(&turn, __ATOMIC_ACQUIRE) != 1)
      futex_wait(&turn, 0);
    __atomic_store_n(&turn, 0, __ATOMIC_RELEASE);
    futex_wake(&turn, 1);
  }
  return 0;
}

static uint64
barrier_rounds(void *arg)
{
  int me = (int)(uint64)arg;

  for (int round = 1; round <= 400; round++) {
    arrived[me] = round;
    barrier_wait(&bar);
    for (int j = 0; j < 4; j++)
      if (arrived[j] < round)
        return 1;
    barrier_wait(&bar);
  }
  return 0;
}

static void
t_futex(void)
{
  int tid = start(pong, 0);

  for (int i = 0; i < 3000; i++) {
    while (__atomic_load_n(&turn, __ATOMIC_ACQUIRE) != 0)
      futex_wait(&turn, 1);
    __atomic_store_n(&turn, 1, __ATOMIC_RELEASE);
    futex_wake(&turn, 1);
  }
  uthread_join(tid, 0);

  int tids[3];
  barrier_init(&bar, 4);
  for (int i = 0; i < 3; i++)
    tids[i] = start(barrier_rounds, (void *)(uint64)(i + 1));
  expect(barrier_rounds(0) == 0, "the main thread passed a barrier early");
  for (int i = 0; i < 3; i++) {
    uint64 r = 1;
    uthread_join(tids[i], &r);
    expect(r == 0, "thread %d passed a barrier early", i + 1);
  }
}

// exit() in any thread ends the process with its status, though other
// threads sleep in the kernel and spin.
static uint64
exit_seven(void *arg)
{
  (void)arg;
  sleep(1);
  exit(7);
}

static void
t_exit(void)
{
  int pid = fork();

  if (pid == 0) {
    start(sleep_forever, 0);
    start(spin_forever, 0);
    start(exit_seven, 0);
    for (;;)
      futex_wait(&never, 0);
  }
  WAITSTATUS(pid, 7);
  expect(wait(0) == -ECHILD, "wait saw more than the process");
}

// thread_exit in the main thread ends the process too.
static void
t_mainexit(void)
{
  int pid = fork();

  if (pid == 0) {
    start(sleep_forever, 0);
    thread_exit(9);
  }
  WAITSTATUS(pid, 9);
}

// kill ends every thread: one spinning, one in futex_wait, one in a pipe
// read, and the main thread in join.
static uint64
read_pipe(void *arg)
{
  char c;

  read((int)(uint64)arg, &c, 1);
  return 0;
}

static void
t_kill(void)
{
  int p[2];

  expect(pipe(p) == 0, "pipe failed");
  int pid = fork();
  if (pid == 0) {
    start(spin_forever, 0);
    start(sleep_forever, 0);
    int tid = start(read_pipe, (void *)(uint64)p[0]);
    uthread_join(tid, 0);
    exit(0);
  }
  sleep(3);
  expect(kill(pid) == 0, "kill failed");
  int st = 0;
  expect(wait(&st) == pid, "wait did not return the killed child");
  expect(st == -1, "killed child exited with %d", st);
  close(p[0]);
  close(p[1]);
}

// fork from a thread copies only that thread; its child belongs to the
// process, so wait works from any thread.
static volatile uint64 ticker;
static uint64 __attribute__((noreturn)) tick_forever(void *arg)
{
  (void)arg;
  for (;;)
    ticker++;
}

static uint64
fork_in_thread(void *arg)
{
  (void)arg;
  int pid = fork();
  if (pid == 0) {
    uint64 a = ticker;
    sleep(2);
    exit(ticker == a ? 5 : 6); // no ticking thread in the child
  }
  int st = -1;
  int r = wait(&st);
  return r == pid && st == 5 ? 0 : 1;
}

static void
t_fork(void)
{
  int pid = fork();

  if (pid == 0) {
    start(tick_forever, 0);
    uint64 r = 1;
    uthread_join(start(fork_in_thread, 0), &r);
    exit(r);
  }
  WAITSTATUS(pid, 0);
}

// exec from a thread ends the others; the caller becomes the process:
// the parent's wait sees the same pid with the new program's status.
static uint64
exec_self(void *arg)
{
  (void)arg;
  char *argv[] = { "threadtests", "--exit42", 0 };
  exec("/threadtests", argv);
  return 1;
}

static void
t_exec(void)
{
  for (int from_main = 0; from_main < 2; from_main++) {
    int pid = fork();
    if (pid == 0) {
      start(spin_forever, 0);
      start(sleep_forever, 0);
      if (from_main)
        exec_self(0);
      start(exec_self, 0);
      for (;;)
        futex_wait(&never, 0);
    }
    WAITSTATUS(pid, 42);
  }
}

// sbrk from four threads at once: each region is the thread's own.
// Shrinking with threads is refused.
static uint64
grow_many(void *arg)
{
  char tag = (char)(uint64)arg;
  char *mine[64];

  for (int i = 0; i < 64; i++) {
    mine[i] = sbrk(3 * 4096);
    if (mine[i] == (char *)-1)
      return 1;
    memset(mine[i], tag, 3 * 4096);
  }
  for (int i = 0; i < 64; i++)
    for (int j = 0; j < 3 * 4096; j += 512)
      if (mine[i][j] != tag)
        return 2;
  return 0;
}

static void
t_sbrk(void)
{
  int tids[4];

  for (int i = 0; i < 4; i++)
    tids[i] = start(grow_many, (void *)(uint64)('a' + i));
  for (int i = 0; i < 4; i++) {
    uint64 r = 9;
    uthread_join(tids[i], &r);
    expect(r == 0, "thread %d: sbrk regions overlap or failed (%lu)", i, r);
  }
  int tid = start(sleep_forever, 0);
  expect(sbrk(-4096) == (char *)-1, "shrinking with two threads was allowed");
  (void)tid;
}

// One thread uses a descriptor (dup and close of the copy, fstat, read)
// while another closes it and opens a file or a pipe in its place,
// FDRACE_ROUNDS times: every call answers, with a result or an
// error code, the kernel stays up, and no open file is left behind. (The
// kernel once used a file that another thread's close had just freed: a
// dup then hit the panic "filedup: unused file".)
#define FDRACE_ROUNDS 8000
static volatile int fdrace_done;
static volatile int fdrace_fd; // the main thread's descriptor of the round

static uint64
fdrace_user(void *arg)
{
  char c;
  struct stat st;
  uint64 bad = 0;

  (void)arg;
  while (!fdrace_done) {
    int d = dup(fdrace_fd);
    if (d >= 0)
      bad += close(d) != 0;
    else
      bad += d != -EBADF && d != -EMFILE;
    int r = fstat(fdrace_fd, &st);
    bad += r != 0 && r != -EBADF && r != -EINVAL; // -EINVAL: a pipe has no inode
    r = read(fdrace_fd, &c, 1);
    bad += r < 0 && r != -EBADF;
  }
  return bad;
}

static void
t_fdrace(void)
{
  struct sysinfo before, after;
  int p[2];

  expect(sysinfo(&before) == 0, "sysinfo");
  fdrace_fd = open("/threadtests", O_RDONLY);
  expect(fdrace_fd >= 0, "open: %s", strerror(fdrace_fd));
  int tid = start(fdrace_user, 0);
  for (int i = 0; i < FDRACE_ROUNDS; i++) {
    expect(close(fdrace_fd) == 0, "close %d", fdrace_fd);
    if (i % 2 == 0) {
      int fd = open("/threadtests", O_RDONLY);
      expect(fd >= 0, "open: %s", strerror(fd));
      fdrace_fd = fd;
    } else { // a pipe's read end: a read there ends at EOF
      expect(pipe(p) == 0, "pipe");
      fdrace_fd = p[0];
      close(p[1]);
    }
  }
  fdrace_done = 1;
  uint64 bad = 9;
  expect(uthread_join(tid, &bad) == 0, "join");
  expect(bad == 0, "%lu calls gave a wrong result", bad);
  close(fdrace_fd);
  expect(sysinfo(&after) == 0 && after.files == before.files, "open files %d before, %d after",
      before.files, after.files);
}

// wait sees the process once, whatever its threads did.
static void
t_wait(void)
{
  int pid = fork();

  if (pid == 0) {
    int tids[6];
    for (int i = 0; i < 6; i++)
      tids[i] = start(twice, (void *)(uint64)i);
    for (int i = 0; i < 3; i++)
      uthread_join(tids[i], 0);
    exit(3);
  }
  WAITSTATUS(pid, 3);
  expect(wait(0) == -ECHILD, "wait saw a thread");
}

static int harts_at_start; // nharts() before anything filled memory

// nharts() stays right after every free page was used (the leak check's
// count does that too): the kernel once read the device tree again for
// it, whose pages the page allocator hands out like any other, and then
// said 1.
static void
t_nharts_full(void)
{
  int n = harts_at_start;
  char *start = sbrk(0);
  long got = 0;

  for (long step = 1 << 20; step >= 4096; step /= 16) // to the last page
    while (sbrk(step) != (char *)-1)
      got += step;
  expect(got > 0, "sbrk gave no memory");
  expect(nharts() == n, "nharts() = %d with memory full, %d before", nharts(), n);
  sbrk(-got);
  expect(sbrk(0) == start, "memory not given back");
}

// ---------------------------------------------------------------- runner

static struct test tests[] = {
  { t_createjoin, "createjoin" },
  { t_badargs, "badargs" },
  { t_shared, "shared" },
  { t_futex, "futex" },
  { t_exit, "exit" },
  { t_mainexit, "mainexit" },
  { t_kill, "kill" },
  { t_fork, "fork" },
  { t_exec, "exec" },
  { t_sbrk, "sbrk" },
  { t_wait, "wait" },
  { t_nharts_full, "nhartsfull" },
  { t_fdrace, "fdrace" },
  { 0, 0 },
};

// Free process slots (each with its kernel stack): a child forks
// children that wait on a pipe until fork fails.
static long
countslots(void)
{
  int p[2], q[2];
  long n = 0;

  if (pipe(p) < 0 || pipe(q) < 0)
    return -1;
  if (fork() == 0) {
    close(q[0]);
    int pid;
    char c;
    while ((pid = fork()) > 0)
      n++;
    if (pid == 0) {
      close(p[1]);
      read(p[0], &c, 1);
      exit(0);
    }
    close(p[1]);
    for (long i = 0; i < n; i++)
      wait(0);
    n++; // this child
    write(q[1], &n, sizeof(n));
    exit(0);
  }
  close(p[0]);
  close(p[1]);
  close(q[1]);
  if (read(q[0], &n, sizeof(n)) != sizeof(n))
    n = -1;
  close(q[0]);
  wait(0);
  return n;
}

static const struct leak leaks[] = {
  { "memleak", "pages", count_free_pages },
  { "slotleak", "process slots", countslots },
  { 0 },
};

int
main(int argc, char *argv[])
{
  struct suite suite = { "threadtests", tests, leaks };
  char banner[64];

  if (argc == 2 && strcmp(argv[1], "--exit42") == 0)
    exit(42);
  harts_at_start = nharts();
  snprintf(banner, sizeof(banner), "threadtests starting on %d harts", harts_at_start);
  harness_main(&suite, banner, argc, argv);
}
