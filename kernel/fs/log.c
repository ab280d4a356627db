// Write-ahead log: crash-safe file-system updates.
//
// A system call brackets its writes with begin_op() and end_op(); the
// blocks it changes go to the log first and only then to their homes, so
// after a crash either all of a call's writes are on disk or none are.
// Inside the bracket, code calls log_write(b) instead of bwrite(b):
// log_write records b's block number in the in-memory header and pins
// the buffer in the cache (it is "dirty") until it is installed.
//
// Group commit: several calls may be inside a transaction at once. The
// log commits when the last of them calls end_op(); a call that might not
// fit in what is left of the log waits in begin_op() for the commit.
// Each call may write at most MAXOPBLOCKS distinct blocks, so a large
// write() is split into several transactions (file.c filewrite).
//
// Commit order: copy the dirty blocks into the log area, write the header
// (the commit point), install the blocks at home, clear the header.
// Blocks 4 KiB big make every disk request worth more, and requests are
// what costs (about 25 us each): the log area is contiguous, so all of a
// transaction goes to it in a few multi-block requests, and installing
// merges blocks with consecutive home numbers (a large file's data) into
// one request per run.
//
// On-disk format:
//   header block: n and the home block number of each logged block
//   block logstart+1+i: the contents of block[i]

#include "types.h"
#include "param.h"
#include "fsparam.h"
#include "spinlock.h"
#include "sleeplock.h"
#include "riscv.h"
#include "defs.h"
#include "fs.h"
#include "buf.h"

struct logheader {
  int n;
  uint32 block[LOGBLOCKS];
};

struct log {
  struct spinlock lock;
  uint start; // the header's block number
  int dev;
  // guarded by lock:
  int outstanding; // system calls inside begin_op/end_op
  int committing;  // commit() is running; wait
  struct logheader lh;
};
struct log log;

_Static_assert(sizeof(struct logheader) <= BSIZE, "log header exceeds a block");

static void recover_from_log(void);
static void commit(void);

// Reads the log's position from the superblock and replays a committed
// transaction left by a crash. Called by fsinit, before any transaction.
void
initlog(int dev, struct superblock *sb)
{
  if (sb->nlog < LOGBLOCKS + 1)
    panic("initlog: the image's log is too small; rebuild the image");
  initlock(&log.lock, "log");
  log.start = sb->logstart;
  log.dev = dev;
  recover_from_log();
}

// Most blocks per disk request: the driver's limit, at most BIOMAXSEGS.
static int
maxsegs(void)
{
  int n = virtio_disk_maxsegs();
  return n < BIOMAXSEGS ? n : BIOMAXSEGS;
}

// Writes the dirty blocks lh.block[i..i+n) to disk blocks to, to+1, ...
// in one request. The buffers are pinned, so they are cached; nobody
// changes them during a commit, but a reader may hold one, so lock each.
static void
write_run(int i, int n, uint to)
{
  struct buf *bufs[BIOMAXSEGS];
  struct blkseg segs[BIOMAXSEGS];
  int j;

  for (j = 0; j < n; j++) {
    bufs[j] = bread(log.dev, log.lh.block[i + j]);
    segs[j].pa = (uint64)bufs[j]->data;
    segs[j].len = BSIZE;
  }
  if (virtio_disk_io(to, segs, n, 1) < 0)
    panic("log: disk write failed");
  for (j = 0; j < n; j++)
    brelse(bufs[j]);
}

// Copies the transaction's blocks into the log area.
static void
write_log(void)
{
  int i, n;

  for (i = 0; i < log.lh.n; i += n) {
    n = log.lh.n - i;
    if (n > maxsegs())
      n = maxsegs();
    write_run(i, n, log.start + 1 + i);
  }
}

// Copies committed blocks from the cache to their homes, merging runs of
// consecutive home block numbers into one request each, and unpins them.
static void
install_trans(void)
{
  int i, n;

  for (i = 0; i < log.lh.n; i += n) {
    for (n = 1; i + n < log.lh.n && n < maxsegs(); n++)
      if (log.lh.block[i + n] != log.lh.block[i] + n)
        break;
    write_run(i, n, log.lh.block[i]);
  }
  for (i = 0; i < log.lh.n; i++) {
    struct buf *b = bread(log.dev, log.lh.block[i]);
    bunpin(b);
    brelse(b);
  }
}

static void
read_head(void)
{
  struct buf *b = bread(log.dev, log.start);
  struct logheader *lh = (struct logheader *)b->data;

  log.lh.n = lh->n;
  if (log.lh.n < 0 || log.lh.n > LOGBLOCKS)
    panic("read_head: corrupt log header; rebuild the image");
  memmove(log.lh.block, lh->block, log.lh.n * sizeof(uint32));
  brelse(b);
}

// Writes the in-memory header to disk. Writing it with n > 0 is the
// point at which the current transaction commits.
static void
write_head(void)
{
  struct buf *b = bread(log.dev, log.start);
  struct logheader *hb = (struct logheader *)b->data;

  hb->n = log.lh.n;
  memmove(hb->block, log.lh.block, log.lh.n * sizeof(uint32));
  bwrite(b);
  brelse(b);
}

// Replays a committed transaction: copies each log block home.
static void
recover_from_log(void)
{
  struct blkseg seg;
  struct buf *b;
  int i;

  read_head();
  for (i = 0; i < log.lh.n; i++) {
    b = bread(log.dev, log.lh.block[i]);
    seg.pa = (uint64)b->data;
    seg.len = BSIZE;
    if (virtio_disk_io(log.start + 1 + i, &seg, 1, 0) < 0)
      panic("recover_from_log: disk read failed");
    bwrite(b);
    brelse(b);
  }
  log.lh.n = 0;
  write_head();
}

// Called at the start of each file-system system call. Waits while a
// commit runs or the log might not hold this call's blocks.
void
begin_op(void)
{
  acquire(&log.lock);
  for (;;) {
    if (log.committing) {
      sleep(&log, &log.lock);
    } else if (log.lh.n + (log.outstanding + 1) * MAXOPBLOCKS > LOGBLOCKS) {
      sleep(&log, &log.lock); // wait for the commit to free the log
    } else {
      log.outstanding++;
      release(&log.lock);
      return;
    }
  }
}

// Called at the end of each file-system system call; commits if this was
// the last outstanding one.
void
end_op(void)
{
  int do_commit = 0;

  acquire(&log.lock);
  log.outstanding--;
  if (log.committing)
    panic("end_op: commit in progress");
  if (log.outstanding == 0) {
    do_commit = 1;
    log.committing = 1;
  } else {
    // begin_op may be waiting for log space, and our reservation is free.
    wakeup(&log);
  }
  release(&log.lock);

  if (do_commit) {
    // commit() sleeps on disk I/O, so it runs without log.lock.
    commit();
    acquire(&log.lock);
    log.committing = 0;
    wakeup(&log);
    release(&log.lock);
  }
}

static void
commit(void)
{
  if (log.lh.n > 0) {
    write_log();
    write_head(); // the commit point
    install_trans();
    log.lh.n = 0;
    write_head(); // the transaction is done; forget it
  }
}

// Records that b was modified within the current transaction: it will be
// written to the log at commit, and stays pinned in the cache until then.
// Writing a block twice in one transaction logs it once (absorption).
// Caller holds b->lock and is between begin_op and end_op.
void
log_write(struct buf *b)
{
  int i;

  acquire(&log.lock);
  if (log.lh.n >= LOGBLOCKS)
    panic("log_write: transaction too big");
  if (log.outstanding < 1)
    panic("log_write: outside of a transaction");
  for (i = 0; i < log.lh.n; i++)
    if (log.lh.block[i] == b->blockno)
      break;
  log.lh.block[i] = b->blockno;
  if (i == log.lh.n) {
    bpin(b);
    log.lh.n++;
  }
  release(&log.lock);
}
