// Sleep locks: held for long operations (disk I/O on an inode or buffer).
// A process waiting for one sleeps instead of spinning, so interrupts
// stay on and the hart runs something else meanwhile.
#include "kernel/include/types.h"
#include "kernel/include/param.h"
#include "kernel/include/riscv.h"
#include "kernel/include/spinlock.h"
#include "kernel/include/sleeplock.h"
#include "kernel/include/proc.h"
#include "kernel/include/defs.h"

void
initsleeplock(struct sleeplock *lk, char *name)
{
  initlock(&lk->lk, "sleep lock");
  lk->name = name;
  lk->locked = 0;
  lk->pid = 0;
}

// Must be called from a process, holding no spin lock.
void
acquiresleep(struct sleeplock *lk)
{
  acquire(&lk->lk);
  while (lk->locked)
    sleep(lk, &lk->lk);
  lk->locked = 1;
  lk->pid = myproc()->pid;
  release(&lk->lk);
}

void
releasesleep(struct sleeplock *lk)
{
  acquire(&lk->lk);
  lk->locked = 0;
  lk->pid = 0;
  wakeup(lk);
  release(&lk->lk);
}

// Is the current process holding lk?
int
holdingsleep(struct sleeplock *lk)
{
  acquire(&lk->lk);
  int r = lk->locked && (lk->pid == myproc()->pid);
  release(&lk->lk);
  return r;
}
