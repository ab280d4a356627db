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
// Durability: when the disk caches writes (VIRTIO_BLK_F_FLUSH), commit
// flushes the disk's cache at each step, so no write reaches stable
// storage ahead of the one it depends on: the log blocks before the
// header that names them, the header before the homes change, the homes
// before the header is cleared, and the cleared header before the next
// transaction overwrites the log area. Measured with tests/progs/fswrite.c
// (one small write() per commit): about 0.58 ms per commit with the
// flushes, 0.34 ms without (kernel built with -DAISVC_NOFLUSH).
//
// On-disk format:
//   header block: n and the home block number of each logged block
//   block logstart+1+i: the contents of block[i]
//
// The header is untrusted, like all of the disk (fs.c). At mount it is
// checked before recovery: n must be within [0, LOGBLOCKS] and fit the
// log region, and every home block number must lie in [inodestart, size)
// (the log holds inode, bitmap and data blocks only). A header that fails
// is not replayed: recovery is skipped with one line on the console, the
// header is left as it was (for `pyaisvc fsimg check`), and the file
// system is mounted read-only (fs_readonly(): calls that would write fail
// with -EROFS), so the shell and the programs still run. The same happens
// when the superblock's log region is unusable (fsinit).

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
  int readonly; // set at mount: no transaction may write
  // guarded by lock:
  int outstanding; // system calls inside begin_op/end_op
  int committing;  // commit() is running; wait
  struct logheader lh;
};
struct log log;

_Static_assert(sizeof(struct logheader) <= BSIZE, "log header exceeds a block");

static void recover_from_log(struct superblock *sb);
static void commit(void);

// Reads the log's position from the superblock and replays a committed
// transaction left by a crash. Called by fsinit, before any transaction;
// readonly (a damaged superblock) skips recovery and mounts read-only.
void
initlog(int dev, struct superblock *sb, int readonly)
{
  initlock(&log.lock, "log");
  log.start = sb->logstart;
  log.dev = dev;
  log.readonly = readonly;
  if (readonly)
    printf("log: not recovering: the superblock's log region is unusable\n");
  else
    recover_from_log(sb);
}

// Is the file system mounted read-only (a damaged superblock or log)?
int
fs_readonly(void)
{
  return log.readonly;
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

// Reads the header into log.lh and checks it against the superblock.
// Returns 0, or why it cannot be right (log.lh.n is then 0).
static const char *
read_head(struct superblock *sb)
{
  struct buf *b = bread(log.dev, log.start);
  struct logheader *lh = (struct logheader *)b->data;
  const char *why = 0;
  int i;

  log.lh.n = lh->n;
  if (log.lh.n < 0 || log.lh.n > LOGBLOCKS || log.lh.n > (int)sb->nlog - 1) {
    why = "block count out of range";
  } else {
    memmove(log.lh.block, lh->block, log.lh.n * sizeof(uint32));
    for (i = 0; i < log.lh.n && why == 0; i++)
      if (log.lh.block[i] < sb->inodestart || log.lh.block[i] >= sb->size)
        why = "a home block number lies outside the inode table, bitmap and data";
  }
  brelse(b);
  if (why)
    log.lh.n = 0;
  return why;
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

// Replays a committed transaction: copies each log block home. A header
// that cannot be right is not replayed: the file system goes read-only.
static void
recover_from_log(struct superblock *sb)
{
  struct blkseg seg;
  struct buf *b;
  const char *why;
  int i;

  if ((why = read_head(sb)) != 0) {
    printf("log: header block %d: %s; not recovering, mounting read-only\n", log.start, why);
    log.readonly = 1;
    return;
  }
  for (i = 0; i < log.lh.n; i++) {
    b = bread(log.dev, log.lh.block[i]);
    seg.pa = (uint64)b->data;
    seg.len = BSIZE;
    if (virtio_disk_io(log.start + 1 + i, &seg, 1, 0) < 0)
      panic("recover_from_log: disk read failed");
    bwrite(b);
    brelse(b);
  }
  if (log.lh.n > 0)
    virtio_disk_flush(); // the homes are written before the header is cleared
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

// Commits the current transaction, if it wrote anything: its blocks to
// the log, the header (the commit point), the blocks home, the header
// cleared; a disk flush between each so the order holds on disk.
static void
commit(void)
{
  if (log.lh.n > 0) {
    write_log();
    virtio_disk_flush(); // the log is on disk before the header names it
    write_head();        // the commit point
    virtio_disk_flush(); // ... and the commit before any home changes
    install_trans();
    virtio_disk_flush(); // the homes are on disk before the header is cleared
    log.lh.n = 0;
    write_head();        // the transaction is done; forget it
    virtio_disk_flush(); // ... for good, before the next one reuses the log
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

  if (log.readonly)
    return; // unreachable: sysfile.c refuses writes; never write a damaged disk
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
