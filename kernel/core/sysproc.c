// Process and time system calls. Each returns its result, or a negative
// error code from errno.h (sbrk: -1, see syscall.h).
#include "kernel/include/types.h"
#include "kernel/include/param.h"
#include "kernel/include/errno.h"
#include "kernel/include/riscv.h"
#include "kernel/include/spinlock.h"
#include "kernel/include/proc.h"
#include "kernel/include/sysinfo.h"
#include "kernel/include/defs.h"

// exit(status): ends the calling process; never returns.
uint64
sys_exit(void)
{
  int n;

  argint(0, &n);
  exit(n);
}

// getpid(): the caller's process id.
uint64
sys_getpid(void)
{
  return myprocess()->pid;
}

// fork(): the child's pid, 0 in the child, or a negative errno.
uint64
sys_fork(void)
{
  return fork();
}

// wait(status): waits for a child to exit; see wait() in proc.c.
uint64
sys_wait(void)
{
  uint64 p;

  argaddr(0, &p);
  return wait(p);
}

// sbrk(n): grows (or with n < 0 shrinks) the heap; returns the old end.
uint64
sys_sbrk(void)
{
  long n;

  arglong(0, &n);
  uint64 addr;
  if (growproc(n, &addr) < 0)
    return -1;
  return addr;
}

// sleep(n): sleeps until the tick count has advanced by n (TICK_HZ per
// second), so at least n-1 whole ticks. Returns 0, -EINVAL for n < 0, or
// -EINTR if killed meanwhile. Holding tickslock while checking the time
// means clockintr's wakeup cannot come between the check and the sleep.
uint64
sys_sleep(void)
{
  int n;

  argint(0, &n);
  if (n < 0)
    return -EINVAL;
  acquire(&tickslock);
  uint64 ticks0 = uptime_ticks();
  while (uptime_ticks() - ticks0 < n) {
    if (killed(myproc())) {
      release(&tickslock);
      return -EINTR;
    }
    sleep((void *)&ticks, &tickslock);
  }
  release(&tickslock);
  return 0;
}

// kill(pid): see kill() in proc.c.
uint64
sys_kill(void)
{
  int pid;

  argint(0, &pid);
  return kill(pid);
}

// setpgid(pid, pgid): see setpgid() in proc.c.
uint64
sys_setpgid(void)
{
  int pid, pgid;

  argint(0, &pid);
  argint(1, &pgid);
  return setpgid(pid, pgid);
}

// Ticks since boot.
uint64
sys_uptime(void)
{
  return uptime_ticks();
}

// Microseconds since boot, from the time CSR.
uint64
sys_time_us(void)
{
  return r_time() / (TIMEBASE_HZ / 1000000);
}

// sysinfo(st): copies the kernel's resource counts (struct sysinfo), the
// page cache's and the caller's mapping counters to user address st. Returns 0 or -EFAULT.
uint64
sys_sysinfo(void)
{
  struct sysinfo si;
  uint64 dst;

  argaddr(0, &dst);
  memset(&si, 0, sizeof(si));
  si.procs = proc_count();
  si.files = file_count();
  pagecache_stats(&si);
  si.freepages = kfreepages() + si.cacheidle; // kalloc reclaims idle cache pages
  mmap_stats(myprocess(), &si.resident, &si.shared, &si.faults);
  if (copyout(myproc()->pagetable, dst, &si, sizeof(si)) < 0)
    return -EFAULT;
  return 0;
}
