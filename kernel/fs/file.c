// Open files: the file table, and reads and writes dispatched by type.
//
// A struct file is an open instance of an inode, a device or one end of a
// pipe; descriptors in several processes (after fork or dup) may share
// one, and with it the offset. The table has NFILE entries; when they are
// all in use, open() and pipe() fail with -ENFILE.

#include "types.h"
#include "riscv.h"
#include "defs.h"
#include "param.h"
#include "fsparam.h"
#include "errno.h"
#include "fs.h"
#include "spinlock.h"
#include "sleeplock.h"
#include "file.h"
#include "stat.h"
#include "proc.h"

// The most bytes one transaction writes. The log gives a call MAXOPBLOCKS
// blocks: the inode, up to four indirect blocks (single, double, and two
// second-level ones when the write crosses from one to the next), each
// with its bitmap block, and per data block the block and possibly its
// bitmap block; an unaligned write touches one data block more.
#define WRITEMAX (((MAXOPBLOCKS - 1 - 4 * 2 - 2) / 2) * BSIZE)

struct devsw devsw[NDEV];

struct {
  struct spinlock lock;
  struct file file[NFILE];
} ftable;

void
fileinit(void)
{
  initlock(&ftable.lock, "ftable");
}

// Allocates a file structure with one reference; 0 if the table is full.
struct file *
filealloc(void)
{
  struct file *f;

  acquire(&ftable.lock);
  for (f = ftable.file; f < ftable.file + NFILE; f++) {
    if (f->ref == 0) {
      f->ref = 1;
      release(&ftable.lock);
      return f;
    }
  }
  release(&ftable.lock);
  return 0;
}

// Open-file table slots in use, for sysinfo().
int
file_count(void)
{
  int n = 0;

  acquire(&ftable.lock);
  for (struct file *f = ftable.file; f < ftable.file + NFILE; f++)
    n += f->ref > 0;
  release(&ftable.lock);
  return n;
}

// Returns f with one more reference.
struct file *
filedup(struct file *f)
{
  acquire(&ftable.lock);
  if (f->ref < 1)
    panic("filedup: unused file");
  f->ref++;
  release(&ftable.lock);
  return f;
}

// Drops a reference; the last one closes the pipe end, device or inode.
void
fileclose(struct file *f)
{
  struct file ff;

  acquire(&ftable.lock);
  if (f->ref < 1)
    panic("fileclose: unused file");
  if (--f->ref > 0) {
    release(&ftable.lock);
    return;
  }
  ff = *f;
  f->ref = 0;
  f->type = FD_NONE;
  release(&ftable.lock);

  if (ff.type == FD_DEVICE && ff.major >= 0 && ff.major < NDEV && devsw[ff.major].close)
    devsw[ff.major].close();
  if (ff.type == FD_PIPE) {
    pipeclose(ff.pipe, ff.writable);
  } else if (ff.type == FD_INODE || ff.type == FD_DEVICE) {
    begin_op();
    iput(ff.ip);
    end_op();
  }
}

// Copies f's metadata to user address addr. Returns 0, -EFAULT, or
// -EINVAL for a pipe, which has none.
int
filestat(struct file *f, uint64 addr)
{
  struct stat st;

  if (f->type != FD_INODE && f->type != FD_DEVICE)
    return -EINVAL;
  ilock(f->ip); // open checked it: a valid inode stays valid
  stati(f->ip, &st);
  iunlock(f->ip);
  if (copyout(myproc()->pagetable, addr, &st, sizeof(st)) < 0)
    return -EFAULT;
  return 0;
}

// Reads up to n bytes into user address addr. Returns the count read or
// a negative errno.
int
fileread(struct file *f, uint64 addr, int n)
{
  int r;

  if (!f->readable)
    return -EBADF;
  switch (f->type) {
  case FD_PIPE: return piperead(f->pipe, addr, n);
  case FD_DEVICE:
    if (f->major < 0 || f->major >= NDEV || !devsw[f->major].read)
      return -EINVAL;
    return devsw[f->major].read(1, addr, n);
  case FD_INODE:
    ilock(f->ip);
    if ((r = readi(f->ip, 1, addr, f->off, n)) > 0)
      f->off += r;
    iunlock(f->ip);
    return r;
  default: panic("fileread: bad file type");
  }
}

// Writes n bytes from user address addr to an inode, in transactions of
// at most WRITEMAX bytes. Returns the count written or a negative errno.
static int
inode_write(struct file *f, uint64 addr, int n)
{
  int i, n1, r = 0;

  for (i = 0; i < n; i += r) {
    n1 = n - i;
    if (n1 > WRITEMAX)
      n1 = WRITEMAX;
    begin_op();
    ilock(f->ip);
    if ((r = writei(f->ip, 1, addr + i, f->off, n1)) > 0)
      f->off += r;
    iunlock(f->ip);
    end_op();
    if (r != n1)
      break; // an error, or the disk is full
  }
  if (i < n && r > 0)
    i += r;
  return i > 0 ? i : r;
}

// Writes n bytes from user address addr. Returns the count written or a
// negative errno.
int
filewrite(struct file *f, uint64 addr, int n)
{
  if (!f->writable)
    return -EBADF;
  switch (f->type) {
  case FD_PIPE: return pipewrite(f->pipe, addr, n);
  case FD_DEVICE:
    if (f->major < 0 || f->major >= NDEV || !devsw[f->major].write)
      return -EINVAL;
    return devsw[f->major].write(1, addr, n);
  case FD_INODE: return inode_write(f, addr, n);
  default: panic("filewrite: bad file type");
  }
}
