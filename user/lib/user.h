// The interface of user programs: system calls and the small C library.
#ifndef AISVC_USER_H
#define AISVC_USER_H

#include "kernel/include/types.h"
#include "kernel/include/errno.h"

struct stat;

// ---- system calls (user/usys.S, generated from kernel/include/syscall.h).
// Each returns a negative error code (-ENOENT, ...) on failure.
int fork(void);
int exit(int status) __attribute__((noreturn));
int wait(int *status);
int pipe(int fds[2]);
int write(int fd, const void *buf, int n);
int read(int fd, void *buf, int n);
int close(int fd);
int kill(int pid);
int exec(const char *path, char **argv);
int open(const char *path, int omode);
int mknod(const char *path, short major, short minor);
int unlink(const char *path);
int fstat(int fd, struct stat *st);
int link(const char *oldpath, const char *newpath);
int mkdir(const char *path);
int chdir(const char *path);
int dup(int fd);
int getpid(void);
char *sbrk(long n);             // (char *)-1 on failure; a negative n releases memory
int sleep(int ticks);           // 10 ticks per second
int uptime(void);               // ticks since boot
uint64 time_us(void);           // microseconds since boot, from the time CSR (no trap: ulib.c)
uint64 time_ticks(void);        // the time CSR itself: TIMEBASE_HZ ticks a second (10 MHz)
int setpgid(int pid, int pgid); // pid 0: the caller; pgid 0: a new group numbered pid
int setfg(int pgid);            // the console's foreground group (0: none); returns the old one
struct sysinfo;
int sysinfo(struct sysinfo *st); // resource counts for leak checks (kernel/include/sysinfo.h)
int vlenb(void);                 // bytes per vector register (RVV), 0 without the V extension
// File mappings (docs/VM.md; kernel/include/mman.h): mmap returns the
// address, or a negative error code as a pointer: test with (long)p < 0.
void *mmap(void *addr, uint64 len, int prot, int flags, int fd, uint64 off);
int munmap(void *addr, uint64 len);
// Threads (docs/THREADS.md); user/lib/thread.c wraps the first three.
int thread_create(void (*entry)(void *), void *arg, void *stack_top); // tid
int thread_join(int tid, uint64 *result);
int thread_exit(uint64 result) __attribute__((noreturn));
int futex_wait(volatile uint32 *addr, uint32 val); // 0, -EAGAIN if *addr != val
int futex_wake(volatile uint32 *addr, int n);      // threads woken
int nharts(void);

// The AI service (kernel/include/aisvc.h: limits, states, AIE_ codes and
// the structs). Each returns a negative AIE_ code on failure.
struct ai_status;
struct ai_job;
struct ai_info;
struct ai_table_view;
int ai_submit(const uint32 *tokens, int token_count, int predict_count); // reqid > 0
// ai_submit with options (struct ai_opts: stop ids such as the model's
// end of sequence, the sampler); opts 0 is ai_submit
struct ai_opts;
int ai_submit_opts(
    const uint32 *tokens, int token_count, int predict_count, const struct ai_opts *opts);
int ai_wait(int reqid, char *out, int out_cap); // bytes written (no NUL counted)
int ai_query(int reqid, struct ai_status *st);  // 0; never blocks
int ai_call(const uint32 *tokens, int n, int predict, char *out, int cap); // submit + wait
int ai_cancel(int reqid);
int ai_info(struct ai_info *in); // the table at a glance
// every slot's public state, the FIFO and the batch at one instant; size:
// bytes at v, at least sizeof(struct ai_table_view)
int ai_table(struct ai_table_view *v, int size);
// ids [from, from+k) of the caller's request, k <= cap; blocks until k >= 1
// or the end; 0 at the end of a done request
int ai_stream(int reqid, uint32 *ids, int from, int cap);
// records [from, from+k) of the ids emitted so far (k <= cap; 0: none
// yet); never blocks; read them before ai_wait collects the request
struct ai_logprob;
int ai_logprobs(int reqid, struct ai_logprob *lp, int from, int cap);
// 1 while this process holds the AI worker right, else 0; drop != 0 first
// gives it up for good (docs/AI_SERVICE.md, rule 13)
int ai_right(int drop);
// the scheduling policy and step budget (struct ai_sched): "" and 0 keep
// them (anyone may read), setting needs the worker right; filled with
// those in force
struct ai_sched;
int ai_sched(struct ai_sched *s);
// Worker only (user/ai/ai_daemon.c):
int ai_register(int vocab, int seq_len); // (0, 0) resigns the role
int ai_next(struct ai_job *job);         // reqid; blocks while none queued
int ai_progress(int reqid, int ntokens);
int ai_complete(int reqid, const uint32 *ids, int n);
int ai_fail(int reqid, int err);
int ai_take(struct ai_job *job, int places);             // reqid, 0 if none queued; never blocks
int ai_emit(int reqid, const uint32 *ids, int n);        // 0 = go on; -AIE_NOREQ = stop it
int ai_logprob(int reqid, const struct ai_logprob *rec); // before the emit of its id
struct ai_kvstat;
int ai_kvreport(int reqid, int cached, const struct ai_kvstat *st); // reqid 0: counters only
struct ai_plan;
int ai_plan(struct ai_plan *p); // the order and the places of the next step

// ---- ulib.c
int stat(const char *path, struct stat *st);
char *strcpy(char *dst, const char *src);
char *strncpy(char *dst, const char *src, int n);
int strcmp(const char *p, const char *q);
int strncmp(const char *p, const char *q, uint n);
uint strlen(const char *s);
char *strchr(const char *s, char c);
char *gets(char *buf, int max);
void *memset(void *dst, int c, uint n);
void *memmove(void *dst, const void *src, int n);
void *memcpy(void *dst, const void *src, uint n);
int memcmp(const void *a, const void *b, uint n);
int atoi(const char *s);
long strtol(const char *s, char **end, int base);
int parse_u64(const char *s, uint64 *v); // 0, or -1 if s is not a number below 2^64
const char *strerror(int err);           // accepts err or -err

// ---- printf.c
void printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void fprintf(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int snprintf(char *buf, int size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

// ---- thread.c: threads with a library-allocated stack, mutex, barrier.
struct mutex {
  uint32 word; // 0 free, 1 held, 2 held with waiters; zero-initialised = free
};
struct barrier {
  int n;
  uint32 count, gen, sleepers;
  uint64 spin_us; // how long a waiter spins before it sleeps (barrier_init: 50)
};
int uthread_create(uint64 (*fn)(void *), void *arg); // tid
int uthread_join(int tid, uint64 *result);
void mutex_lock(struct mutex *m);
void mutex_unlock(struct mutex *m);
void barrier_init(struct barrier *b, int n);
void barrier_wait(struct barrier *b);

// ---- umalloc.c
void *malloc(uint64 n);
void *calloc(uint64 count, uint64 size);
void free(void *p);

#endif
