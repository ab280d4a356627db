// memhog TICKS: takes the machine's free memory for TICKS ticks, for
// tests/test_port.py (a kernel call that runs out of memory meanwhile).
// Grows the heap 1 MiB at a time until sbrk fails, then a page at a time,
// prints "memhog: holding N KiB", and for TICKS ticks keeps taking every
// page that another process frees (sbrk of a page, again and again), so
// that every kalloc elsewhere fails; then exits, which frees it all.
#include "user/lib/user.h"

// Grows the heap by step bytes while it can; returns the bytes taken.
static long
take(long step)
{
  long n = 0;

  while (sbrk(step) != (char *)-1)
    n += step;
  return n;
}

int
main(int argc, char **argv)
{
  if (argc != 2) {
    fprintf(2, "usage: memhog TICKS\n");
    return 2;
  }
  long ticks = atoi(argv[1]);
  long held = take(1 << 20);
  held += take(4096);
  printf("memhog: holding %ld KiB\n", held / 1024);
  for (long t0 = uptime(); uptime() - t0 < ticks;)
    held += take(4096);
  printf("memhog: done, %ld KiB\n", held / 1024);
  return 0;
}
