// sbrkbig MIB: grow the heap by MIB MiB in one sbrk, check the new memory
// is zero and writable on every page, release it, and grow again.
// Prints "sbrkbig: MIB MiB ok (N ms)" or a message naming what failed.
#include "user/lib/user.h"

static int
grow_and_check(long bytes)
{
  char *p = sbrk(bytes);
  if (p == (char *)-1) {
    fprintf(2, "sbrkbig: sbrk(%ld) failed\n", bytes);
    return -1;
  }
  // The first and last byte of every page, to keep the loop short.
  for (long off = 0; off < bytes; off += 4096) {
    if (p[off] != 0 || p[off + 4095] != 0) {
      fprintf(2, "sbrkbig: page at +%ld is not zeroed\n", off);
      return -1;
    }
    p[off] = 1;
    p[off + 4095] = 1;
  }
  if (sbrk(-bytes) == (char *)-1) {
    fprintf(2, "sbrkbig: sbrk(-%ld) failed\n", bytes);
    return -1;
  }
  return 0;
}

int
main(int argc, char **argv)
{
  if (argc != 2) {
    fprintf(2, "usage: sbrkbig MIB\n");
    return 2;
  }
  long bytes = atoi(argv[1]) * 1024L * 1024L;
  uint64 t0 = time_us();
  if (grow_and_check(bytes) < 0 || grow_and_check(bytes) < 0)
    return 1;
  printf("sbrkbig: %s MiB ok (%d ms)\n", argv[1], (int)((time_us() - t0) / 1000));
  return 0;
}
