// exec: replace the current process's memory with a program from the
// file system.
//
// Only static ELF64 little-endian RISC-V executables are accepted. The
// header and every loadable segment are checked before anything is
// mapped: class, data encoding, machine, type, program-header size and
// count, segment sizes and their sums (for overflow), page-aligned
// ascending addresses at or above USERBASE and below the trapframe.
// Anything else fails with -ENOEXEC; the old image is only dropped once
// the new one is complete, so a failed exec returns to the caller intact.
//
// The new image: page 0 unmapped, the segments, a guard page (no PTE_U),
// USTACKSIZE of stack with argv on top, then the heap (p->heapbase).
// A segment may sit at any page-aligned address up to that limit, however
// high: the hole below it costs nothing, because fork, exit and this
// file's teardown walk the page table, not the range below p->sz (vm.c).
#include "kernel/include/types.h"
#include "kernel/include/param.h"
#include "kernel/include/errno.h"
#include "kernel/include/memlayout.h"
#include "kernel/include/riscv.h"
#include "kernel/include/spinlock.h"
#include "kernel/include/proc.h"
#include "kernel/include/elf.h"
#include "kernel/include/defs.h"

// Page permissions for a segment's ELF flags.
static int
flags2perm(int flags)
{
  int perm = 0;
  if (flags & ELF_PROG_FLAG_X)
    perm |= PTE_X;
  if (flags & ELF_PROG_FLAG_W)
    perm |= PTE_W;
  return perm;
}

// Is elf the header of a RISC-V 64-bit little-endian executable this
// kernel can load (at most 64 program headers)?
static int
elf_ok(struct elfhdr *elf)
{
  return elf->magic == ELF_MAGIC && elf->class == ELFCLASS64 && elf->data == ELFDATA2LSB &&
      elf->type == ET_EXEC && elf->machine == EM_RISCV &&
      elf->phentsize == sizeof(struct proghdr) && elf->phnum <= 64;
}

// Is the segment loadable above sz (the end of the previous one)?
static int
segment_ok(struct proghdr *ph, uint64 sz)
{
  return ph->memsz >= ph->filesz && ph->vaddr + ph->memsz >= ph->vaddr &&
      ph->off + ph->filesz >= ph->off && ph->vaddr % PGSIZE == 0 && ph->vaddr >= sz &&
      ph->vaddr + ph->memsz <= USERTOP - PGSIZE - USTACKSIZE;
}

// Reads a segment's file bytes into its pages, which are mapped already.
// Returns 0, or -ENOEXEC if the file is shorter than the segment says.
static int
loadseg(pagetable_t pt, uint64 va, struct inode *ip, uint64 off, uint64 sz)
{
  for (uint64 i = 0; i < sz; i += PGSIZE) {
    uint64 pa = walkaddr(pt, va + i);
    if (pa == 0)
      panic("loadseg: page not mapped");
    uint n = sz - i < PGSIZE ? sz - i : PGSIZE;
    if (readi(ip, 0, pa, off + i, n) != n)
      return -ENOEXEC;
  }
  return 0;
}

// Maps and loads every loadable segment of ip. *szp is the image's end.
// Returns 0 or a negative error code.
static int
load_segments(pagetable_t pt, struct inode *ip, struct elfhdr *elf, uint64 *szp)
{
  struct proghdr ph;

  for (int i = 0; i < elf->phnum; i++) {
    uint64 off = elf->phoff + i * sizeof(ph);
    if (readi(ip, 0, (uint64)&ph, off, sizeof(ph)) != sizeof(ph))
      return -ENOEXEC;
    if (ph.type != ELF_PROG_LOAD)
      continue;
    if (!segment_ok(&ph, *szp))
      return -ENOEXEC;
    int err = uvmalloc(pt, ph.vaddr, ph.vaddr + ph.memsz, flags2perm(ph.flags));
    if (err < 0)
      return err;
    *szp = PGROUNDUP(ph.vaddr + ph.memsz);
    if ((err = loadseg(pt, ph.vaddr, ip, ph.off, ph.filesz)) < 0)
      return err;
  }
  return 0;
}

// Copies the argument strings and the argv array to the top of the stack
// [base, *spp). Returns argc (and the new sp in *spp), or -E2BIG if they
// do not fit.
static int
push_args(pagetable_t pt, char **argv, uint64 base, uint64 *spp)
{
  uint64 ustack[MAXARG + 1];
  uint64 sp = *spp;
  int argc;

  for (argc = 0; argv[argc]; argc++) {
    if (argc >= MAXARG)
      return -E2BIG;
    sp -= strlen(argv[argc]) + 1;
    sp -= sp % 16; // the RISC-V ABI keeps sp 16-byte aligned
    if (sp < base || copyout(pt, sp, argv[argc], strlen(argv[argc]) + 1) < 0)
      return -E2BIG;
    ustack[argc] = sp;
  }
  ustack[argc] = 0;
  sp -= (argc + 1) * sizeof(uint64);
  sp -= sp % 16;
  if (sp < base || copyout(pt, sp, ustack, (argc + 1) * sizeof(uint64)) < 0)
    return -E2BIG;
  *spp = sp;
  return argc;
}

// Replaces the current process's image with the program at path, with
// arguments argv (kernel strings, 0-terminated). Returns argc (which
// becomes a0; a1 is argv), or -ENOENT, -ENOEXEC, -ENOMEM, -E2BIG.
int
exec(char *path, char **argv)
{
  struct proc *p = myproc();
  struct elfhdr elf;
  struct inode *ip;
  pagetable_t pt = 0;
  uint64 sz = USERBASE;
  int err;

  if ((err = thread_exec_prepare()) < 0)
    return err;
  begin_op();
  if ((err = namei_err(path, &ip)) < 0) {
    end_op();
    return err;
  }
  ilock(ip);
  err = -ENOEXEC;
  if (readi(ip, 0, (uint64)&elf, 0, sizeof(elf)) != sizeof(elf) || !elf_ok(&elf))
    goto bad;
  err = -ENOMEM;
  if ((pt = proc_pagetable(p)) == 0)
    goto bad;
  if ((err = load_segments(pt, ip, &elf, &sz)) < 0)
    goto bad;
  iunlockput(ip);
  end_op();
  ip = 0;

  // A guard page without PTE_U, then the stack.
  if ((err = uvmalloc(pt, sz, sz + PGSIZE + USTACKSIZE, PTE_W)) < 0)
    goto bad;
  uvmclear(pt, sz);
  uint64 stackbase = sz + PGSIZE;
  sz += PGSIZE + USTACKSIZE;
  uint64 sp = sz;
  int argc = push_args(pt, argv, stackbase, &sp);
  if ((err = argc) < 0)
    goto bad;

  char *last = path;
  for (char *s = path; *s; s++)
    if (*s == '/')
      last = s + 1;
  safestrcpy(p->name, last, sizeof(p->name));

  pagetable_t oldpt = p->pagetable;
  uint64 oldsz = p->sz;
  p->pagetable = pt;
  p->vmid = vm_newid();
  p->sz = sz;
  p->heapbase = sz;
  p->tfva = TRAPFRAME;
  p->trapframe->epc = elf.entry;
  p->trapframe->sp = sp;
  p->trapframe->a1 = sp;
  // The new program starts with zeroed FP registers; the old values,
  // possibly still in this hart's registers, are dropped.
  memset(&p->fpu, 0, sizeof(p->fpu));
  p->fpu_loaded = 0;
  vector_free(p);      // and without vector state until it uses V
  vm_use(pt, p->vmid); // this hart ran on oldpt until now
  mmap_exit(p, oldpt); // the old image's file mappings go with it
  proc_freepagetable(oldpt, oldsz);
  return argc;

bad:
  if (pt)
    proc_freepagetable(pt, sz);
  if (ip) {
    iunlockput(ip);
    end_op();
  }
  return err;
}

// exec(path, argv): copies path and the argument strings (MAXARGLEN
// bytes each at most, NUL included) into kernel pages and calls exec().
// Returns only on failure (a negative error); on success the system call
// returns argc in the new program.
uint64
sys_exec(void)
{
  char path[MAXPATH];
  char *argv[MAXARG + 1];
  uint64 uargv, uarg;
  int err, n = 0;

  if ((err = argstr(0, path, MAXPATH)) < 0)
    return err;
  argaddr(1, &uargv);
  for (;;) {
    if (n > MAXARG) {
      err = -E2BIG;
      break;
    }
    if ((err = fetchaddr(uargv + n * sizeof(uint64), &uarg)) < 0)
      break;
    if (uarg == 0) {
      argv[n] = 0;
      err = exec(path, argv);
      break;
    }
    if ((argv[n] = kalloc()) == 0) {
      err = -ENOMEM;
      break;
    }
    n++;
    if ((err = fetchstr(uarg, argv[n - 1], MAXARGLEN)) < 0) {
      err = err == -ENAMETOOLONG ? -E2BIG : err;
      break;
    }
  }
  for (int i = 0; i < n; i++)
    kfree(argv[i]);
  return err;
}
