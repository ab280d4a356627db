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
#include "user/lib/user.h"
#include "kernel/include/fcntl.h"
#include "kernel/include/stat.h"
#include "kernel/include/param.h"
#include "kernel/include/fs.h"
#include "kernel/include/memlayout.h"
#include "kernel/include/syscall.h"
#include "kernel/include/sysinfo.h"
#include "kernel/include/mman.h"
#include "kernel/include/aisvc.h"

#define NELEM(a)     ((int)(sizeof(a) / sizeof((a)[0])))
#define SCRATCH      (64 * 1024) // the one buffer valid pointers point into
#define MAXKIDS      3
#define SANDBOX      "fuzz.tmp"
#define NOTE_MAX     160
#define RAW_PERCENT  15
#define MAXTHREADS   4           // threads a worker keeps unjoined
#define HSTACK       (16 * 1024) // the helper thread's stack
#define HELPER_PHASE 500         // calls with the helper thread, then as many without
#define XSTR(x)      STR(x)
#define STR(x)       #x

// ---------------------------------------------------------------- random

static uint64 rng;

// The next number of the xorshift generator with state *st (never 0).
static uint64
rnd_from(uint64 *st)
{
  *st ^= *st << 13;
  *st ^= *st >> 7;
  *st ^= *st << 17;
  return *st;
}

static uint64
rnd(void)
{
  return rnd_from(&rng);
}

// A number in [0, n).
static int
pick(int n)
{
  return (int)(rnd() % (uint64)n);
}

static int
chance(int percent)
{
  return pick(100) < percent;
}

// ---------------------------------------------------------------- worker state

static char *scratch;  // SCRATCH bytes at the top of the heap
static char *heaptop;  // the break after scratch: sbrk fuzzing grows above it
static char *textpage; // the program's code: readable, not writable
static int aiblock;    // AI waits may block: our own worker serves
static int child;      // this process is a worker's child
static int kids[MAXKIDS], nkids;
static int threads[MAXTHREADS], nthreads; // started, not yet joined
static char *hstack;                      // the helper thread's stack, below scratch
static int helper;                        // its thread id while it runs, else 0
static volatile int helper_stop;          // set when the worker's calls are done
static volatile uint32 main_calls;        // the worker's calls: the helper's pace
static int mypid;
static int reportfd = -1; // the pipe to the parent: never picked as a descriptor

struct report {
  int index;           // worker number; -1 for the AI worker
  long calls;          // checked calls
  long failed;         // of those, failed
  char note[NOTE_MAX]; // the first failure
};
static struct report rep;

// Pointer kinds, by what the kernel may do with them.
enum { P_OK, P_PARTIAL, P_NULL, P_BAD, P_RO };

// A pointer of a random kind and its kind in *kind.
static uint64
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
static uint64
okptr(int n)
{
  return (uint64)scratch + pick(SCRATCH - n);
}

static long
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
static int
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
static const char *
scratchname(void)
{
  static const char *names[] = { "a", "b", "c", "d", "a/b", "b/c", "d/a", ".", "", "e",
    "averyveryverylongnamethatisfartoolongforadirent", "a/", "x/y/z" };
  return names[pick(NELEM(names))];
}

// Any path at all, for calls that only look (open read-only, exec of
// nonexistent files, stat). Never the console or a real program (exec).
static const char *
lookname(void)
{
  static const char *names[] = { "/", "..", "../..", "/nonexistent", "/init/x", "//", "a/../b",
    "/fuzz.tmp" };
  return chance(60) ? scratchname() : names[pick(NELEM(names))];
}

// A large file outside the scratch directory, only ever read: its blocks
// are clean on disk, so reads of it take the direct disk-to-user path.
static const char *
bigfile(void)
{
  static const char *names[] = { "/usertests", "/fuzz", "/llmrun_smol", "/ai_daemon" };
  return names[pick(NELEM(names))];
}

// A path argument: the name copied into scratch (user memory), a pointer
// the kernel must refuse, a string that runs into unmapped memory, or one
// longer than MAXPATH. A pointer into scratch always holds the name given,
// never leftovers (which could spell "..").
static uint64
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

// ---------------------------------------------------------------- calls

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

// One call as made: number, arguments, and what the check needs.
struct call {
  long nr;
  uint64 a[6];
  int raw;       // arguments are random registers
  int nodata;    // a pointer the kernel must refuse was passed for data
  int datacount; // success moving data is r > 0 (read, write, ...), else r == 0
  int tmpfd;     // a descriptor opened for this call alone, closed after it (or -1)
  int scrub;     // clear scratch after the call: it may hold a program's bytes
};

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

static int
is_ai(long nr)
{
  return (nr >= SYS_ai_submit && nr <= SYS_ai_submit_opts) ||
      (nr >= SYS_ai_table && nr <= SYS_ai_plan);
}

static int
valid_nr(long nr)
{
  return (nr >= SYS_fork && nr <= SYS_setfg) || is_ai(nr) || nr == SYS_vlenb || nr == SYS_mmap ||
      nr == SYS_munmap;
}

// Records a failed check (the first one's description is kept).
static void
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

static long
run(struct call *c)
{
  long r = sys6(c->nr, c->a[0], c->a[1], c->a[2], c->a[3], c->a[4], c->a[5]);
  check(c, r);
  return r;
}

// Sets the call's pointer argument i for data of n bytes (n > 0) that the
// kernel writes (out) or reads; notes if the kernel must refuse it.
static void
dataptr(struct call *c, int i, long n, int out)
{
  int kind;

  c->a[i] = anyptr(&kind);
  if (n > 0 && (kind == P_BAD || kind == P_NULL || (out && kind == P_RO)))
    c->nodata = 1;
}

// Removes id from list[0..*n) (a reaped child, a joined thread), if there.
static void
forget(int *list, int *n, int id)
{
  for (int i = 0; i < *n; i++)
    if (list[i] == id) {
      list[i] = list[--*n];
      return;
    }
}

static void child_main(void);
static void stop_helper(void);

// ---------------------------------------------------------------- typed calls

static void
call_file(struct call *c)
{
  static const int modes[] = { O_RDONLY, O_WRONLY, O_RDWR, O_CREATE | O_RDWR,
    O_CREATE | O_TRUNC | O_WRONLY, O_TRUNC | O_RDWR, 0x7fffffff, -1 };
  long n;

  switch (pick(11)) {
  case 9: // a file written whole: several blocks, read back below
    c->nr = SYS_write;
    c->tmpfd = open(scratchname(), O_CREATE | O_TRUNC | O_WRONLY);
    c->a[0] = c->tmpfd;
    c->a[2] = 4096 + pick(SCRATCH / 2 - 4096);
    c->a[1] = okptr(c->a[2]);
    c->datacount = 1;
    break;
  case 10: // a read from offset 0 of a fresh descriptor: whole blocks go
           // straight from the disk to the buffer, of any kind
    c->nr = SYS_read;
    c->tmpfd = open(chance(50) ? scratchname() : bigfile(), O_RDONLY);
    c->scrub = 1;
    c->a[0] = c->tmpfd;
    n = chance(50) ? 4096 * (1 + pick(16)) : anylen();
    dataptr(c, 1, n, 1);
    c->a[2] = n;
    c->datacount = 1;
    break;
  case 0: // open
    c->nr = SYS_open;
    c->a[1] = modes[pick(NELEM(modes))];
    c->a[0] = pathptr(c->a[1] == O_RDONLY ? lookname() : scratchname());
    break;
  case 1:
  case 2: // read
    c->nr = SYS_read;
    c->a[0] = anyfd();
    n = anylen();
    dataptr(c, 1, n, 1);
    c->a[2] = n;
    c->datacount = 1;
    break;
  case 3:
  case 4: // write
    c->nr = SYS_write;
    c->a[0] = anyfd();
    n = anylen();
    dataptr(c, 1, n, 0);
    c->a[2] = n;
    c->datacount = 1;
    break;
  case 5:
    c->nr = SYS_close;
    c->a[0] = anyfd();
    break;
  case 6:
    c->nr = SYS_dup;
    c->a[0] = anyfd();
    break;
  case 7:
    c->nr = SYS_fstat;
    c->a[0] = anyfd();
    dataptr(c, 1, sizeof(struct stat), 1);
    break;
  default: // a read of what is there, into a valid buffer
    c->nr = SYS_read;
    c->a[0] = anyfd();
    c->a[1] = okptr(512);
    c->a[2] = pick(512);
    break;
  }
}

static void
call_names(struct call *c)
{
  static const short majors[] = { 0, 2, 9, 10, -1, 32767 }; // never the console (1)

  switch (pick(6)) {
  case 0:
    c->nr = SYS_unlink;
    c->a[0] = pathptr(scratchname());
    break;
  case 1:
    c->nr = SYS_link;
    c->a[0] = pathptr(scratchname());
    c->a[1] = pathptr(scratchname());
    break;
  case 2:
    c->nr = SYS_mkdir;
    c->a[0] = pathptr(scratchname());
    break;
  case 3:
    c->nr = SYS_mknod;
    c->a[0] = pathptr(scratchname());
    c->a[1] = majors[pick(NELEM(majors))];
    c->a[2] = pick(3);
    break;
  case 4: // scratch names never climb: the cwd stays inside the scratch directory
    c->nr = SYS_chdir;
    c->a[0] = pathptr(scratchname());
    break;
  default: { // exec: scratch files hold no ELF; argv of every kind
    int kind;
    c->nr = SYS_exec;
    c->a[0] = pathptr(scratchname());
    c->a[1] = chance(50) ? anyptr(&kind) : okptr(64);
    break;
  }
  }
}

static void
call_proc(struct call *c)
{
  static const int badpids[] = { 0, -1, -1000, 0x7fffffff, 1000000, (int)0x80000000 };

  switch (pick(9)) {
  case 0: c->nr = SYS_getpid; break;
  case 1: c->nr = SYS_uptime; break;
  case 2: c->nr = SYS_time_us; break;
  case 3: // small or absurd sizes; shrink only what fuzzing grew
    c->nr = SYS_sbrk;
    switch (pick(4)) {
    case 0: c->a[0] = pick(3 * PGSIZE); break;
    case 1: c->a[0] = -(long)pick((int)((char *)sbrk(0) - heaptop) + 1); break;
    case 2: c->a[0] = (uint64)1 << (40 + pick(23)); break;
    default: c->a[0] = -((uint64)1 << (40 + pick(23))); break;
    }
    break;
  case 4:
    c->nr = SYS_sleep;
    c->a[0] = chance(80) ? pick(3) : -1 - pick(100);
    break;
  case 5: // kill: own children, or nobody
    c->nr = SYS_kill;
    c->a[0] = nkids > 0 && chance(50) ? kids[pick(nkids)] : badpids[pick(NELEM(badpids))];
    break;
  case 6:
    c->nr = SYS_wait;
    if (chance(60)) {
      c->a[0] = chance(50) ? 0 : okptr(4);
    } else {
      int kind;
      c->a[0] = anyptr(&kind);
      // wait(0) is allowed; other refused pointers must not reap a child
      c->nodata = kind == P_BAD || kind == P_RO;
      c->datacount = 1;
    }
    break;
  case 7:
    c->nr = SYS_sysinfo;
    dataptr(c, 0, sizeof(struct sysinfo), 1);
    break;
  default:
    c->nr = SYS_pipe;
    dataptr(c, 0, 2 * sizeof(int), 1);
    break;
  }
}

// Settings for ai_sched: a policy name (good, unknown, empty or not
// terminated) and a step budget (good, 0 to keep, or out of range).
static void
sched_args(struct ai_sched *s)
{
  static const char *names[] = { "fifo", "priority", "shortest", "fair", "", "lottery", "fifoX",
    "FIFO" };
  static const int chunks[] = { 0, 1, 4, AI_CHUNK_MAX, AI_CHUNK_MAX + 1, -1, 0x7fffffff };

  memset(s, 0, sizeof(*s));
  if (chance(10))
    memset(s->policy, 'f', sizeof(s->policy)); // no NUL
  else
    strcpy(s->policy, names[pick(NELEM(names))]);
  s->chunk = chunks[pick(NELEM(chunks))];
  s->prefill = chunks[pick(NELEM(chunks))];
}

static int
anyreqid(void)
{
  static const int odd[] = { 0, -1, 1, 2, 0x7fffffff, (int)0x80000000 };
  return chance(50) ? odd[pick(NELEM(odd))] : pick(1000);
}

// AI calls a caller makes. Waits only on requests that a worker serves.
static void
call_ai(struct call *c)
{
  static const int counts[] = { 0, 1, 3, AI_MAX_PROMPT, AI_MAX_PROMPT + 1, -1, 0x7fffffff };
  static const int preds[] = { 0, 1, 2, AI_MAX_PREDICT, AI_MAX_PREDICT + 1, -1 };
  int count = counts[pick(NELEM(counts))];

  if (!aiblock && count > 0 && count <= AI_MAX_PROMPT)
    count = 0; // a real worker would run it for seconds: only bad submits

  switch (pick(10)) {
  case 0:
  case 1:
    c->nr = SYS_ai_submit;
    dataptr(c, 0, count > 0 && count <= AI_MAX_PROMPT ? count * 4 : 0, 0);
    if (chance(50))
      memset((char *)(c->a[0] = okptr(AI_MAX_PROMPT * 4)), 0, AI_MAX_PROMPT * 4);
    c->a[1] = count;
    c->a[2] = preds[pick(NELEM(preds))];
    c->nodata = 0;    // a submit that fails the token copy is an error; one that succeeds was fine
    if (chance(50)) { // with options (any bytes): refused only at a bad pointer (0: none)
      int kind;
      c->nr = SYS_ai_submit_opts;
      c->a[3] = anyptr(&kind);
      if (kind == P_BAD)
        c->nodata = 1;
    }
    break;
  case 2: // wait: blocks only if the reqid is ours and queued, and a worker serves
    c->nr = SYS_ai_wait;
    c->a[0] = aiblock ? anyreqid() : -1;
    dataptr(c, 1, 1, 1);
    c->a[2] = chance(70) ? AI_RESULT_MAX + 1 : anylen();
    c->datacount = 1;
    break;
  case 3:
    c->nr = SYS_ai_query;
    c->a[0] = anyreqid();
    dataptr(c, 1, sizeof(struct ai_status), 1);
    break;
  case 4:
    c->nr = SYS_ai_cancel;
    c->a[0] = anyreqid();
    break;
  case 5:
    c->nr = SYS_ai_info;
    dataptr(c, 0, sizeof(struct ai_info), 1);
    break;
  case 7: // a size below the view's is refused before the pointer is used
    c->nr = SYS_ai_table;
    c->a[1] = chance(70) ? sizeof(struct ai_table_view) + pick(2) * pick(4096) : anylen();
    dataptr(c, 0,
        (long)(int)c->a[1] >= (long)sizeof(struct ai_table_view) ? sizeof(struct ai_table_view) : 0,
        1);
    break;
  case 8: // the scheduling settings: read, or set (a name of the list, or any bytes)
    c->nr = SYS_ai_sched;
    if (chance(50))
      sched_args((struct ai_sched *)(c->a[0] = okptr(sizeof(struct ai_sched))));
    else
      dataptr(c, 0, sizeof(struct ai_sched), 1);
    break;
  case 6: // ai_call blocks like submit + wait
    c->nr = SYS_ai_call;
    c->a[0] = okptr(AI_MAX_PROMPT * 4);
    memset((char *)c->a[0], 0, AI_MAX_PROMPT * 4);
    c->a[1] = aiblock ? count : 0;
    c->a[2] = preds[pick(NELEM(preds))];
    dataptr(c, 3, 1, 1);
    c->a[4] = chance(70) ? AI_RESULT_MAX + 1 : anylen();
    c->datacount = 1;
    break;
  default: { // worker-only calls from a caller: refused
    static const long worker[] = { SYS_ai_register, SYS_ai_progress, SYS_ai_complete, SYS_ai_fail,
      SYS_ai_take, SYS_ai_emit, SYS_ai_logprob, SYS_ai_kvreport,
      SYS_ai_plan }; // (an ai_next that succeeds would take a request)
    c->nr = worker[pick(NELEM(worker))];
    c->a[0] = c->nr == SYS_ai_register ? (chance(50) ? 0 : pick(100000)) : anyreqid();
    c->a[1] = c->nr == SYS_ai_register ? (chance(50) ? 0 : pick(1000)) : okptr(1024);
    c->a[2] = pick(300);
    if (c->nr == SYS_ai_take) // (job, places)
      c->a[0] = okptr(sizeof(struct ai_job));
    if (c->nr == SYS_ai_plan)
      c->a[0] = okptr(sizeof(struct ai_plan));
    break;
  }
  }
}

// ai_stream, ai_logprobs and ai_right, which any process may call. A
// stream read blocks only until the request has an id at `from` or ends:
// only on requests of our own that a worker serves (with a real worker,
// submits are all bad). ai_logprobs never blocks.
static void
call_ai_any(struct call *c)
{
  static const int froms[] = { 0, 1, AI_MAX_PREDICT - 1, AI_MAX_PREDICT, -1, 0x7fffffff };

  if (chance(30)) {
    c->nr = SYS_ai_right;
    c->a[0] = chance(50) ? 0 : rnd(); // non-zero drops it: workers never register
    return;
  }
  long cap = anylen();
  c->nr = SYS_ai_stream;
  c->a[0] = aiblock ? anyreqid() : -1;
  if (chance(30)) {
    c->nr = SYS_ai_logprobs;
    c->a[0] = anyreqid();
  }
  c->a[2] = froms[pick(NELEM(froms))];
  c->a[3] = cap;
  dataptr(c, 1, cap, 1);
  c->datacount = 1;
}

// A thread entry that touches no memory, so any stack will do: it calls
// thread_exit with its argument at once.
void fuzz_thread_entry(void *arg);
asm(".pushsection .text\n"
    ".globl fuzz_thread_entry\n"
    "fuzz_thread_entry:\n"
    "  li a7, " XSTR(SYS_thread_exit) "\n"
                                      "  ecall\n"
                                      ".popsection\n");

// A futex word address and a value it does not hold: any kind of pointer;
// one into the heap (up to the break: sbrk fuzzing moves it) or the code
// gets a value other than the word's, so futex_wait can only refuse the
// address or answer -EAGAIN, never sleep (nothing would wake it). Only
// this worker's threads share its memory, and they write nothing.
static void
futex_args(struct call *c)
{
  int kind;
  uint32 word;
  uint64 a = anyptr(&kind) & (chance(70) ? ~(uint64)3 : ~(uint64)0);

  c->a[0] = a;
  c->a[1] = rnd();
  if ((a >= (uint64)scratch && a <= (uint64)sbrk(0) - 4) || kind == P_RO) {
    memmove(&word, (void *)a, 4);
    c->a[1] = word + 1 + pick(1000);
  }
}

// Threads, futexes, process groups and the machine queries.
static void
call_threads(struct call *c)
{
  static const int badtids[] = { 0, -1, 1, 0x7fffffff, (int)0x80000000 };
  int kind;

  switch (pick(8)) {
  case 0: // a stack of any kind, aligned or not
    if (nthreads == MAXTHREADS) {
      c->nr = SYS_thread_join;
      c->a[0] = threads[--nthreads];
      c->a[1] = chance(50) ? 0 : okptr(8);
      break;
    }
    c->nr = SYS_thread_create;
    c->a[0] = (uint64)fuzz_thread_entry;
    c->a[1] = rnd();
    c->a[2] = anyptr(&kind) & (chance(80) ? ~(uint64)15 : ~(uint64)0);
    break;
  case 1: // join: our threads (result pointer of any kind) or none
    c->nr = SYS_thread_join;
    c->a[0] = nthreads > 0 && chance(70) ? threads[pick(nthreads)] : badtids[pick(NELEM(badtids))];
    dataptr(c, 1, 8, 1);
    if (chance(30))
      c->a[1] = 0; // no result wanted
    c->nodata = c->nodata && c->a[1] != 0;
    break;
  case 2:
    c->nr = SYS_futex_wait;
    futex_args(c);
    break;
  case 3:
    c->nr = SYS_futex_wake;
    c->a[0] = anyptr(&kind);
    c->a[1] = chance(50) ? pick(4) : rnd();
    break;
  case 4: // process groups: ourselves, our children or nobody
    c->nr = SYS_setpgid;
    if (chance(30))
      c->a[0] = 0; // the caller
    else
      c->a[0] = nkids > 0 && chance(50) ? kids[pick(nkids)] : badtids[pick(NELEM(badtids))];
    c->a[1] = chance(50) ? pick(3) : rnd();
    break;
  case 5:
    c->nr = SYS_setfg;
    c->a[0] = -1 - pick(1000);
    break;
  case 6: c->nr = SYS_nharts; break;
  default: c->nr = SYS_vlenb; break;
  }
}

// ---------------------------------------------------------------- file mappings

static uint64 lastmap, lastlen; // the latest mapping made (munmap and writes use it)

// mmap of a fresh descriptor or any one, with lengths, protections, flags
// and offsets good and bad; munmap of that mapping or of anything; a write
// from the mapping, whose pages the kernel fills inside the call (or
// refuses past the file's end).
static void
call_mmap(struct call *c)
{
  static const long prots[] = { PROT_READ, PROT_READ | PROT_WRITE, 0, PROT_WRITE, 4, -1 };
  static const long flags[] = { MAP_SHARED, MAP_PRIVATE, 0, 3, -1 };
  int kind;

  switch (pick(4)) {
  case 0:
  case 1:
    c->nr = SYS_mmap;
    c->tmpfd = chance(70) ? open(chance(50) ? scratchname() : bigfile(), O_RDONLY) : -1;
    c->a[0] = chance(90) ? 0 : rnd();
    c->a[1] = chance(70) ? 4096 * (1 + pick(64)) : anylen();
    c->a[2] = prots[pick(NELEM(prots))];
    c->a[3] = flags[pick(NELEM(flags))];
    c->a[4] = c->tmpfd >= 0 ? c->tmpfd : anyfd();
    c->a[5] = chance(70) ? 4096 * pick(8) : rnd();
    break;
  case 2:
    c->nr = SYS_munmap;
    c->a[0] = lastmap && chance(70) ? lastmap + 4096 * pick(4) : anyptr(&kind);
    c->a[1] = chance(70) ? 4096 * pick(8) : anylen();
    break;
  default:
    c->nr = SYS_write;
    c->tmpfd = open(scratchname(), O_CREATE | O_TRUNC | O_WRONLY);
    c->a[0] = c->tmpfd;
    c->a[1] = lastmap ? lastmap : okptr(16);
    c->a[2] = lastmap ? pick(lastlen < SCRATCH ? lastlen + 1 : SCRATCH) : pick(16);
    break;
  }
}

// Random registers; call numbers valid or not, never ones that could
// end the test or block (fork, exit, exec, kill, sbrk, sleep, wait, read,
// pipe, AI waits and the worker calls, threads, futex_wait, setpgid and
// setfg, ai_right).
static void
call_raw(struct call *c)
{
  static const long safe[] = { SYS_write, SYS_fstat, SYS_chdir, SYS_dup, SYS_getpid, SYS_uptime,
    SYS_open, SYS_mknod, SYS_unlink, SYS_link, SYS_mkdir, SYS_close, SYS_time_us, SYS_sysinfo,
    SYS_ai_query, SYS_ai_cancel, SYS_ai_info, SYS_ai_table, SYS_ai_progress, SYS_ai_fail,
    SYS_nharts, SYS_vlenb, SYS_futex_wake, SYS_ai_take, SYS_ai_emit, SYS_ai_plan, SYS_ai_sched };
  static const long bad[] = { 0, -1, 1000, 0x7fffffff, 0x100000005L, (long)0x8000000000000000UL };

  c->raw = 1;
  c->nr = chance(30) ? bad[pick(NELEM(bad))] : safe[pick(NELEM(safe))];
  for (int i = 0; i < 6; i++)
    c->a[i] = rnd();
  // Random registers are mostly huge: a descriptor from them is invalid,
  // but keep reportfd out all the same.
  if ((int)c->a[0] == reportfd)
    c->a[0] = -1;
}

// One random call, typed or raw, made and checked.
static void
one_call(void)
{
  struct call c;
  long r;

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
  default: // fork a child (workers only)
    if (nkids >= MAXKIDS) {
      c.nr = SYS_wait;
      c.a[0] = 0;
      break;
    }
    c.nr = SYS_fork;
    r = run(&c);
    if (r == 0)
      child_main();
    if (r > 0)
      kids[nkids++] = r;
    return;
  }
  if (c.nr == SYS_pipe) {
    // Fill the pipe a little and close its write end, so reads never wait.
    // (A success means the kernel wrote the descriptors at a[0]: memory
    // past scratch may be mapped too, by sbrk fuzzing.)
    if (run(&c) == 0) {
      int *fds = (int *)c.a[0];
      write(fds[1], "fuzz", pick(5));
      close(fds[1]);
    }
    return;
  }
  if (c.nr == SYS_exec)
    stop_helper();
  r = run(&c);
  if (c.nr == SYS_mmap && r > 0) {
    lastmap = r;
    lastlen = c.a[1];
  }
  if (c.nr == SYS_wait && r > 0)
    forget(kids, &nkids, r);
  if (c.nr == SYS_thread_create && r > 0 && !child)
    threads[nthreads++] = r;
  if (c.nr == SYS_thread_join && r == 0)
    forget(threads, &nthreads, c.a[0]);
  if (c.tmpfd >= 0)
    close(c.tmpfd);
  if (c.scrub) // never an ELF image in scratch, so none gets written to a file
    memset(scratch, 0, SCRATCH);
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

// ---------------------------------------------------------------- processes

// Common set-up of a fuzzing process: no console, scratch at the heap top.
static void
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

// Makes the scratch directory for worker index and goes into it.
static int
enter_sandbox(int index)
{
  char dir[32];

  snprintf(dir, sizeof(dir), "%s/w%d", SANDBOX, index);
  mkdir(dir);
  return chdir(dir);
}

static void
send_report(void)
{
  write(reportfd, &rep, sizeof(rep));
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
static void
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
static void __attribute__((noreturn)) worker_main(int index, uint64 seed, long ncalls)
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

// The stop request the parent queues when every caller is done.
#define STOP_TOKEN 999

// Finishes request reqid that the worker took: completes it with up to
// predict ids, or fails it.
static void
finish(int reqid, int predict)
{
  uint32 ids[AI_MAX_PREDICT];
  int n;

  if (chance(30)) {
    ai_fail(reqid, anyreqid());
    return;
  }
  n = 1 + pick(predict);
  for (int i = 0; i < n; i++)
    ids[i] = pick(1000);
  if (ai_complete(reqid, ids, n) < 0)
    ai_fail(reqid, AIE_RUNTIME);
}

static void finish(int reqid, int predict);

// ai_plan's argument for the worker running reqid: a plan of 0..3 entries
// (reqid, or any id; any progress) and places, or a pointer of any kind.
// A plan it accepts only reorders and may pause reqid: the request still
// ends when the worker completes it.
static void
plan_args(struct call *c, int reqid)
{
  static const int places[] = { 0, 1, 8, -1, 0x7fffffff };
  struct ai_plan *p;

  if (chance(30)) {
    dataptr(c, 0, sizeof(struct ai_plan), 1);
    return;
  }
  p = (struct ai_plan *)(c->a[0] = okptr(sizeof(struct ai_plan)));
  memset(p, 0, sizeof(*p));
  p->places = places[pick(NELEM(places))];
  p->caches = places[pick(NELEM(places))];
  p->n = chance(80) ? pick(4) : anylen();
  for (int i = 0; i < 3; i++) {
    p->e[i].reqid = chance(60) ? reqid : anyreqid();
    p->e[i].fed = chance(50) ? pick(8) : anylen();
  }
}

// Bad and good worker-side calls while request reqid runs; none of them
// ends it (a complete with n = -1 is refused; fail is redirected; emit
// adds ids, or is refused). ai_take gets only pointers it must refuse, so
// it takes nothing (should it take a request, that is a failed check, and
// the request is finished too, so that its caller's wait ends).
static void
worker_noise(int reqid)
{
  static const long nrs[] = { SYS_ai_progress, SYS_ai_complete, SYS_ai_fail, SYS_ai_emit,
    SYS_ai_take, SYS_ai_logprob, SYS_ai_plan };
  struct call c;
  int kind;

  for (int k = pick(4); k > 0; k--) {
    memset(&c, 0, sizeof(c));
    c.nr = nrs[pick(NELEM(nrs))];
    c.a[0] = chance(50) ? reqid : anyreqid();
    c.a[1] = c.nr == SYS_ai_progress ? (uint64)pick(300) : anyptr(&kind);
    c.a[2] = anylen();
    if (c.nr == SYS_ai_complete && c.a[0] == (uint64)reqid)
      c.a[2] = -1;
    if (c.nr == SYS_ai_fail && c.a[0] == (uint64)reqid)
      c.nr = SYS_ai_progress;
    if (c.nr == SYS_ai_take) {
      do
        c.a[0] = anyptr(&kind);
      while (kind != P_BAD && kind != P_NULL && kind != P_RO);
      c.a[1] = pick(10);
      c.nodata = 1;
      c.datacount = 1;
    }
    if (c.nr == SYS_ai_plan)
      plan_args(&c, reqid);
    long r = run(&c);
    if (c.nr == SYS_ai_take && r > 0)
      finish(r, 1);
  }
}

// The AI worker: registers (unless another worker serves), tells the
// parent through ready, then serves every request: takes it (sometimes
// with a bad job pointer first, which puts it back), makes bad worker-side
// calls, and completes or fails it. It stops at the parent's stop request.
static void __attribute__((noreturn)) aiworker_main(uint64 seed, int ready)
{
  struct ai_job *job;
  struct call c;
  int r, kind, stop = 0;

  setup(seed);
  rep.index = -1;
  r = ai_register(1000, 600);
  write(ready, &r, sizeof(r));
  close(ready);
  if (r < 0)
    exit(0);
  while (!stop) {
    memset(&c, 0, sizeof(c));
    c.nr = SYS_ai_next;
    kind = P_OK;
    c.a[0] = chance(10) ? anyptr(&kind) : okptr(sizeof(*job));
    c.nodata = kind == P_BAD || kind == P_NULL || kind == P_RO;
    c.datacount = 1;
    if ((r = run(&c)) <= 0)
      continue;
    job = (struct ai_job *)c.a[0]; // the kernel wrote it: valid memory
    stop = job->count == 1 && job->tokens[0] == STOP_TOKEN;
    if (!stop)
      worker_noise(r);
    finish(r, job->predict);
  }
  ai_register(0, 0);
  send_report();
  exit(0);
}

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

static void
usage(void)
{
  fprintf(2, "usage: fuzz [-s SEED] [-p PROCS] [-n CALLS]\n");
  exit(2);
}

int
main(int argc, char *argv[])
{
  long seed = 1, nprocs = 8, ncalls = 2000, calls = 0, failed = 0, checks, bad = 0;
  struct counts before, after;
  struct report r;
  int p[2], ready[2], aipid, pid, st, i, got = 0, aiready = -1;
  uint64 t0;

  for (i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "-s") == 0)
      seed = strtol(argv[i + 1], 0, 10);
    else if (strcmp(argv[i], "-p") == 0)
      nprocs = strtol(argv[i + 1], 0, 10);
    else if (strcmp(argv[i], "-n") == 0)
      ncalls = strtol(argv[i + 1], 0, 10);
    else
      usage();
  }
  if (i != argc || nprocs < 1 || nprocs > 32 || ncalls < 0)
    usage();
  printf("fuzz: seed %ld, %ld processes x %ld calls\n", seed, nprocs, ncalls);
  rmtree(SANDBOX);
  if (mkdir(SANDBOX) < 0) {
    printf("fuzz: cannot make the scratch directory %s\n", SANDBOX);
    exit(1);
  }
  sample(&before);
  t0 = time_us();
  if (pipe(p) < 0 || pipe(ready) < 0) {
    printf("fuzz: pipe failed\n");
    exit(1);
  }
  // The AI worker first, so that no fuzzing process takes the role.
  reportfd = p[1];
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
  for (i = 0; i < nprocs; i++) {
    if ((pid = fork()) == 0) {
      close(p[0]);
      worker_main(i, seed * 1000003 + i, ncalls);
    }
    if (pid < 0)
      printf("fuzz: fork of worker %d failed: %s\n", i, strerror(pid));
  }
  close(p[1]);
  while (read(p[0], &r, sizeof(r)) == sizeof(r)) {
    if (r.index >= 0)
      got++;
    calls += r.calls;
    failed += r.failed;
    if (r.note[0])
      printf("fuzz: worker %d: %ld failed; first: %s\n", r.index, r.failed, r.note);
    if (r.index >= 0 && got == nprocs && aiblock)
      stop_aiworker();
  }
  close(p[0]);
  while ((pid = wait(&st)) > 0)
    if (st != 0) {
      printf("fuzz: worker pid %d exited with status %d\n", pid, st);
      bad++;
    }
  if (got < nprocs) {
    printf("fuzz: %ld of %ld workers reported\n", (long)got, nprocs);
    bad += nprocs - got;
  }
  rmtree(SANDBOX);
  // Requests still running for a real worker are orphans that its reports
  // free: give it a while.
  for (i = 0; i < 600; i++) {
    sample(&after);
    if (after.ai.used <= before.ai.used)
      break;
    sleep(1);
  }
  checks = calls + bad + 4;
  failed += bad;
  failed += !leakcheck("free pages", before.si.freepages, after.si.freepages, 0);
  failed += !leakcheck("open files", before.si.files, after.si.files, 1);
  failed += !leakcheck("processes", before.si.procs, after.si.procs, 1);
  failed += !leakcheck("AI slots", before.ai.used, after.ai.used, 1);
  printf("fuzz: %ld calls in %ld ms; free pages %ld -> %ld\n", calls,
      (long)((time_us() - t0) / 1000), (long)before.si.freepages, (long)after.si.freepages);
  printf("%ld passed, %ld failed\n", checks - failed, failed);
  exit(failed != 0);
}
