// Machine-mode set-up, run once by every hart before the kernel proper.
//
// With -bios none there is no firmware: the kernel starts in M-mode and
// must itself hand everything to S-mode. start() delegates all exceptions
// and interrupts to S-mode, opens physical memory to S and U mode (PMP),
// lets S and U mode read the `time` CSR, and hands the timer to S-mode
// through the Sstc extension (S-mode writes stimecmp itself, so no M-mode
// timer handler is needed). The one interrupt M-mode keeps is the CLINT
// software interrupt, which harts send each other to wake from wfi:
// machvec.S hands it on to S-mode. Then mret drops into main() in S-mode.
#include "kernel/include/types.h"
#include "kernel/include/param.h"
#include "kernel/include/riscv.h"
#include "kernel/include/defs.h"

void main(void);
void machvec(void);

// Boot stacks, one page per hart; entry.S points sp into them.
__attribute__((aligned(16))) char stack0[4096 * NCPU];

// The device tree's physical address, passed by QEMU in a1.
volatile uint64 fdt_pa;

// Two registers' room per hart for machvec.S (mscratch points here).
static uint64 machvec_save[NCPU][2];

// Set if this machine's harts implement Sstc; main() checks it.
volatile int sstc_ok;

// Set if misa has the vector extension (kernel/core/vector.c).
volatile int misa_vector;

// Every hart starts here in machine mode (entry.S, on its stack0 slice):
// hands interrupts and exceptions to S-mode, opens all memory to it,
// enables Sstc and the counters, notes hart 0's device tree, then mret
// into main in S-mode with paging off and tp = hartid.
void
start(uint64 hartid, uint64 dtb)
{
  uint64 x = csr_read(mstatus);
  x &= ~MSTATUS_MPP_MASK;
  x |= MSTATUS_MPP_S;
  csr_write(mstatus, x);
  csr_write(mepc, (uint64)main);
  csr_write(satp, 0);

  csr_write(medeleg, 0xffff);
  csr_write(mideleg, 0xffff);
  csr_set(sie, IE_SEIE | IE_STIE | IE_SSIE);

  // One TOR region covering all addresses, RWX for S and U mode.
  csr_write(pmpaddr0, 0x3fffffffffffffUL);
  csr_write(pmpcfg0, 0xf);

  // time, cycle and instret readable from S-mode (and U via scounteren).
  csr_write(mcounteren, 7);
  csr_set(CSR_MENVCFG, MENVCFG_STCE);
  if (hartid == 0) {
    sstc_ok = (csr_read(CSR_MENVCFG) & MENVCFG_STCE) != 0;
    fdt_pa = dtb;
    misa_vector = (csr_read(misa) & MISA_V) != 0;
  }
  // Wake-up calls from other harts: machvec.S turns them into SSIP.
  csr_write(mscratch, (uint64)machvec_save[hartid]);
  csr_write(mtvec, (uint64)machvec);
  csr_set(mie, MIE_MSIE);

  // No timer interrupt until trapinithart() arms one.
  csr_write(CSR_STIMECMP, -1UL);

  w_tp(hartid);
  asm volatile("mret");
}
