// Threads and futexes.
//
// A thread is a slot of the process table (struct proc) with its own
// kernel stack, trapframe, context, FP state and scheduling state. A
// process is its main thread plus the threads it started with
// thread_create; they share the main thread's page table, memory size,
// open files, current directory, pid and parent. p->leader points at the
// main thread (itself for the main thread); myprocess() is the current
// process's main thread, the owner of everything shared. The other
// threads have parent 0, so a parent's wait() sees only the process.
//
// Each thread's trapframe is mapped in the shared page table at
// THREADFRAME(slot) (memlayout.h), the main thread's at TRAPFRAME;
// trampoline.S finds it through sscratch, which usertrapret sets.
//
// System calls (user/lib/thread.c wraps them):
//   thread_create(entry, arg, stack): a new thread starts at entry with
//     a0 = arg and sp = stack, which the caller allocated (16-byte aligned
//     top of its memory); the other registers are copied from the caller,
//     the FP registers start at zero. Returns the thread id (from the pid
//     counter), -EINVAL for a misaligned stack, -EAGAIN if the process
//     table is full, -ENOMEM, or -EINTR if the process is ending.
//   thread_join(tid, &result): waits for thread tid of the same process
//     to call thread_exit and frees its slot; -ESRCH if there is no such
//     thread (or another join took it), -EINVAL for the caller itself,
//     -EINTR if the process is killed meanwhile.
//   thread_exit(result): ends the calling thread. From the main thread it
//     ends the whole process with status result, like exit.
//   nharts(): the number of harts the kernel runs on.
//   futex_wait(addr, val): sleeps while the 32-bit word at addr equals
//     val; returns 0 when woken, -EAGAIN if it differed already, -EINTR
//     if killed, -EFAULT, -EINVAL for a misaligned addr.
//   futex_wake(addr, n): wakes up to n threads waiting on addr; returns
//     how many. A waiter checks the word and goes to sleep under
//     futex_lock, and a waker takes futex_lock after changing the word,
//     so no wakeup is lost. The sleep channel is the word's physical
//     address, unique to it.
//
// Rules:
// - exit() from any thread ends the process: the thread records its
//   status in the main thread and kills it; the main thread's exit()
//   kills every other thread (waking those asleep in any system call),
//   waits until they are zombies, frees them, and only then closes the
//   files and becomes the zombie its parent waits for. So the page table
//   is freed (by the parent's wait) after the last thread is gone.
// - kill(pid) marks the main thread; killed() of any thread is true once
//   its main thread is killed, so every thread stops at its next trap,
//   and the main thread's exit ends those that sleep. A fault in any
//   thread ends the process.
// - fork() from a thread copies only the caller; the child belongs to
//   the process (its parent is the main thread).
// - exec() from any thread first ends all the others. From a thread that
//   is not the main one, the main thread ends as a thread too and the
//   caller takes over the process: its pid, parent, children, memory,
//   files and directory. The others are gone even if exec then fails.
// - sbrk is serialised by the main thread's vmlock. A process with more
//   than one thread cannot shrink its memory (-EBUSY): another hart may
//   still hold the old mapping in its TLB until it switches processes
//   (traps keep the TLB: vm.c), and this kernel has no cross-hart TLB
//   shootdown.
// - Threads that are never joined stay zombies until the process ends.
//
// Locks: wait_lock (proc.c) guards parent, leader, thread_result and the
// struct threadgroup flags; p->lock the state. Waiting for a thread, or
// for every thread to end, sleeps on the main thread's address with
// wait_lock; a thread that ends wakes that channel.
#include "kernel/include/types.h"
#include "kernel/include/param.h"
#include "kernel/include/errno.h"
#include "kernel/include/memlayout.h"
#include "kernel/include/riscv.h"
#include "kernel/include/spinlock.h"
#include "kernel/include/proc.h"
#include "kernel/include/defs.h"

static struct spinlock futex_lock;

void
threadinit(void)
{
  initlock(&futex_lock, "futex");
}

// The current process's main thread: the owner of the shared state.
struct proc *
myprocess(void)
{
  return myproc()->leader;
}

// A new reference to the current process's directory; a thread's chdir
// may replace it meanwhile.
struct inode *
cwd_dup(void)
{
  struct proc *l = myprocess();

  acquire(&l->tg.filelock);
  struct inode *ip = idup(l->cwd);
  release(&l->tg.filelock);
  return ip;
}

// Is q a thread of the process whose main thread is l, other than l?
// wait_lock must be held.
static int
is_thread_of(struct proc *q, struct proc *l)
{
  return q != l && q->leader == l && __atomic_load_n(&q->state, __ATOMIC_RELAXED) != UNUSED;
}

// Frees a zombie thread's slot: its trapframe mapping in the shared page
// table and its trapframe. wait_lock and q->lock are held.
static void
free_thread(struct proc *q)
{
  uvmunmap(q->pagetable, q->tfva, 1, 0);
  q->pagetable = 0;
  freeproc(q);
}

// How many threads the process of main thread l has besides l.
int
thread_count(struct proc *l)
{
  int n = 0;

  acquire(&wait_lock);
  for (struct proc *q = proc; q < &proc[NPROC]; q++)
    if (is_thread_of(q, l))
      n++;
  release(&wait_lock);
  return n;
}

// Marks p killed and wakes it if it sleeps.
static void
kill_thread(struct proc *p)
{
  acquire(&p->lock);
  p->killed = 1;
  if (p->state == SLEEPING)
    make_runnable(p);
  release(&p->lock);
}

// Ends the calling thread (not a main thread that owns the process):
// records result for thread_join and becomes a zombie. Never returns.
static void __attribute__((noreturn)) thread_end(struct proc *p, uint64 result)
{
  ai_exit(p);
  acquire(&wait_lock);
  p->thread_result = result;
  wakeup(p->leader);
  acquire(&p->lock);
  p->state = ZOMBIE;
  release(&wait_lock);
  sched();
  panic("thread_end: zombie returned");
}

// Kills every thread of me's process but me, waits until each is a
// zombie and frees it; the main thread, if it is not me, is left a zombie
// for the caller (exec's takeover). wait_lock is held throughout (sleep
// releases it meanwhile).
static void
end_others(struct proc *me)
{
  struct proc *l = me->leader;

  for (;;) {
    int live = 0;
    for (struct proc *q = proc; q < &proc[NPROC]; q++) {
      if (q == me || (q != l && !is_thread_of(q, l)))
        continue;
      acquire(&q->lock);
      if (q->state == ZOMBIE && q != l) {
        free_thread(q);
      } else if (q->state != ZOMBIE) {
        q->killed = 1;
        if (q->state == SLEEPING)
          make_runnable(q);
        live++;
      }
      release(&q->lock);
    }
    if (live == 0)
      return;
    sleep(l, &wait_lock);
  }
}

// Called first by exit(status). From a thread other than the main one:
// asks the main thread to end the process with status and ends the
// thread. In the main thread while another thread execs: hands the
// process over to it and ends as a thread. Otherwise ends every other
// thread and returns the status the process exits with.
int
thread_exit_prepare(struct proc *p, int status)
{
  struct proc *l = p->leader;

  acquire(&wait_lock);
  if (p != l) {
    // Unless the process is ending already (then p was killed for it).
    int request = !l->tg.exit_requested && !l->tg.stopping && !l->tg.exec_by;
    if (request) {
      l->tg.exit_requested = 1;
      l->tg.exit_status = status;
    }
    release(&wait_lock);
    if (request)
      kill_thread(l);
    thread_end(p, status);
  }
  if (l->tg.exec_by && l->tg.exec_by != p) {
    struct proc *heir = l->tg.exec_by;
    heir->parent = l->parent;
    l->parent = 0;
    for (struct proc *q = proc; q < &proc[NPROC]; q++)
      if (q->parent == l)
        q->parent = heir;
    release(&wait_lock);
    thread_end(p, 0);
  }
  l->tg.stopping = 1;
  if (l->tg.exit_requested)
    status = l->tg.exit_status;
  end_others(p);
  release(&wait_lock);
  return status;
}

// The thread me takes over the process from its main thread l, a zombie
// that has handed over its parent and children: pid, process group,
// memory and file mappings, files, directory and AI worker right move to me, and l's slot is
// freed. wait_lock is held.
static void
take_over(struct proc *me, struct proc *l)
{
  acquire(&l->lock);
  int pid = l->pid, pgid = l->pgid;
  me->sz = l->sz;
  me->heapbase = l->heapbase;
  for (int fd = 0; fd < NOFILE; fd++) {
    me->ofile[fd] = l->ofile[fd];
    l->ofile[fd] = 0;
  }
  me->cwd = l->cwd;
  l->cwd = 0;
  me->ai_right = l->ai_right;
  me->tg.mm = l->tg.mm;
  memset(&l->tg.mm, 0, sizeof(l->tg.mm));
  uvmunmap(l->pagetable, l->tfva, 1, 0);
  l->pagetable = 0;
  freeproc(l);
  release(&l->lock);

  acquire(&me->lock);
  me->pid = pid;
  me->pgid = pgid;
  release(&me->lock);
  me->leader = me;
  me->tg.stopping = 0;
  me->tg.exit_requested = 0;
  me->tg.exec_by = 0;
}

// Called first by exec(): ends every other thread of the process, and
// makes the caller its main thread. Returns 0, or -EINTR if the process
// is already ending (the caller will be killed on its way out).
int
thread_exec_prepare(void)
{
  struct proc *p = myproc();
  struct proc *l = p->leader;

  acquire(&wait_lock);
  if (l->tg.stopping) {
    release(&wait_lock);
    return -EINTR;
  }
  l->tg.stopping = 1;
  if (p != l)
    l->tg.exec_by = p;
  end_others(p);
  if (p != l)
    take_over(p, l);
  else
    l->tg.stopping = 0;
  release(&wait_lock);
  return 0;
}

// thread_create(entry, arg, stack): see the top of this file.
uint64
sys_thread_create(void)
{
  struct proc *p = myproc();
  struct proc *l = p->leader;
  uint64 entry, arg, stack;

  argaddr(0, &entry);
  argaddr(1, &arg);
  argaddr(2, &stack);
  if (stack % 16 != 0)
    return -EINVAL;
  struct proc *t = allocproc();
  if (t == 0)
    return -EAGAIN;
  // allocproc made a process; a thread uses l's page table instead.
  proc_freepagetable(t->pagetable, 0);
  t->pagetable = l->pagetable;
  t->vmid = l->vmid;
  t->tfva = THREADFRAME(t - proc);
  int tid = t->pid;
  release(&t->lock);

  acquiresleep(&l->tg.vmlock);
  int err = mappages(l->pagetable, t->tfva, PGSIZE, (uint64)t->trapframe, PTE_R | PTE_W);
  releasesleep(&l->tg.vmlock);
  *t->trapframe = *p->trapframe;
  t->trapframe->epc = entry;
  t->trapframe->sp = stack;
  t->trapframe->a0 = arg;
  safestrcpy(t->name, p->name, sizeof(t->name));

  acquire(&wait_lock);
  if (err == 0 && (l->tg.stopping || killed(p)))
    err = -EINTR;
  acquire(&t->lock);
  if (err < 0) {
    free_thread(t);
  } else {
    t->leader = l;
    make_runnable(t);
  }
  release(&t->lock);
  release(&wait_lock);
  return err < 0 ? err : tid;
}

// thread_join(tid, result address or 0): see the top of this file.
uint64
sys_thread_join(void)
{
  struct proc *p = myproc();
  struct proc *l = p->leader;
  int tid;
  uint64 addr;

  argint(0, &tid);
  argaddr(1, &addr);
  if (tid == p->pid)
    return -EINVAL;
  acquire(&wait_lock);
  for (;;) {
    struct proc *t = 0;
    for (struct proc *q = proc; q < &proc[NPROC] && t == 0; q++)
      if (is_thread_of(q, l) && q->pid == tid)
        t = q;
    if (t == 0) {
      release(&wait_lock);
      return -ESRCH;
    }
    acquire(&t->lock);
    if (t->state == ZOMBIE) {
      int err = 0;
      if (addr != 0 && copyout(p->pagetable, addr, &t->thread_result, sizeof(uint64)) < 0)
        err = -EFAULT;
      else
        free_thread(t);
      release(&t->lock);
      release(&wait_lock);
      return err;
    }
    release(&t->lock);
    if (killed(p)) {
      release(&wait_lock);
      return -EINTR;
    }
    sleep(l, &wait_lock);
  }
}

// thread_exit(result): see the top of this file.
uint64
sys_thread_exit(void)
{
  struct proc *p = myproc();
  uint64 result;

  argaddr(0, &result);
  if (p == p->leader)
    exit((int)result);
  // If the process is ending meanwhile, end_others() frees the zombie.
  thread_end(p, result);
}

// nharts(): the harts the kernel runs on (main.c read them at boot).
uint64
sys_nharts(void)
{
  return nharts_used;
}

// The sleep channel of the futex word at user address addr: its
// physical address. Returns 0 if addr is not a mapped user page.
static void *
futex_chan(uint64 addr)
{
  uint64 pa = walkaddr(myproc()->pagetable, addr);

  return pa ? (void *)(pa + (addr % PGSIZE)) : 0;
}

// futex_wait(addr, val): see the top of this file.
uint64
sys_futex_wait(void)
{
  struct proc *p = myproc();
  uint64 addr;
  int val;
  uint32 cur;

  argaddr(0, &addr);
  argint(1, &val);
  if (addr % 4 != 0)
    return -EINVAL;
  void *chan = futex_chan(addr);
  if (chan == 0)
    return -EFAULT;
  acquire(&futex_lock);
  if (copyin(p->pagetable, &cur, addr, sizeof(cur)) < 0) {
    release(&futex_lock);
    return -EFAULT;
  }
  int err = 0;
  if (cur != (uint32)val)
    err = -EAGAIN;
  else if (killed(p))
    err = -EINTR;
  else
    sleep(chan, &futex_lock);
  release(&futex_lock);
  if (err == 0 && killed(p))
    err = -EINTR;
  return err;
}

// futex_wake(addr, n): see the top of this file.
uint64
sys_futex_wake(void)
{
  uint64 addr;
  int n, woken = 0;

  argaddr(0, &addr);
  argint(1, &n);
  if (addr % 4 != 0 || n < 1)
    return -EINVAL;
  void *chan = futex_chan(addr);
  if (chan == 0)
    return -EFAULT;
  acquire(&futex_lock);
  // A waiter holds q->lock, not yet SLEEPING, between releasing
  // futex_lock and sched(): only free slots are skipped unlocked.
  for (struct proc *q = proc; q < &proc[NPROC] && woken < n; q++) {
    if (__atomic_load_n(&q->state, __ATOMIC_RELAXED) == UNUSED)
      continue;
    acquire(&q->lock);
    if (q->state == SLEEPING && q->chan == chan) {
      make_runnable(q);
      woken++;
    }
    release(&q->lock);
  }
  release(&futex_lock);
  return woken;
}
