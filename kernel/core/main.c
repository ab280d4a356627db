// S-mode entry for every hart (start() mrets here).
//
// Hart 0 reads the device tree (and the boot command line), prints the
// boot banner, and initialises every subsystem, then creates the first
// process. The other harts wait
// for it and only set up their own state (paging, trap vector, timer,
// PLIC). Then all of them run the scheduler.
#include "kernel/include/types.h"
#include "kernel/include/param.h"
#include "kernel/include/memlayout.h"
#include "kernel/include/riscv.h"
#include "kernel/include/defs.h"

// The harts the kernel runs on: the device tree's count, at most NCPU.
// Read once at boot: the tree's pages go to the page allocator with the
// rest of RAM (kalloc.c), so a later read may find anything there.
int nharts_used;

// Set by hart 0 when the other harts may start.
static volatile int kernel_ready = 0;

// Finds RAM in the device tree and checks what the kernel relies on.
// Returns the end of RAM.
static uint64
probe(void)
{
  uint64 base, size;
  int nharts;

  if (fdt_parse(fdt_pa, &base, &size, &nharts) < 0)
    panic("main: no memory node in the device tree (is this QEMU virt?)");
  if (base != KERNBASE)
    panic("main: RAM does not start at 0x80000000");
  if (!sstc_ok)
    panic("main: the timer needs the Sstc extension (QEMU 7.1 or later)");
  printf("\naisvc: %d harts, %lu MiB RAM\n", nharts, size >> 20);
  if (base + size > RAM_TOP) {
    size = RAM_TOP - base;
    printf("aisvc: only %lu MiB of RAM will be used (the kernel maps RAM below 128 GiB)\n",
        size >> 20);
  }
  if (nharts > NCPU)
    printf("aisvc: only %d harts will be used (NCPU)\n", NCPU);
  nharts_used = nharts < 1 ? 1 : nharts < NCPU ? nharts : NCPU;
  bootargs_init(fdt_pa);
  return base + size;
}

// Hart 0 sets up every subsystem and starts the first process; the
// others wait for it, then turn on paging, traps and interrupts. Each
// ends in the scheduler.
void
main(void)
{
  if (cpuid() == 0) {
    consoleinit();
    printfinit();
    uint64 ram_end = probe();
    kinit(ram_end, fdt_pa, fdt_pa + fdt_size(fdt_pa));
    pagecache_init(ram_end);
    kvminit(ram_end);
    kvminithart();
    procinit();
    vectorinit();
    trapinithart();
    plicinit();
    plicinithart();
    binit();
    iinit();
    fileinit();
    virtio_disk_init();
    virtio_port_init();
    ai_init();
    userinit();
    __sync_synchronize();
    kernel_ready = 1;
  } else {
    while (kernel_ready == 0)
      ;
    __sync_synchronize();
    kvminithart();
    trapinithart();
    plicinithart();
  }
  scheduler();
}
