# The machine-mode trap vector: wake-up calls between harts.
#
# Everything else is delegated to S-mode (start.c), but a hart cannot
# interrupt another from S-mode: the only switch QEMU virt's CLINT offers
# is a hart's MSIP word, which raises a machine-level software interrupt,
# and M-level interrupts cannot be delegated. So the kernel writes 1 to the
# target's MSIP (ipi_send in proc.c) and this vector, the only M-mode
# trap a hart ever takes after boot, turns it into an S-level software
# interrupt: it clears MSIP and sets mip.SSIP, which S-mode sees as
# scause "supervisor software interrupt" (trap.c). It saves the two
# registers it uses in the hart's 16-byte area that mscratch points to.

#include "kernel/include/memlayout.h"

.section .text
.align 4
.global machvec
machvec:
        csrrw   a0, mscratch, a0
        sd      a1, 0(a0)
        sd      a2, 8(a0)
        # clear this hart's MSIP word: the request is answered
        csrr    a1, mhartid
        slli    a1, a1, 2
        li      a2, CLINT
        add     a1, a1, a2
        sw      zero, 0(a1)
        # pass it on to S-mode
        li      a1, 2
        csrs    mip, a1
        ld      a1, 0(a0)
        ld      a2, 8(a0)
        csrrw   a0, mscratch, a0
        mret
