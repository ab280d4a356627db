// Virtual memory: Sv39 page tables for the kernel and for each process,
// and the copies between user and kernel memory.
//
// The kernel page table maps devices and all RAM 1:1, RAM in 2 MiB
// megapages where alignment allows (a 4 GiB map then needs 4 table pages
// instead of 2049, and far fewer TLB entries), the kernel's text read-only,
// and the per-process kernel stacks just below USERBASE; at the top, the
// trampoline.
//
// A user page table shares the kernel's part: its root entries below
// KERNEL_ROOT_PX (all of the kernel's mappings but the trampoline) are
// copies of the kernel page table's, pointing at the same table pages,
// none with PTE_U. Above that it maps the program, its stack and heap
// from USERBASE up to p->sz in 4 KiB pages with PTE_U, and the trampoline
// and the threads' trapframes (without PTE_U) at the top.
//
// Why the kernel sits in every page table: a trap then needs no satp
// switch, and a hart keeps its TLB entries across system calls and timer
// interrupts. QEMU empties a hart's whole TLB on every satp write and
// sfence.vma, and refilling an entry costs about 0.33 us; a SmolLM2
// token reads some 34,000 pages of weights, so a satp switch at every
// trap (one system call per token at least) would cost a token about
// 14 ms of refills, 12% of its time (docs/PERF_NOTES.md, fact 32, "a trap
// must not empty the TLB"). So satp changes only when a hart switches processes (proc.c: the
// scheduler runs on the kernel page table), and a process's own mapping
// removals fence this hart's TLB (uvmunmap). A process with several
// threads cannot shrink its memory (thread.c), so no other hart can keep
// a stale entry of its user pages. (On a real CPU that speculates,
// kernel mappings in user page tables are what Meltdown-style attacks
// read, and Linux separates the tables again for such CPUs; QEMU's TCG
// does not speculate.)
//
// QEMU sizes a hart's TLB only when it empties it: it doubles the TLB if
// the entries filled since the last emptying took more than 70% of it,
// and shrinks it to fit if they stayed under 30% for 100 ms. Without
// emptying, a TLB would keep its size (256 entries at first) and a
// model's weights would miss anyway. So the timer empties it too
// (vm_tick): after a hart switches to a new page table, at user-mode
// ticks 1, 1, 2, 2, 4, 4, ... apart, up to 2^TLB_EVERY_LOG (5.12 s).
// Only user-mode ticks count: while the kernel works (exec, sbrk, a big
// read) the program fills no TLB entries, and an emptying then would be
// a lost chance to grow. A program streaming 96 MiB gets a TLB that
// holds it 0.2 s after its first pass, instead of never; afterwards one
// refill every 5 s costs under 1% of the time.
//
// The range below p->sz may have holes (everything below a program that
// exec placed at a high address); the functions here skip them.
//
// Cost: fork (uvmcopy), exit and exec's teardown (uvmunmap, uvmfree) walk
// the page table, not the address range: a missing table page skips the
// 2 MiB or 1 GiB it would map. So their cost grows with the pages mapped
// (plus one table scan per leaf table), whatever p->sz is. exec therefore
// accepts a segment at any address below the stack's top limit; a program
// at 200 GiB forks as fast as one at 128 GiB.
//
// User address ranges: user_range_ok() is the one check that a range
// [va, va+len) lies inside user space (from USERBASE to TRAPFRAME)
// without wrapping past 2^64. copyin and copyout apply it before touching
// anything, and so does fs.c's readi() before it turns a user buffer into
// DMA segments; then copyin/copyout/copyinstr check every page against
// the page table: an unmapped page, a kernel-only page or (for copyout) a
// read-only one gives -EFAULT, so a bad pointer from a user program never
// reaches a kernel load or store or the disk. A page of a file mapping
// not filled yet (or a copy-on-write one, for copyout) is filled first,
// as a fault from user mode would (mmap.c), unless the caller holds a
// spinlock (a pipe's copyin): then it is -EFAULT too.
//
// File mappings lie above p->sz (mmap.c), so the functions here that
// work up to p->sz (fork's uvmcopy, uvmfree) never meet their pages;
// mmap.c removes them first, walking with vm_each.
#include "kernel/include/param.h"
#include "kernel/include/types.h"
#include "kernel/include/errno.h"
#include "kernel/include/memlayout.h"
#include "kernel/include/riscv.h"
#include "kernel/include/spinlock.h"
#include "kernel/include/proc.h"
#include "kernel/include/defs.h"

pagetable_t kernel_pagetable;

#define TLB_EVERY_LOG 9 // at most 2^9 ticks (5.12 s) between TLB growth chances

extern char etext[];      // kernel.ld: end of kernel code
extern char trampoline[]; // trampoline.S

// Returns the address of the PTE for va at level `leaf` (0: 4 KiB page,
// 1: 2 MiB megapage), creating table pages on the way if alloc is set.
// Returns 0 if a table is missing (and !alloc) or no memory is left.
static pte_t *
walklevel(pagetable_t pt, uint64 va, int alloc, int leaf)
{
  if (va >= MAXVA)
    panic("walk: va");
  for (int level = 2; level > leaf; level--) {
    pte_t *pte = &pt[PX(level, va)];
    if (*pte & PTE_V) {
      if (PTE_LEAF(*pte))
        panic("walk: inside a megapage");
      pt = (pagetable_t)PTE2PA(*pte);
      continue;
    }
    if (!alloc || (pt = kzalloc()) == 0)
      return 0;
    *pte = PA2PTE(pt) | PTE_V;
  }
  return &pt[PX(leaf, va)];
}

pte_t *
walk(pagetable_t pt, uint64 va, int alloc)
{
  return walklevel(pt, va, alloc, 0);
}

// Boot: maps [va, va+sz) to pa in the kernel page table, in megapages
// wherever va, pa and the remaining size allow. Panics: without these
// mappings the kernel cannot run.
void
kvmmap(pagetable_t kpt, uint64 va, uint64 pa, uint64 sz, int perm)
{
  uint64 end = va + sz;

  while (va < end) {
    int mega = (va % MEGAPAGE) == 0 && (pa % MEGAPAGE) == 0 && end - va >= MEGAPAGE;
    pte_t *pte = walklevel(kpt, va, 1, mega ? 1 : 0);
    if (pte == 0)
      panic("kvmmap: out of memory");
    if (*pte & PTE_V)
      panic("kvmmap: remap");
    *pte = PA2PTE(pa) | perm | PTE_V;
    va += mega ? MEGAPAGE : PGSIZE;
    pa += mega ? MEGAPAGE : PGSIZE;
  }
}

// Hart 0, once: builds the kernel page table over RAM up to ram_end
// (at most RAM_TOP: main.c).
void
kvminit(uint64 ram_end)
{
  pagetable_t kpt = kzalloc();

  kvmmap(kpt, CLINT, CLINT, PGSIZE, PTE_R | PTE_W);
  kvmmap(kpt, UART0, UART0, PGSIZE, PTE_R | PTE_W);
  kvmmap(kpt, VIRTIO0, VIRTIO0, PGSIZE, PTE_R | PTE_W);
  kvmmap(kpt, VIRTIO1, VIRTIO1, PGSIZE, PTE_R | PTE_W);
  kvmmap(kpt, PLIC, PLIC, PLIC_SIZE, PTE_R | PTE_W);
  kvmmap(kpt, KERNBASE, KERNBASE, (uint64)etext - KERNBASE, PTE_R | PTE_X);
  kvmmap(kpt, (uint64)etext, (uint64)etext, ram_end - (uint64)etext, PTE_R | PTE_W);
  kvmmap(kpt, TRAMPOLINE, (uint64)trampoline, PGSIZE, PTE_R | PTE_X);
  proc_mapstacks(kpt);
  kernel_pagetable = kpt;
}

// A new name for a user page table (never 0, never reused).
uint64
vm_newid(void)
{
  static uint64 last;

  return __atomic_add_fetch(&last, 1, __ATOMIC_RELAXED);
}

// Makes pt this hart's page table, emptying its TLB: the scheduler calls
// it around each process it runs, exec for the new program's table.
// vmid is pt's name (vm_newid), 0 for the kernel page table.
void
vm_use(pagetable_t pt, uint64 vmid)
{
  struct cpu *c = mycpu();

  sfence_vma();
  csr_write(satp, MAKE_SATP(pt));
  sfence_vma();
  c->tlb_ticks = 0;
  if (vmid != 0 && vmid != c->tlb_vmid) {
    c->tlb_vmid = vmid;
    c->tlb_emptied = 0;
  }
}

// Every timer tick that interrupts user mode: empties this hart's TLB at
// ticks 1, 1, 2, 2, 4, 4, ... 2^TLB_EVERY_LOG apart after the hart
// switched to a new page table (design comment: QEMU grows a TLB only
// when it empties it).
void
vm_tick(void)
{
  struct cpu *c = mycpu();
  int doublings = c->tlb_emptied / 2; // of the interval

  if (++c->tlb_ticks < 1U << (doublings < TLB_EVERY_LOG ? doublings : TLB_EVERY_LOG))
    return;
  sfence_vma();
  c->tlb_ticks = 0;
  c->tlb_emptied++;
}

// Every hart: turns paging on with the kernel page table.
void
kvminithart(void)
{
  vm_use(kernel_pagetable, 0);
}

// Maps the 4 KiB pages of [va, va+sz) (va page-aligned) to pa with perm.
// Returns 0, or -ENOMEM if a page-table page could not be allocated
// (pages mapped so far stay mapped; the caller unmaps them).
int
mappages(pagetable_t pt, uint64 va, uint64 sz, uint64 pa, int perm)
{
  if (va % PGSIZE != 0 || sz == 0)
    panic("mappages: alignment");
  for (uint64 a = va; a < va + sz; a += PGSIZE, pa += PGSIZE) {
    pte_t *pte = walk(pt, a, 1);
    if (pte == 0)
      return -ENOMEM;
    if (*pte & PTE_V)
      panic("mappages: remap");
    *pte = PA2PTE(pa) | perm | PTE_V;
  }
  return 0;
}

// Is [va, va + len) inside user space, below TRAPFRAME, without wrapping?
// An empty range is inside if va is at most the top.
int
user_range_ok(uint64 va, uint64 len)
{
  return va >= USERBASE && va <= TRAPFRAME && len <= TRAPFRAME - va;
}

// Returns the physical address of user page va if it is mapped with all
// of PTE_V, PTE_U and the bits in perm, else 0.
static uint64
user_pa(pagetable_t pt, uint64 va, int perm)
{
  if (va < USERBASE || va >= MAXVA)
    return 0;
  pte_t *pte = walk(pt, va, 0);
  int need = PTE_V | PTE_U | perm;
  if (pte == 0 || (*pte & need) != need)
    return 0;
  return PTE2PA(*pte);
}

// Physical address of the user page holding va, or 0 if it is not a
// mapped user page.
uint64
walkaddr(pagetable_t pt, uint64 va)
{
  return user_pa(pt, PGROUNDDOWN(va), 0);
}

// The leaf PTE for user page va (below MAXVA), or 0 if a table page on
// the way is missing. [*first, *next) is the range this answer covers:
// va's page, or the whole range the missing table would map.
static pte_t *
walk_skip(pagetable_t pt, uint64 va, uint64 *first, uint64 *next)
{
  for (int level = 2; level > 0; level--) {
    pte_t *pte = &pt[PX(level, va)];
    if ((*pte & PTE_V) == 0) {
      uint64 span = 1UL << (PGSHIFT + 9 * level);
      *first = va & ~(span - 1);
      *next = *first + span;
      return 0;
    }
    if (PTE_LEAF(*pte))
      panic("walk_skip: megapage in a user page table");
    pt = (pagetable_t)PTE2PA(*pte);
  }
  *first = PGROUNDDOWN(va);
  *next = *first + PGSIZE;
  return &pt[PX(0, va)];
}

// Calls fn(pte, va, arg) for every valid leaf PTE of user pages in
// [start, end) (page-aligned), in ascending order, skipping the range of a
// missing table page at once; stops early when fn returns nonzero. The
// file mappings' teardown, fork and counters use it (mmap.c).
void
vm_each(pagetable_t pt, uint64 start, uint64 end, int (*fn)(pte_t *, uint64, void *), void *arg)
{
  uint64 first, next;

  for (uint64 a = start; a < end; a = next) {
    pte_t *pte = walk_skip(pt, a, &first, &next);
    if (pte && (*pte & PTE_V) && fn(pte, a, arg))
      return;
  }
}

// Removes npages mappings from va (page-aligned), skipping unmapped
// pages (a missing table page at once); frees the physical pages if
// do_free. It goes from the top down: the free list hands out the page
// freed last first, so the next process that takes as many pages gets
// them in the same ascending order as this one had them. (Freed bottom
// up, every other process would get its pages in descending order, and
// streaming a model's weights through those runs 12-15% slower under
// QEMU: docs/PERF_NOTES.md, fact 21, "pages in ascending physical order".) Then
// it fences this hart's TLB, in case pt is its page table (design comment).
void
uvmunmap(pagetable_t pt, uint64 va, uint64 npages, int do_free)
{
  uint64 first, next;

  if (va % PGSIZE != 0)
    panic("uvmunmap: alignment");
  for (uint64 a = va + npages * PGSIZE; a > va; a = first) {
    pte_t *pte = walk_skip(pt, a - PGSIZE, &first, &next);
    if (pte == 0 || (*pte & PTE_V) == 0)
      continue;
    if (do_free)
      kfree((void *)PTE2PA(*pte));
    *pte = 0;
  }
  sfence_vma();
}

// Returns a user page table with only the kernel's part (design
// comment), or 0 if out of memory.
pagetable_t
uvmcreate(void)
{
  pagetable_t pt = kzalloc();

  if (pt)
    memmove(pt, kernel_pagetable, KERNEL_ROOT_PX * sizeof(pte_t));
  return pt;
}

// Grows a process's memory from oldsz to newsz with zeroed pages, mapped
// readable, user and xperm. Returns 0, or -ENOMEM having undone the growth.
int
uvmalloc(pagetable_t pt, uint64 oldsz, uint64 newsz, int xperm)
{
  for (uint64 a = PGROUNDUP(oldsz); a < newsz; a += PGSIZE) {
    char *mem = kzalloc();
    if (mem == 0) {
      uvmdealloc(pt, a, oldsz);
      return -ENOMEM;
    }
    if (mappages(pt, a, PGSIZE, (uint64)mem, PTE_R | PTE_U | xperm) < 0) {
      kfree(mem);
      uvmdealloc(pt, a, oldsz);
      return -ENOMEM;
    }
  }
  return 0;
}

// Shrinks a process's memory from oldsz to newsz, freeing the pages.
// Returns the new size.
uint64
uvmdealloc(pagetable_t pt, uint64 oldsz, uint64 newsz)
{
  if (newsz >= oldsz)
    return oldsz;
  uint64 from = PGROUNDUP(newsz);
  uint64 to = PGROUNDUP(oldsz);
  if (from < to)
    uvmunmap(pt, from, (to - from) / PGSIZE, 1);
  return newsz;
}

// Frees the page-table pages below pt. All leaves must be gone already.
static void
freewalk(pagetable_t pt)
{
  for (int i = 0; i < 512; i++) {
    pte_t pte = pt[i];
    if ((pte & PTE_V) && PTE_LEAF(pte))
      panic("freewalk: leaf");
    if (pte & PTE_V)
      freewalk((pagetable_t)PTE2PA(pte));
  }
  kfree(pt);
}

// Frees the user pages from USERBASE to sz, then the page table itself
// (not the kernel's part, which it shares). The caller has unmapped the
// trampoline and the trapframe.
void
uvmfree(pagetable_t pt, uint64 sz)
{
  if (sz > USERBASE)
    uvmunmap(pt, USERBASE, (PGROUNDUP(sz) - USERBASE) / PGSIZE, 1);
  memset(pt, 0, KERNEL_ROOT_PX * sizeof(pte_t));
  freewalk(pt);
}

// fork: copies the user pages from USERBASE to sz from old to new, same permissions,
// visiting only the table pages that exist. Returns 0, or -ENOMEM having
// freed what it copied.
int
uvmcopy(pagetable_t old, pagetable_t new, uint64 sz)
{
  uint64 first, next;

  for (uint64 a = USERBASE; a < sz; a = next) {
    pte_t *pte = walk_skip(old, a, &first, &next);
    if (pte == 0 || (*pte & PTE_V) == 0)
      continue;
    char *mem = kalloc();
    if (mem == 0)
      goto bad;
    memmove(mem, (char *)PTE2PA(*pte), PGSIZE);
    if (mappages(new, a, PGSIZE, (uint64)mem, PTE_FLAGS(*pte) & ~PTE_V) < 0) {
      kfree(mem);
      goto bad;
    }
  }
  return 0;

bad:
  uvmunmap(new, USERBASE, (PGROUNDUP(sz) - USERBASE) / PGSIZE, 1);
  return -ENOMEM;
}

// Takes PTE_U off the page at va: the guard page below the user stack.
void
uvmclear(pagetable_t pt, uint64 va)
{
  pte_t *pte = walk(pt, va, 0);
  if (pte == 0)
    panic("uvmclear: not mapped");
  *pte &= ~PTE_U;
}

// Copies len bytes from kernel src to user dstva. Returns 0, or -EFAULT
// if part of the range is not writable user memory.
int
copyout(pagetable_t pt, uint64 dstva, void *src, uint64 len)
{
  if (!user_range_ok(dstva, len))
    return -EFAULT;
  while (len > 0) {
    uint64 va0 = PGROUNDDOWN(dstva);
    uint64 pa0 = user_pa(pt, va0, PTE_W);
    if (pa0 == 0 && mmap_fault(pt, va0, 1) == 0)
      pa0 = user_pa(pt, va0, PTE_W);
    if (pa0 == 0)
      return -EFAULT;
    uint64 n = PGSIZE - (dstva - va0);
    if (n > len)
      n = len;
    memmove((void *)(pa0 + (dstva - va0)), src, n);
    len -= n;
    src = (char *)src + n;
    dstva = va0 + PGSIZE;
  }
  return 0;
}

// Copies len bytes from user srcva to kernel dst. Returns 0, or -EFAULT
// if part of the range is not readable user memory.
int
copyin(pagetable_t pt, void *dst, uint64 srcva, uint64 len)
{
  if (!user_range_ok(srcva, len))
    return -EFAULT;
  while (len > 0) {
    uint64 va0 = PGROUNDDOWN(srcva);
    uint64 pa0 = user_pa(pt, va0, PTE_R);
    if (pa0 == 0 && mmap_fault(pt, va0, 0) == 0)
      pa0 = user_pa(pt, va0, PTE_R);
    if (pa0 == 0)
      return -EFAULT;
    uint64 n = PGSIZE - (srcva - va0);
    if (n > len)
      n = len;
    memmove(dst, (void *)(pa0 + (srcva - va0)), n);
    len -= n;
    dst = (char *)dst + n;
    srcva = va0 + PGSIZE;
  }
  return 0;
}

// Copies a NUL-terminated string of at most max bytes (NUL included) from
// user srcva to dst. Returns its length without the NUL, -EFAULT for a bad
// address, or -ENAMETOOLONG if no NUL comes within max bytes.
int
copyinstr(pagetable_t pt, char *dst, uint64 srcva, uint64 max)
{
  uint64 got = 0;

  while (got < max) {
    uint64 va0 = PGROUNDDOWN(srcva);
    uint64 pa0 = user_pa(pt, va0, PTE_R);
    if (pa0 == 0 && mmap_fault(pt, va0, 0) == 0)
      pa0 = user_pa(pt, va0, PTE_R);
    if (pa0 == 0)
      return -EFAULT;
    char *p = (char *)(pa0 + (srcva - va0));
    char *pend = (char *)(pa0 + PGSIZE);
    for (; p < pend && got < max; p++, got++, srcva++) {
      dst[got] = *p;
      if (*p == 0)
        return got;
    }
  }
  return -ENAMETOOLONG;
}
