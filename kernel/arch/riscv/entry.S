# The first instructions every hart runs. QEMU (-bios none) starts all harts
# here in M-mode with a0 = hartid and a1 = the device tree's address.
# Each hart takes its own boot stack from stack0 and calls start() in C.
# Harts beyond NCPU park forever.

#include "kernel/include/param.h"

#define BOOTSTACK 4096

.section .text.entry
.global _entry
_entry:
        li      t0, NCPU
        bgeu    a0, t0, park
        la      sp, stack0
        li      t0, BOOTSTACK
        addi    t1, a0, 1
        mul     t0, t0, t1
        add     sp, sp, t0
        call    start
park:
        wfi
        j       park
