// Host compatibility layer: lets the guest's LLM runtime (user/llm/*.c)
// build natively on Linux for fast checks against the numpy reference
// (tests/test_llmrun_host.py). Forced in with `gcc -include`; it stands in
// for user/lib/user.h: the same functions, on glibc, with the guest's
// conventions (system calls return negative error codes, fprintf takes a
// file descriptor, time_us counts microseconds).
#ifndef AISVC_HOSTCOMPAT_H
#define AISVC_HOSTCOMPAT_H

#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
// glibc's struct stat becomes struct host_stat; the guest's is defined below.
#define stat host_stat
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#undef stat

#include "kernel/include/types.h"

// Skip the guest headers this file replaces (glibc's mmap takes the same
// PROT_ and MAP_ values as the guest's).
#define AISVC_USER_H
#define AISVC_FCNTL_H
#define AISVC_MMAN_H
#include "kernel/include/stat.h"
#include "kernel/include/sysinfo.h"

static inline int
hc_ret(long r)
{
  return r < 0 ? -errno : (int)r;
}

static inline int
hc_open(const char *path, int omode)
{
  return hc_ret(open(path, omode));
}

static inline int
hc_read(int fd, void *buf, int n)
{
  return hc_ret(read(fd, buf, n));
}

static inline int
hc_write(int fd, const void *buf, int n)
{
  return hc_ret(write(fd, buf, n));
}

static inline int
hc_fstat(int fd, struct stat *st)
{
  struct host_stat h;
  if (fstat(fd, &h) < 0)
    return -errno;
  st->dev = h.st_dev;
  st->ino = h.st_ino;
  st->type = S_ISDIR(h.st_mode) ? T_DIR : T_FILE;
  st->nlink = h.st_nlink;
  st->size = h.st_size;
  return 0;
}

static inline const char *
hc_strerror(int err)
{
  return strerror(err < 0 ? -err : err);
}

static inline uint64
time_us(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

// The guest's sysinfo: only freepages (4 KiB pages the host has free).
static inline int
sysinfo(struct sysinfo *st)
{
  long n = sysconf(_SC_AVPHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  memset(st, 0, sizeof(*st));
  st->freepages = n > 0 && size > 0 ? (uint64)n * (uint64)size / 4096 : 0;
  return 0;
}

// Round half to even (the default rounding mode), as fcvt.l.d ..., rne.
static inline int64
hostcompat_rint(double x)
{
  return (int64)__builtin_rint(x);
}

// The thread pool's needs (user/llm/pool.c): futexes on Linux's, threads
// on POSIX threads.
static inline int
futex_wait(volatile uint32 *addr, uint32 val)
{
  return syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, 0, 0, 0) < 0 ? -errno : 0;
}

static inline int
futex_wake(volatile uint32 *addr, int n)
{
  return (int)syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, n, 0, 0, 0);
}

struct hc_start {
  uint64 (*fn)(void *);
  void *arg;
};

static pthread_t hc_threads[64];
static int hc_nthreads;

static inline void *
hc_thread(void *p)
{
  struct hc_start s = *(struct hc_start *)p;
  free(p);
  return (void *)s.fn(s.arg);
}

// Thread ids are 1 + the index in hc_threads.
static inline int
uthread_create(uint64 (*fn)(void *), void *arg)
{
  struct hc_start *s = malloc(sizeof(*s));
  if (s == 0 || hc_nthreads == 64) {
    free(s);
    return -EAGAIN;
  }
  s->fn = fn;
  s->arg = arg;
  if (pthread_create(&hc_threads[hc_nthreads], 0, hc_thread, s) != 0) {
    free(s);
    return -EAGAIN;
  }
  return ++hc_nthreads;
}

static inline int
uthread_join(int tid, uint64 *result)
{
  void *r;
  if (tid < 1 || tid > hc_nthreads || pthread_join(hc_threads[tid - 1], &r) != 0)
    return -ESRCH;
  if (result)
    *result = (uint64)r;
  return 0;
}

static inline int
nharts(void)
{
  return (int)sysconf(_SC_NPROCESSORS_ONLN);
}

// user/lib's parse_u64 on glibc: a whole string of digits below 2^64.
static inline int
parse_u64(const char *s, uint64 *v)
{
  char *end;
  if (*s < '0' || *s > '9')
    return -1; // strtoull would take blanks and a sign
  errno = 0;
  unsigned long long n = strtoull(s, &end, 10);
  if (*end != 0 || errno == ERANGE)
    return -1;
  *v = n;
  return 0;
}

#define open     hc_open
#define read     hc_read
#define write    hc_write
#define fstat    hc_fstat
#define strerror hc_strerror
#define fprintf  dprintf

#endif
