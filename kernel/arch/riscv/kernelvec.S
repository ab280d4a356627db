# Traps taken while in the kernel (S-mode) land here, on the current
# kernel stack: save the registers a C function may clobber, call
# kerneltrap(), restore them and sret. tp is not restored: if kerneltrap
# yielded, this thread may now run on another hart, and tp names the hart.

.global kernelvec
.align 4
kernelvec:
        addi sp, sp, -144
        sd ra, 0(sp)
        sd gp, 8(sp)
        sd t0, 16(sp)
        sd t1, 24(sp)
        sd t2, 32(sp)
        sd a0, 40(sp)
        sd a1, 48(sp)
        sd a2, 56(sp)
        sd a3, 64(sp)
        sd a4, 72(sp)
        sd a5, 80(sp)
        sd a6, 88(sp)
        sd a7, 96(sp)
        sd t3, 104(sp)
        sd t4, 112(sp)
        sd t5, 120(sp)
        sd t6, 128(sp)

        call kerneltrap

        ld ra, 0(sp)
        ld gp, 8(sp)
        ld t0, 16(sp)
        ld t1, 24(sp)
        ld t2, 32(sp)
        ld a0, 40(sp)
        ld a1, 48(sp)
        ld a2, 56(sp)
        ld a3, 64(sp)
        ld a4, 72(sp)
        ld a5, 80(sp)
        ld a6, 88(sp)
        ld a7, 96(sp)
        ld t3, 104(sp)
        ld t4, 112(sp)
        ld t5, 120(sp)
        ld t6, 128(sp)
        addi sp, sp, 144
        sret
