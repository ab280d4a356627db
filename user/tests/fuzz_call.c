// fuzz's calls (fuzz.h): the random numbers, the worker's state, the
// arguments of every kind, and a call made and checked (fuzz.c's header
// comment says what passes).

#include "user/tests/fuzz.h"

// ---------------------------------------------------------------- random

static uint64 rng;

// The next number of the xorshift generator with state *st (never 0).
uint64
rnd_from(uint64 *st)
{
  *st ^= *st << 13;
  *st ^= *st >> 7;
  *st ^= *st << 17;
  return *st;
}

// The next number of the process's generator.
uint64
rnd(void)
{
  return rnd_from(&rng);
}

// A number in [0, n).
int
pick(int n)
{
  return (int)(rnd() % (uint64)n);
}

// 1 with the given chance in percent.
int
chance(int percent)
{
  return pick(100) < percent;
}

// ---------------------------------------------------------------- worker state

char *scratch;  // SCRATCH bytes at the top of the heap
char *heaptop;  // the break after scratch: sbrk fuzzing grows above it
char *textpage; // the program's code: readable, not writable
int aiblock;    // AI waits may block: our own worker serves
int child;      // this process is a worker's child
int kids[MAXKIDS], nkids;
int threads[MAXTHREADS], nthreads; // started, not yet joined
char *hstack;                      // the helper thread's stack, below scratch
int helper;                        // its thread id while it runs, else 0
volatile int helper_stop;          // set when the worker's calls are done
volatile uint32 main_calls;        // the worker's calls: the helper's pace
int mypid;
int reportfd = -1; // the pipe to the parent: never picked as a descriptor

struct report rep;

// A pointer of a random kind and its kind in *kind.
uint64
anyptr(int *kind)
{
  uint64 top = (uint64)sbrk(0) + 64 * PGSIZE; // the helper thread grows the heap too

  switch (pick(14)) {
  case 0: *kind = P_NULL; return 0;
  case 1: *kind = P_BAD; return KERNBASE + pick(1 << 20);
  case 2: *kind = P_BAD; return -(uint64)1 - pick(16);
  case 3: *kind = P_BAD; return -(uint64)PGSIZE * (1 + pick(4)); // wraps
  case 4: *kind = P_BAD; return TRAPFRAME + pick(PGSIZE);
  case 5: *kind = P_BAD; return TRAMPOLINE + pick(PGSIZE);
  case 6: *kind = P_BAD; return MAXVA - pick(64);
  case 7: *kind = P_BAD; return ((uint64)1 << 63) + pick(1 << 12);
  case 8: *kind = P_BAD; return (top & ~(uint64)(PGSIZE - 1)) + pick(PGSIZE); // above the heap
  case 9: *kind = P_RO; return (uint64)textpage + pick(64);
  case 10: *kind = P_PARTIAL; return (uint64)scratch + SCRATCH - 1 - pick(64);
  default: *kind = P_OK; return (uint64)scratch + pick(SCRATCH / 2);
  }
}

// A valid pointer into scratch with room for n bytes.
uint64
okptr(int n)
{
  return (uint64)scratch + pick(SCRATCH - n);
}

// A length: mostly small, else one on a block's edge, huge or negative.
long
anylen(void)
{
  static const long len[] = {
    0,
    1,
    7,
    100,
    511,
    512,
    4096,
    4097,
    16384,
    65536,
    1 << 20,
    0x7fffffff,
    -1,
    -4096,
    (long)0x80000000,
    (long)-0x80000000L,
  };
  return chance(30) ? pick(2000) : len[pick(NELEM(len))];
}

// A descriptor number: mostly small ones, never reportfd.
int
anyfd(void)
{
  static const int odd[] = { -1, -100, NOFILE, NOFILE + 1, 1000, 0x7fffffff, (int)0x80000000 };
  int fd;

  if (chance(10))
    return odd[pick(NELEM(odd))];
  while ((fd = pick(NOFILE)) == reportfd)
    ;
  return fd;
}

// A name for a call that may create, change or remove: relative, inside
// the scratch directory, no "..".
const char *
scratchname(void)
{
  static const char *names[] = { "a", "b", "c", "d", "a/b", "b/c", "d/a", ".", "", "e",
    "averyveryverylongnamethatisfartoolongforadirent", "a/", "x/y/z" };
  return names[pick(NELEM(names))];
}

// Any path at all, for calls that only look (open read-only, exec of
// nonexistent files, stat). Never the console or a real program (exec).
const char *
lookname(void)
{
  static const char *names[] = { "/", "..", "../..", "/nonexistent", "/init/x", "//", "a/../b",
    "/fuzz.tmp" };
  return chance(60) ? scratchname() : names[pick(NELEM(names))];
}

// A large file outside the scratch directory, only ever read: its blocks
// are clean on disk, so reads of it take the direct disk-to-user path.
const char *
bigfile(void)
{
  static const char *names[] = { "/usertests", "/fuzz", "/llmrun_smol", "/ai_daemon" };
  return names[pick(NELEM(names))];
}

// A path argument: the name copied into scratch (user memory), a pointer
// the kernel must refuse, a string that runs into unmapped memory, or one
// longer than MAXPATH. A pointer into scratch always holds the name given,
// never leftovers (which could spell "..").
uint64
pathptr(const char *name)
{
  int kind;
  uint64 p;

  switch (pick(10)) {
  case 0:
    p = anyptr(&kind);
    if (kind == P_BAD || kind == P_NULL)
      return p;
    return KERNBASE;
  case 1: // runs into the unmapped page above scratch
    p = (uint64)scratch + SCRATCH - 8;
    memset((char *)p, 'q', 8);
    return p;
  case 2: // longer than MAXPATH
    p = okptr(MAXPATH + 10);
    memset((char *)p, 'a', MAXPATH + 5);
    ((char *)p)[MAXPATH + 5] = 0;
    return p;
  default:
    p = okptr(MAXPATH);
    strcpy((char *)p, name);
    return p;
  }
}

// A request id: odd ones, or any small one.
int
anyreqid(void)
{
  static const int odd[] = { 0, -1, 1, 2, 0x7fffffff, (int)0x80000000 };
  return chance(50) ? odd[pick(NELEM(odd))] : pick(1000);
}

// ---------------------------------------------------------------- calls

// System call n with six arguments, as registers a0..a5; what it returned in a0.
static long
sys6(long n, uint64 a0, uint64 a1, uint64 a2, uint64 a3, uint64 a4, uint64 a5)
{
  register uint64 r0 asm("a0") = a0;
  register uint64 r1 asm("a1") = a1;
  register uint64 r2 asm("a2") = a2;
  register uint64 r3 asm("a3") = a3;
  register uint64 r4 asm("a4") = a4;
  register uint64 r5 asm("a5") = a5;
  register long r7 asm("a7") = n;

  asm volatile("ecall"
               : "+r"(r0)
               : "r"(r1), "r"(r2), "r"(r3), "r"(r4), "r"(r5), "r"(r7)
               : "memory");
  return (long)r0;
}

// Is e an errno.h code?
static int
known_errno(long e)
{
  static const int codes[] = { EPERM, ENOENT, ESRCH, EINTR, EIO, ENXIO, E2BIG, ENOEXEC, EBADF,
    ECHILD, EAGAIN, ENOMEM, EFAULT, EBUSY, EEXIST, EXDEV, ENOTDIR, EISDIR, EINVAL, ENFILE, EMFILE,
    EFBIG, ENOSPC, EROFS, EMLINK, EPIPE, ERANGE, ENAMETOOLONG, ENOSYS, ENOTEMPTY };

  for (int i = 0; i < NELEM(codes); i++)
    if (e == codes[i])
      return 1;
  return 0;
}

// Is nr an AI service call?
static int
is_ai(long nr)
{
  return (nr >= SYS_ai_submit && nr <= SYS_ai_submit_opts) ||
      (nr >= SYS_ai_table && nr <= SYS_ai_plan);
}

// Is nr a call number the kernel has?
static int
valid_nr(long nr)
{
  return (nr >= SYS_fork && nr <= SYS_setfg) || is_ai(nr) || nr == SYS_vlenb || nr == SYS_mmap ||
      nr == SYS_munmap;
}

// Records a failed check (the first one's description is kept).
void
fail(struct call *c, long r, const char *why)
{
  rep.failed++;
  if (rep.note[0] == 0)
    snprintf(rep.note, sizeof(rep.note), "pid %d: call %ld(%lx, %lx, %lx, %lx) returned %ld: %s",
        mypid, c->nr, c->a[0], c->a[1], c->a[2], c->a[3], r, why);
}

// Checks the result r of call c; see the header comment.
static void
check(struct call *c, long r)
{
  if (child)
    return; // children's calls exercise the kernel; their results go unchecked
  rep.calls++;
  if (!valid_nr(c->nr)) {
    if (r != -ENOSYS)
      fail(c, r, "an invalid call number must give -ENOSYS");
    return;
  }
  if (c->nr == SYS_sbrk)
    return; // an address, or -1
  if (r < 0 && !(is_ai(c->nr) ? ai_strerror(r) != 0 : known_errno(-r))) {
    fail(c, r, "not an error code this call can return");
    return;
  }
  if (c->nodata && (c->datacount ? r > 0 : r == 0))
    fail(c, r, "succeeded with a pointer the kernel must refuse");
}

// Makes call c and checks its result; returns it.
long
run(struct call *c)
{
  long r = sys6(c->nr, c->a[0], c->a[1], c->a[2], c->a[3], c->a[4], c->a[5]);
  check(c, r);
  return r;
}

// Sets the call's pointer argument i for data of n bytes (n > 0) that the
// kernel writes (out) or reads; notes if the kernel must refuse it.
void
dataptr(struct call *c, int i, long n, int out)
{
  int kind;

  c->a[i] = anyptr(&kind);
  if (n > 0 && (kind == P_BAD || kind == P_NULL || (out && kind == P_RO)))
    c->nodata = 1;
}

// Removes id from list[0..*n) (a reaped child, a joined thread), if there.
void
forget(int *list, int *n, int id)
{
  for (int i = 0; i < *n; i++)
    if (list[i] == id) {
      list[i] = list[--*n];
      return;
    }
}

// Common set-up of a fuzzing process: no console, scratch at the heap top.
void
setup(uint64 seed)
{
  rng = seed * 0x9E3779B97F4A7C15UL + 1;
  if (rng == 0)
    rng = 1;
  mypid = getpid();
  close(0);
  close(1);
  close(2);
  textpage = (char *)setup;
  hstack = sbrk(HSTACK);
  scratch = sbrk(SCRATCH);
  heaptop = sbrk(0);
}

// Sends rep to the parent.
void
send_report(void)
{
  write(reportfd, &rep, sizeof(rep));
}
