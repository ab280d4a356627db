// System call numbers, shared by the kernel (syscall.c) and user code
// (tools/gen_usys.py turns each SYS_name into a stub in build/user/usys.S).
// Every call returns a negative code from errno.h on failure, except sbrk,
// which returns -1 (user.h: (char *)-1), because its result is an address.
#ifndef AISVC_SYSCALL_H
#define AISVC_SYSCALL_H

#define SYS_fork    1
#define SYS_exit    2
#define SYS_wait    3
#define SYS_pipe    4
#define SYS_read    5
#define SYS_kill    6
#define SYS_exec    7
#define SYS_fstat   8
#define SYS_chdir   9
#define SYS_dup     10
#define SYS_getpid  11
#define SYS_sbrk    12
#define SYS_sleep   13
#define SYS_uptime  14
#define SYS_open    15
#define SYS_write   16
#define SYS_mknod   17
#define SYS_unlink  18
#define SYS_link    19
#define SYS_mkdir   20
#define SYS_close   21
#define SYS_time_us 22
// Threads (kernel/core/thread.c, docs/THREADS.md):
#define SYS_thread_create 23
#define SYS_thread_join   24
#define SYS_thread_exit   25
#define SYS_futex_wait    26
#define SYS_futex_wake    27
#define SYS_nharts        28
#define SYS_sysinfo       29 // kernel/include/sysinfo.h
// (30 and 31: process groups and the console's foreground, console.c)
#define SYS_setpgid 30
#define SYS_setfg   31
// 23..31 and 48 are the kernel core's; 32..47 and 49 the AI service's
// (docs/AI_SERVICE.md; kernel/ai/ai_table.c, kernel/include/aisvc.h):
#define SYS_ai_submit      32
#define SYS_ai_wait        33
#define SYS_ai_query       34
#define SYS_ai_call        35
#define SYS_ai_cancel      36
#define SYS_ai_info        37
#define SYS_ai_register    38 // worker only, from here on
#define SYS_ai_next        39
#define SYS_ai_progress    40
#define SYS_ai_complete    41
#define SYS_ai_fail        42
#define SYS_ai_take        43 // worker only: batching (non-blocking take, emit)
#define SYS_ai_emit        44
#define SYS_ai_stream      45 // any process: read the ids so far
#define SYS_ai_right       46 // any process: hold or drop the AI worker right
#define SYS_ai_submit_opts 47 // ai_submit with options: stop ids, sampler

// The kernel core, continued:
#define SYS_vlenb 48 // kernel/core/vector.c

// The AI service, continued:
#define SYS_ai_table    49 // any process: the whole table's public state
#define SYS_ai_logprobs 50 // any process: its request's log-probability records
#define SYS_ai_logprob  51 // worker only: the record of the id it emits next
#define SYS_ai_kvreport 52 // worker only: its KV cache's counters
#define SYS_ai_sched    53 // any process reads, the worker right sets: policy, step budget
#define SYS_ai_plan     54 // worker only: the order and the places of its next step

// The kernel core, continued: file mappings (kernel/core/mmap.c, docs/VM.md).
#define SYS_mmap   55
#define SYS_munmap 56

#endif
