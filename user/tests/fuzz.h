// What fuzz's files share (fuzz.c has the design comment):
//   fuzz.c         the parent: workers started, reports collected, leaks
//   fuzz_call.c    random numbers, the worker's state, arguments, a call
//                  made and checked
//   fuzz_worker.c  a worker process: one call of any family, children, the
//                  helper thread
//   fuzz_fs.c      the file-system calls
//   fuzz_proc.c    the process, thread and raw calls
//   fuzz_ai.c      the AI service calls, and the AI worker process
#ifndef AISVC_FUZZ_H
#define AISVC_FUZZ_H

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
#define STOP_TOKEN   999         // the stop request the parent queues when every caller is done
#define XSTR(x)      STR(x)
#define STR(x)       #x

// ---------------------------------------------------------------- worker state
extern char *scratch;  // SCRATCH bytes at the top of the heap
extern char *heaptop;  // the break after scratch: sbrk fuzzing grows above it
extern char *textpage; // the program's code: readable, not writable
extern int aiblock;    // AI waits may block: our own worker serves
extern int child;      // this process is a worker's child
extern int kids[MAXKIDS], nkids;
extern int threads[MAXTHREADS], nthreads; // started, not yet joined
extern char *hstack;                      // the helper thread's stack, below scratch
extern int helper;                        // its thread id while it runs, else 0
extern volatile int helper_stop;          // set when the worker's calls are done
extern volatile uint32 main_calls;        // the worker's calls: the helper's pace
extern int mypid;
extern int reportfd; // the pipe to the parent: never picked as a descriptor

// What a process reports to the parent at its end.
struct report {
  int index;           // worker number; -1 for the AI worker
  long calls;          // checked calls
  long failed;         // of those, failed
  char note[NOTE_MAX]; // the first failure
};
extern struct report rep;

// Common set-up of a fuzzing process: random numbers from seed, no
// console, scratch at the heap top.
void setup(uint64 seed);
// Sends rep to the parent.
void send_report(void);

// ---------------------------------------------------------------- random
// The next number of the xorshift generator with state *st (never 0).
uint64 rnd_from(uint64 *st);
// The next number of the process's generator.
uint64 rnd(void);
// A number in [0, n).
int pick(int n);
// 1 with the given chance in percent.
int chance(int percent);

// ---------------------------------------------------------------- arguments
// Pointer kinds, by what the kernel may do with them.
enum { P_OK, P_PARTIAL, P_NULL, P_BAD, P_RO };
// A pointer of a random kind and its kind in *kind.
uint64 anyptr(int *kind);
// A valid pointer into scratch with room for n bytes.
uint64 okptr(int n);
// A length: small, on a block's edge, huge or negative.
long anylen(void);
// A descriptor number: mostly small ones, never reportfd.
int anyfd(void);
// A name inside the scratch directory (relative, no "..").
const char *scratchname(void);
// Any path at all, for calls that only look (never the console or a
// real program).
const char *lookname(void);
// A large file outside the scratch directory, only ever read.
const char *bigfile(void);
// A path argument for name, or a bad one (see fuzz_call.c).
uint64 pathptr(const char *name);
// A request id: odd ones, or any small one.
int anyreqid(void);

// ---------------------------------------------------------------- calls
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

// Records a failed check (the first one's description is kept).
void fail(struct call *c, long r, const char *why);
// Makes call c and checks its result; returns it.
long run(struct call *c);
// Sets the call's pointer argument i for data of n bytes (n > 0) that the
// kernel writes (out) or reads; notes if the kernel must refuse it.
void dataptr(struct call *c, int i, long n, int out);
// Removes id from list[0..*n) (a reaped child, a joined thread), if there.
void forget(int *list, int *n, int id);

// The families: each fills c with one random call of its kind.
void call_file(struct call *c);    // descriptors (fuzz_fs.c)
void call_names(struct call *c);   // names in the directory tree (fuzz_fs.c)
void call_proc(struct call *c);    // the process's own calls (fuzz_proc.c)
void call_threads(struct call *c); // threads, futexes, groups (fuzz_proc.c)
void call_raw(struct call *c);     // random registers (fuzz_proc.c)
void call_ai(struct call *c);      // an AI caller's calls (fuzz_ai.c)
void call_ai_any(struct call *c);  // stream, logprobs, the right (fuzz_ai.c)
void call_mmap(struct call *c);    // file mappings (fuzz_mmap.c)
// After call c returned r: a mapping it made becomes the one call_mmap
// unmaps and writes from (fuzz_mmap.c).
void mmap_made(struct call *c, long r);

// ---------------------------------------------------------------- processes
// One random call, typed or raw, made and checked (fuzz_worker.c).
void one_call(void);
// Ends the helper thread, if one runs, and waits for it.
void stop_helper(void);
// Worker index: ncalls checked calls, then waits for its children.
void __attribute__((noreturn)) worker_main(int index, uint64 seed, long ncalls);
// The AI worker (fuzz_ai.c): registers unless another worker serves, says
// so through ready, and serves until the parent's stop request.
void __attribute__((noreturn)) aiworker_main(uint64 seed, int ready);

#endif
