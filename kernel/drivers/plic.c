// The platform-level interrupt controller (PLIC) routes device interrupts
// (the UART, the virtio disk and the virtio console port) to the harts'
// S-mode. Every hart enables all three; whichever claims an interrupt
// first handles it. The port's interrupt never fires when QEMU has no
// port device.
#include "kernel/include/types.h"
#include "kernel/include/param.h"
#include "kernel/include/memlayout.h"
#include "kernel/include/riscv.h"
#include "kernel/include/defs.h"

#define Reg32(a) (*(volatile uint32 *)(a))

// Hart 0, once: give the devices a non-zero priority (0 means disabled).
void
plicinit(void)
{
  Reg32(PLIC_PRIORITY + UART0_IRQ * 4) = 1;
  Reg32(PLIC_PRIORITY + VIRTIO0_IRQ * 4) = 1;
  Reg32(PLIC_PRIORITY + VIRTIO1_IRQ * 4) = 1;
}

// Every hart: enable the devices for this hart's S-mode context and
// accept any priority above 0.
void
plicinithart(void)
{
  int hart = cpuid();
  Reg32(PLIC_SENABLE(hart)) = (1 << UART0_IRQ) | (1 << VIRTIO0_IRQ) | (1 << VIRTIO1_IRQ);
  Reg32(PLIC_SPRIORITY(hart)) = 0;
}

// Returns the pending interrupt this hart should serve, or 0 if another
// hart claimed it first.
int
plic_claim(void)
{
  return Reg32(PLIC_SCLAIM(cpuid()));
}

// Tells the PLIC this hart has served irq.
void
plic_complete(int irq)
{
  Reg32(PLIC_SCLAIM(cpuid())) = irq;
}
