// Prototypes of every function used across kernel files, grouped by the
// file that defines them. The file system's are in fsdefs.h (included last).
#ifndef AISVC_DEFS_H
#define AISVC_DEFS_H

#include "types.h"
#include "riscv.h"

struct context;
struct cpu;
struct file;
struct inode;
struct proc;
struct spinlock;
struct sleeplock;
struct stat;
struct fpstate;
struct vecstate;

// start.c
extern volatile uint64 fdt_pa;
extern volatile int sstc_ok;
extern volatile int misa_vector;

// main.c
extern int nharts_used;

// fdt.c
int fdt_parse(uint64 pa, uint64 *ram_base, uint64 *ram_size, int *nharts);
uint64 fdt_size(uint64 pa);
int fdt_bootargs(uint64 pa, char *buf, int n);

// bootargs.c
void bootargs_init(uint64 fdt);
int bootargs_for_init(char **argv, int max);
int bootarg_num(const char *key, uint64 lo, uint64 hi, uint64 *val);

// console.c
void consoleinit(void);
void consoleintr(int c);
void consputc(int c);
int consoleread(int user_dst, uint64 dst, int n);
int consolewrite(int user_src, uint64 src, int n);

// uart.c
void uartinit(void);
void uartintr(void);
void uartputc_sync(int c);
void uartwrite(const char *buf, int n);

// plic.c
void plicinit(void);
void plicinithart(void);
int plic_claim(void);
void plic_complete(int irq);

// virtio_console.c
void virtio_port_init(void);
void virtio_port_intr(void);

// printf.c
void printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void panic(const char *s) __attribute__((noreturn));
void printfinit(void);
extern volatile int panicked;

// kalloc.c
void kinit(uint64 ram_end, uint64 dirty_lo, uint64 dirty_hi);
void *kalloc(void);
void *kzalloc(void);
void kfree(void *pa);
uint64 kfreepages(void);
void *kreserve(uint64 nbytes);

// vm.c
void kvminit(uint64 ram_end);
void kvminithart(void);
void vm_use(pagetable_t, uint64);
uint64 vm_newid(void);
void vm_tick(void);
extern pagetable_t kernel_pagetable;
void kvmmap(pagetable_t kpt, uint64 va, uint64 pa, uint64 sz, int perm);
int mappages(pagetable_t pt, uint64 va, uint64 sz, uint64 pa, int perm);
pte_t *walk(pagetable_t pt, uint64 va, int alloc);
uint64 walkaddr(pagetable_t pt, uint64 va);
int user_range_ok(uint64 va, uint64 len);
pagetable_t uvmcreate(void);
int uvmalloc(pagetable_t pt, uint64 oldsz, uint64 newsz, int xperm);
uint64 uvmdealloc(pagetable_t pt, uint64 oldsz, uint64 newsz);
int uvmcopy(pagetable_t old, pagetable_t new, uint64 sz);
void uvmfree(pagetable_t pt, uint64 sz);
void uvmunmap(pagetable_t pt, uint64 va, uint64 npages, int do_free);
void uvmclear(pagetable_t pt, uint64 va);
int copyout(pagetable_t pt, uint64 dstva, void *src, uint64 len);
int copyin(pagetable_t pt, void *dst, uint64 srcva, uint64 len);
int copyinstr(pagetable_t pt, char *dst, uint64 srcva, uint64 max);
void vm_each(
    pagetable_t pt, uint64 start, uint64 end, int (*fn)(pte_t *, uint64, void *), void *arg);

// mmap.c
int mmap_fault(pagetable_t pt, uint64 va, int write);
const char *mmap_why(int err);
int mmap_fork(struct proc *parent, struct proc *child);
void mmap_exit(struct proc *l, pagetable_t pt);
uint64 mmap_floor(struct proc *l);
void mmap_stats(struct proc *l, uint64 *resident, uint64 *shared, uint64 *faults);

// proc.c
int cpuid(void);
struct cpu *mycpu(void);
struct proc *myproc(void);
void procinit(void);
void proc_mapstacks(pagetable_t kpt);
pagetable_t proc_pagetable(struct proc *p);
void proc_freepagetable(pagetable_t pt, uint64 sz);
void userinit(void);
int fork(void);
void exit(int status) __attribute__((noreturn));
int wait(uint64 addr);
int kill(int pid);
int kill_pgrp(int pgid);
int setpgid(int pid, int pgid);
void setkilled(struct proc *p);
int killed(struct proc *p);
int growproc(long n, uint64 *oldsz);
struct proc *allocproc(void); // for thread.c
void freeproc(struct proc *p);

void scheduler(void) __attribute__((noreturn));
void sched(void);
void yield(void);
int proc_waiting(void);
void sleep(void *chan, struct spinlock *lk);
void wakeup(void *chan);
void make_runnable(struct proc *p);
int either_copyout(int user_dst, uint64 dst, void *src, uint64 len);
int either_copyin(void *dst, int user_src, uint64 src, uint64 len);
void procdump(void);
int proc_count(void);
void fpu_enter(struct proc *p);

// thread.c
void threadinit(void);
struct proc *myprocess(void);
struct inode *cwd_dup(void);
int thread_count(struct proc *l);
int thread_exit_prepare(struct proc *p, int status);
int thread_exec_prepare(void);

// swtch.S
void swtch(struct context *old, struct context *new);

// fpu.S
void fpu_save(struct fpstate *f);
void fpu_restore(struct fpstate *f);

// vector.c
void vectorinit(void);
int vector_trap(struct proc *p);
void vector_leave(struct proc *p);
void vector_enter(struct proc *p);
int vector_fork(struct proc *parent, struct proc *child);
void vector_free(struct proc *p);

// vector.S
void vector_save(struct vecstate *v);
void vector_restore(struct vecstate *v);
uint64 vector_vlenb(void);

// exec.c
int exec(char *path, char **argv);

// trap.c
extern volatile uint64 ticks;
extern struct spinlock tickslock;
uint64 uptime_ticks(void);
void trapinithart(void);
void usertrapret(void);

// ai_table.c
void ai_init(void);
void ai_exit(struct proc *p);

// ai_request.c
int ai_submit(uint64 tokens, int count, int predict, uint64 opts);
int ai_wait(int reqid, uint64 out, int cap);
int ai_query(int reqid, uint64 dst);
int ai_cancel(int reqid);
int ai_call(uint64 tokens, int count, int predict, uint64 out, int cap);
int ai_info(uint64 dst);
int ai_table(uint64 dst, int size);
int ai_stream(int reqid, uint64 dst, int from, int cap);
int ai_logprobs(int reqid, uint64 dst, int from, int cap);

// ai_worker.c
int ai_register(int vocab, int seq_len);
int ai_right(int drop);
int ai_next(uint64 dst);
int ai_take(uint64 dst, int places);
int ai_progress(int reqid, int ntokens);
int ai_emit(int reqid, uint64 ids, int n);
int ai_logprob(int reqid, uint64 rec);
int ai_complete(int reqid, uint64 ids, int n);
int ai_fail(int reqid, int err);
int ai_kvreport(int reqid, int cached, uint64 st);

// ai_sched.c
int ai_plan(uint64 dst);
int ai_sched(uint64 u);

// syscall.c
void syscall(void);
int argint(int n, int *ip);
int argaddr(int n, uint64 *ip);
int arglong(int n, long *ip);
int argstr(int n, char *buf, int max);
int fetchaddr(uint64 addr, uint64 *ip);
int fetchstr(uint64 addr, char *buf, int max);

// spinlock.c
void initlock(struct spinlock *lk, char *name);
void acquire(struct spinlock *lk);
void release(struct spinlock *lk);
int holding(struct spinlock *lk);
void push_off(void);
void pop_off(void);

// sleeplock.c
void initsleeplock(struct sleeplock *lk, char *name);
void acquiresleep(struct sleeplock *lk);
void releasesleep(struct sleeplock *lk);
int holdingsleep(struct sleeplock *lk);

// string.c
void *memset(void *dst, int c, uint64 n);
void *memmove(void *dst, const void *src, uint64 n);
void *memcpy(void *dst, const void *src, uint64 n);
int memcmp(const void *a, const void *b, uint64 n);
int strncmp(const char *p, const char *q, uint n);
char *strncpy(char *s, const char *t, int n);
char *safestrcpy(char *s, const char *t, int n);
int strlen(const char *s);

#define NELEM(x)              (sizeof(x) / sizeof((x)[0]))
#define offsetof(type, field) __builtin_offsetof(type, field)

#include "fsdefs.h"

#endif
