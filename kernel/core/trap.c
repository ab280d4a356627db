// Traps: system calls, device and timer interrupts, and faults.
//
// From user mode a trap enters uservec (trampoline.S), which saves the
// user registers in the trapframe and calls usertrap(). A system call runs
// with interrupts on; a page fault in a file mapping fills the page
// (mmap.c); any other fault kills the process with a one-line message
// naming the cause and the address (and, for a mapping, why); a timer interrupt makes the process
// yield if another one is waiting for a hart (a yield switches page
// tables, and so empties the hart's TLB: vm.c). usertrapret() then goes
// back through userret.
//
// In the kernel, traps enter kernelvec (kernelvec.S) and kerneltrap().
// Only interrupts are expected there: an exception in the kernel is a
// kernel bug and panics.
//
// The timer is the Sstc extension's stimecmp: each hart re-arms its own
// SCHED_HZ times a second. Time itself is the time CSR: uptime_ticks()
// (TICK_HZ, the unit of sleep() and uptime()) is computed from it, never
// counted, so it cannot lag. Hart 0's timer interrupt notices when it
// advances and wakes the processes sleeping on `ticks`.
#include "kernel/include/types.h"
#include "kernel/include/param.h"
#include "kernel/include/memlayout.h"
#include "kernel/include/riscv.h"
#include "kernel/include/spinlock.h"
#include "kernel/include/proc.h"
#include "kernel/include/defs.h"

struct spinlock tickslock;
volatile uint64 ticks; // the tick hart 0 saw last; sleepers' channel

extern char trampoline[], uservec[], userret[];

void kernelvec(void);

enum { INTR_NONE, INTR_DEVICE, INTR_TIMER };

// Arms this hart's timer interrupt for the next scheduling tick (SCHED_HZ).
static void
timer_arm(void)
{
  csr_write(CSR_STIMECMP, r_time() + TIMEBASE_HZ / SCHED_HZ);
}

// Every hart: take kernel traps at kernelvec, let user mode read the
// time CSR, start the timer.
void
trapinithart(void)
{
  if (cpuid() == 0)
    initlock(&tickslock, "time");
  csr_write(stvec, (uint64)kernelvec);
  csr_write(scounteren, 7);
  timer_arm();
}

// Ticks (TICK_HZ per second) since boot.
uint64
uptime_ticks(void)
{
  return r_time() / (TIMEBASE_HZ / TICK_HZ);
}

// A timer interrupt: hart 0 advances ticks and wakes its sleepers; every
// hart arms its next tick.
static void
clockintr(void)
{
  if (cpuid() == 0) {
    acquire(&tickslock);
    uint64 now = uptime_ticks();
    if (now != ticks) {
      ticks = now;
      wakeup((void *)&ticks);
    }
    release(&tickslock);
  }
  timer_arm();
}

// Handles an interrupt with cause scause; returns what it was.
static int
devintr(uint64 scause)
{
  if (scause == (SCAUSE_INTR | IRQ_S_TIMER)) {
    clockintr();
    return INTR_TIMER;
  }
  if (scause == (SCAUSE_INTR | IRQ_S_SOFT)) {
    // Another hart's wake-up call (proc.c): leaving wfi was its purpose.
    csr_clear(sip, SIP_SSIP);
    return INTR_DEVICE;
  }
  if (scause != (SCAUSE_INTR | IRQ_S_EXTERNAL))
    return INTR_NONE;
  int irq = plic_claim();
  if (irq == UART0_IRQ)
    uartintr();
  else if (irq == VIRTIO0_IRQ)
    virtio_disk_intr();
  else if (irq == VIRTIO1_IRQ)
    virtio_port_intr();
  else if (irq)
    printf("devintr: unexpected interrupt %d\n", irq);
  if (irq)
    plic_complete(irq);
  return INTR_DEVICE;
}

// Names of the exceptions a user program can cause, by scause.
// addr says whether stval holds the faulting address (else the pc is used).
static const struct {
  const char *name;
  int addr;
} exceptions[] = {
  [0] { "instruction address misaligned", 1 },
  [1] { "instruction access fault", 1 },
  [2] { "illegal instruction", 0 },
  [3] { "breakpoint", 0 },
  [4] { "load address misaligned", 1 },
  [5] { "load access fault", 1 },
  [6] { "store address misaligned", 1 },
  [7] { "store access fault", 1 },
  [12] { "instruction page fault", 1 },
  [13] { "load page fault", 1 },
  [15] { "store page fault", 1 },
};

// A user program caused an exception: say which (and why, if why is
// not 0), and kill it.
static void
user_fault(struct proc *p, uint64 scause, uint64 stval, uint64 sepc, const char *why)
{
  const char *name = 0;
  uint64 addr = sepc;

  if (scause < NELEM(exceptions) && exceptions[scause].name) {
    name = exceptions[scause].name;
    if (exceptions[scause].addr)
      addr = stval;
  }
  if (name && why)
    printf(
        "pid %d %s: killed: %s at 0x%lx (pc 0x%lx): %s\n", p->pid, p->name, name, addr, sepc, why);
  else if (name)
    printf("pid %d %s: killed: %s at 0x%lx (pc 0x%lx)\n", p->pid, p->name, name, addr, sepc);
  else
    printf("pid %d %s: killed: exception %lu (stval 0x%lx, pc 0x%lx)\n", p->pid, p->name, scause,
        stval, sepc);
  setkilled(p);
}

// A page fault at stval: a file mapping's page is filled (mmap.c), with
// interrupts on since that may read the disk; any other fault, or one
// the mapping refuses, kills the process.
static void
page_fault(struct proc *p, uint64 scause, uint64 stval)
{
  int access = scause == EXC_STORE_PAGE_FAULT ? 1 : scause == EXC_INST_PAGE_FAULT ? 2 : 0;

  intr_on();
  int r = mmap_fault(p->pagetable, stval, access);
  if (r != 0)
    user_fault(p, scause, stval, p->trapframe->epc, r < 0 ? mmap_why(r) : 0);
}

// A trap from user mode, called from uservec on the process's kernel stack.
void
usertrap(void)
{
  struct proc *p = myproc();
  uint64 scause = csr_read(scause);
  int which = INTR_NONE;

  if (csr_read(sstatus) & SSTATUS_SPP)
    panic("usertrap: not from user mode");
  // Traps from now on are kernel traps.
  csr_write(stvec, (uint64)kernelvec);
  p->trapframe->epc = csr_read(sepc);

  if (scause == EXC_ECALL_U) {
    if (killed(p))
      exit(-1);
    p->trapframe->epc += 4; // return after the ecall
    // The trap turned interrupts off; a long system call should not.
    intr_on();
    syscall();
  } else if (scause & SCAUSE_INTR) {
    which = devintr(scause);
  } else if (scause == EXC_INST_PAGE_FAULT || scause == EXC_LOAD_PAGE_FAULT ||
      scause == EXC_STORE_PAGE_FAULT) {
    page_fault(p, scause, csr_read(stval));
  } else if (scause != EXC_ILLEGAL || !vector_trap(p)) {
    user_fault(p, scause, csr_read(stval), p->trapframe->epc, 0);
  }
  if (killed(p))
    exit(-1);
  if (which == INTR_TIMER) {
    vm_tick();
    if (proc_waiting())
      yield();
  }
  usertrapret();
}

// Returns to user mode through userret in the trampoline.
void
usertrapret(void)
{
  struct proc *p = myproc();

  // From here until sret, a trap would go to uservec while still in the
  // kernel, so interrupts stay off.
  intr_off();
  fpu_enter(p);
  vector_enter(p);
  csr_write(stvec, TRAMPOLINE + (uservec - trampoline));

  p->trapframe->kernel_sp = p->kstack + KSTACKPAGES * PGSIZE;
  p->trapframe->kernel_trap = (uint64)usertrap;
  p->trapframe->kernel_hartid = r_tp();

  uint64 s = csr_read(sstatus);
  s &= ~SSTATUS_SPP; // sret goes to user mode
  s |= SSTATUS_SPIE; // with interrupts on
  csr_write(sstatus, s);
  csr_write(sepc, p->trapframe->epc);

  void (*ret)(uint64) = (void (*)(uint64))(TRAMPOLINE + (userret - trampoline));
  ret(p->tfva);
}

// A trap in S-mode, called from kernelvec on the current kernel stack.
void
kerneltrap(void)
{
  uint64 sepc = csr_read(sepc);
  uint64 sstatus = csr_read(sstatus);
  uint64 scause = csr_read(scause);

  if ((sstatus & SSTATUS_SPP) == 0)
    panic("kerneltrap: not from supervisor mode");
  if (intr_get())
    panic("kerneltrap: interrupts enabled");
  int which = devintr(scause);
  if (which == INTR_NONE) {
    printf("kerneltrap: scause 0x%lx sepc 0x%lx stval 0x%lx\n", scause, sepc, csr_read(stval));
    panic("kerneltrap: exception in the kernel");
  }
  if (which == INTR_TIMER && myproc() != 0 && proc_waiting())
    yield();
  // yield() may have run other code that changed sepc and sstatus.
  csr_write(sepc, sepc);
  csr_write(sstatus, sstatus);
}
