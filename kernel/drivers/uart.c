// Driver for the 16550 UART that QEMU's virt machine puts at UART0.
//
// Input is interrupt-driven: the UART raises IRQ 10 when a byte arrives
// and uartintr() hands every waiting byte to the console's line editor.
// Output is synchronous: QEMU's transmitter is never busy for long, so the
// kernel waits for the holding register to empty and writes the byte.
#include "kernel/include/types.h"
#include "kernel/include/param.h"
#include "kernel/include/memlayout.h"
#include "kernel/include/riscv.h"
#include "kernel/include/spinlock.h"
#include "kernel/include/defs.h"

// Registers (byte offsets from UART0); see the 16550 data sheet.
#define RHR              0 // receive holding register (read)
#define THR              0 // transmit holding register (write)
#define DLL              0 // divisor latch, low byte (when LCR_DLAB)
#define DLM              1 // divisor latch, high byte (when LCR_DLAB)
#define IER              1 // interrupt enable
#define IER_RX           (1 << 0)
#define FCR              2    // FIFO control
#define FCR_ENABLE_CLEAR 0x07 // enable both FIFOs and clear them
#define LCR              3    // line control
#define LCR_8N1          0x03
#define LCR_DLAB         0x80 // divisor latch access
#define LSR              5    // line status
#define LSR_RX_READY     (1 << 0)
#define LSR_TX_IDLE      (1 << 5)

#define Reg(r) ((volatile uchar *)(UART0 + (r)))

// Keeps one process's write from interleaving with another's.
static struct spinlock uart_tx_lock;

void
uartinit(void)
{
  *Reg(IER) = 0;
  *Reg(LCR) = LCR_DLAB;
  *Reg(DLL) = 3; // 38400 baud; QEMU ignores it but real 16550s need one
  *Reg(DLM) = 0;
  *Reg(LCR) = LCR_8N1;
  *Reg(FCR) = FCR_ENABLE_CLEAR;
  *Reg(IER) = IER_RX;
  initlock(&uart_tx_lock, "uart");
}

// Writes one byte, waiting until the UART can take it. Usable with
// interrupts off (printf, echo). After a panic every other hart stops here
// so that the panic message stays readable.
void
uartputc_sync(int c)
{
  push_off();
  if (panicked)
    for (;;)
      ;
  while ((*Reg(LSR) & LSR_TX_IDLE) == 0)
    ;
  *Reg(THR) = c;
  pop_off();
}

// Writes n bytes as one piece.
void
uartwrite(const char *buf, int n)
{
  acquire(&uart_tx_lock);
  for (int i = 0; i < n; i++)
    uartputc_sync(buf[i]);
  release(&uart_tx_lock);
}

// Interrupt: pass every received byte to the console.
void
uartintr(void)
{
  while (*Reg(LSR) & LSR_RX_READY)
    consoleintr(*Reg(RHR));
}
