// The small C library of user programs: strings, memory, numbers, errors,
// the clock.
//
// Everything here is plain C over the system calls in user.h. memset and
// memmove move 8 bytes at a time when both ends are aligned, because
// programs use them on buffers of hundreds of megabytes (calloc, the LLM
// runtime) where a byte loop would cost seconds under QEMU.

#include "user/lib/user.h"
#include "kernel/include/param.h"
#include "kernel/include/stat.h"
#include "kernel/include/fcntl.h"

// Fill st with the metadata of the file at path.
// Returns 0, or the negative error of open or fstat.
int
stat(const char *path, struct stat *st)
{
  int fd, r;

  fd = open(path, O_RDONLY);
  if (fd < 0)
    return fd;
  r = fstat(fd, st);
  close(fd);
  return r;
}

char *
strcpy(char *dst, const char *src)
{
  char *d = dst;

  while ((*d++ = *src++) != 0)
    ;
  return dst;
}

// Copy at most n bytes and pad with zeros, like C's strncpy:
// dst is not terminated when src has n or more characters.
char *
strncpy(char *dst, const char *src, int n)
{
  int i;

  for (i = 0; i < n && src[i]; i++)
    dst[i] = src[i];
  for (; i < n; i++)
    dst[i] = 0;
  return dst;
}

int
strcmp(const char *p, const char *q)
{
  while (*p && *p == *q)
    p++, q++;
  return (uchar)*p - (uchar)*q;
}

int
strncmp(const char *p, const char *q, uint n)
{
  while (n > 0 && *p && *p == *q)
    n--, p++, q++;
  if (n == 0)
    return 0;
  return (uchar)*p - (uchar)*q;
}

uint
strlen(const char *s)
{
  uint n = 0;

  while (s[n])
    n++;
  return n;
}

// Returns a pointer to the first c in s, or 0 if there is none.
char *
strchr(const char *s, char c)
{
  for (; *s; s++)
    if (*s == c)
      return (char *)s;
  return 0;
}

// Read one line from fd 0 into buf, keeping the '\n', at most max-1
// characters; always terminated. An empty result means end of input.
char *
gets(char *buf, int max)
{
  int i = 0;
  char c;

  while (i + 1 < max) {
    if (read(0, &c, 1) != 1)
      break;
    buf[i++] = c;
    if (c == '\n' || c == '\r')
      break;
  }
  buf[i] = 0;
  return buf;
}

void *
memset(void *dst, int c, uint n)
{
  uchar *d = dst;
  uint64 word = (uchar)c * 0x0101010101010101UL;

  while (n > 0 && ((uint64)d & 7)) {
    *d++ = c;
    n--;
  }
  for (; n >= 8; n -= 8, d += 8)
    *(uint64 *)d = word;
  while (n-- > 0)
    *d++ = c;
  return dst;
}

// Copy n bytes; the regions may overlap.
void *
memmove(void *dst, const void *src, int n)
{
  uchar *d = dst;
  const uchar *s = src;
  int words = (((uint64)d | (uint64)s) & 7) == 0;

  if (n <= 0 || d == s)
    return dst;
  if (d < s || d >= s + n) {
    for (; words && n >= 8; n -= 8, d += 8, s += 8)
      *(uint64 *)d = *(const uint64 *)s;
    while (n-- > 0)
      *d++ = *s++;
  } else {
    // Overlap with dst above src: copy from the end down.
    d += n;
    s += n;
    for (; words && n >= 8; n -= 8)
      d -= 8, s -= 8, *(uint64 *)d = *(const uint64 *)s;
    while (n-- > 0)
      *--d = *--s;
  }
  return dst;
}

// memmove takes an int length; split larger copies into pieces.
void *
memcpy(void *dst, const void *src, uint n)
{
  uint chunk = 1U << 30;
  uint done;

  for (done = 0; n - done > chunk; done += chunk)
    memmove((char *)dst + done, (const char *)src + done, chunk);
  memmove((char *)dst + done, (const char *)src + done, n - done);
  return dst;
}

int
memcmp(const void *a, const void *b, uint n)
{
  const uchar *p = a, *q = b;

  for (; n > 0; n--, p++, q++)
    if (*p != *q)
      return *p - *q;
  return 0;
}

int
atoi(const char *s)
{
  return (int)strtol(s, 0, 10);
}

// The value of digit c in bases up to 36 (0-9, a-z, A-Z), else 99.
static int
digitval(char c)
{
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'z')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'Z')
    return c - 'A' + 10;
  return 99;
}

// Parse an integer in base 2..36, or base 0 to accept 0x (hex) and
// 0 (octal) prefixes. Leading blanks and a sign are allowed.
// *end, if given, points after the last digit used (at s if there was none).
long
strtol(const char *s, char **end, int base)
{
  const char *p = s, *start;
  long v = 0;
  int neg = 0;

  while (*p == ' ' || *p == '\t' || *p == '\n')
    p++;
  if (*p == '-' || *p == '+')
    neg = (*p++ == '-');
  if ((base == 0 || base == 16) && p[0] == '0' && (p[1] == 'x' || p[1] == 'X') &&
      digitval(p[2]) < 16) {
    p += 2;
    base = 16;
  } else if (base == 0) {
    base = (p[0] == '0') ? 8 : 10;
  }
  start = p;
  while (digitval(*p) < base)
    v = v * base + digitval(*p++);
  if (end)
    *end = (char *)(p == start ? s : p);
  return neg ? -v : v;
}

// A whole string of decimal digits below 2^64 -> 0 and *v; -1 for anything
// else (empty, a sign, other characters, too large), *v then unchanged.
int
parse_u64(const char *s, uint64 *v)
{
  uint64 n = 0;
  if (*s == 0)
    return -1;
  for (; *s; s++) {
    if (*s < '0' || *s > '9' || n > (~0UL - (*s - '0')) / 10)
      return -1;
    n = n * 10 + (*s - '0');
  }
  *v = n;
  return 0;
}

static const char *errnames[] = {
  [0] = "success",
  [EPERM] = "operation not permitted",
  [ENOENT] = "no such file or directory",
  [ESRCH] = "no such process",
  [EINTR] = "interrupted",
  [EIO] = "I/O error",
  [ENXIO] = "no such device",
  [E2BIG] = "argument list too long",
  [ENOEXEC] = "not an executable",
  [EBADF] = "bad file descriptor",
  [ECHILD] = "no child processes",
  [EAGAIN] = "resource temporarily unavailable",
  [ENOMEM] = "out of memory",
  [EFAULT] = "bad address",
  [EBUSY] = "resource busy",
  [EEXIST] = "file exists",
  [EXDEV] = "cross-device link",
  [ENOTDIR] = "not a directory",
  [EISDIR] = "is a directory",
  [EINVAL] = "invalid argument",
  [ENFILE] = "too many open files in the system",
  [EMFILE] = "too many open files",
  [EFBIG] = "file too large",
  [ENOSPC] = "no space left on device",
  [EROFS] = "read-only file system",
  [EMLINK] = "too many links",
  [EPIPE] = "broken pipe",
  [ERANGE] = "result out of range",
  [ENAMETOOLONG] = "file name too long",
  [ENOSYS] = "function not implemented",
  [ENOTEMPTY] = "directory not empty",
};

// Words for an error code; accepts ENOENT or -ENOENT.
const char *
strerror(int err)
{
  if (err < 0)
    err = -err;
  if (err >= (int)(sizeof(errnames) / sizeof(errnames[0])) || errnames[err] == 0)
    return "unknown error";
  return errnames[err];
}

// The clock: time_ticks is the time CSR (TIMEBASE_HZ ticks a second),
// time_us the microseconds since boot. The kernel lets user mode read the
// CSR (scounteren.TM, kernel/core/trap.c), so a reading is one
// instruction, not a system call: the thread pool's spins and --profile
// read the clock thousands of times a token, and a trap with its two
// page-table switches made every reading cost microseconds (and
// --profile's figures grow).
// The time_us system call (SYS_time_us) stays, for programs that test it.
// (The host build of this file for tests/test_ulib_host.py has no CSR.)
#ifdef __riscv
uint64
time_ticks(void)
{
  uint64 t;
  asm volatile("rdtime %0" : "=r"(t));
  return t;
}

uint64
time_us(void)
{
  return time_ticks() / (TIMEBASE_HZ / 1000000);
}
#endif
