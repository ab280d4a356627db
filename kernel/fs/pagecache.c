// The page cache: file pages in memory, shared by every mapping of the
// file (kernel/core/mmap.c; docs/VM.md tells the course's story).
//
// A cache page is a physical page holding one page of a regular file,
// named by (dev, inum, index), index being the page's number in the file.
// Every physical page has a descriptor (struct cpage) in one table
// indexed by physical page number, made at boot, so a page table entry
// leads straight to its page's descriptor.
//
// Rules:
// - A page of a file is in the cache at most once: every insertion for
//   an inode happens with the inode's sleep lock held, after looking
//   again under that lock (pagecache_get).
// - ref counts the page table entries (and holders) that use the page.
//   A page with ref 0 is idle: still cached, on the LRU list, most
//   recently used at the head. kalloc() reclaims idle pages from the
//   tail when memory runs out (pagecache_reclaim), so idle pages count
//   as free memory (sysinfo). A page in use is never reclaimed.
// - Cache pages are never written by a process: shared mappings are
//   read-only and a private mapping writes its own copy (mmap.c). So a
//   page is always clean, and reclaiming it loses nothing. writei()
//   copies what it writes into a cached page (pagecache_write), so the
//   mappings see the file as it is.
// - When a file's blocks are freed or truncated (itrunc), its pages
//   leave the cache (pagecache_forget): idle ones are freed, the ones
//   still mapped become orphans, freed when their last mapping goes.
//   So a page never outlives its meaning for a new file with the same
//   inode number.
// - A miss reads a cluster: the missing page and up to CLUSTER - 1
//   following ones that are not cached yet, in one disk request where
//   the blocks lie contiguously. A request costs the device about 25 us
//   whatever its size up to 64 KiB (docs/PERF_NOTES.md, fact 6, "a disk
//   request costs about 25 us"), and the process sleeps for its
//   interrupt, whose wake-up can take milliseconds when the host is busy;
//   so a cluster is the most one request carries, 128 pages (512 KiB,
//   BIOMAXSEGS segments), and a model streams in at read()'s pace.
//
// Locks: cache.lock (a spinlock, taken last: nothing is called with it
// held but the list and hash operations here) guards every descriptor
// and the counters. Disk reads happen with the inode's sleep lock held
// and cache.lock released.
#include "kernel/include/types.h"
#include "kernel/include/param.h"
#include "kernel/include/errno.h"
#include "kernel/include/memlayout.h"
#include "kernel/include/riscv.h"
#include "kernel/include/spinlock.h"
#include "kernel/include/sleeplock.h"
#include "kernel/include/fsparam.h"
#include "kernel/include/fs.h"
#include "kernel/include/file.h"
#include "kernel/include/sysinfo.h"
#include "kernel/include/defs.h"

#define CLUSTER 128  // pages one miss reads (512 KiB: design comment)
#define NHASH   8192 // hash buckets; a power of two

struct cpage {
  uint dev, inum;
  uint64 index;        // page number in the file
  int ref;             // page table entries and holders; 0: idle
  int cached;          // in the hash table (else free, or an orphan)
  struct cpage *hnext; // hash chain
  struct cpage *prev;  // LRU list of idle pages, most recent first
  struct cpage *next;
};

static struct {
  struct spinlock lock;
  struct cpage *pages; // one per physical page from KERNBASE
  uint64 npages;
  struct cpage *hash[NHASH];
  struct cpage lru; // head of the idle list
  uint64 cached, idle, hits, misses, readahead, evictions;
} cache;

// Boot, after kinit: the descriptor table for RAM up to ram_end.
void
pagecache_init(uint64 ram_end)
{
  initlock(&cache.lock, "pagecache");
  cache.npages = (ram_end - KERNBASE) / PGSIZE;
  cache.pages = kreserve(cache.npages * sizeof(struct cpage));
  cache.lru.next = cache.lru.prev = &cache.lru;
}

// The descriptor of physical page pa.
static struct cpage *
desc(uint64 pa)
{
  uint64 i = (pa - KERNBASE) / PGSIZE;

  if (pa < KERNBASE || i >= cache.npages)
    panic("pagecache: page outside RAM");
  return &cache.pages[i];
}

static uint64
page_pa(struct cpage *c)
{
  return KERNBASE + (uint64)(c - cache.pages) * PGSIZE;
}

static struct cpage **
bucket(uint dev, uint inum, uint64 index)
{
  return &cache.hash[(inum * 0x9E3779B1u + dev * 31 + index) & (NHASH - 1)];
}

// The cached page (dev, inum, index), or 0. cache.lock is held.
static struct cpage *
lookup(uint dev, uint inum, uint64 index)
{
  for (struct cpage *c = *bucket(dev, inum, index); c; c = c->hnext)
    if (c->inum == inum && c->dev == dev && c->index == index)
      return c;
  return 0;
}

static void
lru_remove(struct cpage *c)
{
  c->prev->next = c->next;
  c->next->prev = c->prev;
  c->prev = c->next = 0;
  cache.idle--;
}

static void
lru_push(struct cpage *c)
{
  c->next = cache.lru.next;
  c->prev = &cache.lru;
  cache.lru.next->prev = c;
  cache.lru.next = c;
  cache.idle++;
}

// Takes c out of the hash table. cache.lock is held.
static void
unhash(struct cpage *c)
{
  struct cpage **pp = bucket(c->dev, c->inum, c->index);

  while (*pp != c)
    pp = &(*pp)->hnext;
  *pp = c->hnext;
  c->hnext = 0;
  c->cached = 0;
  cache.cached--;
}

// One more reference to c, off the idle list if it was idle.
// cache.lock is held.
static void
hold(struct cpage *c)
{
  if (c->ref++ == 0)
    lru_remove(c);
}

// Looks page index of ip up and holds it. Returns its address or 0.
static uint64
get_cached(struct inode *ip, uint64 index)
{
  acquire(&cache.lock);
  struct cpage *c = lookup(ip->dev, ip->inum, index);
  if (c) {
    hold(c);
    cache.hits++;
  }
  release(&cache.lock);
  return c ? page_pa(c) : 0;
}

// Holds the pages of ip from index on that are cached in a row, at most
// n, without counting hits (a fault maps the pages after the one it
// needs: mmap.c). Returns how many, their addresses in pa[].
int
pagecache_peek(struct inode *ip, uint64 index, int n, uint64 *pa)
{
  int got = 0;

  acquire(&cache.lock);
  for (struct cpage *c; got < n && (c = lookup(ip->dev, ip->inum, index + got)) != 0; got++) {
    hold(c);
    pa[got] = page_pa(c);
  }
  release(&cache.lock);
  return got;
}

// How many pages from index on (at most max) are not cached: the
// cluster a miss at index reads. ip->lock is held.
static int
cluster_len(struct inode *ip, uint64 index, int max)
{
  int n = 1;

  acquire(&cache.lock);
  while (n < max && lookup(ip->dev, ip->inum, index + n) == 0)
    n++;
  release(&cache.lock);
  return n;
}

// Enters the n pages read into pa[] as pages index... of ip; the first
// one held by the caller, the others idle. ip->lock is held.
static void
insert(struct inode *ip, uint64 index, uint64 *pa, int n)
{
  acquire(&cache.lock);
  for (int i = 0; i < n; i++) {
    struct cpage *c = desc(pa[i]);
    struct cpage **b = bucket(ip->dev, ip->inum, index + i);
    c->dev = ip->dev;
    c->inum = ip->inum;
    c->index = index + i;
    c->cached = 1;
    c->ref = i == 0;
    c->hnext = *b;
    *b = c;
    cache.cached++;
    if (i > 0)
      lru_push(c);
  }
  cache.misses++;
  cache.readahead += n - 1;
  release(&cache.lock);
}

// Reads the cluster from page index of ip into new pages, at most max
// pages, and enters it. ip->lock is held. Returns the first page's
// address (held), 0 past the end of the file, or -ENOMEM, -EIO.
static long
fill(struct inode *ip, uint64 index, int max)
{
  uint64 pa[CLUSTER];
  uint64 filepages = PGROUNDUP(ip->size) / PGSIZE;

  if (index >= filepages)
    return 0;
  if (max > CLUSTER)
    max = CLUSTER;
  if ((uint64)max > filepages - index)
    max = filepages - index;
  int n = cluster_len(ip, index, max < 1 ? 1 : max);
  for (int i = 0; i < n; i++) {
    if ((pa[i] = (uint64)kalloc()) == 0) {
      if (i == 0)
        return -ENOMEM;
      n = i;
    }
  }
  int r = readi_pages(ip, index, pa, n);
  if (r < 0 && n > 1) {
    // A damaged block further on fails the cluster: then the page alone.
    while (n > 1)
      kfree((void *)pa[--n]);
    r = readi_pages(ip, index, pa, 1);
  }
  if (r < 0) {
    kfree((void *)pa[0]);
    return -EIO;
  }
  insert(ip, index, pa, n);
  return pa[0];
}

// Holds page index of regular file ip (which the caller holds a
// reference to), reading it and up to ahead - 1 following pages from the
// disk if it is not cached. Returns 0 with the page's physical address in
// *pa, 1 if the page lies past the end of the file, -ENOMEM or -EIO. The
// caller may hold ip->lock already (a read() into a private mapping of
// the same file).
int
pagecache_get(struct inode *ip, uint64 index, int ahead, uint64 *pa)
{
  if ((*pa = get_cached(ip, index)) != 0)
    return 0;
  int locked = holdingsleep(&ip->lock);
  if (!locked && ilock(ip) < 0) {
    iunlock(ip);
    return -EIO;
  }
  long r = 0;
  // Another process may have read it while this one waited for the lock.
  if ((*pa = get_cached(ip, index)) == 0)
    r = fill(ip, index, ahead);
  if (!locked)
    iunlock(ip);
  if (r < 0)
    return r;
  if (*pa == 0 && r == 0)
    return 1;
  if (*pa == 0)
    *pa = r;
  return 0;
}

// One more reference to cache page pa (fork copies a mapping).
void
pagecache_dup(uint64 pa)
{
  acquire(&cache.lock);
  hold(desc(pa));
  release(&cache.lock);
}

// Drops a reference to cache page pa: the last one makes a cached page
// idle and frees an orphan.
void
pagecache_put(uint64 pa)
{
  struct cpage *c = desc(pa);
  int orphan_gone = 0;

  acquire(&cache.lock);
  if (c->ref < 1)
    panic("pagecache_put: not held");
  if (--c->ref == 0) {
    if (c->cached)
      lru_push(c);
    else
      orphan_gone = 1;
  }
  release(&cache.lock);
  if (orphan_gone)
    kfree((void *)pa);
}

// How many references cache page pa has.
int
pagecache_refs(uint64 pa)
{
  acquire(&cache.lock);
  int n = desc(pa)->ref;
  release(&cache.lock);
  return n;
}

// writei wrote file block index of ip, now data: a cached copy takes the
// new contents, zero from the end of the file (size) on. ip->lock is held.
void
pagecache_write(struct inode *ip, uint64 index, const uchar *data, uint64 size)
{
  acquire(&cache.lock);
  struct cpage *c = lookup(ip->dev, ip->inum, index);
  if (c) {
    uint64 keep = size > index * PGSIZE ? size - index * PGSIZE : 0;
    keep = keep < PGSIZE ? keep : PGSIZE;
    memmove((void *)page_pa(c), data, keep);
    memset((char *)page_pa(c) + keep, 0, PGSIZE - keep);
  }
  release(&cache.lock);
}

// ip's blocks are being freed or truncated: every page of it leaves the
// cache (design comment). ip->lock is held.
void
pagecache_forget(struct inode *ip)
{
  struct cpage *freed = 0;

  acquire(&cache.lock);
  for (int b = 0; b < NHASH && cache.cached > 0; b++) {
    struct cpage *c = cache.hash[b], *next;
    for (; c; c = next) {
      next = c->hnext;
      if (c->inum != ip->inum || c->dev != ip->dev)
        continue;
      unhash(c);
      if (c->ref == 0) {
        lru_remove(c);
        c->hnext = freed;
        freed = c;
      }
    }
  }
  release(&cache.lock);
  for (struct cpage *next; freed; freed = next) {
    next = freed->hnext;
    freed->hnext = 0;
    kfree((void *)page_pa(freed));
  }
}

// kalloc() found no free page: frees up to want idle pages, least
// recently used first. Returns how many it freed.
uint64
pagecache_reclaim(uint64 want)
{
  struct cpage *freed = 0;
  uint64 n = 0;

  acquire(&cache.lock);
  while (n < want && cache.lru.prev != &cache.lru) {
    struct cpage *c = cache.lru.prev;
    lru_remove(c);
    unhash(c);
    c->hnext = freed;
    freed = c;
    n++;
  }
  cache.evictions += n;
  release(&cache.lock);
  for (struct cpage *next; freed; freed = next) {
    next = freed->hnext;
    freed->hnext = 0;
    kfree((void *)page_pa(freed));
  }
  return n;
}

// The cache's counters, for sysinfo and ^P.
void
pagecache_stats(struct sysinfo *si)
{
  acquire(&cache.lock);
  si->cachepages = cache.cached;
  si->cacheidle = cache.idle;
  si->hits = cache.hits;
  si->misses = cache.misses;
  si->readahead = cache.readahead;
  si->evictions = cache.evictions;
  release(&cache.lock);
}
