// tlbprobe MIB PASSES: what a TLB miss costs, and what empties the TLB.
// Allocates MIB MiB, writes each page once, then reads one byte of every
// page PASSES times and prints each pass's time per page. Before each
// pass it makes a system call (a trap into the kernel and back); before
// every fifth it sleeps a tick instead (a process switch). A pass that
// misses the TLB on every page takes the cost of a refill per page; one
// that hits takes a few ns. tests/host/bench_tlb.py runs it
// (docs/PERF_NOTES.md, fact 32, "a trap must not empty the TLB").
#include "user/lib/user.h"
#include "kernel/include/riscv.h"

#define MAX_PASSES 1000

// Reads one byte of each of n pages from p; returns ns per page.
static int
pass_ns(volatile char *p, long n, int offset)
{
  uint64 t0 = time_us();
  for (long i = 0; i < n; i++)
    (void)p[i * PGSIZE + offset];
  return (int)((time_us() - t0) * 1000 / n);
}

int
main(int argc, char *argv[])
{
  int mib = argc == 3 ? atoi(argv[1]) : 0;
  int passes = argc == 3 ? atoi(argv[2]) : 0;
  if (mib < 1 || mib > 4096 || passes < 1 || passes > MAX_PASSES) {
    fprintf(2, "usage: tlbprobe MIB PASSES (1-4096 MiB, 1-%d passes)\n", MAX_PASSES);
    exit(2);
  }
  long n = (long)mib * (1024 * 1024 / PGSIZE);
  char *p = sbrk(n * PGSIZE);
  if (p == (char *)-1) {
    fprintf(2, "tlbprobe: no memory for %d MiB: ask for less, or boot with more RAM\n", mib);
    exit(1);
  }
  for (long i = 0; i < n; i++)
    p[i * PGSIZE] = 1;
  uint64 start = time_us();
  for (int k = 0; k < passes; k++) {
    int switched = k % 5 == 4;
    if (switched)
      sleep(1);
    else
      getpid();
    int ns = pass_ns(p, n, (k % 64) * 64);
    printf("tlbprobe: pass %d at %d ms after %s: %d ns/page\n", k,
        (int)((time_us() - start) / 1000), switched ? "a process switch" : "a system call", ns);
  }
  exit(0);
}
