// The vector extension (RVV 1.0) for user processes.
//
// The vector unit is handled like the FP unit (proc.c), with one more
// step: a process gets it only when it uses it. sstatus.VS is Off while a
// process that never used V runs, so its first vector instruction traps
// as an illegal instruction. vector_trap() then gives the process a page
// for v0-v31 (initial state: zero registers, vtype.vill set, vl 0) and
// lets the instruction run again with VS on. An illegal instruction that
// is not a vector one traps a second time and kills the process as
// usual; so does any vector instruction on a machine without V.
//
// While a process with V state runs, the hart's vector registers hold its
// values. sched() calls vector_leave(), which saves them into p->vec when
// VS says they changed (Dirty) and turns VS Off; usertrapret() calls
// vector_enter(), which loads them again. fork copies the state, exec
// drops it (the new program starts without V state), and the page is
// freed with the process.
//
// User code learns whether V is there, and the register length, from the
// vlenb() system call: bytes per vector register, 0 without V.
//
// V is detected from misa on hart 0 (start.c); the register page limits
// vlen to 1024 bits (32 registers of 128 bytes), larger is refused at boot.
#include "kernel/include/types.h"
#include "kernel/include/param.h"
#include "kernel/include/errno.h"
#include "kernel/include/memlayout.h"
#include "kernel/include/riscv.h"
#include "kernel/include/spinlock.h"
#include "kernel/include/proc.h"
#include "kernel/include/defs.h"

// Bytes per vector register, or 0 when user processes get no V.
static uint64 vlenb;

// Hart 0, at boot: finds out whether user processes get V, and says so.
void
vectorinit(void)
{
  if (!misa_vector)
    return;
  csr_set(sstatus, SSTATUS_VS_INIT);
  uint64 n = vector_vlenb();
  csr_clear(sstatus, SSTATUS_VS_MASK);
  if (32 * n > PGSIZE) {
    printf("aisvc: vector registers of %lu bits are not supported (at most 1024); "
           "no V for processes\n",
        n * 8);
    return;
  }
  vlenb = n;
  printf("aisvc: vector extension, %lu-bit registers\n", n * 8);
}

// p took an illegal-instruction trap. If that may have been its first
// vector instruction, gives p vector state and returns 1 (the instruction
// runs again); returns 0 if the trap is a real fault. Interrupts are off.
int
vector_trap(struct proc *p)
{
  if (vlenb == 0 || p->vec.regs != 0)
    return 0;
  char *regs = kzalloc();
  if (regs == 0) {
    printf("pid %d %s: killed: no memory for its vector registers\n", p->pid, p->name);
    setkilled(p);
    return 1;
  }
  memset(&p->vec, 0, sizeof(p->vec));
  p->vec.vtype = 1UL << 63; // vill: no vsetvl yet
  p->vec.regs = regs;
  return 1;
}

// Saves this hart's vector registers into p->vec if they hold p's values
// and p changed them since they were loaded (VS Dirty). Interrupts off.
static void
vector_save_dirty(struct proc *p)
{
  uint64 s = csr_read(sstatus);

  if (p->vec.loaded && (s & SSTATUS_VS_MASK) == SSTATUS_VS_DIRTY) {
    vector_save(&p->vec);
    csr_write(sstatus, (s & ~SSTATUS_VS_MASK) | SSTATUS_VS_CLEAN);
  }
}

// p leaves the hart: keeps its vector values in p->vec and turns the
// vector unit off. Interrupts are off.
void
vector_leave(struct proc *p)
{
  if (vlenb == 0)
    return;
  vector_save_dirty(p);
  p->vec.loaded = 0;
  csr_clear(sstatus, SSTATUS_VS_MASK);
}

// Before returning to user mode: loads p's vector registers unless they
// are still loaded, leaving VS Clean; VS stays Off for a process without
// vector state. Interrupts are off.
void
vector_enter(struct proc *p)
{
  if (vlenb == 0)
    return;
  uint64 s = csr_read(sstatus) & ~SSTATUS_VS_MASK;
  if (p->vec.regs == 0) {
    csr_write(sstatus, s);
  } else if (!p->vec.loaded) {
    csr_write(sstatus, s | SSTATUS_VS_CLEAN);
    vector_restore(&p->vec);
    p->vec.loaded = 1;
    csr_write(sstatus, s | SSTATUS_VS_CLEAN);
  }
}

// fork: gives child a copy of parent's vector state (none if the parent
// has none). Returns 0, or -ENOMEM.
int
vector_fork(struct proc *parent, struct proc *child)
{
  if (parent->vec.regs == 0)
    return 0;
  char *regs = kalloc();
  if (regs == 0)
    return -ENOMEM;
  push_off(); // the parent's latest values may be only in the registers
  vector_save_dirty(parent);
  pop_off();
  child->vec = parent->vec;
  child->vec.regs = regs;
  child->vec.loaded = 0;
  memmove(regs, parent->vec.regs, 32 * vlenb);
  return 0;
}

// Frees p's vector state. p must not be running on any hart, or be the
// caller (exec), which drops whatever the hart's registers hold.
void
vector_free(struct proc *p)
{
  push_off();
  if (p->vec.loaded) {
    p->vec.loaded = 0;
    csr_clear(sstatus, SSTATUS_VS_MASK);
  }
  char *regs = p->vec.regs;
  memset(&p->vec, 0, sizeof(p->vec));
  pop_off();
  if (regs)
    kfree(regs);
}

// vlenb(): bytes per vector register, 0 if processes get no V.
uint64
sys_vlenb(void)
{
  return vlenb;
}
