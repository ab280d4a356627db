// File system implementation, in five layers:
//   + Blocks: allocator for raw disk blocks (the free bitmap).
//   + Log: crash recovery for multi-step updates (log.c).
//   + Files: inode allocator, reading, writing, metadata.
//   + Directories: inodes whose contents are a list of other inodes.
//   + Names: paths like /AI/SMOL/EMB.BIN for convenient naming.
//
// This file holds the low-level routines; sysfile.c turns them into system
// calls. The on-disk layout is in fs.h.
//
// Files are sized for language models: 4 KiB blocks, and an inode maps
// NDIRECT direct blocks, a single-indirect and a double-indirect block
// (about 4 GiB). Reading such a file one block at a time through the
// buffer cache would cost one disk request per 4 KiB; readi() therefore
// reads runs of whole blocks that lie contiguously on disk (the image
// builder places each file contiguously) with large requests that DMA
// straight into the user's pages. Blocks the cache holds dirty (written by
// a transaction but not yet installed at home) are read through the cache.
// Files written in the guest stay contiguous too: balloc gives a file the
// block after its last one when it can, and starts each new run in a
// window of ALLOCWINDOW blocks that no other file starts in.
//
// Errors: what a user can exhaust (inodes, the inode table, disk space)
// makes the call fail with a negative errno; only broken invariants of
// the kernel's own memory panic.
//
// The disk is untrusted: an image may be damaged by a bug, a crash of the
// host or a student's hex editor, and `pyaisvc fsimg` accepts any file.
// Everything read from disk is checked once, at one place per kind,
// before the kernel uses it:
//   + the superblock, at mount (fsinit): a layout whose inode table
//     cannot be located refuses to mount; a bad size or log region mounts
//     read-only (log.c says what happens to the log header);
//   + an inode, when ilock reads it into the table (inode_bad): type,
//     link count, size, direct and indirect block numbers;
//   + a block number taken from an indirect block (ptr_ok);
//   + a directory entry, when dirlookup matches it (dirent_bad).
// A bad object makes the operation that met it fail with -EIO and prints
// one line naming the inode or block ("fs: inode 7: ..."); the rest of
// the file system keeps working. A bad inode is never written back, so
// the damage stays as it was for `pyaisvc fsimg check` to report.

#include "types.h"
#include "riscv.h"
#include "defs.h"
#include "param.h"
#include "fsparam.h"
#include "errno.h"
#include "stat.h"
#include "spinlock.h"
#include "proc.h"
#include "sleeplock.h"
#include "fs.h"
#include "buf.h"
#include "file.h"

_Static_assert(sizeof(struct dinode) == 128, "fs.h: dinode must stay 128 bytes");
_Static_assert(BSIZE % sizeof(struct dinode) == 0, "fs.h: inodes straddle blocks");
_Static_assert(sizeof(struct dirent) == 32, "fs.h: dirent must stay 32 bytes");
_Static_assert(BSIZE == PGSIZE, "fs.h: direct reads assume a block is a page");

// There is one file system per machine; its superblock is read at boot.
struct superblock sb;

// The first data block: blocks below it are metadata, never file data.
static uint datastart;

// Where balloc starts a new run: past the windows it has handed out.
static struct {
  struct spinlock lock;
  uint next;
} hint;

// Blocks needed to hold n items of which per fit in a block.
static uint
nblocks_for(uint64 n, uint64 per)
{
  return (n + per - 1) / per;
}

// Checks where the superblock puts the inode table. Returns 0 if the
// table lies between the superblock and the free map, which follows it
// directly, within the disk; else why not: without the table nothing can
// be found, so the kernel refuses to mount.
static const char *
sb_tables_bad(uint64 capacity)
{
  if (sb.ninodes < ROOTINO + 1 || sb.ninodes > MAXINODES + 1)
    return "inode count out of range";
  if (sb.inodestart < 3 || (uint64)sb.inodestart + nblocks_for(sb.ninodes, IPB) != sb.bmapstart)
    return "inode table and free map disagree (inodestart, ninodes, bmapstart)";
  if ((uint64)sb.bmapstart + nblocks_for(capacity, BPB) >= capacity)
    return "free map beyond the disk";
  return 0;
}

// Checks the size and the log region. Returns 0, or why the image can
// only be mounted read-only.
static const char *
sb_rest_bad(uint64 capacity)
{
  if (sb.size != capacity)
    return "size differs from the disk's";
  if (sb.logstart < 2 || sb.nlog < LOGBLOCKS + 1 || (uint64)sb.logstart + sb.nlog > sb.inodestart)
    return "log region too small or overlapping the inode table";
  return 0;
}

// Reads and checks the superblock, then recovers the log (log.c).
// Called by the first process (it sleeps on disk I/O). Refuses to mount
// (panics, naming the field) only if the image is not ours or its inode
// table cannot be located: the kernel cannot run init without it.
void
fsinit(int dev)
{
  struct buf *bp;
  const char *why;
  uint64 capacity = virtio_disk_capacity();
  int readonly = 0;

  bp = bread(dev, 1);
  memmove(&sb, bp->data, sizeof(sb));
  brelse(bp);
  if (sb.magic != FSMAGIC || sb.version != FSVERSION)
    panic("fsinit: refusing to mount: not an aisvc file system (bad magic or version); "
          "rebuild it with make fsimg");
  if ((why = sb_tables_bad(capacity)) != 0) {
    printf("fsinit: refusing to mount: superblock: %s\n", why);
    panic("fsinit: refusing to mount a damaged image; see pyaisvc fsimg check");
  }
  if ((why = sb_rest_bad(capacity)) != 0) {
    printf("fsinit: superblock: %s; mounting read-only\n", why);
    readonly = 1;
    sb.size = capacity; // the image fills the disk (pyaisvc fsimg builds it so)
  }
  datastart = sb.bmapstart + nblocks_for(sb.size, BPB);
  if (sb.nblocks != sb.size - datastart && !readonly)
    printf("fsinit: superblock: nblocks %u disagrees with the layout; ignored\n", sb.nblocks);
  initlock(&hint.lock, "balloc");
  initlog(dev, &sb, readonly);
}

// Is b a valid data block number (or 0, "no block")?
static int
bno_ok(uint b)
{
  return b == 0 || (b >= datastart && b < sb.size);
}

// ---------------------------------------------------------------- blocks

// Allocates a free block at or after bit `from` of bitmap block bblk.
// Returns its number, or 0 if there is none there.
static uint
balloc_in(uint dev, uint bblk, uint from)
{
  struct buf *bp;
  uint bi, b;

  bp = bread(dev, sb.bmapstart + bblk);
  for (bi = from; bi < BPB;) {
    if (bi % 8 == 0 && bp->data[bi / 8] == 0xff) {
      bi += 8; // a whole byte in use: the common case, skip it at once
      continue;
    }
    b = bblk * BPB + bi;
    if (b >= sb.size)
      break;
    if (b < datastart && (bp->data[bi / 8] & (1 << (bi % 8))) == 0) {
      printf("fs: bitmap marks metadata block %u free; not using it\n", b);
      bi++;
      continue;
    }
    if ((bp->data[bi / 8] & (1 << (bi % 8))) == 0) {
      bp->data[bi / 8] |= 1 << (bi % 8);
      log_write(bp);
      brelse(bp);
      return b;
    }
    bi++;
  }
  brelse(bp);
  return 0;
}

// Takes block b if it is free. Returns b, or 0 if it is in use.
static uint
balloc_at(uint dev, uint b)
{
  struct buf *bp;
  uint bi = b % BPB;

  bp = bread(dev, BBLOCK(b, sb));
  if (bp->data[bi / 8] & (1 << (bi % 8))) {
    brelse(bp);
    return 0;
  }
  bp->data[bi / 8] |= 1 << (bi % 8);
  log_write(bp);
  brelse(bp);
  return b;
}

// Finds a free block for a new run, scanning from the hint, and moves the
// hint ALLOCWINDOW blocks past it: the window is left to this run, so
// files written at the same time do not interleave block by block.
// Returns 0 if the disk is full.
static uint
balloc_window(uint dev)
{
  uint nbmap, start, i, b = 0;

  nbmap = (sb.size + BPB - 1) / BPB;
  acquire(&hint.lock);
  start = hint.next < sb.size ? hint.next : 0;
  release(&hint.lock);
  // Visit the hint's bitmap block first and last, to wrap around.
  for (i = 0; i <= nbmap && b == 0; i++)
    b = balloc_in(dev, (start / BPB + i) % nbmap, i == 0 ? start % BPB : 0);
  if (b) {
    acquire(&hint.lock);
    hint.next = b + ALLOCWINDOW;
    release(&hint.lock);
  }
  return b;
}

// Allocates a zeroed disk block for ip: the block after the one ip got
// last if that is free, so a file written sequentially lies contiguously
// on disk (readi reads such runs with large requests), else the start of
// a new run. Returns 0 if the disk is full. Caller holds ip->lock and is
// inside a transaction.
static uint
balloc(struct inode *ip)
{
  uint b = 0;
  struct buf *bp;

  if (ip->lastalloc >= datastart && ip->lastalloc + 1 < sb.size)
    b = balloc_at(ip->dev, ip->lastalloc + 1);
  if (b == 0 && (b = balloc_window(ip->dev)) == 0)
    return 0;
  ip->lastalloc = b;
  bp = bread_zero(ip->dev, b);
  log_write(bp);
  brelse(bp);
  return b;
}

// Blocks that itrunc found it must not free (a damaged image), reported
// in one line when it is done.
struct unfreed {
  int n;           // how many
  uint first;      // the first one
  const char *why; // what was wrong with it
};

// Notes in u that block b could not be freed, and why (the first one's kept).
static void
note_unfreed(struct unfreed *u, uint b, const char *why)
{
  if (u->n++ == 0) {
    u->first = b;
    u->why = why;
  }
}

// Frees disk block b. A block that is out of range or already free means
// a damaged image: it is noted in *u and the bitmap is left alone.
// Caller is inside a transaction.
static void
bfree(int dev, uint b, struct unfreed *u)
{
  struct buf *bp;
  int bi = b % BPB;

  if (b == 0 || !bno_ok(b)) {
    note_unfreed(u, b, "is outside the data area");
    return;
  }
  bp = bread(dev, BBLOCK(b, sb));
  if ((bp->data[bi / 8] & (1 << (bi % 8))) == 0) {
    note_unfreed(u, b, "is already free in the bitmap");
    brelse(bp);
    return;
  }
  bp->data[bi / 8] &= ~(1 << (bi % 8));
  log_write(bp);
  brelse(bp);
}

// ---------------------------------------------------------------- inodes
//
// The inode table holds the inodes in use, so that processes sharing one
// share its lock and its cached fields. An entry is in use while ref > 0
// (open files, current directories, transient pointers in the kernel);
// iget finds or claims an entry, iput drops a reference. ilock reads the
// inode from disk on first use; valid says whether it has been read.
// itable.lock guards ref, dev and inum; ip->lock guards everything else.
// Changes go to disk through iupdate, inside a transaction.

struct {
  struct spinlock lock;
  struct inode inode[NINODE];
} itable;

void
iinit(void)
{
  int i;

  initlock(&itable.lock, "itable");
  for (i = 0; i < NINODE; i++)
    initsleeplock(&itable.inode[i].lock, "inode");
}

// Returns the in-memory inode for (dev, inum), unlocked, without reading
// the disk. Returns 0 if the table is full.
static struct inode *
iget(uint dev, uint inum)
{
  struct inode *ip, *empty = 0;

  acquire(&itable.lock);
  for (ip = itable.inode; ip < &itable.inode[NINODE]; ip++) {
    if (ip->ref > 0 && ip->dev == dev && ip->inum == inum) {
      ip->ref++;
      release(&itable.lock);
      return ip;
    }
    if (empty == 0 && ip->ref == 0)
      empty = ip;
  }
  if (empty) {
    empty->dev = dev;
    empty->inum = inum;
    empty->ref = 1;
    empty->valid = 0;
    empty->lastalloc = 0;
  }
  release(&itable.lock);
  return empty;
}

// Allocates an inode of the given type and returns it, locked, in *ipp,
// with no links yet (the caller sets nlink and calls iupdate). Returns 0,
// -ENOSPC if every inode is in use, or -ENFILE if the inode table is full.
// Caller is inside a transaction.
//
// The table entry may still be held by an iput that is freeing the same
// inode: its type is 0 on disk from iput's iupdate on, but iput clears
// valid only after that. The sleep lock, which iput holds throughout, is
// taken before the cached copy is filled in, so iput's clearing comes
// first. (Filled in without the lock, the copy could be cleared after:
// create's ilock would then read the new on-disk inode, refuse it for its
// link count of 0, and create would link the inode into the directory
// anyway, a name that every later lookup refuses with -EIO.)
int
ialloc(uint dev, short type, struct inode **ipp)
{
  uint inum;
  struct buf *bp;
  struct dinode *dip;

  for (inum = 1; inum < sb.ninodes; inum++) {
    bp = bread(dev, IBLOCK(inum, sb));
    dip = (struct dinode *)bp->data + inum % IPB;
    if (dip->type == 0) {
      // Claim a table entry first, so that a full table leaves the disk
      // unchanged. Holding bp keeps others from allocating inum meanwhile.
      if ((*ipp = iget(dev, inum)) == 0) {
        brelse(bp);
        return -ENFILE;
      }
      memset(dip, 0, sizeof(*dip));
      dip->type = type;
      log_write(bp);
      brelse(bp); // before the sleep lock: iput's iupdate may need bp
      // Filled in here, as ilock would refuse an inode without links.
      acquiresleep(&(*ipp)->lock);
      (*ipp)->type = type;
      (*ipp)->major = (*ipp)->minor = (*ipp)->nlink = 0;
      (*ipp)->size = 0;
      memset((*ipp)->addrs, 0, sizeof((*ipp)->addrs));
      (*ipp)->valid = 1;
      return 0;
    }
    brelse(bp);
  }
  return -ENOSPC;
}

// Copies ip's fields to disk; does nothing for an inode that was not
// read (a damaged one). Caller holds ip->lock and is inside a transaction.
void
iupdate(struct inode *ip)
{
  struct buf *bp;
  struct dinode *dip;

  if (!ip->valid)
    return;
  bp = bread(ip->dev, IBLOCK(ip->inum, sb));
  dip = (struct dinode *)bp->data + ip->inum % IPB;
  dip->type = ip->type;
  dip->major = ip->major;
  dip->minor = ip->minor;
  dip->nlink = ip->nlink;
  dip->size = ip->size;
  memmove(dip->addrs, ip->addrs, sizeof(ip->addrs));
  log_write(bp);
  brelse(bp);
}

// Returns ip with one more reference.
struct inode *
idup(struct inode *ip)
{
  acquire(&itable.lock);
  ip->ref++;
  release(&itable.lock);
  return ip;
}

// Checks an inode read from disk. Returns 0 if it is usable, else what
// is wrong with it. The inode must be in use (a directory names it, so a
// free one is damage), linked, sized within what its type allows, and
// point only at data blocks.
static const char *
inode_bad(struct dinode *dip)
{
  int i;

  if (dip->type == 0)
    return "free, yet a directory names it";
  if (dip->type != T_DIR && dip->type != T_FILE && dip->type != T_DEVICE)
    return "bad type";
  if (dip->nlink < 1)
    return "link count below 1, yet a directory names it";
  if (dip->size > (uint64)MAXFILE * BSIZE)
    return "size beyond the largest file";
  if (dip->type == T_DIR && dip->size % sizeof(struct dirent) != 0)
    return "directory size not a multiple of the entry size";
  if (dip->type == T_DEVICE && (dip->major < 0 || dip->major >= NDEV))
    return "bad device number";
  for (i = 0; i < NDIRECT + 2; i++)
    if (!bno_ok(dip->addrs[i]))
      return "block number outside the data area";
  return 0;
}

// Locks ip, reading it from disk if needed. Returns 0, or -EIO if the
// inode on disk is damaged (one line on the console says how): ip is then
// locked but not valid, with no type, no size and no blocks, so callers
// that ignore the result find nothing to use, and nothing is written back.
int
ilock(struct inode *ip)
{
  struct buf *bp;
  struct dinode *dip;
  const char *why;

  if (ip == 0 || ip->ref < 1)
    panic("ilock: bad inode");
  acquiresleep(&ip->lock);
  if (ip->valid)
    return 0;
  bp = bread(ip->dev, IBLOCK(ip->inum, sb));
  dip = (struct dinode *)bp->data + ip->inum % IPB;
  if ((why = inode_bad(dip)) != 0) {
    brelse(bp);
    printf("fs: inode %d: %s\n", ip->inum, why);
    ip->type = ip->major = ip->minor = ip->nlink = 0;
    ip->size = 0;
    memset(ip->addrs, 0, sizeof(ip->addrs));
    return -EIO;
  }
  ip->type = dip->type;
  ip->major = dip->major;
  ip->minor = dip->minor;
  ip->nlink = dip->nlink;
  ip->size = dip->size;
  memmove(ip->addrs, dip->addrs, sizeof(ip->addrs));
  brelse(bp);
  ip->valid = 1;
  return 0;
}

void
iunlock(struct inode *ip)
{
  if (ip == 0 || !holdingsleep(&ip->lock) || ip->ref < 1)
    panic("iunlock: not locked");
  releasesleep(&ip->lock);
}

// Drops a reference. The last reference to an inode without links frees
// it and its blocks on disk. Caller is inside a transaction, because of
// that last case.
void
iput(struct inode *ip)
{
  acquire(&itable.lock);
  if (ip->ref == 1 && ip->valid && ip->nlink == 0) {
    // No other process holds ip (ref is 1) and no directory names it, so
    // acquiresleep cannot block. Only ialloc can find ip meanwhile, once
    // the type on disk is 0, and it waits for the sleep lock.
    acquiresleep(&ip->lock);
    release(&itable.lock);
    itrunc(ip);
    ip->type = 0;
    iupdate(ip);
    ip->valid = 0;
    releasesleep(&ip->lock);
    acquire(&itable.lock);
  }
  ip->ref--;
  release(&itable.lock);
}

void
iunlockput(struct inode *ip)
{
  iunlock(ip);
  iput(ip);
}

// ---------------------------------------------------------------- block maps

// Checks block number addr, read from entry idx of indirect block blk of
// ip: the one place a number taken from an indirect block is checked (the
// inode's own are checked by ilock). Returns 0, or -EIO (logged).
static int
ptr_ok(struct inode *ip, uint blk, uint idx, uint addr)
{
  if (bno_ok(addr))
    return 0;
  printf("fs: inode %d: indirect block %u entry %d: block %u outside the data area\n", ip->inum,
      blk, idx, addr);
  return -EIO;
}

// Stores in *addr ip->addrs[i], allocating a block for it first if it is
// 0 and alloc is set (ip is written back by the caller's iupdate).
// Returns 0, or -ENOSPC if the disk is full.
static int
inode_slot(struct inode *ip, int i, int alloc, uint *addr)
{
  if (ip->addrs[i] == 0 && alloc && (ip->addrs[i] = balloc(ip)) == 0)
    return -ENOSPC;
  *addr = ip->addrs[i];
  return 0;
}

// Stores in *addr entry idx of indirect block blk, allocating a block for
// it if it is 0 and alloc is set. Returns 0, -EIO for a damaged entry, or
// -ENOSPC if the disk is full.
static int
indirect_slot(struct inode *ip, uint blk, uint idx, int alloc, uint *addr)
{
  struct buf *bp;
  uint *a;
  int r = 0;

  bp = bread(ip->dev, blk);
  a = (uint *)bp->data;
  *addr = a[idx];
  if ((r = ptr_ok(ip, blk, idx, *addr)) == 0 && *addr == 0 && alloc) {
    if ((*addr = balloc(ip)) != 0) {
      a[idx] = *addr;
      log_write(bp);
    } else {
      r = -ENOSPC;
    }
  }
  brelse(bp);
  return r;
}

// Stores in *addr the disk block holding block bn of the file, allocating
// it (and the indirect blocks on the way) if alloc is set; 0 means a hole
// (without alloc). Returns 0, -EIO (damaged block map), -ENOSPC (disk
// full) or -EFBIG. Caller holds ip->lock; with alloc, it is inside a
// transaction.
static int
bmap(struct inode *ip, uint64 bn, int alloc, uint *addr)
{
  uint blk;
  int r;

  *addr = 0;
  if (bn < NDIRECT)
    return inode_slot(ip, bn, alloc, addr);
  bn -= NDIRECT;
  if (bn < NINDIRECT) {
    if ((r = inode_slot(ip, NDIRECT, alloc, &blk)) < 0 || blk == 0)
      return r;
    return indirect_slot(ip, blk, bn, alloc, addr);
  }
  bn -= NINDIRECT;
  if (bn >= NDINDIRECT)
    return -EFBIG;
  if ((r = inode_slot(ip, NDIRECT + 1, alloc, &blk)) < 0 || blk == 0)
    return r;
  if ((r = indirect_slot(ip, blk, bn / NINDIRECT, alloc, &blk)) < 0 || blk == 0)
    return r;
  return indirect_slot(ip, blk, bn % NINDIRECT, alloc, addr);
}

// Returns the disk block of file block bn and, in *run, how many of the
// file's blocks from bn on (at most max) follow it contiguously on disk.
// Looks only within the pointer array that holds bn (the inode's direct
// blocks or one indirect block), so one call reads at most one block.
// Returns 0 for a hole or a damaged pointer (readi's slow path, through
// bmap, reports it). Caller holds ip->lock.
static uint
bmap_run(struct inode *ip, uint64 bn, uint max, uint *run)
{
  struct buf *bp = 0;
  uint *a, idx, len, addr, n, blk;

  if (bn < NDIRECT) {
    a = ip->addrs;
    idx = bn;
    len = NDIRECT;
  } else {
    bn -= NDIRECT;
    if (bn < NINDIRECT) {
      blk = ip->addrs[NDIRECT];
    } else if (bn - NINDIRECT < NDINDIRECT && ip->addrs[NDIRECT + 1]) {
      bn -= NINDIRECT;
      if (indirect_slot(ip, ip->addrs[NDIRECT + 1], bn / NINDIRECT, 0, &blk) < 0)
        return 0;
    } else {
      return 0;
    }
    if (blk == 0)
      return 0;
    bp = bread(ip->dev, blk);
    a = (uint *)bp->data;
    idx = bn % NINDIRECT;
    len = NINDIRECT;
  }
  addr = bno_ok(a[idx]) ? a[idx] : 0; // the slow path reports it
  for (n = 1; addr && n < max && idx + n < len && a[idx + n] == addr + n && addr + n < sb.size; n++)
    ;
  if (bp)
    brelse(bp);
  *run = n;
  return addr;
}

// Frees indirect block blk and what it points to; depth 1 points to data.
// Pointers outside the data area are noted in *u, not followed.
static void
free_indirect(struct inode *ip, uint blk, int depth, struct unfreed *u)
{
  struct buf *bp;
  uint *a;
  int j;

  bp = bread(ip->dev, blk);
  a = (uint *)bp->data;
  for (j = 0; j < NINDIRECT; j++) {
    if (a[j] == 0)
      continue;
    if (!bno_ok(a[j]))
      note_unfreed(u, a[j], "is outside the data area");
    else if (depth > 1)
      free_indirect(ip, a[j], depth - 1, u);
    else
      bfree(ip->dev, a[j], u);
  }
  brelse(bp);
  bfree(ip->dev, blk, u);
}

// Discards the contents of ip. Blocks a damaged image says are free or
// out of range stay as they are, with one line on the console. Caller
// holds ip->lock and is inside a transaction.
void
itrunc(struct inode *ip)
{
  struct unfreed u = { 0 };
  int i;

  pagecache_forget(ip);
  for (i = 0; i < NDIRECT; i++) {
    if (ip->addrs[i]) {
      bfree(ip->dev, ip->addrs[i], &u);
      ip->addrs[i] = 0;
    }
  }
  for (i = 0; i < 2; i++) {
    if (ip->addrs[NDIRECT + i]) {
      free_indirect(ip, ip->addrs[NDIRECT + i], i + 1, &u);
      ip->addrs[NDIRECT + i] = 0;
    }
  }
  if (u.n)
    printf("fs: inode %d: block %u %s; not freeing it (%d such blocks)\n", ip->inum, u.first, u.why,
        u.n);
  ip->size = 0;
  iupdate(ip);
}

// Copies stat information from ip. Caller holds ip->lock.
void
stati(struct inode *ip, struct stat *st)
{
  st->dev = ip->dev;
  st->ino = ip->inum;
  st->type = ip->type;
  st->nlink = ip->nlink;
  st->size = ip->size;
}

// ---------------------------------------------------------------- reading and writing

// Appends the physical pieces of the user block at va to segs[*n..],
// merging a piece with the previous one when they are adjacent. Returns
// -1 if part of it is not user-writable memory.
static int
user_block_segs(pagetable_t pt, uint64 va, struct blkseg *segs, int *n)
{
  uint64 end, pa, len;
  pte_t *pte;

  for (end = va + BSIZE; va < end; va += len) {
    if (va >= MAXVA || (pte = walk(pt, va, 0)) == 0 ||
        (*pte & (PTE_V | PTE_U | PTE_W)) != (PTE_V | PTE_U | PTE_W))
      return -1;
    pa = PTE2PA(*pte) + va % PGSIZE;
    len = PGSIZE - va % PGSIZE;
    if (len > end - va)
      len = end - va;
    if (*n > 0 && segs[*n - 1].pa + segs[*n - 1].len == pa) {
      segs[*n - 1].len += len;
    } else {
      segs[*n].pa = pa;
      segs[*n].len = len;
      (*n)++;
    }
  }
  return 0;
}

// Fills segs with the physical pieces of user memory [va, va + nblocks *
// BSIZE), block by block. Stops at a block that is not all user-writable
// memory (the slow path will report the fault) or when max segments might
// not hold the next block. Returns the blocks covered; *nseg the segments.
static uint
user_segs(pagetable_t pt, uint64 va, uint nblocks, struct blkseg *segs, int max, int *nseg)
{
  uint done;
  int n = 0, saved_n;
  uint32 saved_len;

  for (done = 0; done < nblocks && n + 2 <= max; done++) {
    saved_n = n;
    saved_len = n > 0 ? segs[n - 1].len : 0;
    if (user_block_segs(pt, va + (uint64)done * BSIZE, segs, &n) < 0) {
      n = saved_n;
      if (n > 0)
        segs[n - 1].len = saved_len;
      break;
    }
  }
  *nseg = n;
  return done;
}

// Reads up to nblocks whole blocks of ip, from block-aligned offset off,
// straight from the disk into user memory at dst, in one request. Returns
// the bytes read, 0 if the first block must take the slow path (a hole, a
// dirty block, an unmapped user page), or -EIO. Caller holds ip->lock,
// which keeps the file's blocks from changing during the read.
static int
readi_direct(struct inode *ip, uint64 dst, uint64 off, uint nblocks)
{
  struct blkseg segs[BIOMAXSEGS];
  int nseg, max;
  uint disk, run;

  if (nblocks > FASTREADMAX)
    nblocks = FASTREADMAX;
  disk = bmap_run(ip, off / BSIZE, nblocks, &run);
  if (disk == 0)
    return 0;
  run = bclean_run(ip->dev, disk, run);
  max = virtio_disk_maxsegs() < BIOMAXSEGS ? virtio_disk_maxsegs() : BIOMAXSEGS;
  run = user_segs(myproc()->pagetable, dst, run, segs, max, &nseg);
  if (run == 0)
    return 0;
  if (virtio_disk_io(disk, segs, nseg, 0) < 0)
    return -EIO;
  return run * BSIZE;
}

// Reads n bytes at offset off of ip into dst (a user virtual address if
// user_dst, else a kernel one). Returns the bytes read (fewer at the end
// of the file), -EFAULT for a bad destination or -EIO. Caller holds
// ip->lock.
int
readi(struct inode *ip, int user_dst, uint64 dst, uint64 off, uint n)
{
  uint tot, m, addr;
  struct buf *bp;
  int r;

  // The whole user buffer is checked first (vm.c user_range_ok), so no
  // address below wraps and no DMA segment list comes out empty.
  if (user_dst && !user_range_ok(dst, n))
    return -EFAULT;
  if (off > ip->size || off + n < off)
    return 0;
  if (off + n > ip->size)
    n = ip->size - off;
  for (tot = 0; tot < n; tot += m, off += m, dst += m) {
    if (user_dst && off % BSIZE == 0 && n - tot >= FASTREADMIN * BSIZE) {
      r = readi_direct(ip, dst, off, (n - tot) / BSIZE);
      if (r < 0)
        return r;
      if ((m = r) > 0)
        continue;
    }
    if ((r = bmap(ip, off / BSIZE, 0, &addr)) < 0)
      return r;
    if (addr == 0) {
      printf("fs: inode %d: hole at byte %ld\n", ip->inum, off);
      return -EIO; // only a damaged image has holes
    }
    bp = bread(ip->dev, addr);
    m = BSIZE - off % BSIZE;
    if (m > n - tot)
      m = n - tot;
    r = either_copyout(user_dst, dst, bp->data + off % BSIZE, m);
    brelse(bp);
    if (r < 0)
      return -EFAULT;
  }
  return tot;
}

// Reads file pages [index, index + n) of ip into the physical pages pa[],
// for the page cache: each run of blocks that lies contiguously on disk
// (and is not dirty in the buffer cache) in one request, the rest through
// readi; bytes past the end of the file are zero. Returns 0 or -EIO.
// Caller holds ip->lock; the pages lie within the file.
int
readi_pages(struct inode *ip, uint64 index, uint64 *pa, int n)
{
  struct blkseg segs[BIOMAXSEGS];
  int max = virtio_disk_maxsegs() < BIOMAXSEGS ? virtio_disk_maxsegs() : BIOMAXSEGS;
  uint run, disk;

  for (int i = 0; i < n; i += run) {
    uint64 off = (index + i) * BSIZE;
    disk = bmap_run(ip, index + i, n - i < max ? n - i : max, &run);
    if (disk != 0)
      run = bclean_run(ip->dev, disk, run);
    if (disk == 0 || run == 0) {
      run = 1;
      memset((void *)pa[i], 0, PGSIZE);
      uint want = ip->size - off < BSIZE ? ip->size - off : BSIZE;
      if (readi(ip, 0, pa[i], off, want) != want)
        return -EIO;
      continue;
    }
    for (uint k = 0; k < run; k++) {
      segs[k].pa = pa[i + k];
      segs[k].len = BSIZE;
    }
    if (virtio_disk_io(disk, segs, run, 0) < 0)
      return -EIO;
  }
  uint64 tail = ip->size % BSIZE;
  if (tail && (ip->size - 1) / BSIZE < index + n)
    memset((char *)pa[(ip->size - 1) / BSIZE - index] + tail, 0, BSIZE - tail);
  return 0;
}

// Writes n bytes from src (user virtual address if user_src) into ip at
// offset off, growing the file if needed. Returns the bytes written, or
// -EINVAL (off beyond the end), -EFBIG, -ENOSPC (nothing written), -EFAULT,
// -EIO (a damaged block map).
// Fewer than n bytes means the disk filled up. Caller holds ip->lock and
// is inside a transaction that can hold the blocks (file.c filewrite).
int
writei(struct inode *ip, int user_src, uint64 src, uint64 off, uint n)
{
  uint tot, m, addr;
  struct buf *bp;
  int err = 0;

  if (off > ip->size || off + n < off)
    return -EINVAL;
  if (off + n > (uint64)MAXFILE * BSIZE)
    return -EFBIG;
  for (tot = 0; tot < n; tot += m, off += m, src += m) {
    if ((err = bmap(ip, off / BSIZE, 1, &addr)) < 0)
      break;
    bp = bread(ip->dev, addr);
    m = BSIZE - off % BSIZE;
    if (m > n - tot)
      m = n - tot;
    if (either_copyin(bp->data + off % BSIZE, user_src, src, m) < 0) {
      brelse(bp);
      err = -EFAULT;
      break;
    }
    log_write(bp);
    pagecache_write(ip, off / BSIZE, bp->data, off + m > ip->size ? off + m : ip->size);
    brelse(bp);
  }
  if (off > ip->size)
    ip->size = off;
  // Even without growth, bmap may have added blocks to ip->addrs.
  iupdate(ip);
  return tot > 0 || err == 0 ? tot : err;
}

// ---------------------------------------------------------------- directories

int
namecmp(const char *s, const char *t)
{
  return strncmp(s, t, DIRSIZ);
}

// Checks the entry that matched name in directory dp: the one place a
// directory entry's inode number is checked. Returns 0, or -EIO (logged)
// if it names no inode of the image, or names dp itself under a name
// other than "." (or ".." in the root): following it would lock dp twice.
static int
dirent_bad(struct inode *dp, char *name, uint inum)
{
  const char *why = 0;
  char shown[DIRSIZ + 1];

  if (inum >= sb.ninodes)
    why = "names an inode beyond the inode count";
  else if (inum == dp->inum && namecmp(name, ".") != 0 &&
      !(namecmp(name, "..") == 0 && dp->inum == ROOTINO))
    why = "names its own directory";
  else if (inum != dp->inum && namecmp(name, ".") == 0)
    why = "'.' names another inode";
  if (why == 0)
    return 0;
  memmove(shown, name, DIRSIZ); // name may fill DIRSIZ without a NUL
  shown[DIRSIZ] = 0;
  printf("fs: inode %d: entry '%s' -> inode %d %s\n", dp->inum, shown, inum, why);
  return -EIO;
}

// Looks for name in directory dp. If found, sets *poff (if poff) to the
// entry's offset and *ipp to its inode, unlocked. Returns 0, -ENOENT,
// -EIO (a damaged directory or entry), or -ENFILE if the inode table is
// full. Caller holds dp->lock.
int
dirlookup(struct inode *dp, char *name, uint *poff, struct inode **ipp)
{
  uint64 off;
  uint addr, inum;
  struct buf *bp;
  struct dirent *de;
  int r;

  if (dp->type != T_DIR)
    return -ENOTDIR;
  for (off = 0; off < dp->size; off += BSIZE) {
    if ((r = bmap(dp, off / BSIZE, 0, &addr)) < 0)
      return r;
    if (addr == 0) {
      printf("fs: inode %d: hole in a directory at byte %ld\n", dp->inum, off);
      return -EIO;
    }
    bp = bread(dp->dev, addr);
    for (de = (struct dirent *)bp->data; de < (struct dirent *)(bp->data + BSIZE); de++) {
      if ((uchar *)de - bp->data + off >= dp->size)
        break;
      if (de->inum == 0 || namecmp(name, de->name) != 0)
        continue;
      if (poff)
        *poff = off + ((uchar *)de - bp->data);
      inum = de->inum;
      brelse(bp);
      if ((r = dirent_bad(dp, name, inum)) < 0)
        return r;
      return (*ipp = iget(dp->dev, inum)) ? 0 : -ENFILE;
    }
    brelse(bp);
  }
  return -ENOENT;
}

// Adds entry (name, inum) to directory dp. Returns 0, -ENOENT (dp was
// removed meanwhile: an unlinked directory takes no new names, which would
// be lost with it), -EEXIST, -ENFILE, -ENOSPC, -EFBIG or -EIO. Caller
// holds dp->lock and is inside a transaction.
int
dirlink(struct inode *dp, char *name, uint inum)
{
  struct dirent de;
  struct inode *ip;
  uint64 off;
  int r;

  if (dp->nlink < 1)
    return -ENOENT;
  if ((r = dirlookup(dp, name, 0, &ip)) == 0) {
    iput(ip);
    return -EEXIST;
  }
  if (r != -ENOENT)
    return r;
  for (off = 0; off < dp->size; off += sizeof(de)) {
    if ((r = readi(dp, 0, (uint64)&de, off, sizeof(de))) != sizeof(de))
      return r < 0 ? r : -EIO;
    if (de.inum == 0)
      break;
  }
  strncpy(de.name, name, DIRSIZ);
  de.inum = inum;
  r = writei(dp, 0, (uint64)&de, off, sizeof(de));
  if (r == sizeof(de))
    return 0;
  return r < 0 ? r : -ENOSPC;
}

// ---------------------------------------------------------------- path names

// Copies the next element of path into name and returns the rest of the
// path, without leading slashes; returns 0 if there is no element.
// Sets *toolong if the element exceeds DIRSIZ bytes.
//   skipelem("a/bb/c", name) = "bb/c", setting name = "a"
//   skipelem("///a//bb", name) = "bb", setting name = "a"
//   skipelem("", name) = skipelem("////", name) = 0
static char *
skipelem(char *path, char *name, int *toolong)
{
  char *s;
  int len;

  while (*path == '/')
    path++;
  if (*path == 0)
    return 0;
  s = path;
  while (*path != '/' && *path != 0)
    path++;
  len = path - s;
  *toolong = len > DIRSIZ;
  if (len >= DIRSIZ) {
    memmove(name, s, DIRSIZ);
  } else {
    memmove(name, s, len);
    name[len] = 0;
  }
  while (*path == '/')
    path++;
  return path;
}

// Looks up path; with parent set, stops one level early, returns the
// parent directory and copies the final element into name (DIRSIZ bytes).
// Stores the inode, unlocked, in *ipp. Returns 0, -ENOENT, -ENOTDIR,
// -ENAMETOOLONG or -ENFILE. Caller is inside a transaction (iput).
static int
namex(char *path, int parent, char *name, struct inode **ipp)
{
  struct inode *ip, *next;
  int toolong, r;

  if (*path == 0)
    return -ENOENT;
  if (*path == '/') {
    if ((ip = iget(ROOTDEV, ROOTINO)) == 0)
      return -ENFILE;
  } else {
    ip = cwd_dup();
  }
  while ((path = skipelem(path, name, &toolong)) != 0) {
    if (toolong) {
      iput(ip);
      return -ENAMETOOLONG;
    }
    if ((r = ilock(ip)) < 0 || ip->type != T_DIR) {
      iunlockput(ip);
      return r < 0 ? r : -ENOTDIR;
    }
    if (parent && *path == 0) {
      iunlock(ip); // stop one level early
      *ipp = ip;
      return 0;
    }
    r = dirlookup(ip, name, 0, &next);
    iunlockput(ip);
    if (r < 0)
      return r;
    ip = next;
  }
  if (parent) {
    iput(ip); // "/" has no parent to return
    return -ENOENT;
  }
  *ipp = ip;
  return 0;
}

int
namei_err(char *path, struct inode **ipp)
{
  char name[DIRSIZ];

  return namex(path, 0, name, ipp);
}

int
nameiparent_err(char *path, char *name, struct inode **ipp)
{
  return namex(path, 1, name, ipp);
}

// Returns the inode for path, unlocked, or 0 if there is none (for exec).
struct inode *
namei(char *path)
{
  struct inode *ip;

  return namei_err(path, &ip) == 0 ? ip : 0;
}
