// usertests: the guest's self-test.
//
//   usertests          run every case
//   usertests -q       only the quick ones
//   usertests NAME...  only the named cases
//
// The runner (harness.c) gives one line per case, "test NAME: OK" or
// "test NAME: FAILED (why)", then the leak checks and the summary.
// Around the cases two leak checks count the free memory pages (a child
// grows its heap until sbrk fails) and the free slots of the kernel's
// open-file table (children open files until ENFILE), before and after:
// a page or file the kernel failed to free is missing at the end.
//
// The cases are a check on the kernel: they pass kernel addresses, null
// and all-ones pointers, bad descriptors and bad paths to every system
// call, and a kernel bug shows up as a FAILED line, not a hang or panic.

#include "user/lib/user.h"
#include "kernel/include/fcntl.h"
#include "kernel/include/stat.h"
#include "kernel/include/param.h"
#include "kernel/include/fs.h"
#include "kernel/include/memlayout.h"
#include "kernel/include/elf.h"
#include "kernel/include/aisvc.h"
#include "kernel/include/sysinfo.h"
#include "user/tests/harness.h"

#define MB       (1024L * 1024)
#define NELEM(a) ((int)(sizeof(a) / sizeof((a)[0])))

// ---------------------------------------------------------------- checks

// EXPECT_ERR(call, ECODE): the call must return exactly -ECODE.
#define EXPECT_ERR(expr, code) experr((long)(expr), (code), #expr, __LINE__)
// EXPECT_OK(call): the call must return a value >= 0; yields it.
#define EXPECT_OK(expr) expok((long)(expr), #expr, __LINE__)

static void
experr(long got, int code, const char *what, int line)
{
  char why[250];

  if (got == -code)
    return;
  snprintf(why, sizeof(why), "%s returned %ld (%s), expected -%d (%s)", what, got,
      got < 0 ? strerror(got) : "success", code, strerror(code));
  failed(line, why);
}

static long
expok(long got, const char *what, int line)
{
  char why[250];

  if (got >= 0)
    return got;
  snprintf(why, sizeof(why), "%s failed: %ld (%s)", what, got, strerror(got));
  failed(line, why);
}

// Wait for the child pid, which the kernel must have killed.
#define WAITKILLED(pid) \
  do { \
    int st_ = 0, r_ = wait(&st_); \
    expect(r_ == (pid), "wait returned %d, expected %d", r_, (pid)); \
    expect(st_ != 0, "child %d exited with status 0", (pid)); \
  } while (0)

// Wait for n children, each of which must exit with status 0 (a failed
// one has already written its reason).
static void
waitchildren(int n)
{
  int r, st;

  for (; n > 0; n--) {
    r = wait(&st);
    expect(r > 0, "wait returned %d (%s) with %d children left", r, strerror(r), n);
    expect(st == 0, "child %d exited with status %d", r, st);
  }
}

// The addresses no system call may read or write through: null, the
// kernel's RAM, all ones, the trap frame and trampoline (mapped, but not
// for user mode) and an unmapped page above the heap.
static char *
badptr(int i)
{
  switch (i) {
  case 0: return (char *)0;
  case 1: return (char *)KERNBASE;
  case 2: return (char *)0xffffffffffffffffUL;
  case 3: return (char *)TRAPFRAME;
  case 4: return (char *)TRAMPOLINE;
  case 5: return (char *)(((uint64)sbrk(0) + 16 * PGSIZE) & ~(uint64)(PGSIZE - 1));
  }
  return 0;
}
#define NBADPTR 6

// Create path holding n bytes of c; returns an fd open for reading.
static int
makefile(const char *path, int n, char c)
{
  char buf[512];
  int fd, k;

  memset(buf, c, sizeof(buf));
  fd = EXPECT_OK(open(path, O_CREATE | O_TRUNC | O_WRONLY));
  for (; n > 0; n -= k) {
    k = n < 512 ? n : 512;
    expect(write(fd, buf, k) == k, "write to %s failed", path);
  }
  close(fd);
  return EXPECT_OK(open(path, O_RDONLY));
}

// Read fd to its end into buf (at most max bytes); returns the count.
static int
readall(int fd, char *buf, int max)
{
  int n, total = 0;

  while (total < max && (n = read(fd, buf + total, max - total)) > 0)
    total += n;
  return total;
}

// A deterministic byte stream for big transfers: byte i of stream seed.
static char
patbyte(uint64 i, int seed)
{
  return (char)((i * 2654435761UL >> 13) ^ (i >> 20) ^ seed);
}

// ---------------------------------------------------------------- processes

static void
t_getpid(void)
{
  int p[2], me, pid, child;

  me = getpid();
  expect(me > 0, "getpid returned %d", me);
  EXPECT_OK(pipe(p));
  pid = EXPECT_OK(fork());
  if (pid == 0) {
    child = getpid();
    write(p[1], &child, sizeof(child));
    exit(child == me);
  }
  expect(read(p[0], &child, sizeof(child)) == sizeof(child), "no pid from child");
  expect(child == pid, "child says it is %d, fork said %d", child, pid);
  expect(getpid() == me, "getpid changed from %d to %d", me, getpid());
  WAITSTATUS(pid, 0);
}

static void
t_exitstatus(void)
{
  int codes[] = { 0, 1, 42, 255, -1 };
  int i, pid;

  for (i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
    pid = EXPECT_OK(fork());
    if (pid == 0)
      exit(codes[i]);
    WAITSTATUS(pid, codes[i]);
  }
  // A null status pointer is allowed.
  pid = EXPECT_OK(fork());
  if (pid == 0)
    exit(3);
  expect(wait(0) == pid, "wait(0) did not return the child");
  EXPECT_ERR(wait(0), ECHILD);
}

// A child's own child is adopted by init when the child exits first.
static void
t_orphan(void)
{
  int pid;

  pid = EXPECT_OK(fork());
  if (pid == 0) {
    if (fork() == 0) {
      sleep(2);
      exit(0);
    }
    exit(0);
  }
  WAITSTATUS(pid, 0);
  EXPECT_ERR(wait(0), ECHILD);
}

// Fork until the process table is full: fork must fail with an error,
// and work again once the children have gone.
static void
t_forkmany(void)
{
  int p[2], n, pid, r;
  char c;

  EXPECT_OK(pipe(p));
  for (n = 0; n < 1000; n++) {
    pid = fork();
    if (pid == 0) {
      // Block until the parent closes the pipe.
      close(p[1]);
      read(p[0], &c, 1);
      exit(0);
    }
    if (pid < 0)
      break;
  }
  expect(pid == -EAGAIN || pid == -ENOMEM, "fork %d returned %d (%s), expected -EAGAIN", n, pid,
      pid < 0 ? strerror(pid) : "success");
  expect(n >= 16, "only %d forks succeeded", n);
  close(p[1]);
  for (; n > 0; n--)
    expect((r = wait(0)) > 0, "wait returned %d with %d children left", r, n);
  pid = EXPECT_OK(fork());
  if (pid == 0)
    exit(0);
  WAITSTATUS(pid, 0);
}

// Many processes forking and exiting at once (locks in fork/exit/wait).
static void
t_forkstorm(void)
{
  int i, j, pid;

  for (i = 0; i < 4; i++) {
    pid = EXPECT_OK(fork());
    if (pid == 0) {
      for (j = 0; j < 100; j++) {
        pid = fork();
        if (pid == 0)
          exit(j & 7);
        if (pid < 0)
          continue;
        WAITSTATUS(pid, j & 7);
      }
      exit(0);
    }
  }
  waitchildren(4);
}

// Run argv with its output into a pipe; returns the output in buf.
static int
runcapture(char **argv, char *buf, int max)
{
  int p[2], pid, n;

  EXPECT_OK(pipe(p));
  pid = EXPECT_OK(fork());
  if (pid == 0) {
    close(1);
    dup(p[1]);
    close(p[0]);
    close(p[1]);
    n = exec(argv[0], argv);
    fail("exec %s: %s", argv[0], strerror(n));
  }
  close(p[1]);
  n = readall(p[0], buf, max - 1);
  buf[n] = 0;
  close(p[0]);
  WAITSTATUS(pid, 0);
  return n;
}

static void
t_exec(void)
{
  char *argv[] = { "/echo", "hello", "world", 0 };
  char out[64];

  runcapture(argv, out, sizeof(out));
  expect(strcmp(out, "hello world\n") == 0, "echo printed \"%s\"", out);
}

// exec in a grandchild that reports 77 when exec fails as expected, so a
// wrongly successful exec (the program would exit 0) fails the case.
#define EXECFAILS(path, argv, code) \
  do { \
    int pid_ = EXPECT_OK(fork()); \
    if (pid_ == 0) { \
      EXPECT_ERR(exec((path), (argv)), (code)); \
      exit(77); \
    } \
    WAITSTATUS(pid_, 77); \
  } while (0)

static void
t_execargs(void)
{
  static char *argv[MAXARG + 2];
  static char out[4096], big[MAXARGLEN + 1];
  int i, n;

  argv[0] = "/echo";
  for (i = 1; i < MAXARG - 1; i++)
    argv[i] = "ab";
  argv[i] = 0;
  n = runcapture(argv, out, sizeof(out));
  expect(n == 3 * (MAXARG - 2), "echo of %d args printed %d bytes", MAXARG - 2, n);
  for (i = 1; i < MAXARG + 1; i++)
    argv[i] = "ab";
  argv[i] = 0;
  EXECFAILS("/echo", argv, E2BIG);
  // MAXARGLEN counts the terminating NUL.
  memset(big, 'x', MAXARGLEN);
  argv[1] = big;
  argv[2] = 0;
  EXECFAILS("/echo", argv, E2BIG);
}

// Files that are not programs: text, empty, and ELF headers that lie.
static void
t_execbad(void)
{
  char *argv[] = { "x", 0 };
  uint64 hdr[8];
  int fd;

  close(makefile("ut_script", 100, '#'));
  close(makefile("ut_empty", 0, 0));
  EXECFAILS("ut_script", argv, ENOEXEC);
  EXECFAILS("ut_empty", argv, ENOEXEC);
  EXECFAILS("ut_nosuch", argv, ENOENT);
  // An ELF64 RISC-V header whose program headers lie far past the file.
  memset(hdr, 0, sizeof(hdr));
  memmove(hdr, "\177ELF\2\1\1", 7);
  hdr[2] = 0x10000f3 | (1UL << 32);              // e_type EXEC, e_machine RISC-V, version 1
  hdr[3] = 0x1000;                               // e_entry
  hdr[4] = 0x7ffffffffff0UL;                     // e_phoff
  hdr[7] = (0xffffUL << 16) | (56UL << 32) | 64; // e_phnum 65535, e_phentsize 56, e_ehsize
  fd = EXPECT_OK(open("ut_badelf", O_CREATE | O_TRUNC | O_WRONLY));
  expect(write(fd, hdr, sizeof(hdr)) == sizeof(hdr), "write ut_badelf");
  close(fd);
  EXECFAILS("ut_badelf", argv, ENOEXEC);
  unlink("ut_script");
  unlink("ut_empty");
  unlink("ut_badelf");
}

// ---------------------------------------------------------------- pipes

static void
t_pipe(void)
{
  char buf[1100];
  int p[2], pid, i, n, total = 0;

  EXPECT_OK(pipe(p));
  pid = EXPECT_OK(fork());
  if (pid == 0) {
    close(p[0]);
    for (i = 0; i < 5; i++) {
      memset(buf, 'a' + i, 1033);
      expect(write(p[1], buf, 1033) == 1033, "pipe write %d", i);
    }
    exit(0);
  }
  close(p[1]);
  while ((n = read(p[0], buf, sizeof(buf))) > 0) {
    for (i = 0; i < n; i++, total++)
      expect(buf[i] == 'a' + total / 1033, "byte %d is %c", total, buf[i]);
  }
  expect(n == 0 && total == 5 * 1033, "read %d bytes, last read %d", total, n);
  WAITSTATUS(pid, 0);
}

// 4 MB through a pipe in odd-sized writes and reads.
static void
t_pipebig(void)
{
  static char buf[9000];
  uint64 total = 0, want = 4 * MB;
  int p[2], pid, n, i;

  EXPECT_OK(pipe(p));
  pid = EXPECT_OK(fork());
  if (pid == 0) {
    close(p[0]);
    while (total < want) {
      n = 1 + (total * 7 + 4093) % sizeof(buf);
      if (n > want - total)
        n = want - total;
      for (i = 0; i < n; i++)
        buf[i] = patbyte(total + i, 5);
      expect(write(p[1], buf, n) == n, "pipe write at %ld", (long)total);
      total += n;
    }
    exit(0);
  }
  close(p[1]);
  while ((n = read(p[0], buf, 1 + total % 5000)) > 0) {
    for (i = 0; i < n; i++)
      expect(buf[i] == patbyte(total + i, 5), "wrong byte at %ld", (long)(total + i));
    total += n;
  }
  expect(n == 0 && total == want, "read %ld of %ld bytes, then %d", (long)total, (long)want, n);
  WAITSTATUS(pid, 0);
}

// The reader sees end-of-file once every writer has closed its end.
static void
t_pipeeof(void)
{
  char buf[256];
  int p[2], i, pid, n, total = 0;

  EXPECT_OK(pipe(p));
  for (i = 0; i < 3; i++) {
    pid = EXPECT_OK(fork());
    if (pid == 0) {
      close(p[0]);
      memset(buf, 'x', 100);
      sleep(i);
      write(p[1], buf, 100);
      exit(0);
    }
  }
  close(p[1]);
  while ((n = read(p[0], buf, sizeof(buf))) > 0)
    total += n;
  expect(n == 0 && total == 300, "read %d bytes then %d", total, n);
  waitchildren(3);
}

// Writing to a pipe nobody can read fails with EPIPE.
static void
t_pipeclosed(void)
{
  int p[2];

  EXPECT_OK(pipe(p));
  close(p[0]);
  EXPECT_ERR(write(p[1], "x", 1), EPIPE);
  close(p[1]);
}

// ---------------------------------------------------------------- kill

// kill ends a process that spins, one that sleeps, and one blocked in
// a pipe read, promptly.
static void
t_kill(void)
{
  int pids[3], p[2], i, st, t0;
  char c;

  EXPECT_OK(pipe(p));
  for (i = 0; i < 3; i++) {
    pids[i] = EXPECT_OK(fork());
    if (pids[i] == 0) {
      if (i == 0)
        for (;;)
          ;
      if (i == 1)
        sleep(100000);
      read(p[0], &c, 1);
      exit(0);
    }
  }
  sleep(2);
  t0 = uptime();
  for (i = 0; i < 3; i++)
    EXPECT_OK(kill(pids[i]));
  for (i = 0; i < 3; i++) {
    expect(wait(&st) > 0, "wait after kill");
    expect(st != 0, "a killed child exited with status 0");
  }
  expect(uptime() - t0 < 50, "kill took %d ticks", uptime() - t0);
  EXPECT_ERR(kill(pids[0]), ESRCH);
  close(p[0]);
  close(p[1]);
}

// ---------------------------------------------------------------- memory

static int
sbrkfailed(char *p)
{
  return p == (char *)-1;
}

// Align the break to a page, so shrinking frees whole pages.
static char *
alignbrk(void)
{
  uint64 brk = (uint64)sbrk(0);

  if (brk % PGSIZE)
    sbrk(PGSIZE - brk % PGSIZE);
  return sbrk(0);
}

static void
t_sbrkbasic(void)
{
  char *a, *b;
  int i;

  a = sbrk(0);
  b = sbrk(10000);
  expect(b == a, "sbrk(10000) returned %p, the break was %p", b, a);
  expect(sbrk(0) == a + 10000, "break is %p after growing %p by 10000", sbrk(0), a);
  for (i = 0; i < 10000; i++)
    a[i] = i;
  for (i = 0; i < 10000; i++)
    expect(a[i] == (char)i, "heap byte %d changed", i);
  b = sbrk(-10000);
  expect(b == a + 10000, "sbrk(-10000) returned %p", b);
  expect(sbrk(0) == a, "break is %p after shrinking, expected %p", sbrk(0), a);
  // One byte at a time crosses page boundaries at odd places.
  for (i = 0; i < 5000; i++) {
    b = sbrk(1);
    expect(b == a + i, "sbrk(1) number %d returned %p", i, b);
    *b = 1;
  }
  sbrk(-5000);
}

// Memory from sbrk is zero, also when it was used and given back before.
static void
t_sbrkzero(void)
{
  char *a, *b;
  long i, n = 4 * MB;

  a = alignbrk();
  b = sbrk(n);
  expect(!sbrkfailed(b), "sbrk(%ld) failed", n);
  for (i = 0; i < n; i++)
    expect(a[i] == 0, "new heap byte %ld is %d", i, a[i]);
  memset(a, 0xaa, n);
  sbrk(-n);
  b = sbrk(n);
  expect(b == a, "regrow returned %p, expected %p", b, a);
  for (i = 0; i < n; i++)
    expect(a[i] == 0, "regrown heap byte %ld is %d", i, a[i]);
  sbrk(-n);
}

// Grow by as much as the machine has, from 1.5 GiB down to 32 MiB: touch
// every page, give it back, grow again.
static void
t_sbrkbig(void)
{
  char *a, *b;
  long n, i;

  a = alignbrk();
  for (n = 1536 * MB; n >= 32 * MB; n /= 2) {
    b = sbrk(n);
    if (!sbrkfailed(b))
      break;
    expect(sbrk(0) == a, "failed sbrk(%ld) moved the break", n);
  }
  expect(n >= 32 * MB, "could not grow by even 32 MB");
  expect(b == a, "sbrk(%ld) returned %p, expected %p", n, b, a);
  for (i = 0; i < n; i += PGSIZE) {
    expect(a[i] == 0, "new page at +%ld not zero", i);
    a[i] = (char)(i / PGSIZE) | 1;
  }
  for (i = 0; i < n; i += PGSIZE)
    expect(a[i] == ((char)(i / PGSIZE) | 1), "page at +%ld lost its value", i);
  expect(sbrk(-n) == a + n, "sbrk(-%ld) failed", n);
  expect(sbrk(0) == a, "break not back after release");
  b = sbrk(n);
  expect(b == a, "growing again by %ld after release failed", n);
  a[n - 1] = 1;
  sbrk(-n);
}

// Impossible requests fail with (char *)-1 and leave the break alone.
static void
t_sbrkfail(void)
{
  char *a = sbrk(0);

  expect(sbrkfailed(sbrk(1L << 45)), "sbrk(2^45) succeeded");
  expect(sbrkfailed(sbrk(-(long)a - 4096)), "shrinking below 0 succeeded");
  expect(sbrkfailed(sbrk(0x7fffffffffffffffL)), "sbrk(LONG_MAX) succeeded");
  expect(sbrk(0) == a, "a failed sbrk moved the break");
  expect(!sbrkfailed(sbrk(4096)), "sbrk(4096) failed after the bad calls");
  sbrk(-4096);
}

// fork copies the heap; the copies are independent.
static void
t_sbrkfork(void)
{
  char *a;
  int i, pid, n = 256 * 1024;

  a = sbrk(n);
  expect(!sbrkfailed(a), "sbrk failed");
  for (i = 0; i < n; i++)
    a[i] = patbyte(i, 1);
  pid = EXPECT_OK(fork());
  if (pid == 0) {
    for (i = 0; i < n; i++)
      expect(a[i] == patbyte(i, 1), "child heap byte %d differs", i);
    memset(a, 0, n);
    exit(0);
  }
  WAITSTATUS(pid, 0);
  for (i = 0; i < n; i++)
    expect(a[i] == patbyte(i, 1), "the child's writes reached the parent at %d", i);
}

// malloc, calloc and free, small and big.
static void
t_malloc(void)
{
  char *p[200], *big;
  int i, j;

  for (i = 0; i < 200; i++) {
    p[i] = malloc(1 + i * 37);
    expect(p[i] != 0, "malloc(%d) failed", 1 + i * 37);
    expect(((uint64)p[i] & 15) == 0, "malloc returned unaligned %p", p[i]);
    memset(p[i], i, 1 + i * 37);
  }
  for (i = 0; i < 200; i++)
    for (j = 0; j < 1 + i * 37; j++)
      expect(p[i][j] == (char)i, "block %d overwritten at %d", i, j);
  for (i = 0; i < 200; i += 2)
    free(p[i]);
  for (i = 1; i < 200; i += 2)
    free(p[i]);
  big = calloc(64, MB);
  expect(big != 0, "calloc(64, 1 MB) failed");
  for (i = 0; i < 64 * MB; i += PGSIZE)
    expect(big[i] == 0, "calloc memory not zero at %d", i);
  memset(big, 1, 64 * MB);
  free(big);
  big = calloc(64, MB);
  expect(big != 0, "calloc after free failed");
  for (i = 0; i < 64 * MB; i += 997)
    expect(big[i] == 0, "reused calloc memory not zero at %d", i);
  free(big);
  expect(calloc(1L << 40, 1L << 30) == 0, "calloc overflow returned memory");
}

// Each way of touching memory a process does not own kills it (with a
// message from the kernel), and nothing else.
static void
t_faults(void)
{
  int i, pid;
  volatile char *p;

  for (i = 0; i < 5; i++) {
    pid = EXPECT_OK(fork());
    if (pid == 0) {
      switch (i) {
      case 0:
        p = 0;
        *p = 1;
        break;
      case 1:
        p = (char *)KERNBASE;
        i = *p;
        break;
      case 2:
        p = (char *)TRAPFRAME;
        *p = 1;
        break;
      case 3: ((void (*)(void))KERNBASE)(); break;
      case 4:
        p = badptr(5);
        *p = 1;
        break;
      }
      exit(0);
    }
    WAITKILLED(pid);
  }
}

static int
recurse(int n)
{
  volatile char pad[1024];

  pad[0] = n;
  return n == 0 ? 0 : recurse(n - 1) + pad[0];
}

// Running off the end of the user stack hits the guard page.
static void
t_stackoverflow(void)
{
  int pid;

  pid = EXPECT_OK(fork());
  if (pid == 0) {
    recurse(USTACKSIZE / 1024 * 2);
    exit(0);
  }
  WAITKILLED(pid);
}

// ---------------------------------------------------------------- floating point

// Load v[0..32) into f0-f31 and fcsr, spin for iters loop turns (the
// timer preempts us many times), then store them into out[0..32] (out[32]
// gets fcsr). All in one asm statement, so the compiler cannot use the
// registers in between.
static void
fpspin(double *v, uint64 fcsr, double *out, long iters)
{
  asm volatile("fld f0, 0(%0)\n fld f1, 8(%0)\n fld f2, 16(%0)\n fld f3, 24(%0)\n"
               "fld f4, 32(%0)\n fld f5, 40(%0)\n fld f6, 48(%0)\n fld f7, 56(%0)\n"
               "fld f8, 64(%0)\n fld f9, 72(%0)\n fld f10, 80(%0)\n fld f11, 88(%0)\n"
               "fld f12, 96(%0)\n fld f13, 104(%0)\n fld f14, 112(%0)\n fld f15, 120(%0)\n"
               "fld f16, 128(%0)\n fld f17, 136(%0)\n fld f18, 144(%0)\n fld f19, 152(%0)\n"
               "fld f20, 160(%0)\n fld f21, 168(%0)\n fld f22, 176(%0)\n fld f23, 184(%0)\n"
               "fld f24, 192(%0)\n fld f25, 200(%0)\n fld f26, 208(%0)\n fld f27, 216(%0)\n"
               "fld f28, 224(%0)\n fld f29, 232(%0)\n fld f30, 240(%0)\n fld f31, 248(%0)\n"
               "fscsr %1\n"
               "1: addi %2, %2, -1\n bnez %2, 1b\n"
               "frcsr %1\n sd %1, 256(%3)\n"
               "fsd f0, 0(%3)\n fsd f1, 8(%3)\n fsd f2, 16(%3)\n fsd f3, 24(%3)\n"
               "fsd f4, 32(%3)\n fsd f5, 40(%3)\n fsd f6, 48(%3)\n fsd f7, 56(%3)\n"
               "fsd f8, 64(%3)\n fsd f9, 72(%3)\n fsd f10, 80(%3)\n fsd f11, 88(%3)\n"
               "fsd f12, 96(%3)\n fsd f13, 104(%3)\n fsd f14, 112(%3)\n fsd f15, 120(%3)\n"
               "fsd f16, 128(%3)\n fsd f17, 136(%3)\n fsd f18, 144(%3)\n fsd f19, 152(%3)\n"
               "fsd f20, 160(%3)\n fsd f21, 168(%3)\n fsd f22, 176(%3)\n fsd f23, 184(%3)\n"
               "fsd f24, 192(%3)\n fsd f25, 200(%3)\n fsd f26, 208(%3)\n fsd f27, 216(%3)\n"
               "fsd f28, 224(%3)\n fsd f29, 232(%3)\n fsd f30, 240(%3)\n fsd f31, 248(%3)\n"
               : "+r"(v), "+r"(fcsr), "+r"(iters)
               : "r"(out)
               : "memory", "f0", "f1", "f2", "f3", "f4", "f5", "f6", "f7", "f8", "f9", "f10", "f11",
               "f12", "f13", "f14", "f15", "f16", "f17", "f18", "f19", "f20", "f21", "f22", "f23",
               "f24", "f25", "f26", "f27", "f28", "f29", "f30", "f31");
}

// Several processes hold distinct values in all FP registers and fcsr
// while they take turns on the harts for about two seconds each; a
// kernel that does not save and restore them per process mixes them up.
#define NFPPROC 4

static void
fpworker(int id)
{
  double v[32], out[33];
  uint64 fcsr, got, t0 = time_us();
  int i, round;

  for (round = 0; time_us() - t0 < 2000000; round++) {
    for (i = 0; i < 32; i++)
      v[i] = id * 1000.0 + i + round * 0.25;
    // frm (bits 5-7) and fflags (bits 0-4) differ per process.
    fcsr = ((id % 5) << 5) | ((round + id) & 31);
    fpspin(v, fcsr, out, 5000000);
    for (i = 0; i < 32; i++)
      expect(out[i] == v[i], "process %d round %d: f%d changed", id, round, i);
    memmove(&got, &out[32], sizeof(got));
    expect(got == fcsr, "process %d: fcsr %lx became %lx", id, fcsr, got);
  }
}

static void
t_fpregs(void)
{
  int i, pid;

  for (i = 0; i < NFPPROC; i++) {
    pid = EXPECT_OK(fork());
    if (pid == 0) {
      fpworker(i + 1);
      exit(0);
    }
  }
  waitchildren(NFPPROC);
}

// ---------------------------------------------------------------- vector unit

// Load v0-v31 from in (32 * vlenb bytes), set vtype, vl = avl and vxrm,
// spin for iters loop turns (the timer preempts us many times), then
// store v0-v31 into out and vl, vtype and vcsr into csr[0..3]. One asm
// statement, so nothing else can touch the vector unit in between.
static void
vecspin(const char *in, uint64 vtype, uint64 avl, uint64 vxrm, char *out, uint64 *csr, long iters)
{
  asm volatile(".option push\n .option arch, +v\n"
               "csrr t1, vlenb\n slli t1, t1, 3\n mv t0, %[in]\n"
               "vl8r.v v0, (t0)\n add t0, t0, t1\n vl8r.v v8, (t0)\n add t0, t0, t1\n"
               "vl8r.v v16, (t0)\n add t0, t0, t1\n vl8r.v v24, (t0)\n"
               "vsetvl zero, %[avl], %[vtype]\n csrw vxrm, %[vxrm]\n"
               "1: addi %[iters], %[iters], -1\n bnez %[iters], 1b\n"
               "csrr t2, vl\n sd t2, 0(%[csr])\n csrr t2, vtype\n sd t2, 8(%[csr])\n"
               "csrr t2, vcsr\n sd t2, 16(%[csr])\n mv t0, %[out]\n"
               "vs8r.v v0, (t0)\n add t0, t0, t1\n vs8r.v v8, (t0)\n add t0, t0, t1\n"
               "vs8r.v v16, (t0)\n add t0, t0, t1\n vs8r.v v24, (t0)\n"
               ".option pop\n"
               : [iters] "+r"(iters)
               : [in] "r"(in), [out] "r"(out), [csr] "r"(csr), [avl] "r"(avl), [vtype] "r"(vtype),
               [vxrm] "r"(vxrm)
               : "memory", "t0", "t1", "t2");
}

// Several processes hold distinct contents in all vector registers and
// distinct vl, vtype (element width, register grouping) and vxrm while
// they take turns on the harts for about two seconds each; a kernel that
// does not keep the vector state per process mixes them up.
#define NVPROC 4

static void
vecworker(int id, int vlenb)
{
  static char in[32 * 128], out[32 * 128];
  uint64 csr[3], t0 = time_us();
  int i, n = 32 * vlenb, round;

  for (round = 0; time_us() - t0 < 2000000; round++) {
    for (i = 0; i < n; i++)
      in[i] = (char)(id * 37 + i * 7 + round);
    uint64 sew = (id + round) % 4, lmul = id % 4; // e8..e64, m1..m8
    uint64 vlmax = (uint64)vlenb * 8 * (1 << lmul) / (8 << sew);
    uint64 avl = 1 + (id * 5 + round) % vlmax, vxrm = (id + round) % 4;
    uint64 vtype = (1 << 7) | (sew << 3) | lmul; // vma set, vta clear
    vecspin(in, vtype, avl, vxrm, out, csr, 5000000);
    for (i = 0; i < n; i++)
      expect(out[i] == in[i], "process %d round %d: v%d byte %d changed", id, round, i / vlenb,
          i % vlenb);
    expect(csr[0] == avl, "process %d round %d: vl %lu became %lu", id, round, avl, csr[0]);
    expect(csr[1] == vtype, "process %d: vtype %lx became %lx", id, vtype, csr[1]);
    expect(csr[2] >> 1 == vxrm, "process %d: vxrm %lu became vcsr %lx", id, vxrm, csr[2]);
  }
}

// With V: processes keep their vector state (vecworker), and an illegal
// instruction that is not a vector one still kills. Without V: vlenb() is
// 0, and a vector instruction kills the process like any illegal one.
static void
t_vecregs(void)
{
  int i, pid, n = vlenb();

  expect(n == 0 || (n >= 16 && n <= 128 && (n & (n - 1)) == 0), "vlenb() = %d", n);
  pid = EXPECT_OK(fork());
  if (pid == 0) {
    if (n == 0)
      asm volatile(".option push\n .option arch, +v\n vsetvli t0, zero, e8, m1, ta, ma\n"
                   ".option pop\n" ::
                       : "t0");
    else
      asm volatile(".word 0"); // all-zero bits: illegal on every RISC-V
    exit(0);
  }
  WAITKILLED(pid);
  if (n == 0)
    return;
  for (i = 0; i < NVPROC; i++) {
    pid = EXPECT_OK(fork());
    if (pid == 0) {
      vecworker(i + 1, n);
      exit(0);
    }
  }
  waitchildren(NVPROC);
}

static uint64
bits(double d)
{
  uint64 u;

  memmove(&u, &d, sizeof(u));
  return u;
}

static double
fsqrt(double x)
{
  double r;

  asm("fsqrt.d %0, %1" : "=f"(r) : "f"(x));
  return r;
}

// A long sum that depends on every rounding step: the same code gives the
// same bits in the parent and in children running side by side.
static double
series(int seed)
{
  double s = 0.0, x = seed;
  int k;

  for (k = 1; k < 300000; k++) {
    s = s + 1.0 / (x * k);
    x = x * 1.0000001;
  }
  return s;
}

static void
t_fpmath(void)
{
  volatile double third = 1.0, two = 2.0, a = 0.1, b = 0.2;
  volatile float f3 = 3.0f;
  double want[NFPPROC];
  int i, pid;

  // Correctly rounded IEEE results, known bit for bit.
  expect(bits(third / 3.0) == 0x3fd5555555555555UL, "1/3 = %lx", bits(third / 3.0));
  expect(bits(a + b) == 0x3fd3333333333334UL, "0.1 + 0.2 = %lx", bits(a + b));
  expect(bits(fsqrt(two)) == 0x3ff6a09e667f3bcdUL, "sqrt(2) = %lx", bits(fsqrt(two)));
  expect(1.0f / f3 == 0.333333343267f, "1.0f / 3.0f wrong");
  expect((long)(-7.9 * third) == -7, "(long)-7.9 = %ld", (long)(-7.9 * third));
  for (i = 0; i < NFPPROC; i++)
    want[i] = series(i + 1);
  for (i = 0; i < NFPPROC; i++) {
    pid = EXPECT_OK(fork());
    if (pid == 0) {
      double got = series(i + 1);
      expect(bits(got) == bits(want[i]), "child %d: series %lx, expected %lx", i, bits(got),
          bits(want[i]));
      exit(0);
    }
  }
  waitchildren(NFPPROC);
}

// ---------------------------------------------------------------- time

static void
t_sleep(void)
{
  int t0, t1;
  uint64 u0, u1;

  t0 = uptime();
  u0 = time_us();
  EXPECT_OK(sleep(3));
  t1 = uptime();
  u1 = time_us();
  // At least two full ticks (the first may be partly over); the upper
  // bounds only catch a sleep that ignores its argument.
  expect(t1 - t0 >= 3 && t1 - t0 < 100, "sleep(3) took %d ticks", t1 - t0);
  expect(u1 - u0 >= 200000 && u1 - u0 < 10000000, "sleep(3) took %ld us", (long)(u1 - u0));
  EXPECT_OK(sleep(0));
  for (t0 = 0; t0 < 1000; t0++) {
    u0 = time_us();
    expect(time_us() >= u0, "time_us went backwards");
  }
}

// ---------------------------------------------------------------- files

static void
t_files(void)
{
  char buf[100];
  int fd;

  fd = EXPECT_OK(open("ut_f", O_CREATE | O_TRUNC | O_RDWR));
  expect(write(fd, "hello ", 6) == 6, "write");
  expect(write(fd, "world", 5) == 5, "write");
  expect(read(fd, buf, 10) == 0, "read at the end of the file returned data");
  close(fd);
  fd = EXPECT_OK(open("ut_f", O_RDONLY));
  expect(read(fd, buf, sizeof(buf)) == 11 && memcmp(buf, "hello world", 11) == 0, "read back");
  expect(read(fd, buf, sizeof(buf)) == 0, "read past the end did not return 0");
  EXPECT_ERR(write(fd, "x", 1), EBADF);
  close(fd);
  // O_CREATE on an existing file keeps its contents; O_TRUNC empties it.
  fd = EXPECT_OK(open("ut_f", O_CREATE | O_WRONLY));
  EXPECT_ERR(read(fd, buf, 1), EBADF);
  expect(write(fd, "J", 1) == 1, "write");
  close(fd);
  fd = EXPECT_OK(open("ut_f", O_RDONLY));
  expect(read(fd, buf, sizeof(buf)) == 11 && buf[0] == 'J' && buf[1] == 'e', "overwrite");
  close(fd);
  fd = EXPECT_OK(open("ut_f", O_TRUNC | O_RDWR));
  expect(read(fd, buf, sizeof(buf)) == 0, "O_TRUNC left data");
  close(fd);
  EXPECT_ERR(open("ut_nosuch", O_RDONLY), ENOENT);
  EXPECT_OK(unlink("ut_f"));
  EXPECT_ERR(unlink("ut_f"), ENOENT);
}

static void
t_fstat(void)
{
  struct stat st;
  int fd;

  fd = makefile("ut_st", 5000, 'z');
  EXPECT_OK(fstat(fd, &st));
  expect(st.type == T_FILE && st.size == 5000 && st.nlink == 1, "file: type %d size %ld nlink %d",
      st.type, (long)st.size, st.nlink);
  close(fd);
  EXPECT_OK(stat(".", &st));
  expect(st.type == T_DIR, "\".\" has type %d", st.type);
  EXPECT_OK(stat("/", &st));
  expect(st.type == T_DIR && st.ino == ROOTINO, "/ has type %d inode %d", st.type, st.ino);
  EXPECT_OK(stat("/console", &st));
  expect(st.type == T_DEVICE, "/console has type %d", st.type);
  unlink("ut_st");
}

// dup returns the lowest free descriptor and shares the file offset.
static void
t_dup(void)
{
  char buf[8];
  int fd, fd2, lowest;

  lowest = EXPECT_OK(dup(0));
  close(lowest);
  fd = EXPECT_OK(open("ut_dup", O_CREATE | O_TRUNC | O_RDWR));
  expect(fd == lowest, "open returned %d, the lowest free fd is %d", fd, lowest);
  fd2 = EXPECT_OK(dup(fd));
  expect(write(fd, "ab", 2) == 2 && write(fd2, "cd", 2) == 2, "write");
  close(fd);
  close(fd2);
  fd = EXPECT_OK(open("ut_dup", O_RDONLY));
  expect(read(fd, buf, sizeof(buf)) == 4 && memcmp(buf, "abcd", 4) == 0,
      "writes through dup'ed fds did not share the offset");
  close(fd);
  unlink("ut_dup");
}

// A process can open NOFILE files; one more fails with EMFILE.
static void
t_fdlimit(void)
{
  int fds[NOFILE + 1], n, fd, i;

  for (n = 0; n <= NOFILE; n++) {
    fd = open("/console", O_RDONLY);
    if (fd < 0)
      break;
    fds[n] = fd;
  }
  expect(n < NOFILE, "opened %d files, more than NOFILE (%d)", n, NOFILE);
  EXPECT_ERR(fd, EMFILE);
  EXPECT_ERR(pipe(fds + n), EMFILE);
  EXPECT_ERR(dup(0), EMFILE);
  for (i = 0; i < n; i++)
    close(fds[i]);
  EXPECT_OK(fd = open("/console", O_RDONLY));
  close(fd);
}

// An unlinked file lives on while it is open.
static void
t_unlinkopen(void)
{
  char buf[600];
  int fd;

  fd = makefile("ut_ul", 600, 'u');
  EXPECT_OK(unlink("ut_ul"));
  EXPECT_ERR(open("ut_ul", O_RDONLY), ENOENT);
  expect(read(fd, buf, sizeof(buf)) == 600 && buf[599] == 'u', "read after unlink");
  close(fd);
}

// Writes and reads of sizes around block boundaries.
static void
t_blocksizes(void)
{
  static char buf[3 * BSIZE + 10];
  int sizes[] = { 1, BSIZE - 1, BSIZE, BSIZE + 1, 3 * BSIZE + 7 };
  int i, j, fd, n, total = 0, off = 0;

  fd = EXPECT_OK(open("ut_bs", O_CREATE | O_TRUNC | O_WRONLY));
  for (i = 0; i < 5; i++) {
    for (j = 0; j < sizes[i]; j++)
      buf[j] = patbyte(total + j, 2);
    expect(write(fd, buf, sizes[i]) == sizes[i], "write of %d bytes", sizes[i]);
    total += sizes[i];
  }
  close(fd);
  fd = EXPECT_OK(open("ut_bs", O_RDONLY));
  while ((n = read(fd, buf, 1 + off % (2 * BSIZE + 3))) > 0) {
    for (j = 0; j < n; j++)
      expect(buf[j] == patbyte(off + j, 2), "byte %d differs", off + j);
    off += n;
  }
  expect(off == total, "read %d of %d bytes", off, total);
  close(fd);
  unlink("ut_bs");
}

// Write a file of BIGFILE bytes in 64 KiB pieces, read it back, compare a
// checksum: the double-indirect blocks and the disk driver's big requests.
#define BIGFILE (110 * MB)

static uint64
bigsum(uint64 sum, uint64 *w, int n, uint64 off)
{
  int i;

  for (i = 0; i < n; i++)
    sum = (sum ^ w[i]) * 0x100000001b3UL + off + i;
  return sum;
}

static void
t_bigfile(void)
{
  static uint64 w[8192];
  uint64 off, sum = 0, sum2 = 0;
  struct stat st;
  int fd, i, n;

  fd = EXPECT_OK(open("ut_big", O_CREATE | O_TRUNC | O_WRONLY));
  for (off = 0; off < BIGFILE / 8; off += 8192) {
    for (i = 0; i < 8192; i++)
      w[i] = (off + i) * 0x9e3779b97f4a7c15UL;
    sum = bigsum(sum, w, 8192, off);
    n = write(fd, w, sizeof(w));
    if (n != sizeof(w)) {
      unlink("ut_big");
      fail("write at %ld MB returned %d (%s)%s", (long)(off * 8 / MB), n,
          n < 0 ? strerror(n) : "short",
          n != -ENOSPC
              ? ""
              : "; the image needs 110 MB free: rm build/fs.img; make qemu FSIMG_SIZE=512M");
    }
  }
  EXPECT_OK(fstat(fd, &st));
  expect(st.size == BIGFILE, "size is %ld, expected %ld", (long)st.size, (long)BIGFILE);
  close(fd);
  fd = EXPECT_OK(open("ut_big", O_RDONLY));
  for (off = 0; (n = readall(fd, (char *)w, sizeof(w))) > 0; off += n / 8)
    sum2 = bigsum(sum2, w, n / 8, off);
  close(fd);
  unlink("ut_big");
  expect(off * 8 == BIGFILE, "read %ld bytes back", (long)(off * 8));
  expect(sum == sum2, "checksum differs: wrote %lx, read %lx", sum, sum2);
}

// Processes writing their own files in one directory at the same time.
static void
t_fsconcurrent(void)
{
  static char buf[BSIZE];
  char name[16];
  int i, j, k, fd, pid;

  for (i = 0; i < 4; i++) {
    pid = EXPECT_OK(fork());
    if (pid == 0) {
      snprintf(name, sizeof(name), "ut_cc%d", i);
      fd = EXPECT_OK(open(name, O_CREATE | O_TRUNC | O_WRONLY));
      memset(buf, 'A' + i, sizeof(buf));
      for (j = 0; j < 50; j++)
        expect(write(fd, buf, sizeof(buf)) == sizeof(buf), "%s: write %d", name, j);
      close(fd);
      fd = EXPECT_OK(open(name, O_RDONLY));
      for (j = 0; j < 50; j++) {
        expect(readall(fd, buf, sizeof(buf)) == sizeof(buf), "%s: short read", name);
        for (k = 0; k < sizeof(buf); k++)
          expect(buf[k] == 'A' + i, "%s: block %d holds another file's data", name, j);
      }
      close(fd);
      EXPECT_OK(unlink(name));
      exit(0);
    }
  }
  waitchildren(4);
}

// ---------------------------------------------------------------- directories

static void
t_dirs(void)
{
  char path[128];
  struct stat st;
  int i, fd;

  EXPECT_OK(mkdir("ut_d"));
  EXPECT_ERR(mkdir("ut_d"), EEXIST);
  EXPECT_ERR(mkdir("ut_nosuch/x"), ENOENT);
  // Eight levels deep, then a file at the bottom.
  strcpy(path, "ut_d");
  for (i = 0; i < 8; i++) {
    strcpy(path + strlen(path), "/sub");
    EXPECT_OK(mkdir(path));
  }
  strcpy(path + strlen(path), "/file");
  close(makefile(path, 10, 'd'));
  EXPECT_OK(chdir("ut_d/sub/sub/sub/sub/sub/sub/sub/sub"));
  fd = EXPECT_OK(open("file", O_RDONLY));
  close(fd);
  EXPECT_OK(chdir("../../../../../../../../.."));
  EXPECT_OK(stat("ut_d", &st));
  expect(st.type == T_DIR, "nine times .. did not come back");
  EXPECT_ERR(unlink("ut_d/sub"), ENOTEMPTY);
  // Remove from the bottom up.
  EXPECT_OK(unlink(path));
  for (i = 8; i >= 0; i--) {
    path[4 + 4 * i] = 0;
    EXPECT_OK(unlink(path));
  }
  EXPECT_ERR(chdir("ut_d"), ENOENT);
  EXPECT_OK(chdir("/"));
  EXPECT_OK(chdir(".."));
  EXPECT_OK(stat(".", &st));
  expect(st.ino == ROOTINO, "/.. is not /");
}

// Remove ut_many/f0 .. f(n-1) and the directory.
static void
removemany(int n)
{
  char name[32];
  int i;

  for (i = 0; i < n; i++) {
    snprintf(name, sizeof(name), "ut_many/f%d", i);
    EXPECT_OK(unlink(name));
  }
  EXPECT_OK(unlink("ut_many"));
}

// Create up to max files in ut_many; returns how many were made and
// the error that stopped it in *err (0 if none did).
static int
createmany(int max, int *err)
{
  char name[32];
  int n, fd;

  EXPECT_OK(mkdir("ut_many"));
  *err = 0;
  for (n = 0; n < max; n++) {
    snprintf(name, sizeof(name), "ut_many/f%d", n);
    if ((fd = open(name, O_CREATE | O_RDWR)) < 0) {
      *err = fd;
      break;
    }
    close(fd);
  }
  return n;
}

// A directory that outgrows its first block.
static void
t_manyfiles(void)
{
  int n, want = BSIZE / sizeof(struct dirent) + 20, err;

  n = createmany(want, &err);
  // Clean up before judging, so a failure does not leave the disk full
  // for the cases after this one.
  removemany(n);
  expect(n == want, "file %d of %d: %s", n, want, strerror(err));
}

// Create files until there is no inode (or block) left: the call fails
// with ENOSPC, and once the files are gone creating works again.
static void
t_outofinodes(void)
{
  int n, err, fd;

  n = createmany(MAXINODES + 1, &err);
  removemany(n);
  EXPECT_ERR(err, ENOSPC);
  fd = EXPECT_OK(open("ut_many", O_CREATE | O_RDWR));
  close(fd);
  EXPECT_OK(unlink("ut_many"));
}

// Names longer than xv6's 14 characters, up to DIRSIZ; one more is too long.
static void
t_longnames(void)
{
  char name[DIRSIZ + 2], path[MAXPATH + 20];
  int lens[] = { 14, 20, DIRSIZ };
  struct stat st;
  int i, len, fd;

  for (i = 0; i < 3; i++) {
    len = lens[i];
    memset(name, 'a' + i, len);
    name[len] = 0;
    close(makefile(name, len, 'n'));
    EXPECT_OK(stat(name, &st));
    expect(st.size == len, "%d-character name: size %ld", len, (long)st.size);
    EXPECT_OK(unlink(name));
  }
  memset(name, 'q', DIRSIZ + 1);
  name[DIRSIZ + 1] = 0;
  EXPECT_ERR(open(name, O_CREATE | O_RDWR), ENAMETOOLONG);
  EXPECT_ERR(mkdir(name), ENAMETOOLONG);
  // A path longer than MAXPATH made of short components.
  for (len = 0; len < MAXPATH + 10; len += 2)
    memmove(path + len, "a/", 2);
  path[len] = 0;
  EXPECT_ERR(open(path, O_RDONLY), ENAMETOOLONG);
  EXPECT_ERR(mkdir(path), ENAMETOOLONG);
  fd = open(name, O_RDONLY);
  expect(fd < 0, "a too-long name was created");
}

static void
t_link(void)
{
  struct stat st;
  char buf[10];
  int fd;

  close(makefile("ut_la", 5, 'l'));
  EXPECT_OK(link("ut_la", "ut_lb"));
  EXPECT_OK(stat("ut_lb", &st));
  expect(st.nlink == 2 && st.size == 5, "after link: nlink %d size %ld", st.nlink, (long)st.size);
  EXPECT_ERR(link("ut_la", "ut_lb"), EEXIST);
  EXPECT_ERR(link("ut_nosuch", "ut_lc"), ENOENT);
  EXPECT_OK(unlink("ut_la"));
  fd = EXPECT_OK(open("ut_lb", O_RDONLY));
  expect(read(fd, buf, sizeof(buf)) == 5, "the link lost the data");
  close(fd);
  EXPECT_OK(stat("ut_lb", &st));
  expect(st.nlink == 1, "nlink %d after unlinking one name", st.nlink);
  EXPECT_OK(unlink("ut_lb"));
  EXPECT_OK(mkdir("ut_ld"));
  expect(link("ut_ld", "ut_ld2") < 0, "a directory was hard-linked");
  EXPECT_OK(unlink("ut_ld"));
}

// A file used where a directory belongs, and the other way round.
static void
t_filedir(void)
{
  char *argv[] = { "x", 0 };

  close(makefile("ut_fd", 1, 'f'));
  EXPECT_ERR(open("ut_fd/x", O_CREATE | O_RDWR), ENOTDIR);
  EXPECT_ERR(open("ut_fd/x", O_RDONLY), ENOTDIR);
  EXPECT_ERR(mkdir("ut_fd/x"), ENOTDIR);
  EXPECT_ERR(mknod("ut_fd/x", 1, 0), ENOTDIR);
  EXPECT_ERR(link("ut_fd", "ut_fd/x"), ENOTDIR);
  EXPECT_ERR(unlink("ut_fd/x"), ENOTDIR);
  EXPECT_ERR(chdir("ut_fd"), ENOTDIR);
  EXECFAILS("ut_fd/x", argv, ENOTDIR);
  EXPECT_ERR(open(".", O_WRONLY), EISDIR);
  EXPECT_ERR(open(".", O_RDWR), EISDIR);
  EXPECT_ERR(open(".", O_CREATE | O_RDWR), EISDIR);
  expect(unlink(".") < 0, "unlink(\".\") succeeded");
  expect(unlink("..") < 0, "unlink(\"..\") succeeded");
  EXPECT_OK(unlink("ut_fd"));
}

static void
t_mknod(void)
{
  struct stat st;
  int fd;

  EXPECT_OK(mknod("ut_dev", 1, 0));
  EXPECT_ERR(mknod("ut_dev", 1, 0), EEXIST);
  fd = EXPECT_OK(open("ut_dev", O_WRONLY));
  EXPECT_OK(fstat(fd, &st));
  expect(st.type == T_DEVICE, "mknod made type %d", st.type);
  close(fd);
  EXPECT_OK(unlink("ut_dev"));
}

// ---------------------------------------------------------------- bad arguments

static void
t_badread(void)
{
  char *p;
  int fd, i, n, pp[2];

  fd = makefile("ut_br", 8192, 'r');
  EXPECT_OK(pipe(pp));
  for (i = 0; i < NBADPTR; i++) {
    p = badptr(i);
    EXPECT_ERR(read(fd, p, 100), EFAULT);
    expect(write(pp[1], "abc", 3) == 3, "pipe write");
    EXPECT_ERR(read(pp[0], p, 100), EFAULT);
  }
  // A buffer that runs off the end of the heap: at most the mapped part.
  p = alignbrk();
  n = read(fd, p - 10, 100);
  expect(n == -EFAULT || (n >= 0 && n <= 10), "read across the break returned %d", n);
  close(fd);
  close(pp[0]);
  close(pp[1]);
  unlink("ut_br");
}

static void
t_badwrite(void)
{
  char *p;
  int fd, i, n, pp[2];

  fd = EXPECT_OK(open("ut_bw", O_CREATE | O_TRUNC | O_WRONLY));
  EXPECT_OK(pipe(pp));
  for (i = 0; i < NBADPTR; i++) {
    p = badptr(i);
    EXPECT_ERR(write(fd, p, 100), EFAULT);
    EXPECT_ERR(write(pp[1], p, 100), EFAULT);
    EXPECT_ERR(write(1, p, 100), EFAULT);
  }
  p = alignbrk();
  n = write(fd, p - 10, 100);
  expect(n == -EFAULT || (n >= 0 && n <= 10), "write across the break returned %d", n);
  close(fd);
  close(pp[0]);
  close(pp[1]);
  unlink("ut_bw");
}

// Null, kernel and unmapped pointers as path names, stat buffers,
// pipe arrays, wait statuses and exec argument vectors.
static void
t_badptrs(void)
{
  char *argv[] = { "echo", 0, 0 };
  char *p;
  int i, r, fd, pid, lowest;

  lowest = EXPECT_OK(dup(0));
  close(lowest);
  fd = EXPECT_OK(open("/console", O_RDONLY));
  close(makefile("ut_bp", 1, 'p'));
  for (i = 0; i < NBADPTR; i++) {
    p = badptr(i);
    EXPECT_ERR(open(p, O_RDONLY), EFAULT);
    EXPECT_ERR(open(p, O_CREATE | O_RDWR), EFAULT);
    EXPECT_ERR(mknod(p, 1, 0), EFAULT);
    EXPECT_ERR(unlink(p), EFAULT);
    EXPECT_ERR(link(p, "ut_bp2"), EFAULT);
    EXPECT_ERR(link("ut_bp", p), EFAULT);
    EXPECT_ERR(mkdir(p), EFAULT);
    EXPECT_ERR(chdir(p), EFAULT);
    EXPECT_ERR(fstat(fd, (struct stat *)p), EFAULT);
    EXPECT_ERR(pipe((int *)p), EFAULT);
    EXECFAILS(p, argv, EFAULT);
    EXECFAILS("/echo", (char **)p, EFAULT);
    // Null is a valid wait status pointer, and a null argv[1] just
    // ends the list: only the others are bad there.
    if (p == 0)
      continue;
    argv[1] = p;
    EXECFAILS("/echo", argv, EFAULT);
    argv[1] = 0;
    pid = EXPECT_OK(fork());
    if (pid == 0)
      exit(0);
    EXPECT_ERR(wait((int *)p), EFAULT);
    // Whether the failed wait collected the child or not, the next
    // wait must not hang or return another pid.
    r = wait(0);
    expect(r == pid || r == -ECHILD, "wait after a bad wait returned %d", r);
  }
  close(fd);
  EXPECT_ERR(stat("ut_bp2", 0), ENOENT);
  EXPECT_OK(unlink("ut_bp"));
  // A failed pipe() must not leave descriptors behind.
  expect(dup(0) == lowest, "a failed call leaked a file descriptor");
}

// A path name that runs into unmapped memory without a terminator.
static void
t_badstring(void)
{
  char *p;

  p = alignbrk();
  expect(!sbrkfailed(sbrk(PGSIZE)), "sbrk");
  memset(p, 'a', PGSIZE);
  EXPECT_ERR(open(p + PGSIZE - 5, O_RDONLY), EFAULT);
  EXPECT_ERR(mkdir(p + PGSIZE - 5), EFAULT);
  sbrk(-PGSIZE);
}

static void
t_badfds(void)
{
  int bad[4] = { -1, 1000, NOFILE, 0 };
  struct stat st;
  char buf[4];
  int i;

  bad[3] = EXPECT_OK(dup(0));
  close(bad[3]);
  for (i = 0; i < 4; i++) {
    EXPECT_ERR(read(bad[i], buf, 1), EBADF);
    EXPECT_ERR(write(bad[i], "x", 1), EBADF);
    EXPECT_ERR(close(bad[i]), EBADF);
    EXPECT_ERR(fstat(bad[i], &st), EBADF);
    EXPECT_ERR(dup(bad[i]), EBADF);
  }
}

// Empty, missing and too-long paths for every call that takes one.
static void
t_badpaths(void)
{
  static char toolong[MAXPATH + 64];
  char *argv[] = { "x", 0 };
  char *paths[] = { "", "ut_nosuch/ut_nosuch", toolong };
  int codes[] = { ENOENT, ENOENT, ENAMETOOLONG };
  int i;

  memset(toolong, 'b', sizeof(toolong) - 1);
  close(makefile("ut_pf", 1, 'p'));
  for (i = 0; i < 3; i++) {
    EXPECT_ERR(open(paths[i], O_RDONLY), codes[i]);
    EXPECT_ERR(open(paths[i], O_CREATE | O_RDWR), codes[i]);
    EXPECT_ERR(mknod(paths[i], 1, 0), codes[i]);
    EXPECT_ERR(unlink(paths[i]), codes[i]);
    EXPECT_ERR(link(paths[i], "ut_pf2"), codes[i]);
    EXPECT_ERR(link("ut_pf", paths[i]), codes[i]);
    EXPECT_ERR(mkdir(paths[i]), codes[i]);
    EXPECT_ERR(chdir(paths[i]), codes[i]);
    EXECFAILS(paths[i], argv, codes[i]);
  }
  EXPECT_OK(unlink("ut_pf"));
}

static void
t_badsizes(void)
{
  char buf[16];
  int fd;

  fd = makefile("ut_bz", 10, 's');
  EXPECT_ERR(read(fd, buf, -1), EINVAL);
  EXPECT_ERR(read(fd, buf, -100000), EINVAL);
  expect(read(fd, buf, 0) == 0, "read of 0 bytes");
  close(fd);
  fd = EXPECT_OK(open("ut_bz", O_WRONLY));
  EXPECT_ERR(write(fd, buf, -1), EINVAL);
  expect(write(fd, buf, 0) == 0, "write of 0 bytes");
  close(fd);
  EXPECT_OK(unlink("ut_bz"));
}

// Other calls with nonsense numbers.
static void
t_badnums(void)
{
  long r;
  int t0;

  EXPECT_ERR(kill(1000000), ESRCH);
  r = kill(-1);
  expect(r == -ESRCH || r == -EINVAL, "kill(-1) returned %ld", r);
  t0 = uptime();
  r = sleep(-5);
  expect(r <= 0 && uptime() - t0 < 5, "sleep(-5) returned %ld after %d ticks", r, uptime() - t0);
  // A device number no driver has: refused now, or when opened.
  if (mknod("ut_bn", -1, 0) == 0) {
    r = open("ut_bn", O_RDWR);
    unlink("ut_bn");
    expect(r < 0, "opened a device with major -1");
  }
  // A system call number the kernel does not have.
  asm volatile("li a7, 999\n ecall\n mv %0, a0" : "=r"(r) : : "a0", "a7", "memory");
  EXPECT_ERR(r, ENOSYS);
  asm volatile("li a7, -1\n ecall\n mv %0, a0" : "=r"(r) : : "a0", "a7", "memory");
  EXPECT_ERR(r, ENOSYS);
}

// ---------------------------------------------------------------- edge-case arguments

// Buffers whose range wraps past 2^64 or runs past the top of user space
// fail with EFAULT on every path: copyout/copyin, and the file read that
// hands whole blocks to the disk (it panicked with "bad segment count").
static void
t_wraprange(void)
{
  static const uint64 base[] = {
    -(uint64)PGSIZE,      // wraps within the first block
    -(uint64)(4 * BSIZE), // wraps at the end of the run
    TRAPFRAME - PGSIZE,   // runs into the trap frame
    MAXVA - 2 * PGSIZE,   // runs past the top of Sv39
    (uint64)1 << 63,      // not a user address at all
  };
  int n = 8 * BSIZE, fd, pp[2], i;
  char ok[16];

  close(makefile("ut_wrap", n, 'w'));
  EXPECT_OK(pipe(pp));
  for (i = 0; i < NELEM(base); i++) {
    fd = EXPECT_OK(open("ut_wrap", O_RDONLY));
    EXPECT_ERR(read(fd, (void *)base[i], n), EFAULT);
    EXPECT_ERR(fstat(fd, (struct stat *)base[i]), EFAULT);
    close(fd);
    fd = EXPECT_OK(open("ut_wrap", O_WRONLY));
    EXPECT_ERR(write(fd, (void *)base[i], n), EFAULT);
    close(fd);
    expect(write(pp[1], "abc", 3) == 3, "pipe write");
    EXPECT_ERR(read(pp[0], (void *)base[i], 3), EFAULT);
  }
  // The system still reads the file.
  fd = EXPECT_OK(open("ut_wrap", O_RDONLY));
  expect(read(fd, ok, sizeof(ok)) == sizeof(ok) && ok[0] == 'w', "read after the bad ones");
  close(fd);
  close(pp[0]);
  close(pp[1]);
  unlink("ut_wrap");
}

// A program whose one segment sits at 192 GiB: fork and exit must cost
// what is mapped, not the 48 million pages below the segment (a page-by-
// page walk took 7.6 s for each). The program forks, and both exit.
static void
t_highexec(void)
{
  static const uint32 code[] = {
    0x00100893, // li a7, SYS_fork
    0x00000073, // ecall
    0x00200893, // li a7, SYS_exit
    0x00000513, // li a0, 0
    0x00000073, // ecall
  };
  struct {
    struct elfhdr eh;
    struct proghdr ph;
    uint32 code[NELEM(code)];
  } img;
  uint64 va = 0x3000000000UL;
  char *argv[] = { "ut_high", 0 };
  int fd, pid, t0;

  memset(&img, 0, sizeof(img));
  img.eh.magic = ELF_MAGIC;
  img.eh.class = ELFCLASS64;
  img.eh.data = ELFDATA2LSB;
  img.eh.ident_version = 1;
  img.eh.type = ET_EXEC;
  img.eh.machine = EM_RISCV;
  img.eh.version = 1;
  img.eh.entry = va + ((char *)img.code - (char *)&img);
  img.eh.phoff = sizeof(img.eh);
  img.eh.ehsize = sizeof(img.eh);
  img.eh.phentsize = sizeof(img.ph);
  img.eh.phnum = 1;
  img.ph.type = ELF_PROG_LOAD;
  img.ph.flags = ELF_PROG_FLAG_R | ELF_PROG_FLAG_X;
  img.ph.off = 0;
  img.ph.vaddr = va;
  img.ph.filesz = sizeof(img);
  img.ph.memsz = sizeof(img);
  memmove(img.code, code, sizeof(code));
  fd = EXPECT_OK(open("ut_high", O_CREATE | O_TRUNC | O_WRONLY));
  expect(write(fd, &img, sizeof(img)) == sizeof(img), "write ut_high");
  close(fd);
  t0 = uptime();
  pid = EXPECT_OK(fork());
  if (pid == 0) {
    exec("ut_high", argv);
    exit(99);
  }
  WAITSTATUS(pid, 0);
  // Well below the seconds that one walk of the address range takes.
  expect(uptime() - t0 < 2 * TICK_HZ, "fork+exec+exit of a program at 192 GiB took %d ticks",
      uptime() - t0);
  unlink("ut_high");
}

// Memory starvation for the AI cases: the heap grows until sbrk fails,
// then pipes take what is left (the last sbrk may stop with a page free,
// when that page needed a table page too). Returns the bytes grown;
// *np pipes are open in pfd. starve_end() gives it all back.
static long
starve(int pfd[][2], int max, int *np)
{
  struct sysinfo si;
  long chunk, got = 0;

  for (chunk = 64 * MB; chunk >= PGSIZE; chunk /= 2)
    while (!sbrkfailed(sbrk(chunk)))
      got += chunk;
  for (*np = 0; *np < max && sysinfo(&si) == 0 && si.freepages > 0; (*np)++)
    if (pipe(pfd[*np]) < 0)
      break;
  return got;
}

static void
starve_end(long got, int pfd[][2], int np)
{
  sbrk(-got);
  for (int i = 0; i < np; i++) {
    close(pfd[i][0]);
    close(pfd[i][1]);
  }
}

static int
freepages(void)
{
  struct sysinfo si;

  memset(&si, 0, sizeof(si));
  sysinfo(&si);
  return (int)si.freepages;
}

// ai_call that runs out of kernel memory must leave no request behind:
// usertests registers as the worker (there is none without a model; the
// test boots with aiworker=console, so that the console may: rule 13),
// starves the kernel, and calls. The request must not stay queued,
// counted against this process's cap until exit.
static void
t_aicallnomem(void)
{
  static const uint32 ids[] = { 1, 2, 3 };
  struct ai_info in;
  char out[64];
  long got;
  int r, left, np, pfd[6][2];

  r = ai_register(1000, 64);
  if (r == -AIE_BUSY || r == -AIE_PERM)
    return; // a real worker serves this system, or this boot gave the console no
            // worker right (aiworker=console): nothing to test here
  EXPECT_OK(r);
  got = starve(pfd, NELEM(pfd), &np);
  // With memory left the call would wait for a worker that is this process.
  left = freepages();
  r = left == 0 ? ai_call(ids, NELEM(ids), 2, out, sizeof(out)) : 0;
  starve_end(got, pfd, np);
  expect(left == 0, "could not use up the memory: %d pages left", left);
  EXPECT_OK(ai_info(&in));
  EXPECT_OK(ai_register(0, 0));
  expect(r == -AIE_NOMEM, "ai_call without memory returned %d, expected -%d", r, AIE_NOMEM);
  expect(
      in.used == 0 && in.queued == 0, "ai_call left %d requests (%d queued)", in.used, in.queued);
}

// The worker's ai_complete must not fail for lack of kernel memory: the
// daemon cannot do better than give up, and the request would stay
// RUNNING, its caller blocked in ai_wait, until the worker dies.
static void
t_aicompletenomem(void)
{
  static const uint32 ids[] = { 1, 2, 3 }, gen[] = { 7, 8 };
  static struct ai_job job;
  struct ai_status st;
  char out[64];
  long got;
  int r, reqid, left, np, pfd[6][2];

  r = ai_register(1000, 64);
  if (r == -AIE_BUSY || r == -AIE_PERM)
    return; // a real worker serves this system, or this boot gave the console no
            // worker right (aiworker=console): nothing to test here
  EXPECT_OK(r);
  reqid = EXPECT_OK(ai_submit(ids, NELEM(ids), 2));
  expect(ai_next(&job) == reqid, "ai_next did not give the request");
  got = starve(pfd, NELEM(pfd), &np);
  left = freepages();
  r = ai_complete(reqid, gen, NELEM(gen));
  starve_end(got, pfd, np);
  expect(left == 0, "could not use up the memory: %d pages left", left);
  expect(r == 0, "ai_complete without memory returned %d (%s)", r, ai_strerror(r));
  EXPECT_OK(ai_query(reqid, &st));
  expect(st.state == AI_DONE, "request state %d after the complete", st.state);
  r = ai_wait(reqid, out, sizeof(out));
  EXPECT_OK(ai_register(0, 0));
  expect(r == 3 && strcmp(out, "7 8") == 0, "ai_wait returned %d", r);
}

// A kill must end a sleep it races with, on any hart: children block in
// read() on a pipe nobody writes; each is killed at once. A kill that
// lands between the child's killed() check and its sleep() must not be
// lost: the child would sleep forever.
static void
t_killrace(void)
{
  int i, pid, pp[2];
  char c;

  EXPECT_OK(pipe(pp));
  for (i = 0; i < 300; i++) {
    pid = EXPECT_OK(fork());
    if (pid == 0) {
      read(pp[0], &c, 1);
      exit(0);
    }
    for (volatile int j = 0; j < (i * 37) % 2000; j++) // vary where the kill lands
      ;
    EXPECT_OK(kill(pid));
    WAITKILLED(pid);
  }
  close(pp[0]);
  close(pp[1]);
}

// A directory removed while a process still uses it (its cwd here) takes
// no new names: they would vanish with it, leaving inodes no directory
// names (the fuzzer found this as a race between create and unlink).
static void
t_deaddir(void)
{
  char cwd[] = "ut_dead";

  EXPECT_OK(mkdir(cwd));
  EXPECT_OK(chdir(cwd));
  EXPECT_OK(unlink("../ut_dead"));
  EXPECT_ERR(open("f", O_CREATE | O_RDWR), ENOENT);
  EXPECT_ERR(mkdir("d"), ENOENT);
  EXPECT_ERR(mknod("n", 9, 0), ENOENT);
  EXPECT_ERR(link("/usertests", "l"), ENOENT);
  EXPECT_OK(chdir("/"));
  EXPECT_ERR(chdir(cwd), ENOENT);
}

// ---------------------------------------------------------------- runner

static struct test tests[] = {
  { t_getpid, "getpid" },
  { t_exitstatus, "exitstatus" },
  { t_orphan, "orphan" },
  { t_forkmany, "forkmany" },
  { t_forkstorm, "forkstorm" },
  { t_exec, "exec" },
  { t_execargs, "execargs" },
  { t_execbad, "execbad" },
  { t_pipe, "pipe" },
  { t_pipebig, "pipebig" },
  { t_pipeeof, "pipeeof" },
  { t_pipeclosed, "pipeclosed" },
  { t_kill, "kill" },
  { t_sbrkbasic, "sbrkbasic" },
  { t_sbrkzero, "sbrkzero" },
  { t_sbrkbig, "sbrkbig", 1 },
  { t_sbrkfail, "sbrkfail" },
  { t_sbrkfork, "sbrkfork" },
  { t_malloc, "malloc" },
  { t_faults, "faults" },
  { t_stackoverflow, "stackoverflow" },
  { t_fpregs, "fpregs" },
  { t_fpmath, "fpmath" },
  { t_vecregs, "vecregs" },
  { t_sleep, "sleep" },
  { t_files, "files" },
  { t_fstat, "fstat" },
  { t_dup, "dup" },
  { t_fdlimit, "fdlimit" },
  { t_unlinkopen, "unlinkopen" },
  { t_blocksizes, "blocksizes" },
  { t_bigfile, "bigfile", 1 },
  { t_fsconcurrent, "fsconcurrent" },
  { t_dirs, "dirs" },
  { t_manyfiles, "manyfiles" },
  { t_outofinodes, "outofinodes", 1 },
  { t_longnames, "longnames" },
  { t_link, "link" },
  { t_filedir, "filedir" },
  { t_mknod, "mknod" },
  { t_badread, "badread" },
  { t_badwrite, "badwrite" },
  { t_badptrs, "badptrs" },
  { t_badstring, "badstring" },
  { t_badfds, "badfds" },
  { t_badpaths, "badpaths" },
  { t_badsizes, "badsizes" },
  { t_badnums, "badnums" },
  { t_wraprange, "wraprange" },
  { t_highexec, "highexec" },
  { t_aicallnomem, "aicallnomem" },
  { t_aicompletenomem, "aicompletenomem" },
  { t_killrace, "killrace" },
  { t_deaddir, "deaddir" },
  { 0, 0 },
};

// In a child: hold as many open files as a process may, and when that
// is all this process may have, fork the next link of the chain; stop
// when the kernel's file table is full. Each link writes its count to out.
static void __attribute__((noreturn)) fillfiles(int out)
{
  int n = 0, fd, pid, i;

  // Files inherited from the parent are the parent's to count.
  for (i = 3; i < NOFILE; i++)
    if (i != out)
      close(i);
  while ((fd = open("/console", O_RDONLY)) >= 0)
    n++;
  if (fd == -EMFILE && (pid = fork()) == 0)
    fillfiles(out);
  if (fd == -EMFILE && pid > 0)
    wait(0);
  else if (fd != -ENFILE)
    n = -1000000; // could not fill the table: spoil the sum
  write(out, &n, sizeof(n));
  exit(0);
}

// Count the free entries of the kernel's open-file table, or -1.
static long
countfiles(void)
{
  int p[2], pid, n;
  long total = 0;

  if (pipe(p) < 0 || (pid = fork()) < 0)
    return -1;
  if (pid == 0) {
    close(p[0]);
    fillfiles(p[1]);
  }
  close(p[1]);
  while (read(p[0], &n, sizeof(n)) == sizeof(n))
    total += n;
  close(p[0]);
  wait(0);
  return total < 0 ? -1 : total;
}

static const struct leak leaks[] = {
  { "memleak", "pages", count_free_pages },
  { "fileleak", "open-file slots", countfiles },
  { 0 },
};

int
main(int argc, char *argv[])
{
  struct suite suite = { "usertests", tests, leaks };

  harness_main(&suite, "usertests starting", argc, argv);
}
