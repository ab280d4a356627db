// Memory and string helpers. memset and memmove work a word at a time
// when the addresses allow it: the kernel zeroes every page it gives a
// process (sbrk of a gigabyte is 262144 pages), and under QEMU the time
// goes by the number of instructions, not by the bytes moved.
#include "kernel/include/types.h"
#include "kernel/include/defs.h"

void *
memset(void *dst, int c, uint64 n)
{
  uchar *d = dst;
  if ((((uint64)d | n) & 63) == 0) {
    // Eight stores per turn: a quarter of the loop's instructions.
    uint64 w = (uchar)c * 0x0101010101010101UL;
    for (uint64 *wd = dst; wd < (uint64 *)(d + n); wd += 8) {
      wd[0] = w;
      wd[1] = w;
      wd[2] = w;
      wd[3] = w;
      wd[4] = w;
      wd[5] = w;
      wd[6] = w;
      wd[7] = w;
    }
    return dst;
  }
  for (uint64 i = 0; i < n; i++)
    d[i] = c;
  return dst;
}

int
memcmp(const void *a, const void *b, uint64 n)
{
  const uchar *s1 = a, *s2 = b;
  for (uint64 i = 0; i < n; i++)
    if (s1[i] != s2[i])
      return s1[i] - s2[i];
  return 0;
}

// Copies n bytes; the regions may overlap.
void *
memmove(void *dst, const void *src, uint64 n)
{
  const uchar *s = src;
  uchar *d = dst;
  if (s < d && s + n > d) {
    while (n-- > 0)
      d[n] = s[n];
    return dst;
  }
  if ((((uint64)s | (uint64)d | n) & 7) == 0) {
    const uint64 *ws = src;
    uint64 *wd = dst;
    for (uint64 i = 0; i < n / 8; i++)
      wd[i] = ws[i];
    return dst;
  }
  for (uint64 i = 0; i < n; i++)
    d[i] = s[i];
  return dst;
}

// gcc may emit calls to memcpy for struct assignments.
void *
memcpy(void *dst, const void *src, uint64 n)
{
  return memmove(dst, src, n);
}

int
strncmp(const char *p, const char *q, uint n)
{
  while (n > 0 && *p && *p == *q) {
    n--;
    p++;
    q++;
  }
  if (n == 0)
    return 0;
  return (uchar)*p - (uchar)*q;
}

char *
strncpy(char *s, const char *t, int n)
{
  char *os = s;
  while (n > 0 && (*s = *t) != 0) {
    n--;
    s++;
    t++;
  }
  while (n-- > 0)
    *s++ = 0;
  return os;
}

// Like strncpy, but always NUL-terminates s (when n > 0).
char *
safestrcpy(char *s, const char *t, int n)
{
  char *os = s;
  if (n <= 0)
    return os;
  while (--n > 0 && (*s = *t) != 0) {
    s++;
    t++;
  }
  *s = 0;
  return os;
}

int
strlen(const char *s)
{
  int n = 0;
  while (s[n])
    n++;
  return n;
}
