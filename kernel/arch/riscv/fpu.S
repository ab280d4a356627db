# Save and restore a user process's floating-point registers and fcsr
# (struct fpstate in proc.h). The kernel is compiled without the F and D
# extensions so that it never touches these registers by accident; only
# this file enables D. The caller makes sure sstatus.FS is not Off.

.option arch, +d

.global fpu_save
fpu_save:
        .irp n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
        fsd f\n, \n*8(a0)
        .endr
        frcsr t0
        sd t0, 256(a0)
        ret

.global fpu_restore
fpu_restore:
        .irp n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
        fld f\n, \n*8(a0)
        .endr
        ld t0, 256(a0)
        fscsr t0
        ret
