// fswrite: times small synchronous file writes. Each write() of a few
// bytes is one file-system transaction (begin_op/end_op), so the loop
// measures what a log commit costs, including the disk FLUSH requests
// the log sends when the disk caches writes (kernel/fs/log.c).
// Usage: fswrite [N]   (default 200 writes of 64 bytes to /fswrite.tmp)
// Prints "fswrite: N writes in U us (P us per write)".
#include "user/lib/user.h"
#include "kernel/include/fcntl.h"

int
main(int argc, char *argv[])
{
  char buf[64];
  int n = argc > 1 ? atoi(argv[1]) : 200;
  int fd, i;
  uint64 t0, t1;

  memset(buf, 'w', sizeof(buf));
  if ((fd = open("/fswrite.tmp", O_CREATE | O_WRONLY | O_TRUNC)) < 0) {
    fprintf(2, "fswrite: cannot create /fswrite.tmp: %s\n", strerror(fd));
    exit(1);
  }
  t0 = time_us();
  for (i = 0; i < n; i++) {
    if (write(fd, buf, sizeof(buf)) != sizeof(buf)) {
      fprintf(2, "fswrite: write %d failed\n", i);
      exit(1);
    }
  }
  t1 = time_us();
  close(fd);
  unlink("/fswrite.tmp");
  printf("fswrite: %d writes in %lu us (%lu us per write)\n", n, t1 - t0, (t1 - t0) / n);
  exit(0);
}
