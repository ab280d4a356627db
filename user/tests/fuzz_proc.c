// fuzz's process calls (fuzz.c): the process's own (sbrk, sleep, kill,
// wait, sysinfo, pipe), threads, futexes and process groups, and raw
// calls of random registers.

#include "user/tests/fuzz.h"

// The process's own calls: getpid, uptime, time_us, sbrk (shrinking only
// what fuzzing grew), sleep, kill (own children or nobody), wait, sysinfo,
// pipe.
void
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
void
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

// Random registers; call numbers valid or not, never ones that could
// end the test or block (fork, exit, exec, kill, sbrk, sleep, wait, read,
// pipe, AI waits and the worker calls, threads, futex_wait, setpgid and
// setfg, ai_right).
void
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
