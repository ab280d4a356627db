// fuzz: the guest's system-call fuzzer.
//
//   fuzz [-s SEED] [-p PROCS] [-n CALLS]
//
// PROCS worker processes (default 8) each make CALLS system calls (default
// 2000) with arguments drawn from SEED (default 1): typed arguments (every
// kind of bad pointer, huge and negative lengths, invalid descriptors,
// numbers and paths, AI calls with wrong ids and buffers, threads and
// futexes with every kind of stack and word pointer) and raw ones (random
// 64-bit registers, invalid call numbers). Every call number the kernel
// has is made, typed. A worker also forks
// short-lived children that make random calls, exit with random statuses
// and are killed or waited for. One more process serves the AI service as
// its worker (when no real worker is registered), so that AI callers'
// waits end; it takes every request and completes or fails it, with bad
// worker-side calls in between.
//
// Each worker also runs a helper thread that makes unchecked calls on the
// process's shared descriptors, directory and memory while the worker's
// own calls run (see helper_main), in every other phase of HELPER_PHASE
// calls (a process with threads cannot shrink its heap, which the worker's
// sbrk calls do when alone); it is also stopped before each exec the
// worker makes.
//
// Passed and failed. Each call is checked; it passes when
//   - it returns, and the calling process is not killed for it;
//   - its result is a success value or an error code the call can return
//     (errno.h codes for the core calls, AIE_ codes for the AI calls;
//     -ENOSYS exactly for an invalid call number);
//   - it did not report moving data through a pointer the kernel must
//     refuse: a read, fstat, pipe, wait or AI call given an unmapped,
//     kernel, wrapping or (for output) read-only buffer must not return a
//     count or success for it.
// A worker that dies (killed by the kernel, or a wrong exit status) is one
// failed check. At the end, after every process is gone, four leak checks
// compare with the start: free memory pages, open-file table slots and
// process slots (sysinfo()), and AI request slots (ai_info()). The last
// line is "N passed, N failed" over all those checks.
//
// Safety: nothing the fuzzer does can end the test by design. Workers close
// the console descriptors (no reads that wait for a key, no garbage on the
// screen) and keep their report pipe out of every descriptor they pick;
// paths that create, change or remove something are relative names inside
// a scratch directory of the worker's own (fuzz.tmp/wN, removed at the
// end; chdir only moves deeper inside it); kill only targets the worker's
// own children or pids that do not exist; exec only names scratch files
// (never an ELF: program files are only read, and scratch is cleared after)
// or bad pointers; mknod never makes a console node; setfg only gets
// negative groups (the console's foreground stays the shell's choice);
// threads start at an entry that exits at once without touching memory
// (so any stack will do); futex_wait only sees a word that differs from
// its value, or an address it must refuse; a
// pipe's write end is closed right after the pipe is filled a little, so
// reads never wait; sleep is at most 2 ticks; children never fork and make
// no AI call that can block (see child_main).
#include "user/tests/fuzz.h"

// ---------------------------------------------------------------- the parent

// The first entry of the current directory other than . and .., into
// name; 0 when there is none. Holds no descriptor once it returns.
static int
first_entry(char *name)
{
  struct dirent de;
  int fd, found = 0;

  if ((fd = open(".", O_RDONLY)) < 0)
    return 0;
  while (!found && read(fd, &de, sizeof(de)) == sizeof(de)) {
    if (de.inum == 0)
      continue;
    memmove(name, de.name, DIRSIZ);
    name[DIRSIZ] = 0;
    found = strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
  }
  close(fd);
  return found;
}

// Removes everything below the current directory. No descriptor stays
// open across the recursion: the workers' chdir can nest directories
// deeper than a process has descriptors (a 1,000,000-call run left one).
static void
rmtree_here(void)
{
  struct stat st;
  char name[DIRSIZ + 1];

  while (first_entry(name)) {
    if (stat(name, &st) == 0 && st.type == T_DIR && chdir(name) == 0) {
      rmtree_here();
      chdir("..");
    }
    if (unlink(name) < 0)
      return; // cannot go on; the caller's check reports what is left
  }
}

// Removes dir and everything below it.
static void
rmtree(const char *dir)
{
  if (chdir(dir) == 0) {
    rmtree_here();
    chdir("..");
  }
  unlink(dir);
}

// Every caller is done: queue the stop request for the AI worker.
static void
stop_aiworker(void)
{
  uint32 stop[1] = { STOP_TOKEN };
  char out[AI_RESULT_MAX + 1];

  ai_call(stop, 1, 1, out, sizeof(out)); // done or failed: the worker decides
}

struct counts {
  struct sysinfo si;
  struct ai_info ai;
};

// The free resources now, into c.
static void
sample(struct counts *c)
{
  memset(c, 0, sizeof(*c));
  sysinfo(&c->si);
  ai_info(&c->ai);
}

// One leak check line; returns 1 if it passed.
static int
leakcheck(const char *what, long before, long after, int more_is_leak)
{
  int ok = more_is_leak ? after <= before : after >= before;

  if (!ok)
    printf("fuzz: leak: %s %ld before, %ld after\n", what, before, after);
  return ok;
}

// Prints the usage and exits with status 2.
static void
usage(void)
{
  fprintf(2, "usage: fuzz [-s SEED] [-p PROCS] [-n CALLS]\n");
  exit(2);
}

// Reads `-s SEED -p PROCS -n CALLS` into its arguments (their defaults
// kept); a bad argument prints the usage and exits.
static void
parse_args(int argc, char *argv[], long *seed, long *nprocs, long *ncalls)
{
  int i;
  for (i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "-s") == 0)
      *seed = strtol(argv[i + 1], 0, 10);
    else if (strcmp(argv[i], "-p") == 0)
      *nprocs = strtol(argv[i + 1], 0, 10);
    else if (strcmp(argv[i], "-n") == 0)
      *ncalls = strtol(argv[i + 1], 0, 10);
    else
      usage();
  }
  if (i != argc || *nprocs < 1 || *nprocs > 32 || *ncalls < 0)
    usage();
}

// Starts the AI worker process (before any fuzzing process, so that none
// takes the role), reporting on the pipe p; sets aiblock if it serves.
static void
start_aiworker(long seed, int *p)
{
  int ready[2], aipid, aiready = -1;
  if (pipe(ready) < 0) {
    printf("fuzz: pipe failed\n");
    exit(1);
  }
  if ((aipid = fork()) == 0) {
    close(p[0]);
    close(ready[0]);
    aiworker_main(seed * 7919 + 99, ready[1]);
  }
  close(ready[1]);
  if (aipid < 0 || read(ready[0], &aiready, sizeof(aiready)) != sizeof(aiready))
    aiready = -1;
  close(ready[0]);
  aiblock = aiready == 0;
  if (!aiblock)
    printf("fuzz: a real AI worker serves (or none can): AI waits are not fuzzed\n");
}

// Reads every process's report from fd until all have closed the pipe,
// adding up their calls and failures; queues the AI worker's stop once the
// nprocs workers have reported. Returns how many workers reported.
static long
collect_reports(int fd, long nprocs, long *calls, long *failed)
{
  struct report r;
  long got = 0;
  while (read(fd, &r, sizeof(r)) == sizeof(r)) {
    if (r.index >= 0)
      got++;
    *calls += r.calls;
    *failed += r.failed;
    if (r.note[0])
      printf("fuzz: worker %d: %ld failed; first: %s\n", r.index, r.failed, r.note);
    if (r.index >= 0 && got == nprocs && aiblock)
      stop_aiworker();
  }
  return got;
}

// Reaps every child; returns how many exited with a status other than 0.
static long
reap_workers(void)
{
  int pid, st;
  long bad = 0;
  while ((pid = wait(&st)) > 0)
    if (st != 0) {
      printf("fuzz: worker pid %d exited with status %d\n", pid, st);
      bad++;
    }
  return bad;
}

// The counts after the run, into after. Requests still running for a real
// worker are orphans that its reports free: it gets a while.
static void
sample_after(const struct counts *before, struct counts *after)
{
  for (int i = 0; i < 600; i++) {
    sample(after);
    if (after->ai.used <= before->ai.used)
      break;
    sleep(1);
  }
}

// The four leak checks; returns how many failed.
static long
leakchecks(const struct counts *before, const struct counts *after)
{
  long failed = 0;
  failed += !leakcheck("free pages", before->si.freepages, after->si.freepages, 0);
  failed += !leakcheck("open files", before->si.files, after->si.files, 1);
  failed += !leakcheck("processes", before->si.procs, after->si.procs, 1);
  failed += !leakcheck("AI slots", before->ai.used, after->ai.used, 1);
  return failed;
}

// Runs the fuzzer (see above); exit status 1 if a check failed.
int
main(int argc, char *argv[])
{
  long seed = 1, nprocs = 8, ncalls = 2000, calls = 0, failed = 0, bad, got;
  struct counts before, after;
  int p[2], pid;

  parse_args(argc, argv, &seed, &nprocs, &ncalls);
  printf("fuzz: seed %ld, %ld processes x %ld calls\n", seed, nprocs, ncalls);
  rmtree(SANDBOX);
  if (mkdir(SANDBOX) < 0) {
    printf("fuzz: cannot make the scratch directory %s\n", SANDBOX);
    exit(1);
  }
  sample(&before);
  uint64 t0 = time_us();
  if (pipe(p) < 0) {
    printf("fuzz: pipe failed\n");
    exit(1);
  }
  reportfd = p[1];
  start_aiworker(seed, p);
  for (int i = 0; i < nprocs; i++) {
    if ((pid = fork()) == 0) {
      close(p[0]);
      worker_main(i, seed * 1000003 + i, ncalls);
    }
    if (pid < 0)
      printf("fuzz: fork of worker %d failed: %s\n", i, strerror(pid));
  }
  close(p[1]);
  got = collect_reports(p[0], nprocs, &calls, &failed);
  close(p[0]);
  bad = reap_workers();
  if (got < nprocs) {
    printf("fuzz: %ld of %ld workers reported\n", got, nprocs);
    bad += nprocs - got;
  }
  rmtree(SANDBOX);
  sample_after(&before, &after);
  failed += bad + leakchecks(&before, &after);
  printf("fuzz: %ld calls in %ld ms; free pages %ld -> %ld\n", calls,
      (long)((time_us() - t0) / 1000), (long)before.si.freepages, (long)after.si.freepages);
  printf("%ld passed, %ld failed\n", calls + bad + 4 - failed, failed);
  exit(failed != 0);
}
