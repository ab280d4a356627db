# Save and restore a user process's vector state (struct vecstate in
# proc.h: vstart, vl, vtype, vcsr at offsets 0-24, the register page's
# address at 32). The kernel is compiled without V; only this file enables
# it. The caller makes sure sstatus.VS is not Off. Whole-register loads
# and stores (vl8r.v, vs8r.v) move v0-v31 whatever vtype and vl are, so
# the state is saved exactly as the process left it, vill included.

.option arch, +v

# vector_save(struct vecstate *v)
.global vector_save
vector_save:
        csrr t0, vstart
        sd t0, 0(a0)
        csrr t0, vl
        sd t0, 8(a0)
        csrr t0, vtype
        sd t0, 16(a0)
        csrr t0, vcsr
        sd t0, 24(a0)
        csrw vstart, zero       # whole-register stores start at vstart
        ld t1, 32(a0)
        csrr t2, vlenb
        slli t2, t2, 3          # bytes in 8 registers
        vs8r.v v0, (t1)
        add t1, t1, t2
        vs8r.v v8, (t1)
        add t1, t1, t2
        vs8r.v v16, (t1)
        add t1, t1, t2
        vs8r.v v24, (t1)
        ret

# vector_restore(struct vecstate *v)
.global vector_restore
vector_restore:
        csrw vstart, zero
        ld t1, 32(a0)
        csrr t2, vlenb
        slli t2, t2, 3
        vl8r.v v0, (t1)
        add t1, t1, t2
        vl8r.v v8, (t1)
        add t1, t1, t2
        vl8r.v v16, (t1)
        add t1, t1, t2
        vl8r.v v24, (t1)
        # vsetvl gives back vl exactly (it was <= VLMAX of vtype), or
        # vill and vl 0 if vtype had vill set.
        ld t0, 8(a0)
        ld t1, 16(a0)
        vsetvl zero, t0, t1
        ld t0, 24(a0)
        csrw vcsr, t0
        ld t0, 0(a0)
        csrw vstart, t0
        ret

# vector_vlenb(): the vlenb CSR (bytes per vector register).
.global vector_vlenb
vector_vlenb:
        csrr a0, vlenb
        ret
