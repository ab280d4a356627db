// The AI service's system calls (numbers in syscall.h, prototypes in
// user/lib/user.h): each passes its arguments, fetched with arg(), straight
// on to the call that does the work, in ai_request.c (any process) or
// ai_worker.c (the worker). An int argument is the low 32 bits of its
// register, as argint reads it; addresses are checked on use, by copyin
// and copyout.

#include "kernel/include/types.h"
#include "kernel/include/defs.h"

// The n-th system-call argument (0..5), as a 64-bit register.
static uint64
arg(int n)
{
  uint64 a;

  argaddr(n, &a);
  return a;
}

// ai_submit without options (ai_request.c).
uint64
sys_ai_submit(void)
{
  return ai_submit(arg(0), arg(1), arg(2), 0);
}

// ai_submit with its options (ai_request.c).
uint64
sys_ai_submit_opts(void)
{
  return ai_submit(arg(0), arg(1), arg(2), arg(3));
}

// ai_wait (ai_request.c).
uint64
sys_ai_wait(void)
{
  return ai_wait(arg(0), arg(1), arg(2));
}

// ai_query (ai_request.c).
uint64
sys_ai_query(void)
{
  return ai_query(arg(0), arg(1));
}

// ai_call (ai_request.c).
uint64
sys_ai_call(void)
{
  return ai_call(arg(0), arg(1), arg(2), arg(3), arg(4));
}

// ai_cancel (ai_request.c).
uint64
sys_ai_cancel(void)
{
  return ai_cancel(arg(0));
}

// ai_info (ai_request.c).
uint64
sys_ai_info(void)
{
  return ai_info(arg(0));
}

// ai_table (ai_request.c).
uint64
sys_ai_table(void)
{
  return ai_table(arg(0), arg(1));
}

// ai_stream (ai_request.c).
uint64
sys_ai_stream(void)
{
  return ai_stream(arg(0), arg(1), arg(2), arg(3));
}

// ai_logprobs (ai_request.c).
uint64
sys_ai_logprobs(void)
{
  return ai_logprobs(arg(0), arg(1), arg(2), arg(3));
}

// ai_logprob (ai_worker.c).
uint64
sys_ai_logprob(void)
{
  return ai_logprob(arg(0), arg(1));
}

// ai_register (ai_worker.c).
uint64
sys_ai_register(void)
{
  return ai_register(arg(0), arg(1));
}

// ai_right (ai_worker.c).
uint64
sys_ai_right(void)
{
  return ai_right(arg(0));
}

// ai_next (ai_worker.c).
uint64
sys_ai_next(void)
{
  return ai_next(arg(0));
}

// ai_take (ai_worker.c).
uint64
sys_ai_take(void)
{
  return ai_take(arg(0), arg(1));
}

// ai_progress (ai_worker.c).
uint64
sys_ai_progress(void)
{
  return ai_progress(arg(0), arg(1));
}

// ai_emit (ai_worker.c).
uint64
sys_ai_emit(void)
{
  return ai_emit(arg(0), arg(1), arg(2));
}

// ai_complete (ai_worker.c).
uint64
sys_ai_complete(void)
{
  return ai_complete(arg(0), arg(1), arg(2));
}

// ai_kvreport (ai_worker.c).
uint64
sys_ai_kvreport(void)
{
  return ai_kvreport(arg(0), arg(1), arg(2));
}

// ai_fail (ai_worker.c).
uint64
sys_ai_fail(void)
{
  return ai_fail(arg(0), arg(1));
}

// ai_plan (ai_sched.c).
uint64
sys_ai_plan(void)
{
  return ai_plan(arg(0));
}

// ai_sched (ai_sched.c).
uint64
sys_ai_sched(void)
{
  return ai_sched(arg(0));
}
