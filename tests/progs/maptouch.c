// maptouch FILE: the time to bring FILE into memory by read() into the
// heap and, then, through a shared mapping touched once per page (the
// first touch after boot reads the disk, the next one finds the page
// cache); one line each, for tests/host/bench_mmap.py.
#include "user/lib/user.h"
#include "kernel/include/fcntl.h"
#include "kernel/include/stat.h"
#include "kernel/include/mman.h"
#include "kernel/include/sysinfo.h"

// Touches one byte of every page of the mapping of fd (size bytes);
// returns their sum, and the faults it took in *faults.
static uint64
touch(int fd, uint64 size, uint64 *faults)
{
  struct sysinfo a, b;
  const volatile uint8 *p = mmap(0, size, PROT_READ, MAP_SHARED, fd, 0);
  uint64 sum = 0;

  if ((long)p < 0) {
    fprintf(2, "maptouch: mmap: %s\n", strerror((long)p));
    exit(1);
  }
  sysinfo(&a);
  for (uint64 off = 0; off < size; off += 4096)
    sum += p[off];
  sysinfo(&b);
  *faults = b.faults - a.faults;
  munmap((void *)p, size);
  return sum;
}

int
main(int argc, char *argv[])
{
  struct stat st;
  uint64 faults;

  if (argc != 3) {
    fprintf(2, "usage: maptouch read|map FILE\n");
    exit(1);
  }
  int fd = open(argv[2], O_RDONLY);
  if (fd < 0 || fstat(fd, &st) < 0) {
    fprintf(2, "maptouch: %s: cannot open\n", argv[2]);
    exit(1);
  }
  uint64 t0 = time_us();
  if (strcmp(argv[1], "read") == 0) {
    char *buf = malloc(st.size);
    int n = buf ? read(fd, buf, st.size) : -ENOMEM;
    printf("maptouch: read %lu bytes in %lu us (%d)\n", st.size, time_us() - t0, n);
  } else {
    uint64 sum = touch(fd, st.size, &faults);
    printf("maptouch: mapped %lu bytes in %lu us, %lu faults (sum %lu)\n", st.size, time_us() - t0,
        faults, sum);
  }
  exit(0);
}
