// vmstat: the memory and the page cache as the kernel sees them
// (sysinfo(), kernel/include/sysinfo.h; docs/VM.md).
//
//   vmstat            one report
//   vmstat N [COUNT]  a report every N tenths of a second, COUNT of them
//                     (default: until ^C)

#include "user/lib/user.h"
#include "kernel/include/sysinfo.h"

// One report: free memory, the page cache's size and counters.
static int
report(void)
{
  struct sysinfo si;
  int r = sysinfo(&si);

  if (r < 0) {
    fprintf(2, "vmstat: sysinfo failed: %s\n", strerror(r));
    return -1;
  }
  printf("free %lu KiB, page cache %lu KiB (%lu KiB idle), hits %lu, misses %lu, readahead %lu, "
         "evictions %lu\n",
      si.freepages * 4, si.cachepages * 4, si.cacheidle * 4, si.hits, si.misses, si.readahead,
      si.evictions);
  return 0;
}

int
main(int argc, char *argv[])
{
  int every = argc >= 2 ? atoi(argv[1]) : 0, count = argc == 3 ? atoi(argv[2]) : -1;

  if (argc > 3 || (argc >= 2 && every <= 0) || count == 0 || count < -1) {
    fprintf(2, "usage: vmstat [N [COUNT]]  (N: tenths of a second between reports)\n");
    exit(1);
  }
  if (report() < 0)
    exit(1);
  for (int n = 1; every > 0 && n != count; n++) {
    sleep(every);
    if (report() < 0)
      exit(1);
  }
  exit(0);
}
