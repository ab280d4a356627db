// Buffer cache: copies of disk blocks in memory.
//
// The cache holds NBUF blocks of BSIZE bytes. It keeps the blocks that
// many processes use (inodes, bitmaps, directories, indirect blocks) in
// memory, and it is the synchronization point for a block: at most one
// cached copy of each block exists, and its sleeplock lets one process
// at a time use it.
//
// Interface:
// * bread(dev, blockno) returns a locked buffer holding the block.
// * bread_zero(dev, blockno) does the same for a block about to be
//   overwritten with zeros, without reading it.
// * bwrite(b) writes a locked buffer to disk; brelse(b) releases it.
// * Do not use a buffer after brelse.
// * The log pins the buffers it has recorded (bpin) until it has installed
//   them at home (bunpin); a pinned buffer is "dirty": newer than the disk.
//
// Lookups go through a hash table, because bmap() looks up indirect
// blocks once per block of a large file and a linear scan of NBUF entries
// would cost more than the disk. Free buffers are recycled least recently
// used first; when all are in use, bget sleeps until one is released.
//
// Large reads that bypass the cache (fs.c readi) ask bclean_run() which
// blocks they may read from the disk directly: only those not dirty here.

#include "types.h"
#include "param.h"
#include "fsparam.h"
#include "spinlock.h"
#include "sleeplock.h"
#include "riscv.h"
#include "defs.h"
#include "fs.h"
#include "buf.h"

#define NHASH 128 // hash buckets; a power of two

struct {
  struct spinlock lock;
  struct buf buf[NBUF];
  struct buf head;         // LRU list: head.next is the most recent
  struct buf *hash[NHASH]; // chains through buf.hnext
  int ndirty;              // pinned (dirty) buffers, for bclean_run
  int waiting;             // processes sleeping in bget for a buffer
} bcache;

// Block data lives in page-aligned static memory: the kernel maps it 1:1,
// so the disk can DMA into it at its virtual address.
static uchar bufdata[NBUF][BSIZE] __attribute__((aligned(PGSIZE)));

// The hash chain of the cache for block blockno of dev.
static struct buf **
bucket(uint dev, uint blockno)
{
  return &bcache.hash[(blockno * 31 + dev) & (NHASH - 1)];
}

// Called once at boot on hart 0.
void
binit(void)
{
  struct buf *b;

  initlock(&bcache.lock, "bcache");
  bcache.head.prev = &bcache.head;
  bcache.head.next = &bcache.head;
  for (b = bcache.buf; b < bcache.buf + NBUF; b++) {
    b->data = bufdata[b - bcache.buf];
    b->blockno = ~0U; // matches no block until bget assigns one
    initsleeplock(&b->lock, "buffer");
    b->next = bcache.head.next;
    b->prev = &bcache.head;
    bcache.head.next->prev = b;
    bcache.head.next = b;
  }
}

// Returns the cached buffer for (dev, blockno), or 0.
// Caller holds bcache.lock.
static struct buf *
bfind(uint dev, uint blockno)
{
  struct buf *b;

  for (b = *bucket(dev, blockno); b; b = b->hnext)
    if (b->dev == dev && b->blockno == blockno)
      return b;
  return 0;
}

// Moves b from its hash chain to the one of (dev, blockno).
// Caller holds bcache.lock.
static void
brehash(struct buf *b, uint dev, uint blockno)
{
  struct buf **pp;

  for (pp = bucket(b->dev, b->blockno); *pp; pp = &(*pp)->hnext) {
    if (*pp == b) {
      *pp = b->hnext;
      break;
    }
  }
  b->dev = dev;
  b->blockno = blockno;
  b->hnext = *bucket(dev, blockno);
  *bucket(dev, blockno) = b;
}

// Returns the locked buffer for (dev, blockno), recycling the least
// recently used free buffer if the block is not cached. Sleeps while
// every buffer is in use.
static struct buf *
bget(uint dev, uint blockno)
{
  struct buf *b;

  acquire(&bcache.lock);
  for (;;) {
    if ((b = bfind(dev, blockno)) != 0)
      break;
    for (b = bcache.head.prev; b != &bcache.head; b = b->prev)
      if (b->refcnt == 0)
        break;
    if (b != &bcache.head) {
      brehash(b, dev, blockno);
      b->valid = 0;
      break;
    }
    // Every buffer is held; brelse wakes us when one comes free.
    bcache.waiting++;
    sleep(&bcache.waiting, &bcache.lock);
    bcache.waiting--;
  }
  b->refcnt++;
  release(&bcache.lock);
  acquiresleep(&b->lock);
  return b;
}

// Returns a locked buffer with the contents of the block.
struct buf *
bread(uint dev, uint blockno)
{
  struct buf *b;

  b = bget(dev, blockno);
  if (!b->valid) {
    virtio_disk_rw(b, 0);
    b->valid = 1;
  }
  return b;
}

// Returns a locked buffer for the block with all-zero contents, without
// reading the disk: for a block just allocated (fs.c balloc).
struct buf *
bread_zero(uint dev, uint blockno)
{
  struct buf *b;

  b = bget(dev, blockno);
  memset(b->data, 0, BSIZE);
  b->valid = 1;
  return b;
}

// Writes b's contents to disk. Caller holds b->lock.
void
bwrite(struct buf *b)
{
  if (!holdingsleep(&b->lock))
    panic("bwrite: buffer not locked");
  virtio_disk_rw(b, 1);
}

// Releases a locked buffer; an unused buffer becomes the most recently
// used one.
void
brelse(struct buf *b)
{
  if (!holdingsleep(&b->lock))
    panic("brelse: buffer not locked");
  releasesleep(&b->lock);

  acquire(&bcache.lock);
  b->refcnt--;
  if (b->refcnt == 0) {
    b->next->prev = b->prev;
    b->prev->next = b->next;
    b->next = bcache.head.next;
    b->prev = &bcache.head;
    bcache.head.next->prev = b;
    bcache.head.next = b;
    if (bcache.waiting)
      wakeup(&bcache.waiting);
  }
  release(&bcache.lock);
}

// Marks b dirty and keeps it cached until bunpin (log.c). b is not yet
// pinned. Caller holds b->lock.
void
bpin(struct buf *b)
{
  acquire(&bcache.lock);
  b->refcnt++;
  b->dirty = 1;
  bcache.ndirty++;
  release(&bcache.lock);
}

// b's contents are on disk at home: it is clean and may be recycled.
void
bunpin(struct buf *b)
{
  acquire(&bcache.lock);
  b->refcnt--;
  b->dirty = 0;
  bcache.ndirty--;
  if (b->refcnt == 0 && bcache.waiting)
    wakeup(&bcache.waiting);
  release(&bcache.lock);
}

// Returns how many of the n blocks from blockno on, counted from the
// first, the disk holds in their latest state (none is dirty here).
// The caller must keep the blocks from being written meanwhile, e.g. by
// holding the lock of the inode they belong to.
uint
bclean_run(uint dev, uint blockno, uint n)
{
  uint i;
  struct buf *b;

  acquire(&bcache.lock);
  if (bcache.ndirty > 0) {
    for (i = 0; i < n; i++) {
      b = bfind(dev, blockno + i);
      if (b && b->dirty) {
        n = i;
        break;
      }
    }
  }
  release(&bcache.lock);
  return n;
}
