// Physical and virtual memory layout.
//
// Physical (QEMU virt):
//   0x02000000  CLINT: each hart's MSIP word (4 bytes from the base,
//               in hart order) raises a machine software interrupt
//   0x0c000000  PLIC
//   0x10000000  UART0 (16550), IRQ 10
//   0x10001000  VIRTIO0 (virtio-mmio, the disk), IRQ 1
//   0x10002000  VIRTIO1 (virtio-mmio, the gateway's console port, if
//               QEMU has one: virtio_console.c), IRQ 2
//   0x80000000  RAM; QEMU loads the kernel here (-bios none).
//               The RAM size comes from the device tree (fdt.c).
//
// Virtual, one address space per process with the kernel in its lower
// part (vm.c says why):
//   below USERBASE (128 GiB), the kernel's: RAM, CLINT, UART0, VIRTIO0,
//     VIRTIO1 and PLIC mapped 1:1 (va == pa), and just below USERBASE each
//     process slot's kernel stack with an unmapped guard page below it.
//     None of it has PTE_U, so user code cannot touch it.
//   from USERBASE, the process's: the program's segments, a guard page,
//     the user stack (USTACKSIZE), then the heap grown by sbrk, all below
//     USERTOP; above it the trapframes of the process's threads
//     (THREADFRAME(slot), one page per process-table slot,
//     kernel/core/thread.c), then TRAPFRAME (the main thread's).
//   at the top, TRAMPOLINE, in every page table.
// Address 0 is in the kernel's part and unmapped: a null pointer faults.

#ifndef AISVC_MEMLAYOUT_H
#define AISVC_MEMLAYOUT_H

#include "param.h"
#include "riscv.h"

#define CLINT         0x02000000L
#define CLINT_MSIP(h) (CLINT + 4 * (h))

#define UART0     0x10000000L
#define UART0_IRQ 10

#define VIRTIO0     0x10001000L
#define VIRTIO0_IRQ 1

#define VIRTIO1     0x10002000L
#define VIRTIO1_IRQ 2

#define PLIC              0x0c000000L
#define PLIC_SIZE         0x400000L
#define PLIC_PRIORITY     (PLIC + 0x0)
#define PLIC_SENABLE(h)   (PLIC + 0x2080 + (h)*0x100)
#define PLIC_SPRIORITY(h) (PLIC + 0x201000 + (h)*0x2000)
#define PLIC_SCLAIM(h)    (PLIC + 0x201004 + (h)*0x2000)

#define KERNBASE 0x80000000L

// The kernel's half: everything below USERBASE (128 GiB, root entries
// 0-127 of an Sv39 table). Every user page table shares these entries
// with the kernel page table (vm.c), so user programs live above it.
#define USERBASE       (1L << 37)
#define KERNEL_ROOT_PX (USERBASE >> 30) // root entries below it (1 GiB each) are the kernel's

#define TRAMPOLINE (MAXVA - PGSIZE)
#define KSTACK(i)  (USERBASE - ((i) + 1) * (KSTACKPAGES + 1) * PGSIZE)
#define TRAPFRAME  (TRAMPOLINE - PGSIZE)
#define RAM_TOP    KSTACK(NPROC - 1) // RAM's 1:1 map ends below the kernel stacks

// The trapframe of the thread in process-table slot i, and the top of
// user memory below all of them.
#define THREADFRAME(i) (TRAPFRAME - ((i) + 1) * PGSIZE)
#define USERTOP        THREADFRAME(NPROC)

#endif
