// Physical page allocator: 4096-byte pages for user memory, page tables,
// kernel stacks and pipe buffers.
//
// All RAM from the end of the kernel image to the end of RAM (the size
// comes from the device tree) belongs to the allocator. Pages that were
// freed sit on a free list; pages never handed out yet are the range
// [kmem.fresh, kmem.end), taken from the bottom up. Boot therefore touches
// none of the RAM: writing a list link into every page of 4 GiB would cost
// a second of QEMU start-up, and the host memory behind it.
//
// kzalloc() returns zeroed pages (user memory, page tables). A page that
// was never handed out is still zero: QEMU starts with RAM zeroed and
// loads only the kernel image and the device tree into it, and the
// device tree's pages are excluded. Such pages are not written again.
// Under QEMU the first write to a guest page is slow (the host backs it
// with memory then), so this halves the cost of a large sbrk, and a model
// read from disk by DMA into fresh pages is written only once.
//
// When no page is left, kalloc() asks the page cache to free some of its
// idle pages (clean file pages no mapping uses, kernel/fs/pagecache.c)
// and tries again; so those count as free memory.
#include "kernel/include/types.h"
#include "kernel/include/param.h"
#include "kernel/include/memlayout.h"
#include "kernel/include/spinlock.h"
#include "kernel/include/riscv.h"
#include "kernel/include/defs.h"

extern char end[]; // first address after the kernel, from kernel.ld

struct run {
  struct run *next;
};

static struct {
  struct spinlock lock;
  // lock must be held when using these:
  struct run *freelist;
  uint64 fresh;    // lowest never-allocated page
  uint64 end;      // end of RAM
  uint64 nfree;    // pages on the free list plus never-allocated ones
  uint64 dirty_lo; // [dirty_lo, dirty_hi): never-allocated pages that
  uint64 dirty_hi; // are not zero (the device tree)
} kmem;

// Boot: hands the allocator RAM from the kernel's end to ram_end. The
// pages of [dirty_lo, dirty_hi) hold data QEMU loaded (the device tree).
void
kinit(uint64 ram_end, uint64 dirty_lo, uint64 dirty_hi)
{
  initlock(&kmem.lock, "kmem");
  kmem.fresh = PGROUNDUP((uint64)end);
  kmem.end = PGROUNDDOWN(ram_end);
  kmem.nfree = (kmem.end - kmem.fresh) / PGSIZE;
  kmem.dirty_lo = PGROUNDDOWN(dirty_lo);
  kmem.dirty_hi = PGROUNDUP(dirty_hi);
}

// Returns the page at pa, which kalloc() handed out, to the allocator.
void
kfree(void *pa)
{
  struct run *r = pa;

  if (((uint64)pa % PGSIZE) != 0 || (char *)pa < end || (uint64)pa >= kmem.end)
    panic("kfree: bad address");
  acquire(&kmem.lock);
  r->next = kmem.freelist;
  kmem.freelist = r;
  kmem.nfree++;
  release(&kmem.lock);
}

// Takes a page; *zero says whether it is known to hold zeros.
static void *
take(int *zero)
{
  struct run *r;

  acquire(&kmem.lock);
  r = kmem.freelist;
  *zero = 0;
  if (r) {
    kmem.freelist = r->next;
  } else if (kmem.fresh < kmem.end) {
    r = (struct run *)kmem.fresh;
    *zero = kmem.fresh < kmem.dirty_lo || kmem.fresh >= kmem.dirty_hi;
    kmem.fresh += PGSIZE;
  }
  if (r)
    kmem.nfree--;
  release(&kmem.lock);
  return r;
}

#define RECLAIM_BATCH 32 // idle cache pages freed at once when memory runs out

// Takes a page, reclaiming idle page-cache pages if none is free.
static void *
take_or_reclaim(int *zero)
{
  void *pa = take(zero);

  while (pa == 0 && pagecache_reclaim(RECLAIM_BATCH) > 0)
    pa = take(zero);
  return pa;
}

// Returns a page of physical memory (not zeroed), or 0 if none is left.
void *
kalloc(void)
{
  int zero;
  return take_or_reclaim(&zero);
}

// Returns a zeroed page of physical memory, or 0 if none is left.
void *
kzalloc(void)
{
  int zero;
  void *pa = take_or_reclaim(&zero);
  if (pa && !zero)
    memset(pa, 0, PGSIZE);
  return pa;
}

// Boot, before any kalloc: nbytes of contiguous zeroed memory that is
// never freed (the page cache's descriptor table).
void *
kreserve(uint64 nbytes)
{
  uint64 pa = kmem.fresh, n = PGROUNDUP(nbytes) / PGSIZE;

  if (kmem.freelist || n > kmem.nfree)
    panic("kreserve: not at boot, or too large");
  kmem.fresh += n * PGSIZE;
  kmem.nfree -= n;
  if (pa < kmem.dirty_hi && kmem.fresh > kmem.dirty_lo)
    memset((void *)pa, 0, n * PGSIZE);
  return (void *)pa;
}

// Number of free pages, for tests that check nothing leaks.
uint64
kfreepages(void)
{
  acquire(&kmem.lock);
  uint64 n = kmem.nfree;
  release(&kmem.lock);
  return n;
}
