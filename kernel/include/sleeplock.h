// Long-term lock for processes: sleeps instead of spinning.
#ifndef AISVC_SLEEPLOCK_H
#define AISVC_SLEEPLOCK_H

#include "spinlock.h"

struct sleeplock {
  struct spinlock lk; // protects the fields below
  uint locked;        // is the lock held?
  int pid;            // process holding the lock
  char *name;         // for debugging
};

#endif
