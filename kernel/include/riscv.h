// RISC-V privileged architecture: CSR bits, CSR access, Sv39 page tables.
#ifndef AISVC_RISCV_H
#define AISVC_RISCV_H

#ifndef __ASSEMBLER__
#include "types.h"
#endif

// mstatus / sstatus
#define MSTATUS_MPP_MASK (3L << 11)
#define MSTATUS_MPP_S    (1L << 11)
#define SSTATUS_SIE      (1L << 1)  // S-mode interrupt enable
#define SSTATUS_SPIE     (1L << 5)  // interrupts enabled before the trap
#define SSTATUS_SPP      (1L << 8)  // previous mode: 1 = S, 0 = U
#define SSTATUS_FS_MASK  (3L << 13) // floating-point unit state
#define SSTATUS_FS_OFF   (0L << 13)
#define SSTATUS_FS_INIT  (1L << 13)
#define SSTATUS_FS_CLEAN (2L << 13)
#define SSTATUS_FS_DIRTY (3L << 13)
#define SSTATUS_VS_MASK  (3L << 9) // vector unit state, encoded like FS
#define SSTATUS_VS_OFF   (0L << 9)
#define SSTATUS_VS_INIT  (1L << 9)
#define SSTATUS_VS_CLEAN (2L << 9)
#define SSTATUS_VS_DIRTY (3L << 9)
#define SSTATUS_SUM      (1L << 18)

// sie / sip / mideleg bits
#define IE_SSIE  (1L << 1)
#define IE_STIE  (1L << 5)
#define IE_SEIE  (1L << 9)
#define MIE_MSIE (1L << 3) // mie: machine software interrupt (CLINT MSIP)
#define SIP_SSIP (1L << 1) // sip: supervisor software interrupt pending

// scause
#define SCAUSE_INTR          (1UL << 63)
#define IRQ_S_SOFT           1
#define IRQ_S_TIMER          5
#define IRQ_S_EXTERNAL       9
#define EXC_ILLEGAL          2
#define EXC_ECALL_U          8
#define EXC_INST_PAGE_FAULT  12
#define EXC_LOAD_PAGE_FAULT  13
#define EXC_STORE_PAGE_FAULT 15

#define MISA_V (1L << ('V' - 'A')) // the vector extension

#define MCOUNTEREN_TM (1L << 1)   // lets S (and via scounteren, U) read `time`
#define MENVCFG_STCE  (1UL << 63) // Sstc: S-mode owns stimecmp

#define CSR_MENVCFG  0x30a
#define CSR_STIMECMP 0x14d

#ifndef __ASSEMBLER__

#define CSR_STR_(x) #x
#define CSR_STR(x)  CSR_STR_(x)
#define csr_read(csr) \
  ({ \
    uint64 __v; \
    asm volatile("csrr %0, " CSR_STR(csr) : "=r"(__v)); \
    __v; \
  })
#define csr_write(csr, v) asm volatile("csrw " CSR_STR(csr) ", %0" : : "r"((uint64)(v)))
#define csr_set(csr, v)   asm volatile("csrs " CSR_STR(csr) ", %0" : : "r"((uint64)(v)))
#define csr_clear(csr, v) asm volatile("csrc " CSR_STR(csr) ", %0" : : "r"((uint64)(v)))

static inline uint64
r_tp(void)
{
  uint64 x;
  asm volatile("mv %0, tp" : "=r"(x));
  return x;
}

static inline void
w_tp(uint64 x)
{
  asm volatile("mv tp, %0" : : "r"(x));
}

static inline uint64
r_time(void)
{
  return csr_read(time);
}

static inline void
intr_on(void)
{
  csr_set(sstatus, SSTATUS_SIE);
}

static inline void
intr_off(void)
{
  csr_clear(sstatus, SSTATUS_SIE);
}

static inline int
intr_get(void)
{
  return (csr_read(sstatus) & SSTATUS_SIE) != 0;
}

// Flush the whole TLB.
static inline void
sfence_vma(void)
{
  asm volatile("sfence.vma zero, zero");
}

typedef uint64 pte_t;
typedef uint64 *pagetable_t; // 512 PTEs

#endif // __ASSEMBLER__

#define PGSIZE         4096
#define PGSHIFT        12
#define PGROUNDUP(a)   (((a) + PGSIZE - 1) & ~(uint64)(PGSIZE - 1))
#define PGROUNDDOWN(a) ((a) & ~(uint64)(PGSIZE - 1))
#define MEGAPAGE       (2L * 1024 * 1024) // a level-1 leaf maps 2 MiB

#define SATP_SV39     (8L << 60)
#define MAKE_SATP(pt) (SATP_SV39 | (((uint64)(pt)) >> 12))

#define PTE_V (1L << 0)
#define PTE_R (1L << 1)
#define PTE_W (1L << 2)
#define PTE_X (1L << 3)
#define PTE_U (1L << 4)
// Software bit (RSW): a private page of a file mapping, the process's own
// copy rather than a page of the page cache (kernel/core/mmap.c).
#define PTE_COPY (1L << 8)

#define PA2PTE(pa)     ((((uint64)(pa)) >> 12) << 10)
#define PTE2PA(pte)    (((pte) >> 10) << 12)
#define PTE_FLAGS(pte) ((pte)&0x3FF)
#define PTE_LEAF(pte)  ((pte) & (PTE_R | PTE_W | PTE_X))

// Index of va in the page table of the given level (2 = root).
#define PXSHIFT(level) (PGSHIFT + (9 * (level)))
#define PX(level, va)  ((((uint64)(va)) >> PXSHIFT(level)) & 0x1FF)

// One past the highest Sv39 address. It leaves the top bit of the
// 39 unused so addresses need no sign extension.
#define MAXVA (1L << (9 + 9 + 9 + 12 - 1))

#endif
