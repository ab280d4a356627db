// System call dispatch and argument fetching.
//
// A user program puts the call number (syscall.h) in a7 and the arguments
// in a0..a5, then executes ecall. syscall() runs the handler and puts its
// result in a0. Handlers fetch arguments with argint/arglong/argaddr and
// read user memory only through copyin/fetchaddr/fetchstr, which check
// every address.
#include "kernel/include/types.h"
#include "kernel/include/param.h"
#include "kernel/include/errno.h"
#include "kernel/include/memlayout.h"
#include "kernel/include/riscv.h"
#include "kernel/include/spinlock.h"
#include "kernel/include/proc.h"
#include "kernel/include/syscall.h"
#include "kernel/include/defs.h"

// Fetches the 8 bytes at user address addr. Returns 0 or -EFAULT.
int
fetchaddr(uint64 addr, uint64 *ip)
{
  return copyin(myproc()->pagetable, ip, addr, sizeof(*ip));
}

// Fetches the NUL-terminated string at user address addr into buf (max
// bytes with the NUL). Returns its length, -EFAULT or -ENAMETOOLONG.
int
fetchstr(uint64 addr, char *buf, int max)
{
  return copyinstr(myproc()->pagetable, buf, addr, max);
}

// The current system call's argument register n (a0..a5).
static uint64
argraw(int n)
{
  struct trapframe *tf = myproc()->trapframe;
  uint64 regs[] = { tf->a0, tf->a1, tf->a2, tf->a3, tf->a4, tf->a5 };

  if (n < 0 || n >= NELEM(regs))
    panic("argraw: bad argument number");
  return regs[n];
}

// The n-th argument as an int. Always 0: the value itself is not checked.
int
argint(int n, int *ip)
{
  *ip = argraw(n);
  return 0;
}

int
arglong(int n, long *ip)
{
  *ip = argraw(n);
  return 0;
}

// The n-th argument as a user address; copyin/copyout check it on use.
int
argaddr(int n, uint64 *ip)
{
  *ip = argraw(n);
  return 0;
}

// The n-th argument as a string copied into buf. Returns its length,
// -EFAULT or -ENAMETOOLONG.
int
argstr(int n, char *buf, int max)
{
  uint64 addr;

  argaddr(n, &addr);
  return fetchstr(addr, buf, max);
}

uint64 sys_fork(void);
uint64 sys_exit(void);
uint64 sys_wait(void);
uint64 sys_pipe(void);
uint64 sys_read(void);
uint64 sys_kill(void);
uint64 sys_exec(void);
uint64 sys_fstat(void);
uint64 sys_chdir(void);
uint64 sys_dup(void);
uint64 sys_getpid(void);
uint64 sys_sbrk(void);
uint64 sys_sleep(void);
uint64 sys_uptime(void);
uint64 sys_open(void);
uint64 sys_write(void);
uint64 sys_mknod(void);
uint64 sys_unlink(void);
uint64 sys_link(void);
uint64 sys_mkdir(void);
uint64 sys_close(void);
uint64 sys_time_us(void);
uint64 sys_thread_create(void); // thread.c
uint64 sys_thread_join(void);
uint64 sys_thread_exit(void);
uint64 sys_futex_wait(void);
uint64 sys_futex_wake(void);
uint64 sys_nharts(void);
uint64 sys_sysinfo(void);
uint64 sys_setpgid(void);
uint64 sys_setfg(void); // console.c
uint64 sys_vlenb(void); // vector.c
uint64 sys_mmap(void);  // mmap.c
uint64 sys_munmap(void);
uint64 sys_ai_submit(void); // sysai.c
uint64 sys_ai_submit_opts(void);
uint64 sys_ai_wait(void);
uint64 sys_ai_query(void);
uint64 sys_ai_call(void);
uint64 sys_ai_cancel(void);
uint64 sys_ai_info(void);
uint64 sys_ai_table(void);
uint64 sys_ai_register(void);
uint64 sys_ai_next(void);
uint64 sys_ai_progress(void);
uint64 sys_ai_complete(void);
uint64 sys_ai_fail(void);
uint64 sys_ai_take(void);
uint64 sys_ai_emit(void);
uint64 sys_ai_kvreport(void);
uint64 sys_ai_stream(void);
uint64 sys_ai_logprobs(void);
uint64 sys_ai_logprob(void);
uint64 sys_ai_right(void);
uint64 sys_ai_sched(void);
uint64 sys_ai_plan(void);

static uint64 (*syscalls[])(void) = {
  [SYS_fork] sys_fork,
  [SYS_exit] sys_exit,
  [SYS_wait] sys_wait,
  [SYS_pipe] sys_pipe,
  [SYS_read] sys_read,
  [SYS_kill] sys_kill,
  [SYS_exec] sys_exec,
  [SYS_fstat] sys_fstat,
  [SYS_chdir] sys_chdir,
  [SYS_dup] sys_dup,
  [SYS_getpid] sys_getpid,
  [SYS_sbrk] sys_sbrk,
  [SYS_sleep] sys_sleep,
  [SYS_uptime] sys_uptime,
  [SYS_open] sys_open,
  [SYS_write] sys_write,
  [SYS_mknod] sys_mknod,
  [SYS_unlink] sys_unlink,
  [SYS_link] sys_link,
  [SYS_mkdir] sys_mkdir,
  [SYS_close] sys_close,
  [SYS_time_us] sys_time_us,
  [SYS_thread_create] sys_thread_create,
  [SYS_thread_join] sys_thread_join,
  [SYS_thread_exit] sys_thread_exit,
  [SYS_futex_wait] sys_futex_wait,
  [SYS_futex_wake] sys_futex_wake,
  [SYS_nharts] sys_nharts,
  [SYS_sysinfo] sys_sysinfo,
  [SYS_setpgid] sys_setpgid,
  [SYS_setfg] sys_setfg,
  [SYS_vlenb] sys_vlenb,
  [SYS_mmap] sys_mmap,
  [SYS_munmap] sys_munmap,
  [SYS_ai_submit] sys_ai_submit,
  [SYS_ai_submit_opts] sys_ai_submit_opts,
  [SYS_ai_wait] sys_ai_wait,
  [SYS_ai_query] sys_ai_query,
  [SYS_ai_call] sys_ai_call,
  [SYS_ai_cancel] sys_ai_cancel,
  [SYS_ai_info] sys_ai_info,
  [SYS_ai_table] sys_ai_table,
  [SYS_ai_sched] sys_ai_sched,
  [SYS_ai_plan] sys_ai_plan,
  [SYS_ai_register] sys_ai_register,
  [SYS_ai_next] sys_ai_next,
  [SYS_ai_progress] sys_ai_progress,
  [SYS_ai_complete] sys_ai_complete,
  [SYS_ai_fail] sys_ai_fail,
  [SYS_ai_take] sys_ai_take,
  [SYS_ai_emit] sys_ai_emit,
  [SYS_ai_kvreport] sys_ai_kvreport,
  [SYS_ai_stream] sys_ai_stream,
  [SYS_ai_logprobs] sys_ai_logprobs,
  [SYS_ai_logprob] sys_ai_logprob,
  [SYS_ai_right] sys_ai_right,
};

// Runs the system call named by a7; an unknown number returns -ENOSYS.
void
syscall(void)
{
  struct proc *p = myproc();
  uint64 num = p->trapframe->a7;

  if (num < NELEM(syscalls) && syscalls[num])
    p->trapframe->a0 = syscalls[num]();
  else
    p->trapframe->a0 = -ENOSYS;
}
