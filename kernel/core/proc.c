// Processes and the scheduler.
//
// The process table is a fixed array of NPROC slots; fork returns -EAGAIN
// when all are in use. Each slot has a kernel stack mapped at KSTACK(i)
// for the kernel's lifetime, with an unmapped guard page below it.
//
// Every hart runs scheduler(), which picks RUNNABLE processes round-robin
// and swtch()es to them. A process gives the hart back by calling sched()
// (from yield, sleep or exit) with its p->lock held; the scheduler
// releases that lock. Timer interrupts make a running process yield when
// another one is RUNNABLE, so scheduling is preemptive. The scheduler
// runs on the kernel page table and switches satp to the process's table
// around each run (vm.c says why only there).
//
// Locks: p->lock guards the state, chan, killed, xstate, pid and pgid
// fields; wait_lock guards every p->parent and is taken before any
// p->lock, so a parent's wait() cannot miss a child's exit.
//
// Floating point: the harts' f registers hold the running process's
// values. sched() saves them into p->fpu when sstatus.FS says the process
// changed them (Dirty), and turns FS Off. On the way back to user mode,
// fpu_enter() loads them again. So FP state follows the process to any
// hart, and processes that never touch FP cost a restore per switch only.
//
// Waking idle harts: a hart with nothing to run waits in wfi. Whoever
// makes a process RUNNABLE (make_runnable) sends one idle hart a software
// interrupt (machvec.S), so a thread woken by another hart starts within
// microseconds instead of at the idle hart's next timer tick (10 ms): the
// runtime's thread pool wakes its workers at every step. A hart sets
// cpu.idle before its last look for work and the waker sets the state
// before it looks at cpu.idle, each with a fence between, so at least one
// of them sees the other.
//
// Soft affinity: a process goes back to the hart it last ran on (its
// home) when that hart is free, and to any hart when its home is busy
// with another process or has not taken it within HOME_WAIT. A hart
// skips a RUNNABLE process whose home is another hart not running
// anything (that hart is in its scheduler and will take it, or in wfi
// and make_runnable wakes it first), for that long. So a lone process
// does not wander between harts at every wake-up, and each thread of the
// runtime's pool keeps its hart. That matters under QEMU: how fast a
// vector register is depends on the hart (docs/PERF_NOTES.md, facts 19
// and 29, "where QEMU keeps the vector registers" and "a process keeps its
// hart"), and the runtime times its kernels per thread. The time limit is
// for harts that the host runs late (more harts than host cores).
#include "kernel/include/types.h"
#include "kernel/include/param.h"
#include "kernel/include/errno.h"
#include "kernel/include/memlayout.h"
#include "kernel/include/riscv.h"
#include "kernel/include/spinlock.h"
#include "kernel/include/proc.h"
#include "kernel/include/sysinfo.h"
#include "kernel/include/defs.h"

#define HOME_WAIT (TIMEBASE_HZ / 10000) // 100 us: soft affinity's limit (design comment)

struct cpu cpus[NCPU];

struct proc proc[NPROC];

static struct proc *initproc;

static int nextpid = 1;
static struct spinlock pid_lock;

struct spinlock wait_lock; // also thread.c's

extern char trampoline[]; // trampoline.S

static void forkret(void);

// Is the slot in use? Read without p->lock, to skip free slots cheaply
// (each acquire costs two sstatus writes, slow under QEMU). Only for
// loops where missing a slot that is just being taken is harmless: a new
// process can be neither sleeping on a channel nor the one looked for.
static int
slot_used(struct proc *p)
{
  return __atomic_load_n(&p->state, __ATOMIC_RELAXED) != UNUSED;
}

// Boot: maps every slot's kernel stack into the kernel page table.
void
proc_mapstacks(pagetable_t kpt)
{
  for (int i = 0; i < NPROC; i++) {
    for (int j = 0; j < KSTACKPAGES; j++) {
      char *pa = kalloc();
      if (pa == 0)
        panic("proc_mapstacks: out of memory");
      kvmmap(kpt, KSTACK(i) + j * PGSIZE, (uint64)pa, PGSIZE, PTE_R | PTE_W);
    }
  }
}

void
procinit(void)
{
  initlock(&pid_lock, "nextpid");
  initlock(&wait_lock, "wait_lock");
  threadinit();
  for (int i = 0; i < NPROC; i++) {
    initlock(&proc[i].lock, "proc");
    initsleeplock(&proc[i].tg.vmlock, "vmlock");
    initlock(&proc[i].tg.filelock, "filelock");
    proc[i].state = UNUSED;
    proc[i].kstack = KSTACK(i);
  }
}

// The id of this hart. Interrupts must be off, or the process could move
// to another hart before the caller uses the answer.
int
cpuid(void)
{
  return r_tp();
}

// This hart's struct cpu. Interrupts must be off.
struct cpu *
mycpu(void)
{
  return &cpus[cpuid()];
}

// The process running on this hart, or 0 in the scheduler.
struct proc *
myproc(void)
{
  push_off();
  struct proc *p = mycpu()->proc;
  pop_off();
  return p;
}

// A new process id.
static int
allocpid(void)
{
  acquire(&pid_lock);
  int pid = nextpid++;
  release(&pid_lock);
  return pid;
}

// Finds an UNUSED slot and prepares it to run in the kernel: trapframe,
// empty user page table, context that starts at forkret. Returns the
// process (a main thread) with p->lock held, or 0 if the table is full or
// memory ran out. thread.c turns it into a thread.
struct proc *
allocproc(void)
{
  struct proc *p;

  for (p = proc; p < &proc[NPROC]; p++) {
    acquire(&p->lock);
    if (p->state == UNUSED)
      break;
    release(&p->lock);
  }
  if (p == &proc[NPROC])
    return 0;
  p->pid = allocpid();
  p->state = USED;
  p->home = -1;
  p->leader = p;
  p->tfva = TRAPFRAME;
  if ((p->trapframe = kalloc()) == 0 || (p->pagetable = proc_pagetable(p)) == 0) {
    freeproc(p);
    release(&p->lock);
    return 0;
  }
  p->vmid = vm_newid();
  memset(p->trapframe, 0, PGSIZE);
  memset(&p->context, 0, sizeof(p->context));
  memset(&p->fpu, 0, sizeof(p->fpu));
  p->fpu_loaded = 0;
  p->context.ra = (uint64)forkret;
  p->context.sp = p->kstack + KSTACKPAGES * PGSIZE;
  return p;
}

// Frees a slot and everything hanging from it. p->lock must be held.
void
freeproc(struct proc *p)
{
  if (p->trapframe)
    kfree(p->trapframe);
  p->trapframe = 0;
  if (p->pagetable)
    proc_freepagetable(p->pagetable, p->sz);
  p->pagetable = 0;
  p->vmid = 0;
  p->sz = 0;
  p->heapbase = 0;
  vector_free(p);
  p->pid = 0;
  p->pgid = 0;
  p->parent = 0;
  p->name[0] = 0;
  p->chan = 0;
  p->killed = 0;
  p->xstate = 0;
  p->thread_result = 0;
  p->tg.stopping = 0;
  p->tg.exit_requested = 0;
  p->tg.exec_by = 0;
  p->state = UNUSED;
}

// A user page table with only the trampoline and p's trapframe mapped.
// Returns 0 if out of memory.
pagetable_t
proc_pagetable(struct proc *p)
{
  pagetable_t pt = uvmcreate();

  if (pt == 0)
    return 0;
  if (mappages(pt, TRAMPOLINE, PGSIZE, (uint64)trampoline, PTE_R | PTE_X) < 0) {
    uvmfree(pt, 0);
    return 0;
  }
  if (mappages(pt, TRAPFRAME, PGSIZE, (uint64)p->trapframe, PTE_R | PTE_W) < 0) {
    uvmunmap(pt, TRAMPOLINE, 1, 0);
    uvmfree(pt, 0);
    return 0;
  }
  return pt;
}

// Frees a user page table and the memory below sz it maps. The
// trampoline and any trapframes left mapped above USERTOP are unmapped,
// not freed.
void
proc_freepagetable(pagetable_t pt, uint64 sz)
{
  uvmunmap(pt, USERTOP, (TRAMPOLINE + PGSIZE - USERTOP) / PGSIZE, 0);
  uvmfree(pt, sz);
}

// Boot: creates the first process. It has no user memory yet: when it
// first runs, forkret() mounts the file system and execs /init.
void
userinit(void)
{
  struct proc *p = allocproc();

  if (p == 0)
    panic("userinit: no memory");
  initproc = p;
  p->pgid = p->pid;
  p->ai_right = 1; // init hands it on to the AI worker only (ai_worker.c)
  safestrcpy(p->name, "init", sizeof(p->name));
  make_runnable(p);
  release(&p->lock);
}

// The first process's first steps, in process context because the file
// system may sleep: mount it, then run /init.
static void
start_init(struct proc *p)
{
  char *argv[24] = { "init" }; // and the command line's words for init (bootargs.c)

  bootargs_for_init(argv, NELEM(argv));
  fsinit(ROOTDEV);
  p->cwd = namei("/");
  int argc = exec("/init", argv);
  if (argc < 0) {
    printf("init: cannot run /init: error %d; is it in the image?\n", -argc);
    panic("start_init: no /init");
  }
  p->trapframe->a0 = argc;
}

// A new process's first scheduling lands here (context.ra), still holding
// p->lock from the scheduler.
static void
forkret(void)
{
  static volatile int first = 1;
  struct proc *p = myproc();

  release(&p->lock);
  if (first) {
    // Only the first process ever gets here while first is set: every
    // other process descends from it and is created after this point.
    first = 0;
    start_init(p);
  }
  usertrapret();
}

// Grows or shrinks the current process's memory by n bytes, one thread
// at a time; *oldsz is the size before. Returns 0, -ENOMEM if memory runs
// out or the heap would reach the lowest file mapping (mmap.c), -EINVAL if it would shrink
// below the start of the heap, or -EBUSY to shrink with several threads
// (kernel/core/thread.c says why).
int
growproc(long n, uint64 *oldsz)
{
  struct proc *p = myprocess();
  int err = 0;

  acquiresleep(&p->tg.vmlock);
  uint64 sz = p->sz;
  *oldsz = sz;
  if (n > 0) {
    if (sz + n < sz || sz + n > mmap_floor(p))
      err = -ENOMEM;
    else if ((err = uvmalloc(p->pagetable, sz, sz + n, PTE_W)) == 0)
      p->sz = sz + n;
  } else if (n < 0) {
    if ((uint64)-n > sz - p->heapbase)
      err = -EINVAL;
    else if (thread_count(p) > 0)
      err = -EBUSY;
    else
      p->sz = uvmdealloc(p->pagetable, sz, sz + n);
  }
  releasesleep(&p->tg.vmlock);
  return err;
}

// Saves this hart's FP registers into p->fpu if they hold p's values and
// p changed them since they were loaded (FS Dirty). Interrupts are off.
static void
fpu_save_dirty(struct proc *p)
{
  uint64 s = csr_read(sstatus);

  if (p->fpu_loaded && (s & SSTATUS_FS_MASK) == SSTATUS_FS_DIRTY) {
    fpu_save(&p->fpu);
    csr_write(sstatus, (s & ~SSTATUS_FS_MASK) | SSTATUS_FS_CLEAN);
  }
}

// p leaves the hart: keep its FP values in p->fpu and turn the FP unit
// off, so that nothing saves the next process's values into p. Interrupts
// are off.
static void
fpu_leave(struct proc *p)
{
  fpu_save_dirty(p);
  p->fpu_loaded = 0;
  csr_clear(sstatus, SSTATUS_FS_MASK);
}

// Before returning to user mode: loads p's FP registers unless they are
// still loaded. Leaves FS Clean, so that a write makes it Dirty.
// Interrupts are off.
void
fpu_enter(struct proc *p)
{
  uint64 s = csr_read(sstatus) & ~SSTATUS_FS_MASK;

  if (!p->fpu_loaded) {
    csr_write(sstatus, s | SSTATUS_FS_CLEAN);
    fpu_restore(&p->fpu);
    p->fpu_loaded = 1;
    csr_write(sstatus, s | SSTATUS_FS_CLEAN);
  }
}

// p's process group, read under p->lock (its parent may change it).
static int
pgid_of(struct proc *p)
{
  acquire(&p->lock);
  int pgid = p->pgid;
  release(&p->lock);
  return pgid;
}

// Creates a copy of the current process with one thread, a copy of the
// caller. Returns the child's pid in the parent (the child returns 0 from
// the system call), -EAGAIN if the process table is full, or -ENOMEM.
int
fork(void)
{
  struct proc *p = myproc();
  struct proc *l = p->leader;
  int pgid = pgid_of(l); // the process's group, also when a thread forks
  struct proc *np = allocproc();

  if (np == 0)
    return -EAGAIN;
  release(&np->lock);
  acquiresleep(&l->tg.vmlock);
  int err = uvmcopy(p->pagetable, np->pagetable, l->sz);
  np->sz = l->sz;
  if (err == 0)
    err = mmap_fork(l, np);
  releasesleep(&l->tg.vmlock);
  if (err < 0)
    mmap_exit(np, np->pagetable);
  acquire(&np->lock);
  if (err < 0) {
    freeproc(np);
    release(&np->lock);
    return -ENOMEM;
  }
  np->heapbase = l->heapbase;
  *(np->trapframe) = *(p->trapframe);
  np->trapframe->a0 = 0;

  // The parent's latest FP values may be only in the registers.
  push_off();
  fpu_save_dirty(p);
  pop_off();
  np->fpu = p->fpu;
  if (vector_fork(p, np) < 0) {
    release(&np->lock);
    mmap_exit(np, np->pagetable);
    acquire(&np->lock);
    freeproc(np);
    release(&np->lock);
    return -ENOMEM;
  }

  acquire(&l->tg.filelock); // the other threads may close or chdir meanwhile
  for (int i = 0; i < NOFILE; i++)
    if (l->ofile[i])
      np->ofile[i] = filedup(l->ofile[i]);
  np->cwd = idup(l->cwd);
  release(&l->tg.filelock);
  safestrcpy(np->name, p->name, sizeof(p->name));
  np->ai_right = l->ai_right;
  np->pgid = pgid;
  int pid = np->pid;
  release(&np->lock);

  acquire(&wait_lock);
  np->parent = l;
  release(&wait_lock);

  acquire(&np->lock);
  make_runnable(np);
  release(&np->lock);
  return pid;
}

// Gives p's children to init. wait_lock must be held.
static void
reparent(struct proc *p)
{
  for (struct proc *pp = proc; pp < &proc[NPROC]; pp++) {
    if (pp->parent == p) {
      pp->parent = initproc;
      wakeup(initproc);
    }
  }
}

// Ends the current process. It stays a ZOMBIE until its parent's wait().
void
exit(int status)
{
  struct proc *p = myproc();

  if (p == initproc)
    panic("exit: init exited");
  // Other threads end first; a thread other than the main one ends here.
  status = thread_exit_prepare(p, status);
  // Reclaim its AI requests; if it is the AI worker, fail what it ran.
  ai_exit(p);
  mmap_exit(p, p->pagetable);
  for (int fd = 0; fd < NOFILE; fd++) {
    if (p->ofile[fd]) {
      fileclose(p->ofile[fd]);
      p->ofile[fd] = 0;
    }
  }
  begin_op();
  iput(p->cwd);
  end_op();
  p->cwd = 0;

  acquire(&wait_lock);
  reparent(p);
  // The parent may be asleep in wait().
  wakeup(p->parent);
  acquire(&p->lock);
  p->xstate = status;
  p->state = ZOMBIE;
  release(&wait_lock);
  sched();
  panic("exit: zombie returned");
}

// Frees a zombie child, copying its status to user address addr (if not
// 0). Returns its pid or -EFAULT (the child stays a zombie). Called with
// wait_lock and pp->lock held; releases both.
static int
reap(struct proc *pp, uint64 addr)
{
  int pid = pp->pid;

  if (addr != 0 && copyout(myproc()->pagetable, addr, &pp->xstate, sizeof(pp->xstate)) < 0)
    pid = -EFAULT;
  else
    freeproc(pp);
  release(&pp->lock);
  release(&wait_lock);
  return pid;
}

// Waits for a child to exit; stores its status at user address addr if
// addr is not 0. Returns the child's pid, -ECHILD if there are no
// children, -EINTR if the caller is killed while waiting, or -EFAULT.
int
wait(uint64 addr)
{
  struct proc *p = myprocess();

  acquire(&wait_lock);
  for (;;) {
    int havekids = 0;
    for (struct proc *pp = proc; pp < &proc[NPROC]; pp++) {
      if (pp->parent != p)
        continue;
      acquire(&pp->lock);
      havekids = 1;
      if (pp->state == ZOMBIE)
        return reap(pp, addr);
      release(&pp->lock);
    }
    if (!havekids || killed(myproc())) {
      release(&wait_lock);
      return havekids ? -EINTR : -ECHILD;
    }
    sleep(p, &wait_lock);
  }
}

// Interrupts hart `hart` (out of wfi): machvec.S passes it on as SSIP.
static void
ipi_send(int hart)
{
  *(volatile uint32 *)CLINT_MSIP(hart) = 1;
}

// Marks p RUNNABLE and, if some other hart is idle, wakes one to run it:
// several wake-ups in a row (futex_wake of n threads) go to several idle
// harts. The caller holds p->lock.
void
make_runnable(struct proc *p)
{
  p->state = RUNNABLE;
  p->runnable_at = r_time();
  __sync_synchronize();
  int me = r_tp(), first = p->home >= 0 ? p->home : 0;
  // The home hart first (soft affinity). Claiming a hart (idle 1 -> 0)
  // sends the next wake-up elsewhere.
  for (int k = 0; k < NCPU; k++) {
    int i = (first + k) % NCPU;
    if (i != me && __atomic_exchange_n(&cpus[i].idle, 0, __ATOMIC_ACQ_REL)) {
      ipi_send(i);
      return;
    }
  }
}

// Is any process RUNNABLE? A lock-free look, only to decide whether to
// wait in wfi: the scheduler's next turn reads each state under its lock.
static int
any_runnable(void)
{
  for (struct proc *p = proc; p < &proc[NPROC]; p++)
    if (__atomic_load_n(&p->state, __ATOMIC_RELAXED) == RUNNABLE)
      return 1;
  return 0;
}

// Waits in wfi for an interrupt unless work appeared meanwhile. Setting
// idle before the last look pairs with make_runnable (design comment).
static void
idle_wait(struct cpu *c)
{
  __atomic_store_n(&c->idle, 1, __ATOMIC_RELAXED);
  __sync_synchronize();
  if (!any_runnable())
    asm volatile("wfi");
  __atomic_store_n(&c->idle, 0, __ATOMIC_RELAXED);
}

// Does RUNNABLE p belong to another hart, one that is free to take it
// and has had less than HOME_WAIT to do so? (Soft affinity, design
// comment; a lock-free look at that hart.)
static int
goes_home(struct proc *p, int me)
{
  return p->home >= 0 && p->home != me &&
      __atomic_load_n(&cpus[p->home].proc, __ATOMIC_RELAXED) == 0 &&
      r_time() - p->runnable_at < HOME_WAIT;
}

// Every hart ends up here after boot and never leaves: run each RUNNABLE
// process in turn (leaving those that go home); wait for an interrupt
// when there is none.
void
scheduler(void)
{
  struct cpu *c = mycpu();
  int me = cpuid();

  c->proc = 0;
  for (;;) {
    // Interrupts on, so that a device can make a process runnable.
    intr_on();
    int found = 0;
    for (struct proc *p = proc; p < &proc[NPROC]; p++) {
      // A slot taken meanwhile is seen on the next turn.
      if (!slot_used(p))
        continue;
      acquire(&p->lock);
      if (p->state == RUNNABLE && !goes_home(p, me)) {
        p->state = RUNNING;
        p->home = me;
        c->proc = p;
        vm_use(p->pagetable, p->vmid);
        swtch(&c->context, &p->context);
        // Off p's page table before p->lock goes: whoever frees the
        // table (a parent's wait, a thread's reaper) takes that lock
        // first. (exec frees the old table after switching off it.)
        vm_use(kernel_pagetable, 0);
        c->proc = 0;
        found = 1;
      }
      release(&p->lock);
    }
    if (!found)
      idle_wait(c);
  }
}

// Switches to the scheduler. The caller holds p->lock and no other lock
// and has changed p->state. intena belongs to this kernel thread, not to
// the hart, so it is saved and restored around the switch.
void
sched(void)
{
  struct proc *p = myproc();

  if (!holding(&p->lock))
    panic("sched: p->lock not held");
  if (mycpu()->noff != 1)
    panic("sched: other locks held");
  if (p->state == RUNNING)
    panic("sched: still running");
  if (intr_get())
    panic("sched: interruptible");
  fpu_leave(p);
  vector_leave(p);
  int intena = mycpu()->intena;
  swtch(&p->context, &mycpu()->context);
  mycpu()->intena = intena;
}

// Is a process waiting for a hart (RUNNABLE)? The timer makes the running
// process yield only then (trap.c).
int
proc_waiting(void)
{
  for (struct proc *p = proc; p < &proc[NPROC]; p++)
    if (__atomic_load_n(&p->state, __ATOMIC_RELAXED) == RUNNABLE)
      return 1;
  return 0;
}

// Gives up the hart for one scheduling round.
void
yield(void)
{
  struct proc *p = myproc();

  acquire(&p->lock);
  p->state = RUNNABLE;
  p->runnable_at = r_time();
  sched();
  release(&p->lock);
}

// Atomically releases lk and sleeps on chan; reacquires lk when woken.
// Because p->lock is taken before lk is released, and wakeup() needs
// p->lock, a wakeup between the two cannot be missed. Callers loop,
// rechecking their condition and killed().
// A killed process never goes to sleep: it only yields the hart once. A
// kill() from another hart may come after the caller's killed() check
// and before this point, when the process is not SLEEPING yet, so kill()
// cannot wake it; p->killed is read here under p->lock, which kill()
// also holds, so the kill is seen either here or by kill() itself.
// Sleeps that a kill must not end (disk, sleep locks, the log) loop on
// their condition and so become polling loops until it holds.
void
sleep(void *chan, struct spinlock *lk)
{
  struct proc *p = myproc();

  acquire(&p->lock);
  release(lk);
  p->chan = chan;
  p->state = p->killed ? RUNNABLE : SLEEPING;
  sched();
  p->chan = 0;
  release(&p->lock);
  acquire(lk);
}

// Makes every process sleeping on chan runnable. The caller must not hold
// any p->lock. Only free slots are skipped without the lock: a process
// about to sleep holds p->lock but may not be SLEEPING yet (see sleep()),
// so its state must be read under the lock.
void
wakeup(void *chan)
{
  struct proc *me = myproc();

  for (struct proc *p = proc; p < &proc[NPROC]; p++) {
    if (p == me || !slot_used(p))
      continue;
    acquire(&p->lock);
    if (p->state == SLEEPING && p->chan == chan)
      make_runnable(p);
    release(&p->lock);
  }
}

// Marks process pid killed; it exits when it next crosses to or from user
// mode, or when its sleep loop checks killed(). Returns 0, -ESRCH if there
// is no such process, or -EPERM for init (its death would stop the system).
int
kill(int pid)
{
  for (struct proc *p = proc; p < &proc[NPROC]; p++) {
    if (!slot_used(p))
      continue;
    acquire(&p->lock);
    if (p->pid == pid && p->state != UNUSED) {
      int err = 0;
      if (p == initproc)
        err = -EPERM;
      else
        p->killed = 1;
      if (!err && p->state == SLEEPING)
        make_runnable(p);
      release(&p->lock);
      return err;
    }
    release(&p->lock);
  }
  return -ESRCH;
}

// Puts process pid (0: the caller) into process group pgid (0: a new
// group numbered pid). Only the caller itself or one of its children may
// be moved, so that a shell can place a job it just forked whichever of
// the two runs first. Returns 0, -EINVAL for pid or pgid < 0, or -ESRCH
// if pid is neither the caller nor its child.
int
setpgid(int pid, int pgid)
{
  struct proc *me = myprocess(); // a thread moves its whole process

  if (pid < 0 || pgid < 0)
    return -EINVAL;
  if (pid == 0)
    pid = me->pid;
  acquire(&wait_lock);
  for (struct proc *p = proc; p < &proc[NPROC]; p++) {
    if (!slot_used(p) || (p != me && p->parent != me))
      continue;
    acquire(&p->lock);
    if (p->pid == pid && p->state != UNUSED && p->state != ZOMBIE) {
      p->pgid = pgid ? pgid : pid;
      release(&p->lock);
      release(&wait_lock);
      return 0;
    }
    release(&p->lock);
  }
  release(&wait_lock);
  return -ESRCH;
}

// Kills every process in group pgid, as kill() does, except init.
// Returns how many were marked.
int
kill_pgrp(int pgid)
{
  int n = 0;

  for (struct proc *p = proc; p < &proc[NPROC]; p++) {
    if (!slot_used(p))
      continue;
    acquire(&p->lock);
    if (p->pgid == pgid && p != initproc && p->state != UNUSED && p->state != ZOMBIE) {
      p->killed = 1;
      if (p->state == SLEEPING)
        make_runnable(p);
      n++;
    }
    release(&p->lock);
  }
  return n;
}

void
setkilled(struct proc *p)
{
  acquire(&p->lock);
  p->killed = 1;
  release(&p->lock);
}

// Is p killed, or the process it is a thread of?
int
killed(struct proc *p)
{
  acquire(&p->lock);
  int k = p->killed;
  release(&p->lock);
  return k || __atomic_load_n(&p->leader->killed, __ATOMIC_RELAXED);
}

// Copies to a user address (user_dst) or a kernel one. Returns 0 or -EFAULT.
int
either_copyout(int user_dst, uint64 dst, void *src, uint64 len)
{
  if (user_dst)
    return copyout(myproc()->pagetable, dst, src, len);
  memmove((char *)dst, src, len);
  return 0;
}

// Copies from a user address (user_src) or a kernel one. Returns 0 or -EFAULT.
int
either_copyin(void *dst, int user_src, uint64 src, uint64 len)
{
  if (user_src)
    return copyin(myproc()->pagetable, dst, src, len);
  memmove(dst, (char *)src, len);
  return 0;
}

// ^P on the console: one line per process (pid, state, name, size, the
// hart it last ran on, its mapped pages and their faults), and the free
// memory and the page cache's counters. Takes no locks, so that it
// works even when the system is stuck.
void
procdump(void)
{
  static char *states[] = {
    [UNUSED] "unused",
    [USED] "used",
    [SLEEPING] "sleep",
    [RUNNABLE] "runble",
    [RUNNING] "run",
    [ZOMBIE] "zombie",
  };

  printf("\n");
  for (struct proc *p = proc; p < &proc[NPROC]; p++) {
    if (p->state == UNUSED)
      continue;
    printf("%d %s %s %lu KiB hart %d", p->pid, states[p->state], p->name, p->sz / 1024, p->home);
    if (p->leader == p && (p->tg.mm.resident || p->tg.mm.faults))
      printf(" mapped %lu pages, %lu faults", p->tg.mm.resident, p->tg.mm.faults);
    printf("\n");
  }
  struct sysinfo si;
  pagecache_stats(&si);
  printf("free memory: %lu MiB; page cache: %lu pages (%lu idle), %lu hits, %lu misses, %lu "
         "evictions\n",
      kfreepages() / 256, si.cachepages, si.cacheidle, si.hits, si.misses, si.evictions);
}

// Process table slots in use (zombies included), for sysinfo().
int
proc_count(void)
{
  int n = 0;

  for (struct proc *p = proc; p < &proc[NPROC]; p++)
    n += slot_used(p);
  return n;
}
