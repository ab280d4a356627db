// Processes, harts and the state saved when switching between them.
#ifndef AISVC_PROC_H
#define AISVC_PROC_H

#include "param.h"
#include "riscv.h"
#include "spinlock.h"
#include "sleeplock.h"

// Callee-saved registers for swtch() between kernel threads.
struct context {
  uint64 ra;
  uint64 sp;
  uint64 s[12]; // s0..s11
};

// Per-hart state.
struct cpu {
  struct proc *proc;      // the process running on this hart, or 0
  struct context context; // swtch() here to enter the scheduler
  int noff;               // depth of push_off() nesting
  int intena;             // were interrupts enabled before push_off()?
  int idle;               // in the scheduler's wfi, waiting for work
  // vm.c: when the timer empties this hart's TLB
  uint64 tlb_vmid; // the user page table it switched to last
  uint tlb_ticks;  // user-mode timer ticks since the TLB was last emptied
  int tlb_emptied; // times the timer emptied it since the switch
};

extern struct cpu cpus[NCPU];

// User registers saved by trampoline.S on a trap from user mode, in a page
// of its own mapped at TRAPFRAME in the user page table. The first four
// fields are what uservec needs to enter the kernel; the offsets are fixed
// because trampoline.S uses them.
struct trapframe {
  /*   0 */ uint64 kernel_sp;     // top of the process's kernel stack
  /*   8 */ uint64 kernel_trap;   // usertrap()
  /*  16 */ uint64 epc;           // user pc
  /*  24 */ uint64 kernel_hartid; // tp in the kernel
  /*  32 */ uint64 ra;
  /*  40 */ uint64 sp;
  /*  48 */ uint64 gp;
  /*  56 */ uint64 tp;
  /*  64 */ uint64 t0;
  /*  72 */ uint64 t1;
  /*  80 */ uint64 t2;
  /*  88 */ uint64 s0;
  /*  96 */ uint64 s1;
  /* 104 */ uint64 a0;
  /* 112 */ uint64 a1;
  /* 120 */ uint64 a2;
  /* 128 */ uint64 a3;
  /* 136 */ uint64 a4;
  /* 144 */ uint64 a5;
  /* 152 */ uint64 a6;
  /* 160 */ uint64 a7;
  /* 168 */ uint64 s2;
  /* 176 */ uint64 s3;
  /* 184 */ uint64 s4;
  /* 192 */ uint64 s5;
  /* 200 */ uint64 s6;
  /* 208 */ uint64 s7;
  /* 216 */ uint64 s8;
  /* 224 */ uint64 s9;
  /* 232 */ uint64 s10;
  /* 240 */ uint64 s11;
  /* 248 */ uint64 t3;
  /* 256 */ uint64 t4;
  /* 264 */ uint64 t5;
  /* 272 */ uint64 t6;
};

// User floating-point registers, saved by fpu.S.
struct fpstate {
  uint64 f[32];
  uint64 fcsr;
};

// User vector state (kernel/core/vector.c; saved by vector.S, which
// knows the offsets of the first five fields). A process has none until
// its first vector instruction: regs is 0 until then, and afterwards one
// page holding v0-v31 (32 * vlenb bytes). loaded is set while this hart's
// vector registers hold the values. Everything the vector unit needs per
// flow of control is here, so it can move to a thread whole.
struct vecstate {
  uint64 vstart;
  uint64 vl;
  uint64 vtype;
  uint64 vcsr;
  char *regs;
  int loaded;
};

enum procstate { UNUSED, USED, SLEEPING, RUNNABLE, RUNNING, ZOMBIE };

// A slot of the process table is one thread: everything in struct proc
// is per thread (kernel stack, trapframe, context, FP state, scheduling
// state), and per-thread state added later belongs here too. A process is
// its main thread, whose slot also holds the state all its threads share
// (pid, parent, pagetable, sz, heapbase, ofile, cwd, xstate; the
// struct threadgroup). The other threads point at it (`leader`) and use
// its shared fields: myprocess() in kernel/core/thread.c.
// A file mapping (kernel/core/mmap.c): [start, end) of the address space
// shows the file from offset off on.
struct vma {
  uint64 start, end; // page-aligned; end 0: a free slot
  uint64 off;        // file offset of start, page-aligned
  struct inode *ip;  // a reference of the mapping's own
  int prot, flags;   // mman.h
};

// A process's file mappings and their counters; vmlock guards them.
struct mmspace {
  struct vma vma[NMAP];
  uint64 resident; // pages mapped in them now
  uint64 faults;   // page faults that filled one, since exec
};

struct threadgroup {
  struct sleeplock vmlock;  // serialises sbrk, fork, exec and mmap's address-space changes
  struct spinlock filelock; // guards ofile[] and cwd against the other threads
  // wait_lock must be held when using these:
  int stopping;         // the process is ending its threads (exit, exec)
  int exit_requested;   // a thread called exit(): its status is exit_status
  int exit_status;      //
  struct proc *exec_by; // the thread that is exec()ing, ending the others
  struct mmspace mm;    // file mappings (mmap.c)
};

struct proc {
  struct spinlock lock;

  // p->lock must be held when using these:
  enum procstate state;
  void *chan; // sleeping on chan, if non-zero
  int killed; // if non-zero, the process has been killed
  int xstate; // exit status returned to the parent's wait
  int pid;
  int pgid;           // process group: the console's ^C kills a whole group (console.c)
  int home;           // the hart it last ran on, -1 before its first run (proc.c)
  uint64 runnable_at; // r_time() when it last became RUNNABLE

  // wait_lock must be held when using these:
  struct proc *parent;  // 0 for a thread other than the main one
  struct proc *leader;  // the process's main thread (itself if main)
  uint64 thread_result; // thread_exit()'s value, for thread_join()

  // private to the process, so p->lock need not be held:
  uint64 kstack;               // virtual address of the kernel stack
  uint64 sz;                   // size of user memory (bytes)
  uint64 heapbase;             // start of the heap: sbrk cannot shrink below
  pagetable_t pagetable;       // user page table
  uint64 vmid;                 // names that page table (vm.c, vm_use)
  struct trapframe *trapframe; // the page mapped at tfva
  uint64 tfva;                 // TRAPFRAME (main thread) or THREADFRAME(slot)
  struct context context;      // swtch() here to run the process
  struct file *ofile[NOFILE];  // open files
  struct inode *cwd;           // current directory
  char name[16];               // for messages
  int ai_right;                // may register as the AI worker (ai_worker.c; main thread's counts)

  // private; fpu_loaded is set while this hart's f registers hold the
  // process's values (see fpu_leave and fpu_enter in proc.c).
  struct fpstate fpu;
  int fpu_loaded;
  struct vecstate vec; // private, like fpu (kernel/core/vector.c)

  struct threadgroup tg; // used in the main thread's slot only
};

extern struct proc proc[NPROC];   // proc.c; thread.c walks it too
extern struct spinlock wait_lock; // proc.c: guards parent, leader, tg

#endif
