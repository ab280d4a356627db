// fuzz's worker processes (fuzz.c): one random call of any family, the
// short-lived children, the helper thread, and a worker's run.

#include "user/tests/fuzz.h"

static void child_main(void);

// A worker forks a child that makes a few calls and exits (c is the fork).
static void
fork_child(struct call *c)
{
  c->nr = SYS_fork;
  long r = run(c);
  if (r == 0)
    child_main();
  if (r > 0)
    kids[nkids++] = r;
}

// Makes the typed call c and keeps the worker's books: a pipe is filled a
// little and its write end closed (so reads never wait), the helper thread
// stops before an exec, reaped children and joined threads are forgotten,
// a call's own descriptor closed and scratch cleared if the call asks.
static void
make_typed(struct call *c)
{
  long r;
  if (c->nr == SYS_pipe) {
    // (A success means the kernel wrote the descriptors at a[0]: memory
    // past scratch may be mapped too, by sbrk fuzzing.)
    if (run(c) == 0) {
      int *fds = (int *)c->a[0];
      write(fds[1], "fuzz", pick(5));
      close(fds[1]);
    }
    return;
  }
  if (c->nr == SYS_exec)
    stop_helper();
  r = run(c);
  mmap_made(c, r);
  if (c->nr == SYS_wait && r > 0)
    forget(kids, &nkids, r);
  if (c->nr == SYS_thread_create && r > 0 && !child)
    threads[nthreads++] = r;
  if (c->nr == SYS_thread_join && r == 0)
    forget(threads, &nthreads, c->a[0]);
  if (c->tmpfd >= 0)
    close(c->tmpfd);
  if (c->scrub) // never an ELF image in scratch, so none gets written to a file
    memset(scratch, 0, SCRATCH);
}

// One random call, typed or raw, made and checked.
void
one_call(void)
{
  struct call c;

  memset(&c, 0, sizeof(c));
  c.tmpfd = -1;
  if (chance(RAW_PERCENT)) {
    call_raw(&c);
    run(&c);
    return;
  }
  switch (pick(child ? 12 : 13)) {
  case 0:
  case 1:
  case 2: call_file(&c); break;
  case 3:
  case 4: call_names(&c); break;
  case 5:
  case 6: call_proc(&c); break;
  case 7:
  case 8: call_ai(&c); break;
  case 9: call_threads(&c); break;
  case 10: call_ai_any(&c); break;
  case 11: call_mmap(&c); break;
  default: // fork a child (workers only), or wait for one of MAXKIDS
    if (nkids >= MAXKIDS) {
      c.nr = SYS_wait;
      c.a[0] = 0;
      break;
    }
    fork_child(&c);
    return;
  }
  make_typed(&c);
}

// A worker's child: a few calls, then exit with a random status.
static void
child_main(void)
{
  child = 1;
  nkids = nthreads = helper = 0; // the parent's (fork copies only the calling thread)
  // A child's blocking AI call could sleep in submit on a table full of
  // results that its parent, blocked in wait() for it, holds: a deadlock of
  // the program's own making. Children make only the calls that fail at once.
  aiblock = 0;
  close(reportfd);
  // The parent's helper thread may have held a pipe's write end for a
  // moment (a pipe it had just made, or a dup) when the fork copied the
  // table: a read of that pipe here would wait for the child itself, and
  // the parent, reading it too, for the child. Children keep no pipes.
  struct stat st;
  for (int fd = 0; fd < NOFILE; fd++)
    if (fstat(fd, &st) == -EINVAL)
      close(fd);
  for (int n = 1 + pick(20); n > 0; n--)
    one_call();
  exit(pick(256));
}

// Makes the scratch directory for worker index and goes into it.
static int
enter_sandbox(int index)
{
  char dir[32];

  snprintf(dir, sizeof(dir), "%s/w%d", SANDBOX, index);
  mkdir(dir);
  return chdir(dir);
}

// The helper thread: while the worker's main thread makes its checked
// calls, it makes unchecked ones on what the threads share: descriptors
// (read, write, dup, fstat, close, open, pipe), the directory (mkdir,
// unlink, chdir deeper), the break (sbrk grows) and the children (fork;
// the child exits at once). Its own random numbers and buffers: what it
// reads is never written anywhere (scratch must never hold a program), it
// writes only to files and devices (a full pipe would block it), and it
// leaves blocking AI calls alone, so it always comes back to see
// helper_stop. It makes one call per call of the worker's (futex_wait on
// main_calls), so the two overlap without the helper taking over the hart.
static void
helper_main(void *arg)
{
  static const char *names[] = { "a", "b", "h", "a/h", "h/h", "." };
  static char in[512];
  static const char out[64] = "written by the helper thread";
  struct stat st;
  uint64 r = (uint64)arg | 1;
  int p[2];

  uint32 seen = main_calls;
  while (!helper_stop) {
    futex_wait(&main_calls, seen);
    seen = main_calls;
    rnd_from(&r); // its own state: rng is the worker's
    int fd = (int)((r >> 8) % NOFILE), n = (int)((r >> 32) % sizeof(in));
    const char *name = names[(r >> 40) % NELEM(names)];
    if (fd == reportfd)
      continue;
    switch ((r >> 20) % 10) {
    case 0: read(fd, in, n); break;
    case 1:
      if (fstat(fd, &st) == 0 && st.type != T_DIR)
        write(fd, out, n % sizeof(out));
      break;
    case 2:
      if ((n = dup(fd)) >= 0)
        close(n);
      break;
    case 3: close(fd); break;
    case 4: open(name, n % 2 ? O_CREATE | O_RDWR : O_RDONLY); break;
    case 5:
      if (pipe(p) == 0) {
        close(p[1]); // so a read of p[0] ends
        if (n % 2)
          close(p[0]);
      }
      break;
    case 6: n % 2 ? mkdir(name) : unlink(name); break;
    case 7: chdir(name); break; // names never climb
    case 8: sbrk(n); break;
    default:
      if (n % 8 == 0 && fork() == 0)
        exit(0);
      break;
    }
  }
  thread_exit(0);
}

// Starts the helper thread if none runs.
static void
start_helper(void)
{
  if (helper == 0)
    helper = thread_create(helper_main, (void *)rnd(), hstack + HSTACK);
  if (helper < 0)
    helper = 0;
}

// Ends the helper thread and waits for it: at the end, and before an exec,
// which ends the other threads only once it has copied its arguments (so
// the worker could not tell whether the helper still runs).
void
stop_helper(void)
{
  if (helper == 0)
    return;
  helper_stop = 1;
  main_calls++;
  futex_wake(&main_calls, 1);
  thread_join(helper, 0);
  helper = helper_stop = 0;
}

// Worker index: ncalls checked calls, then waits for its children.
void __attribute__((noreturn)) worker_main(int index, uint64 seed, long ncalls)
{
  setup(seed);
  rep.index = index;
  if (enter_sandbox(index) < 0) {
    struct call c = { .nr = SYS_chdir };
    fail(&c, -1, "cannot enter the scratch directory");
    send_report();
    exit(1);
  }
  while (rep.calls < ncalls) {
    if (rep.calls / HELPER_PHASE % 2 == 0)
      start_helper();
    else
      stop_helper(); // alone, the worker's sbrk may shrink the heap again
    one_call();
    main_calls++;
    futex_wake(&main_calls, 1);
  }
  stop_helper();
  while (wait(0) > 0)
    ;
  send_report();
  exit(0);
}
