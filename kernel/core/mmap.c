// File mappings: mmap, munmap and the page faults that fill them
// (docs/VM.md tells the course's story; the pages come from the page
// cache, kernel/fs/pagecache.c).
//
// mmap(0, len, prot, flags, fd, off) maps len bytes of the regular file
// open for reading at fd, from page-aligned offset off, and returns the
// address it chose; munmap(addr, len) removes whole pages of mappings in
// [addr, addr + len), splitting a mapping it cuts in the middle. A process
// has at most NMAP mappings; each holds a reference to its inode, so
// unlinking a mapped file keeps its blocks until the last mapping goes.
//
// Rules:
// - Nothing is read at mmap: a page is filled when the process first
//   touches it (a page fault, or a system call's copyin/copyout). The
//   fault takes the page from the page cache, which reads a cluster of
//   following pages with it when it misses, and a read fault maps the
//   cached pages after it too (up to AROUND in all): a process that
//   streams through a file takes a fault per 512 pages (2 MiB), not per
//   page.
// - MAP_SHARED maps the cache page itself, read-only (PROT_WRITE is
//   refused: there is no write-back); every process that maps the file
//   sees the same physical page. MAP_PRIVATE maps the cache page
//   read-only too, and a write (PROT_WRITE) replaces it with the process's
//   own copy (copy-on-write; its PTE carries PTE_COPY). Such a copy is
//   never shared and never reclaimed: it is data the process wrote.
// - A fault on a page wholly past the end of the file, a write to a
//   mapping without PROT_WRITE, or an instruction fetch from a mapping
//   kills only the process, with one line saying why (trap.c); so does
//   running out of memory or a disk error while filling a page. Inside a
//   system call the same cases give -EFAULT instead.
// - When memory runs out during a fault, a process with one thread first
//   drops its own mapped cache pages that no other mapping uses (lowest
//   addresses first) so that the page cache can reclaim them, and tries
//   once more: a file larger than free memory can be read through a
//   mapping. Pages of other processes are never taken away, since this
//   kernel cannot empty another hart's TLB.
// - fork copies the mappings: cache pages are shared, private copies
//   copied. exec and exit drop them. munmap with more than one thread
//   fails with -EBUSY, for the reason sbrk cannot shrink then
//   (kernel/core/thread.c): other harts may hold the old entries.
// - Placement: mappings go top down from USERTOP, each below the lowest
//   one with a guard page between, and never below the heap's end; sbrk
//   stops below the lowest mapping (mmap_floor).
//
// Locks: the process's vmlock guards its mappings and their page table
// entries. A fault looks up its mapping under vmlock, reads the page with
// vmlock released (the page cache takes the inode's lock), and maps it
// under vmlock again; the inode stays referenced meanwhile because a
// mapping can only go while this process has no other thread running.
#include "kernel/include/types.h"
#include "kernel/include/param.h"
#include "kernel/include/errno.h"
#include "kernel/include/memlayout.h"
#include "kernel/include/riscv.h"
#include "kernel/include/spinlock.h"
#include "kernel/include/sleeplock.h"
#include "kernel/include/proc.h"
#include "kernel/include/mman.h"
#include "kernel/include/fs.h"
#include "kernel/include/stat.h"
#include "kernel/include/file.h"
#include "kernel/include/defs.h"

#define MAXMAP     (1UL << 36) // longest mapping (64 GiB)
#define TRIM_PAGES 256         // pages a process drops when a fault finds no memory
#define AROUND     512         // pages a read fault maps: its own and the cached ones after it
#define PEEK       64          // of those, looked up in the page cache at once

// ---------------------------------------------------------------- lookups

// The mapping of l holding page va, or 0. vmlock is held.
static struct vma *
find_vma(struct proc *l, uint64 va)
{
  for (struct vma *v = l->tg.mm.vma; v < &l->tg.mm.vma[NMAP]; v++)
    if (v->end && va >= v->start && va < v->end)
      return v;
  return 0;
}

// The lowest address mapped by l, or USERTOP if none: sbrk's limit.
uint64
mmap_floor(struct proc *l)
{
  uint64 low = USERTOP;

  for (struct vma *v = l->tg.mm.vma; v < &l->tg.mm.vma[NMAP]; v++)
    if (v->end && v->start < low)
      low = v->start;
  return low;
}

// ---------------------------------------------------------------- unmapping

struct drop {
  struct proc *l;
  uint64 wanted; // trim only: pages still to drop
};

// vm_each callback: removes one mapped page, giving a cache page back
// to the cache and freeing a private copy.
static int
drop_page(pte_t *pte, uint64 va, void *arg)
{
  struct drop *d = arg;
  uint64 pa = PTE2PA(*pte);

  if (*pte & PTE_COPY)
    kfree((void *)pa);
  else
    pagecache_put(pa);
  *pte = 0;
  d->l->tg.mm.resident--;
  return 0;
}

// Removes the pages of [start, end) that l maps in pt. vmlock is held.
static void
drop_range(struct proc *l, pagetable_t pt, uint64 start, uint64 end)
{
  struct drop d = { l, 0 };

  vm_each(pt, start, end, drop_page, &d);
  sfence_vma();
}

// vm_each callback for trim: drops cache pages only this mapping uses.
static int
trim_page(pte_t *pte, uint64 va, void *arg)
{
  struct drop *d = arg;

  if ((*pte & PTE_COPY) || pagecache_refs(PTE2PA(*pte)) != 1)
    return 0;
  drop_page(pte, va, arg);
  return --d->wanted == 0;
}

// Out of memory in a fault of single-threaded l: drops up to want of
// its own cache pages that no one else maps, lowest addresses first,
// so that kalloc can reclaim them. vmlock is held.
static void
trim(struct proc *l, uint64 want)
{
  struct drop d = { l, want };

  for (struct vma *v = l->tg.mm.vma; v < &l->tg.mm.vma[NMAP] && d.wanted > 0; v++)
    if (v->end)
      vm_each(l->pagetable, v->start, v->end, trim_page, &d);
  sfence_vma();
}

// exec and exit: drops every mapping of l, whose pages are in pt.
void
mmap_exit(struct proc *l, pagetable_t pt)
{
  struct inode *ips[NMAP];
  int n = 0;

  acquiresleep(&l->tg.vmlock);
  for (struct vma *v = l->tg.mm.vma; v < &l->tg.mm.vma[NMAP]; v++) {
    if (v->end == 0)
      continue;
    drop_range(l, pt, v->start, v->end);
    ips[n++] = v->ip;
    memset(v, 0, sizeof(*v));
  }
  l->tg.mm.resident = 0;
  l->tg.mm.faults = 0;
  releasesleep(&l->tg.vmlock);
  if (n == 0)
    return;
  begin_op();
  while (n > 0)
    iput(ips[--n]);
  end_op();
}

// ---------------------------------------------------------------- faults

// Is the process single-threaded (so that its own pages may be trimmed)?
static int
alone(struct proc *l)
{
  return thread_count(l) == 0;
}

// Page index of v's file from the page cache, trimming l's own pages
// and trying once more if memory ran out. Returns pagecache_get's result.
static int
cache_page(struct proc *l, struct vma *v, uint64 va, uint64 *pa)
{
  uint64 index = (v->off + va - v->start) / PGSIZE;
  int r = pagecache_get(v->ip, index, (v->end - va) / PGSIZE, pa);

  if (r == -ENOMEM && alone(l)) {
    acquiresleep(&l->tg.vmlock);
    trim(l, TRIM_PAGES);
    releasesleep(&l->tg.vmlock);
    r = pagecache_get(v->ip, index, 1, pa);
  }
  return r;
}

// A new page, trimming l's own pages first if memory ran out. vmlock
// is held. Returns it or 0.
static void *
new_page(struct proc *l)
{
  void *mem = kalloc();

  if (mem == 0 && alone(l)) {
    trim(l, TRIM_PAGES);
    mem = kalloc();
  }
  return mem;
}

// Maps page va of l in pt to cache page pa: for a write, as a private
// copy of it (the cache page is then given back). vmlock is held, and va
// is not mapped. Returns 0 or -ENOMEM (pa given back).
static int
map_page(struct proc *l, pagetable_t pt, uint64 va, uint64 pa, int write)
{
  int perm = PTE_R | PTE_U;
  uint64 page = pa;

  if (write) {
    void *mem = new_page(l);
    if (mem == 0) {
      pagecache_put(pa);
      return -ENOMEM;
    }
    memmove(mem, (void *)pa, PGSIZE);
    pagecache_put(pa);
    page = (uint64)mem;
    perm |= PTE_W | PTE_COPY;
  }
  if (mappages(pt, va, PGSIZE, page, perm) < 0) {
    if (write)
      kfree((void *)page);
    else
      pagecache_put(page);
    return -ENOMEM;
  }
  l->tg.mm.resident++;
  l->tg.mm.faults++;
  return 0;
}

// A write to a present read-only page of a private writable mapping:
// it becomes the process's own copy. vmlock is held. Returns 0 or -ENOMEM.
static int
copy_on_write(struct proc *l, pte_t *pte)
{
  uint64 pa = PTE2PA(*pte);
  void *mem = new_page(l);

  if (mem == 0)
    return -ENOMEM;
  memmove(mem, (void *)pa, PGSIZE);
  *pte = PA2PTE(mem) | PTE_R | PTE_W | PTE_U | PTE_COPY | PTE_V;
  sfence_vma();
  pagecache_put(pa);
  l->tg.mm.faults++;
  return 0;
}

// May access (0 read, 1 write, 2 fetch) touch v? Returns 0 or why not.
static int
access_ok(struct vma *v, int access)
{
  if (access == 2)
    return -ENOEXEC;
  if (access == 1 && !(v->prot & PROT_WRITE))
    return -EPERM;
  return 0;
}

// The page at va is mapped already: another thread was first, or a write
// finds a copy-on-write page. vmlock is held. Returns 0 or -ENOMEM.
static int
fault_present(struct proc *l, pte_t *pte, int access)
{
  if (access != 1 || (*pte & PTE_W))
    return 0;
  return copy_on_write(l, pte);
}

// Maps up to n pages of v from va on that are cached and not mapped yet,
// read-only, stopping at the first that is not. vmlock is held. Returns
// how many it mapped.
static int
map_run(struct proc *l, pagetable_t pt, struct vma *v, uint64 va, int n)
{
  uint64 pa[PEEK], index = (v->off + va - v->start) / PGSIZE;
  int want = 0, got, i;

  for (; want < n && want < PEEK && va + want * PGSIZE < v->end; want++) {
    pte_t *pte = walk(pt, va + want * PGSIZE, 0);
    if (pte && (*pte & PTE_V))
      break;
  }
  got = pagecache_peek(v->ip, index, want, pa);
  for (i = 0; i < got && mappages(pt, va + i * PGSIZE, PGSIZE, pa[i], PTE_R | PTE_U) == 0; i++)
    l->tg.mm.resident++;
  for (int k = i; k < got; k++)
    pagecache_put(pa[k]); // no memory for a page-table page
  return i;
}

// After a read fault mapped page va of v: maps the following pages of v,
// up to AROUND in all, that are cached and not mapped yet, PEEK at a
// time, so that a process streaming through a file takes one fault per
// AROUND pages the page cache holds, not one per page. vmlock is held.
static void
map_around(struct proc *l, pagetable_t pt, struct vma *v, uint64 va)
{
  for (int done = 1, got = PEEK; done < AROUND && got == PEEK; done += got)
    got = map_run(l, pt, v, va + done * PGSIZE, AROUND - done < PEEK ? AROUND - done : PEEK);
}

// Fills page va of mapping *v (a copy taken under vmlock) in pt. Returns
// 0, -EFAULT (past the end of the file), -ENOMEM or -EIO.
static int
fill_page(struct proc *l, pagetable_t pt, struct vma *v, uint64 va, int access)
{
  uint64 pa;
  int r = cache_page(l, v, va, &pa);

  if (r != 0)
    return r == 1 ? -EFAULT : r;
  acquiresleep(&l->tg.vmlock);
  pte_t *pte = walk(pt, va, 0);
  if (pte && (*pte & PTE_V)) {
    pagecache_put(pa); // another thread mapped it meanwhile
    r = fault_present(l, pte, access);
  } else {
    r = map_page(l, pt, va, pa, access == 1);
    if (r == 0 && access != 1)
      map_around(l, pt, v, va);
  }
  releasesleep(&l->tg.vmlock);
  return r;
}

// A fault at user address va in page table pt with access 0 (read),
// 1 (write) or 2 (instruction fetch), from a trap or from copyin and
// copyout. Returns 0 once the page is mapped, 1 if va lies in no mapping
// of the current process (or pt is not its table, or the caller cannot
// sleep: a spinlock is held), or why the access fails: -EFAULT, -EPERM,
// -ENOEXEC, -ENOMEM, -EIO (mmap_why).
int
mmap_fault(pagetable_t pt, uint64 va, int access)
{
  struct proc *l = myprocess();

  if (pt != l->pagetable || !intr_get())
    return 1;
  va = PGROUNDDOWN(va);
  acquiresleep(&l->tg.vmlock);
  struct vma *found = find_vma(l, va), v = { 0 };
  int r = found ? access_ok(found, access) : 1;
  pte_t *pte = r == 0 ? walk(pt, va, 0) : 0;
  if (pte && (*pte & PTE_V)) {
    r = fault_present(l, pte, access);
    found = 0;
  }
  if (found)
    v = *found;
  releasesleep(&l->tg.vmlock);
  if (r != 0 || found == 0)
    return r;
  return fill_page(l, pt, &v, va, access);
}

// Why a mapping's fault failed, for the one line that kills the process.
const char *
mmap_why(int err)
{
  switch (err) {
  case -EFAULT: return "past the end of the mapped file";
  case -EPERM: return "write to a read-only mapping";
  case -ENOEXEC: return "instruction fetch from a file mapping";
  case -ENOMEM: return "out of memory filling a file mapping";
  default: return "the mapped file could not be read";
  }
}

// ---------------------------------------------------------------- fork

struct forkcopy {
  struct proc *child;
  int err;
};

// vm_each callback: maps the parent's page at va in the child, sharing a
// cache page and copying a private one.
static int
fork_page(pte_t *pte, uint64 va, void *arg)
{
  struct forkcopy *f = arg;
  uint64 pa = PTE2PA(*pte);

  if (*pte & PTE_COPY) {
    void *mem = kalloc();
    if (mem == 0) {
      f->err = -ENOMEM;
      return 1;
    }
    memmove(mem, (void *)pa, PGSIZE);
    pa = (uint64)mem;
  } else {
    pagecache_dup(pa);
  }
  if (mappages(f->child->pagetable, va, PGSIZE, pa, PTE_FLAGS(*pte) & ~PTE_V) < 0) {
    if (*pte & PTE_COPY)
      kfree((void *)pa);
    else
      pagecache_put(pa);
    f->err = -ENOMEM;
    return 1;
  }
  f->child->tg.mm.resident++;
  return 0;
}

// fork: gives child copies of parent l's mappings and their pages. The
// caller holds l's vmlock. Returns 0, or -ENOMEM (the caller then drops
// what the child got with mmap_exit).
int
mmap_fork(struct proc *l, struct proc *child)
{
  struct forkcopy f = { child, 0 };

  for (int i = 0; i < NMAP && f.err == 0; i++) {
    struct vma *v = &l->tg.mm.vma[i];
    if (v->end == 0)
      continue;
    child->tg.mm.vma[i] = *v;
    idup(v->ip);
    vm_each(l->pagetable, v->start, v->end, fork_page, &f);
  }
  return f.err;
}

// ---------------------------------------------------------------- mmap

// Checks mmap's arguments other than the file. Returns 0 or -EINVAL.
static int
args_ok(uint64 addr, uint64 len, int prot, int flags, uint64 off)
{
  if (addr != 0 || len == 0 || len > MAXMAP || off % PGSIZE != 0 || off > MAXMAP)
    return -EINVAL;
  if (!(prot & PROT_READ) || (prot & ~(PROT_READ | PROT_WRITE)))
    return -EINVAL;
  if (flags != MAP_SHARED && flags != MAP_PRIVATE)
    return -EINVAL;
  if (flags == MAP_SHARED && (prot & PROT_WRITE))
    return -EINVAL; // no write-back: shared mappings are read-only
  return 0;
}

// Can f be mapped? Returns 0, -EBADF (not open for reading) or -EINVAL
// (not a regular file).
static int
file_ok(struct file *f)
{
  if (!f->readable)
    return -EBADF;
  if (f->type != FD_INODE)
    return -EINVAL;
  if (ilock(f->ip) < 0) {
    iunlock(f->ip);
    return -EINVAL;
  }
  int type = f->ip->type;
  iunlock(f->ip);
  return type == T_FILE ? 0 : -EINVAL;
}

// Places a mapping of len bytes of ip from off in l: below the lowest
// mapping, above the heap. Returns its address, or -ENOMEM (no slot or
// no room).
static long
place(struct proc *l, struct inode *ip, uint64 len, uint64 off, int prot, int flags)
{
  struct vma *v = 0;
  long r = -ENOMEM;

  acquiresleep(&l->tg.vmlock);
  for (int i = 0; i < NMAP && v == 0; i++)
    if (l->tg.mm.vma[i].end == 0)
      v = &l->tg.mm.vma[i];
  uint64 top = mmap_floor(l) - (mmap_floor(l) == USERTOP ? 0 : PGSIZE);
  uint64 size = PGROUNDUP(len);
  if (v && top > PGROUNDUP(l->sz) && top - PGROUNDUP(l->sz) > size + PGSIZE) {
    v->start = top - size;
    v->end = top;
    v->off = off;
    v->ip = idup(ip);
    v->prot = prot;
    v->flags = flags;
    r = v->start;
  }
  releasesleep(&l->tg.vmlock);
  return r;
}

// mmap(addr, len, prot, flags, fd, off): see the top of this file.
// Returns the mapping's address, or -EINVAL (bad arguments, not a regular
// file), -EBADF, -ENOMEM (no slot or no room).
uint64
sys_mmap(void)
{
  uint64 addr, len, off;
  int prot, flags;
  struct file *f;

  argaddr(0, &addr);
  argaddr(1, &len);
  argint(2, &prot);
  argint(3, &flags);
  argaddr(5, &off);
  long r = args_ok(addr, len, prot, flags, off);
  if (r < 0 || (r = argfd(4, &f)) < 0)
    return r;
  if ((r = file_ok(f)) == 0)
    r = place(myprocess(), f->ip, len, off, prot, flags);
  fileclose(f);
  return r;
}

// ---------------------------------------------------------------- munmap

// Does cutting [a, e) out of l's mappings need a free slot (a mapping
// split in two) that l lacks? vmlock is held.
static int
split_impossible(struct proc *l, uint64 a, uint64 e)
{
  int splits = 0, free = 0;

  for (struct vma *v = l->tg.mm.vma; v < &l->tg.mm.vma[NMAP]; v++) {
    free += v->end == 0;
    splits += v->end && v->start < a && v->end > e;
  }
  return splits > free;
}

// Cuts [a, e) out of mapping v of l, which it overlaps. Returns the
// inode to iput if v went away entirely, else 0. vmlock is held.
static struct inode *
cut(struct proc *l, struct vma *v, uint64 a, uint64 e)
{
  uint64 lo = a > v->start ? a : v->start, hi = e < v->end ? e : v->end;

  drop_range(l, l->pagetable, lo, hi);
  if (lo == v->start && hi == v->end) {
    struct inode *ip = v->ip;
    memset(v, 0, sizeof(*v));
    return ip;
  }
  if (lo > v->start && hi < v->end) {
    struct vma *tail = l->tg.mm.vma;
    while (tail->end)
      tail++; // split_impossible made sure there is one
    *tail = *v;
    tail->start = hi;
    tail->off = v->off + (hi - v->start);
    idup(v->ip);
    v->end = lo;
  } else if (lo == v->start) {
    v->off += hi - v->start;
    v->start = hi;
  } else {
    v->end = lo;
  }
  return 0;
}

// munmap(addr, len): removes the pages of [addr, addr + len) from the
// caller's mappings. Returns 0 (also if nothing was mapped there),
// -EINVAL (addr not page-aligned, len 0, outside user space), -EBUSY
// (more than one thread) or -ENOMEM (a split needs a mapping slot).
uint64
sys_munmap(void)
{
  struct proc *l = myprocess();
  struct inode *ips[NMAP];
  uint64 a, len;
  int n = 0, err = 0;

  argaddr(0, &a);
  argaddr(1, &len);
  if (a % PGSIZE != 0 || len == 0 || !user_range_ok(a, len))
    return -EINVAL;
  uint64 e = PGROUNDUP(a + len);
  acquiresleep(&l->tg.vmlock);
  if (!alone(l))
    err = -EBUSY;
  else if (split_impossible(l, a, e))
    err = -ENOMEM;
  for (struct vma *v = l->tg.mm.vma; err == 0 && v < &l->tg.mm.vma[NMAP]; v++)
    if (v->end && v->start < e && v->end > a && (ips[n] = cut(l, v, a, e)) != 0)
      n++;
  releasesleep(&l->tg.vmlock);
  if (n > 0) {
    begin_op();
    while (n > 0)
      iput(ips[--n]);
    end_op();
  }
  return err;
}

// ---------------------------------------------------------------- counters

struct census {
  uint64 resident, shared;
};

static int
count_page(pte_t *pte, uint64 va, void *arg)
{
  struct census *c = arg;

  c->resident++;
  if (!(*pte & PTE_COPY) && pagecache_refs(PTE2PA(*pte)) > 1)
    c->shared++;
  return 0;
}

// l's mapped pages, those of them another mapping uses too, and its
// mapping faults since exec (sysinfo).
void
mmap_stats(struct proc *l, uint64 *resident, uint64 *shared, uint64 *faults)
{
  struct census c = { 0, 0 };

  acquiresleep(&l->tg.vmlock);
  for (struct vma *v = l->tg.mm.vma; v < &l->tg.mm.vma[NMAP]; v++)
    if (v->end)
      vm_each(l->pagetable, v->start, v->end, count_page, &c);
  *faults = l->tg.mm.faults;
  releasesleep(&l->tg.vmlock);
  *resident = c.resident;
  *shared = c.shared;
}
