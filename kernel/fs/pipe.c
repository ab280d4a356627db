// Pipes: a bounded byte buffer between a writing and a reading file.
//
// The buffer is a ring of PIPESIZE bytes; nread and nwrite count the
// bytes ever read and written, so the ring is full when they differ by
// PIPESIZE and empty when they are equal (PIPESIZE divides 2^32, so the
// counters may wrap). Readers sleep on &nread's pipe while it is empty,
// writers on &nwrite while it is full; each wakes the other side.

#include "types.h"
#include "riscv.h"
#include "defs.h"
#include "param.h"
#include "errno.h"
#include "spinlock.h"
#include "proc.h"
#include "fs.h"
#include "sleeplock.h"
#include "file.h"

#define PIPESIZE 2048

struct pipe {
  struct spinlock lock;
  // guarded by lock:
  char data[PIPESIZE];
  uint nread;    // bytes read
  uint nwrite;   // bytes written
  int readopen;  // the read end is still open
  int writeopen; // the write end is still open
};

_Static_assert(sizeof(struct pipe) <= PGSIZE, "pipe.c: a pipe must fit a page");

// Creates a pipe and two files for its ends. Returns 0, -ENFILE if the
// file table is full or -ENOMEM.
int
pipealloc(struct file **f0, struct file **f1)
{
  struct pipe *pi = 0;
  int err = -ENFILE;

  *f0 = *f1 = 0;
  if ((*f0 = filealloc()) == 0 || (*f1 = filealloc()) == 0)
    goto bad;
  err = -ENOMEM;
  if ((pi = (struct pipe *)kalloc()) == 0)
    goto bad;
  initlock(&pi->lock, "pipe");
  pi->nread = pi->nwrite = 0;
  pi->readopen = pi->writeopen = 1;
  (*f0)->type = (*f1)->type = FD_PIPE;
  (*f0)->readable = 1;
  (*f0)->writable = 0;
  (*f1)->readable = 0;
  (*f1)->writable = 1;
  (*f0)->pipe = (*f1)->pipe = pi;
  return 0;

bad:
  if (*f0)
    fileclose(*f0);
  if (*f1)
    fileclose(*f1);
  return err;
}

// Closes one end; the pipe is freed when both are closed.
void
pipeclose(struct pipe *pi, int writable)
{
  acquire(&pi->lock);
  if (writable) {
    pi->writeopen = 0;
    wakeup(&pi->nread);
  } else {
    pi->readopen = 0;
    wakeup(&pi->nwrite);
  }
  if (pi->readopen == 0 && pi->writeopen == 0) {
    release(&pi->lock);
    kfree((char *)pi);
  } else {
    release(&pi->lock);
  }
}

// Writes n bytes from user address addr, sleeping while the pipe is full.
// Returns n, or what was written before the reader went away (-EPIPE if
// nothing), -EINTR if killed, -EFAULT for a bad address.
int
pipewrite(struct pipe *pi, uint64 addr, int n)
{
  struct proc *pr = myproc();
  int i = 0, m, err = 0;

  acquire(&pi->lock);
  while (i < n) {
    if (!pi->readopen || killed(pr)) {
      err = killed(pr) ? -EINTR : -EPIPE;
      break;
    }
    if (pi->nwrite == pi->nread + PIPESIZE) {
      wakeup(&pi->nread);
      sleep(&pi->nwrite, &pi->lock);
      continue;
    }
    // Copy as much as fits before the ring's end in one go.
    m = PIPESIZE - (pi->nwrite - pi->nread);
    if (m > PIPESIZE - pi->nwrite % PIPESIZE)
      m = PIPESIZE - pi->nwrite % PIPESIZE;
    if (m > n - i)
      m = n - i;
    if (copyin(pr->pagetable, &pi->data[pi->nwrite % PIPESIZE], addr + i, m) < 0) {
      err = -EFAULT;
      break;
    }
    pi->nwrite += m;
    i += m;
  }
  wakeup(&pi->nread);
  release(&pi->lock);
  return i > 0 ? i : err;
}

// Reads up to n bytes into user address addr, sleeping while the pipe is
// empty and a writer exists. Returns the count (0 at end of file), -EINTR
// if killed, -EFAULT for a bad address.
int
piperead(struct pipe *pi, uint64 addr, int n)
{
  struct proc *pr = myproc();
  int i = 0, m;

  acquire(&pi->lock);
  while (pi->nread == pi->nwrite && pi->writeopen) {
    if (killed(pr)) {
      release(&pi->lock);
      return -EINTR;
    }
    sleep(&pi->nread, &pi->lock);
  }
  while (i < n && pi->nread != pi->nwrite) {
    m = pi->nwrite - pi->nread;
    if (m > PIPESIZE - pi->nread % PIPESIZE)
      m = PIPESIZE - pi->nread % PIPESIZE;
    if (m > n - i)
      m = n - i;
    if (copyout(pr->pagetable, addr + i, &pi->data[pi->nread % PIPESIZE], m) < 0) {
      if (i == 0)
        i = -EFAULT;
      break;
    }
    pi->nread += m;
    i += m;
  }
  wakeup(&pi->nwrite);
  release(&pi->lock);
  return i;
}
