// Host harness for the guest C library (user/lib/printf.c, user/lib/umalloc.c,
// user/lib/ulib.c), built by tests/test_ulib_host.py.
//
// The library is compiled with its names prefixed u_ (u_printf, u_malloc,
// ...) so it does not clash with the host libc this file uses. Here are
// the system calls it needs: u_write goes to the real fd, u_sbrk moves a
// break inside a reserved region. The test appends the printf cases
// (ulib_cases.c, generated) and runs:
//   ulib_test printf   one line per case, fprintf's long line, snprintf's
//                      truncation
//   ulib_test malloc   "malloc ok", or what went wrong
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define ARENA (4UL << 30) // address space for u_sbrk (reserved, not touched)

int u_snprintf(char *buf, int size, const char *fmt, ...);
void u_fprintf(int fd, const char *fmt, ...);
void *u_malloc(uint64_t n);
void *u_calloc(uint64_t count, uint64_t size);
void u_free(void *p);
char *u_sbrk(long n);

static char *arena, *brk_now;

char *
u_sbrk(long n)
{
  char *old = brk_now;

  if (arena == 0) {
    arena =
        mmap(0, ARENA, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (arena == MAP_FAILED)
      abort();
    // Start at an odd address, as a program's break may: umalloc aligns.
    old = brk_now = arena + 8;
  }
  if (n > 0 && (uint64_t)n > ARENA - (uint64_t)(brk_now - arena))
    return (char *)-1;
  if (n < 0 && (uint64_t)-n > (uint64_t)(brk_now - arena))
    return (char *)-1;
  brk_now += n;
  return old;
}

int
u_write(int fd, const void *buf, int n)
{
  return write(fd, buf, n);
}

// ulib.c's stat and gets call these; the tests do not use them.
int
u_open(const char *path, int mode)
{
  (void)path;
  (void)mode;
  return -38;
}
int
u_read(int fd, void *buf, int n)
{
  (void)fd;
  (void)buf;
  (void)n;
  return -38;
}
int
u_close(int fd)
{
  (void)fd;
  return -38;
}
int
u_fstat(int fd, void *st)
{
  (void)fd;
  (void)st;
  return -38;
}

// umalloc.c's lock: the harness runs one thread.
struct mutex;
void
u_mutex_lock(struct mutex *m)
{
  (void)m;
}
void
u_mutex_unlock(struct mutex *m)
{
  (void)m;
}

void run_printf_cases(void); // ulib_cases.c

#define CHECK(cond, ...) \
  do { \
    if (!(cond)) { \
      printf(__VA_ARGS__); \
      printf("\n"); \
      return 1; \
    } \
  } while (0)

// Random blocks of many sizes, freed in random order, must never overlap
// or lose their contents; big blocks go back to the kernel when freed.
static int
test_malloc(void)
{
  enum { N = 2000 };
  static unsigned char *p[N];
  static size_t len[N];
  uint64_t seed = 12345;
  size_t i, j, k;
  char *start, *big, *big2;
  unsigned char *z;

  for (k = 0; k < 20000; k++) {
    seed = seed * 6364136223846793005UL + 1442695040888963407UL;
    i = (seed >> 33) % N;
    if (p[i]) {
      for (j = 0; j < len[i]; j++)
        CHECK(p[i][j] == (unsigned char)i, "block %zu byte %zu overwritten", i, j);
      u_free(p[i]);
      p[i] = 0;
    } else {
      len[i] = 1 + (seed >> 40) % ((seed >> 20) % 64 == 0 ? 3000000 : 200);
      p[i] = u_malloc(len[i]);
      CHECK(p[i] != 0, "malloc(%zu) failed", len[i]);
      CHECK(((uintptr_t)p[i] & 15) == 0, "malloc(%zu) returned unaligned %p", len[i], p[i]);
      memset(p[i], (int)i, len[i]);
    }
  }
  for (i = 0; i < N; i++)
    u_free(p[i]);

  // A big block comes from sbrk and goes back to it when freed.
  start = u_sbrk(0);
  big = u_malloc(300UL << 20);
  CHECK(big != 0, "malloc(300 MB) failed");
  CHECK(u_sbrk(0) - start >= (300L << 20), "the break did not grow for a big block");
  u_free(big);
  // (Free space below it merges in and may go back too.)
  CHECK(u_sbrk(0) <= start, "freeing the big block left the break %ld bytes up",
      (long)(u_sbrk(0) - start));
  big2 = u_calloc(3000, 100000);
  CHECK(big2 != 0 && big2[0] == 0 && big2[300000000 - 1] == 0, "big calloc");
  u_free(big2);

  // calloc clears memory that malloc used before.
  z = u_malloc(50000);
  memset(z, 0xff, 50000);
  u_free(z);
  z = u_calloc(50000, 1);
  for (j = 0; j < 50000; j++)
    CHECK(z[j] == 0, "calloc returned dirty byte %zu", j);
  u_free(z);
  CHECK(u_calloc(1UL << 40, 1UL << 30) == 0, "calloc overflow was not refused");
  CHECK(u_malloc(0) == 0, "malloc(0) returned memory");
  printf("malloc ok\n");
  return 0;
}

int
main(int argc, char *argv[])
{
  char line[1200];
  int n;

  if (argc == 2 && strcmp(argv[1], "printf") == 0) {
    run_printf_cases();
    fflush(stdout);
    // Longer than fprintf's 256-byte buffer: several writes, in order.
    memset(line, 'L', sizeof(line) - 1);
    line[sizeof(line) - 1] = 0;
    u_fprintf(1, "[%s|%d]\n", line, 7);
    // snprintf returns the full length and stops at size - 1 characters;
    // with size 0 it writes nothing (line[0] stays the 1 of 123).
    memset(line, 'z', 8);
    n = u_snprintf(line, 4, "%d", 123456);
    printf("%d %s %c\n", n, line, line[4]);
    n = u_snprintf(line, 0, "%s", "abc");
    printf("%d %c\n", n, line[0]);
    return 0;
  }
  if (argc == 2 && strcmp(argv[1], "malloc") == 0)
    return test_malloc();
  fprintf(stderr, "usage: ulib_test printf|malloc\n");
  return 2;
}
