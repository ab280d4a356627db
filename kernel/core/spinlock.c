// Spin locks for short critical sections, usable from interrupt handlers.
//
// acquire() turns interrupts off on this hart (push_off) for as long as
// any spin lock is held, so an interrupt handler cannot try to take a lock
// its own hart already holds. push_off/pop_off nest and remember whether
// interrupts were on before the outermost push_off.
#include "kernel/include/types.h"
#include "kernel/include/param.h"
#include "kernel/include/riscv.h"
#include "kernel/include/spinlock.h"
#include "kernel/include/proc.h"
#include "kernel/include/defs.h"

void
initlock(struct spinlock *lk, char *name)
{
  lk->name = name;
  lk->locked = 0;
  lk->cpu = 0;
}

// Spins until the lock is free, then takes it. Interrupts stay off until
// the matching release().
void
acquire(struct spinlock *lk)
{
  push_off();
  if (holding(lk))
    panic(lk->name);
  while (__sync_lock_test_and_set(&lk->locked, 1) != 0)
    ;
  // No load or store of the critical section may move above this point.
  __sync_synchronize();
  lk->cpu = mycpu();
}

void
release(struct spinlock *lk)
{
  if (!holding(lk))
    panic("release: not held");
  lk->cpu = 0;
  __sync_synchronize();
  __sync_lock_release(&lk->locked);
  pop_off();
}

// Is this hart holding the lock? Interrupts must be off.
int
holding(struct spinlock *lk)
{
  return lk->locked && lk->cpu == mycpu();
}

void
push_off(void)
{
  int old = intr_get();
  intr_off();
  if (mycpu()->noff == 0)
    mycpu()->intena = old;
  mycpu()->noff += 1;
}

void
pop_off(void)
{
  struct cpu *c = mycpu();
  if (intr_get())
    panic("pop_off: interruptible");
  if (c->noff < 1)
    panic("pop_off: unbalanced");
  c->noff -= 1;
  if (c->noff == 0 && c->intena)
    intr_on();
}
