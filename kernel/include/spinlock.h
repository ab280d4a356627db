// Mutual-exclusion spin lock.
#ifndef AISVC_SPINLOCK_H
#define AISVC_SPINLOCK_H

struct spinlock {
  uint locked;     // is the lock held?
  char *name;      // for panics
  struct cpu *cpu; // the cpu holding the lock
};

#endif
