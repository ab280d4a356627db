# RVV 1.0 kernels for the LLM runtime: the int8 matrix kernels
# (user/llm/kernels_vec.c packs the weights and calls these;
# docs/PERF_NOTES.md, facts 9, 17 and 33, "RVV written for TCG is 2-3x scalar on QEMU 10",
# "the RVV kernels on QEMU 10, vlen 256" and "what one vector instruction costs"), and at the end
# the Gated DeltaNet's state update.
#
# Rows lie across vector lanes: each 32-bit lane accumulates one output
# row. A block of B rows (B = VLMAX for e32 and the caller's LMUL) is
# packed so that word k4 of lane r holds the 4 weights of row r at columns
# 4*k4 .. 4*k4+3 (word index k4 * B + r), each offset by 128 to an
# unsigned byte u = w + 128, so one unit-stride load brings 4 columns of
# all B rows. The word W itself and W >> 8, W >> 16, W >> 24 (one logical
# shift each) are multiplied by the activations' column factors y_0..y_3
# (a scalar register: vmul.vx, then vadd.vv), which the quantiser makes
# so that the higher bytes cancel and the sum is that of q_k * u_k (YWORD).
# The offset comes back out once per group of 32 columns (qs = 128 * the
# group's sum of q), and the int32 group sum is then multiplied by mult =
# wm[r][g] * m[g] (at most 2^30) into an int64 row total: exactly the
# integers of the scalar kernel (user/llm/kernels.c, matmul1), so every
# output is the same. Under QEMU 10 an inline vector op costs about the
# same per byte whatever it does, so the count of ops per product is what
# the kernels' speed is (fact 33, "what one vector instruction costs").
# vtype arrives in a register (e32, ta, ma, LMUL 1-4); the e64 totals use
# twice the LMUL.
#
# Registers: see each kernel (the matvec comes in four versions, the
# 4-position kernel in two). The code sits on two pages of its own
# (PERF_NOTES.md, fact 4, "hot code in one 4 KiB page").

        .option arch, +v
        .section .text.hot.rvv, "ax", @progbits
        .balign 4096

# c += v * y_k, y_k the 16-bit field k of sreg (y_0..y_3 of one
# position's 4 columns, as one 8-byte load leaves them), through the
# scalar tmp; p is scratch (may be v).
.macro YPOS k, sreg, tmp, c, v, p
        .if \k - 3
        slli \tmp, \sreg, 48 - 16 * \k
        srai \tmp, \tmp, 48
        .else
        srai \tmp, \sreg, 48
        .endif
        vmul.vx \p, \v, \tmp
        vadd.vv \c, \c, \p
.endm

# acc += the 4 columns of each lane of wreg (offset weights u = w + 128)
# times y_0..y_3 at off(a2): with V_0 = W and V_k = W >> 8k (logical),
# sum_k y_k V_k = sum_k q_k u_k modulo 2^32 when y_0 = q_0 and y_k = q_k -
# 256 q_{k-1} (the higher bytes in each V_k cancel), so one shift per
# byte where sign-extension takes two; |y_k| < 2^15, so one 8-byte load
# brings the four (kernels.h, struct llm_qact's ys). scr is scratch.
.macro YWORD acc, scr, wreg, off
        ld t5, \off(a2)
        YPOS 0, t5, t6, \acc, \wreg, \scr
        .irp k, 1, 2, 3
        vsrl.vi \scr, \wreg, 8 * \k
        YPOS \k, t5, t6, \acc, \scr, \scr
        .endr
.endm

# The 8 columns of y at a2 against two word vectors, w0 and w1.
.macro YCOLS8 acc, scr, w0, w1
        YWORD \acc, \scr, \w0, 0
        YWORD \acc, \scr, \w1, 8
        addi a2, a2, 16
.endm

# Four register groups to a5, a5 + step, ... (a5 advances).
.macro STORE4 store, step, r0, r1, r2, r3
        \store \r0, (a5)
        .irp r, \r1, \r2, \r3
        add a5, a5, \step
        \store \r, (a5)
        .endr
.endm

# The one-position kernels' int32 sum S of one group of 32 columns in
# acc (weights at a0, y at a2, qs at a7, each advanced past the group;
# t1 = bytes per two word vectors).
.macro GROUP_SUM load, acc, scr, w0, w1
        vmv.v.i \acc, 0
        li t4, 4                        # 4 x 8 columns per group
2:      \load \w0, (a0)
        add a0, a0, t1
        YCOLS8 \acc, \scr, \w0, \w1
        addi t4, t4, -1
        bnez t4, 2b
        lw t5, 0(a7)                    # S = sum q u - 128 sum q
        addi a7, a7, 4
        vsub.vx \acc, \acc, t5
.endm

# dst = wm[g][.] * m[g], the group's multipliers (wm at a1, m at a3, each
# advanced past the group; t3 = bytes per word vector).
.macro GROUP_MULT mload, dst
        \mload \dst, (a1)
        add a1, a1, t3
        lw t5, 0(a3)
        addi a3, a3, 4
        vmul.vx \dst, \dst, t5
.endm

# void llm_rvv_matvec_{m4,m2}_{a,b,c}(const int8 *w, const int32 *wm,
#     const int16 *y, const int32 *m, long ng, int64 *t, long vtype,
#     const int32 *qs)
# One block: t[r] = sum_g (wm[g][r] * m[g]) * (sum_k w[r][32g+k] * q[32g+k]),
# w and wm the block's packed weights (offset by 128) and multipliers (ng
# groups), y the activations' column factors (YWORD) and qs[g] = 128 *
# the sum of group g's q, which takes the offset back out. One
# whole-register load brings two word vectors (8 columns): a vector load
# costs about the same up to 1 KiB (PERF_NOTES.md, fact 9, "RVV written for TCG
# is 2-3x scalar on QEMU 10"), so fewer and larger loads pay. The m4 versions
# (LMUL 4: vlen 128 and 256) load 8 registers, the m2 ones (vlen 512) 4. Every
# load and store here names byte elements (vl8re8.v, vs8r.v, ...), whatever the
# data: a register holds the same bytes either way, and QEMU 10 copies a
# byte-element access as one block but moves wider elements one at a time
# (PERF_NOTES.md, fact 25, "vector loads of bytes, not words").
#
# Three versions use different registers for the group sums (acc), the
# weights (w0, w1), the scratch (scr) and the int64 totals (tot): an op on
# a register that a host page boundary cuts runs about 4x slower in QEMU
# 10, and where the boundary falls differs between QEMU processes and
# harts (PERF_NOTES.md, fact 19, "where QEMU keeps the vector registers").
# Whichever single register it cuts, one version leaves it out of its inline
# ops (the totals only meet a helper call, once per group): kernels_vec.c
# times them and takes the fastest.
.macro MATVEC name, load, mload, tstore, acc, scr, w0, w1, tot
        .global \name
        .type \name, @function
\name:
        addi t2, a6, 9                  # e64 and twice the LMUL
        vsetvl t0, zero, t2
        vmv.v.i \tot, 0
        vsetvl t0, zero, a6             # t0 = B
        slli t3, t0, 2                  # bytes per packed word vector
        slli t1, t0, 3                  # bytes per two
1:      GROUP_SUM \load, \acc, \scr, \w0, \w1
        GROUP_MULT \mload, \scr          # mult = wm[g][.] * m[g]
        vwmacc.vv \tot, \scr, \acc
        addi a4, a4, -1
        bnez a4, 1b
        \tstore \tot, (a5)
        ret
        .size \name, . - \name
.endm

        MATVEC llm_rvv_matvec_m4_a, vl8re8.v, vl4re8.v, vs8r.v, v4, v16, v8, v12, v24
        MATVEC llm_rvv_matvec_m4_b, vl8re8.v, vl4re8.v, vs8r.v, v0, v20, v8, v12, v24
        MATVEC llm_rvv_matvec_m4_c, vl8re8.v, vl4re8.v, vs8r.v, v4, v16, v24, v28, v8
        MATVEC llm_rvv_matvec_m2_a, vl4re8.v, vl2re8.v, vs4r.v, v4, v16, v8, v10, v24
        MATVEC llm_rvv_matvec_m2_b, vl4re8.v, vl2re8.v, vs4r.v, v0, v20, v8, v10, v24
        MATVEC llm_rvv_matvec_m2_c, vl4re8.v, vl2re8.v, vs4r.v, v4, v16, v24, v26, v8

# void llm_rvv_matvecp_{m4,m2}(const int8 *w, const int32 *wm,
#     const int16 *y, const int32 *m, long ng, int32 *p, long vtype,
#     const int32 *qs)
# llm_rvv_matvec with inline ops in place of the widening helper (about
# 80 ns a call under QEMU 10, against about 2 ns for an inline op of 128
# bytes: PERF_NOTES.md, fact 33, "what one vector instruction costs"). Each
# group's int32 sum S (|S| <= 32 * 128 * 127 < 2^19) and multiplier M (0 <=
# M <= 2^30) are cut into S = S_hi * 2^10 + S_lo and M = M_hi * 2^15 + M_lo
# (S_lo < 2^10, M_lo < 2^15), and the four products are summed over the
# groups in four int32 sums, which cannot overflow for ng <= 128 (S_lo *
# M_lo and S_lo * M_hi are below 2^25 and kept as uint32; |S_hi * M_lo| and
# |S_hi * M_hi| are at most 2^24): p[0..B) sum S_lo*M_lo, p[B..2B)
# S_lo*M_hi, p[2B..3B) S_hi*M_lo, p[3B..4B) S_hi*M_hi, from which
# kernels_vec.c forms the same int64 totals as llm_rvv_matvec. The four sums
# take the registers the totals left, so at each group's end the sum,
# scratch and weight registers are the only temporaries and S_lo is formed
# twice.
.macro MATVECP name, load, mload, pstore, acc, scr, w0, w1, pll, plh, phl, phh
        .global \name
        .type \name, @function
\name:
        vsetvl t0, zero, a6             # t0 = B
        vmv.v.i \pll, 0
        vmv.v.i \plh, 0
        vmv.v.i \phl, 0
        vmv.v.i \phh, 0
        slli t3, t0, 2                  # bytes per packed word vector
        slli t1, t0, 3                  # bytes per two
        li t0, 0x3ff                    # S_lo = S & t0
        li t2, 0x7fff                   # M_lo = M & t2
1:      GROUP_SUM \load, \acc, \scr, \w0, \w1
        GROUP_MULT \mload, \w0           # M = wm[g][.] * m[g]
        vand.vx \w1, \w0, t2            # M_lo
        vand.vx \scr, \acc, t0          # S_lo
        vmul.vv \scr, \scr, \w1
        vadd.vv \pll, \pll, \scr
        vsra.vi \scr, \acc, 10          # S_hi
        vmul.vv \w1, \w1, \scr
        vadd.vv \phl, \phl, \w1
        vsra.vi \w0, \w0, 15            # M_hi
        vmul.vv \scr, \scr, \w0
        vadd.vv \phh, \phh, \scr
        vand.vx \acc, \acc, t0          # S_lo again
        vmul.vv \acc, \acc, \w0
        vadd.vv \plh, \plh, \acc
        addi a4, a4, -1
        bnez a4, 1b
        STORE4 \pstore, t3, \pll, \plh, \phl, \phh
        ret
        .size \name, . - \name
.endm

        MATVECP llm_rvv_matvecp_m4, vl8re8.v, vl4re8.v, vs4r.v, v0, v4, v8, v12, v16, v20, v24, v28
        MATVECP llm_rvv_matvecp_m2, vl4re8.v, vl2re8.v, vs2r.v, v0, v2, v4, v6, v8, v10, v12, v14

# V_k of each lane of w (V_0 = w, V_k = w >> 8k, logical: YWORD) times
# the 4 positions' y_k (in s0-s3) through p, added to c0-c3; V_k is
# formed once in b for the four.
.macro YMAC4 k, c0, c1, c2, c3, w, b, p
        .if \k
        vsrl.vi \b, \w, 8 * \k
        YPOS \k, s0, t5, \c0, \b, \p
        YPOS \k, s1, t5, \c1, \b, \p
        YPOS \k, s2, t5, \c2, \b, \p
        YPOS \k, s3, t5, \c3, \b, \p
        .else
        YPOS 0, s0, t5, \c0, \w, \p
        YPOS 0, s1, t5, \c1, \w, \p
        YPOS 0, s2, t5, \c2, \w, \p
        YPOS 0, s3, t5, \c3, \w, \p
        .endif
.endm

# tot += (wm[g] * m_p[g]) * (acc - qs_p[g]), with wm[g] in b, m_p[g] at
# t0 (advanced by t2) and qs_p[g] at t0 + a6; p is scratch.
.macro TOTAL acc, tot, b, p
        add t5, t0, a6
        lw t5, 0(t5)
        vsub.vx \acc, \acc, t5
        lw t5, 0(t0)
        add t0, t0, t2
        vmul.vx \p, \b, t5
        vwmacc.vv \tot, \p, \acc
.endm

# void llm_rvv_matvec4_{m2,m1}_{a,b}(const int8 *w, const int32 *wm,
#     const int16 *y, const int32 *m, long ng, int64 *t, long vtype, long n,
#     const int32 *qs)
# llm_rvv_matvec for 4 positions (y + p*n, m + p*ng, qs + p*ng; n = 32 *
# ng) and
# half a block: vtype has half the LMUL of the packing's, so a load takes
# the first half of a packed word vector, and w and wm advance by two.
# vmul.vx and vadd.vv rather than vmacc.vx: QEMU 10 runs vmacc through a
# helper call, 2-3x slower. Totals to t[p*H .. p*H+H), H = VLMAX.
# One 8-byte load per position brings 4 columns' y (s0-s3, saved).
# load: vl2re8.v or vl1re8.v, one register group at the kernel's LMUL.
# Two versions, a and b, keep their inline ops on disjoint registers
# (group sums c0-c3, weights w, byte b, product p; the int64 totals
# t0r-t3r only meet the widening helper): whichever register a host page
# boundary cuts, one of them runs at full speed (PERF_NOTES.md, facts 19
# and 26, "where QEMU keeps the vector registers" and "the prefill kernel's
# second register set"); kernels_vec.c times both, as for the matvec.
.macro MATVEC4 name, load, tstore, c0, c1, c2, c3, w, b, p, t0r, t1r, t2r, t3r
        .global \name
        .type \name, @function
\name:
        addi sp, sp, -32
        sd s0, 0(sp)
        sd s1, 8(sp)
        sd s2, 16(sp)
        sd s3, 24(sp)
        addi t2, a6, 9
        vsetvl t0, zero, t2
        vmv.v.i \t0r, 0
        vmv.v.i \t1r, 0
        vmv.v.i \t2r, 0
        vmv.v.i \t3r, 0
        vsetvl t0, zero, a6
        slli t1, t0, 2                  # bytes per (half) word vector
        ld a6, 32(sp)                   # qs
        sub a6, a6, a3                  # qs_p[g] sits a6 bytes after m_p[g]
        slli a7, a7, 1                  # bytes per position's y
        add t3, a2, a7                  # the positions' y
        add t4, t3, a7
        add t6, t4, a7
        slli t2, a4, 2                  # bytes between positions' multipliers
1:      vmv.v.i \c0, 0
        vmv.v.i \c1, 0
        vmv.v.i \c2, 0
        vmv.v.i \c3, 0
        li a7, 8
2:      \load \w, (a0)
        add a0, a0, t1
        add a0, a0, t1
        ld s0, 0(a2)                    # 4 columns of each position
        ld s1, 0(t3)
        ld s2, 0(t4)
        ld s3, 0(t6)
        .irp k, 0, 1, 2, 3
        YMAC4 \k, \c0, \c1, \c2, \c3, \w, \b, \p
        .endr
        addi a2, a2, 8
        addi t3, t3, 8
        addi t4, t4, 8
        addi t6, t6, 8
        addi a7, a7, -1
        bnez a7, 2b
        \load \b, (a1)
        add a1, a1, t1
        add a1, a1, t1
        mv t0, a3
        TOTAL \c0, \t0r, \b, \p
        TOTAL \c1, \t1r, \b, \p
        TOTAL \c2, \t2r, \b, \p
        TOTAL \c3, \t3r, \b, \p
        addi a3, a3, 4
        addi a4, a4, -1
        bnez a4, 1b
        slli t1, t1, 1                  # bytes per position's totals
        STORE4 \tstore, t1, \t0r, \t1r, \t2r, \t3r
        ld s0, 0(sp)
        ld s1, 8(sp)
        ld s2, 16(sp)
        ld s3, 24(sp)
        addi sp, sp, 32
        ret
        .size \name, . - \name
.endm

# The 4-position kernels sit on a page of their own: with the others they
# would not fit in one.
        .pushsection .text.hot.rvv4, "ax", @progbits
        .balign 4096
        MATVEC4 llm_rvv_matvec4_m2_a, vl2re8.v, vs4r.v, v0, v2, v4, v6, v8, v12, v14, v16, v20, v24, v28
        MATVEC4 llm_rvv_matvec4_m2_b, vl2re8.v, vs4r.v, v16, v18, v20, v22, v24, v28, v30, v0, v4, v8, v12
        MATVEC4 llm_rvv_matvec4_m1_a, vl1re8.v, vs2r.v, v0, v2, v4, v6, v8, v12, v14, v16, v20, v24, v28
        MATVEC4 llm_rvv_matvec4_m1_b, vl1re8.v, vs2r.v, v16, v18, v20, v22, v24, v28, v30, v0, v4, v8, v12
        .popsection

# void llm_rvv_delta_{m8,m4}(double *S, const double *k, const double *q,
#     const double *v, long kd, long vd, double *o, long vtype,
#     double beta, double decay)
# One step of the gated delta rule for one value head (kernels.c,
# llm_delta_step, says what it computes), with the columns j of the state
# S (kd rows of vd doubles) across the lanes. Column j needs only kv_j,
# delta_j and o_j, so the kernel runs both passes over all rows for one
# chunk of C columns (C = VLMAX for vtype: e64 and LMUL 8 or 4, 16 or 32
# doubles; vd a multiple of C) before the next chunk. Each lane does the
# scalar code's float operations on its column in the same order
# (vfmul, then vfadd: no fused multiply-add, as -ffp-contract=off keeps
# the C), so S and o are bit for bit the scalar ones.
# Registers: v0 products, v8 kv then delta, v16 o, v24 a chunk of a row.
.macro DELTA name, load, store
        .global \name
        .type \name, @function
\name:
        vsetvl t0, zero, a7             # t0 = C
        slli t1, t0, 3                  # bytes per chunk
        slli t2, a5, 3                  # bytes per row
        mv t3, zero                     # the chunk's byte offset
1:      vmv.v.i v8, 0                   # kv = +0.0
        add t4, a0, t3
        mv t5, a1
        mv t6, a4
2:      \load v24, (t4)                 # S_ij *= decay; kv_j += S_ij * k_i
        vfmul.vf v24, v24, fa1
        \store v24, (t4)
        fld ft0, 0(t5)
        vfmul.vf v0, v24, ft0
        vfadd.vv v8, v8, v0
        add t4, t4, t2
        addi t5, t5, 8
        addi t6, t6, -1
        bnez t6, 2b
        add t4, a3, t3                  # delta_j = (v_j - kv_j) * beta
        \load v0, (t4)
        vfsub.vv v8, v0, v8
        vfmul.vf v8, v8, fa0
        vmv.v.i v16, 0                  # o = +0.0
        add t4, a0, t3
        mv t5, a1
        mv a7, a2
        mv t6, a4
3:      \load v24, (t4)                 # S_ij += k_i * delta_j; o_j += S_ij * q_i
        fld ft0, 0(t5)
        vfmul.vf v0, v8, ft0
        vfadd.vv v24, v24, v0
        \store v24, (t4)
        fld ft1, 0(a7)
        vfmul.vf v0, v24, ft1
        vfadd.vv v16, v16, v0
        add t4, t4, t2
        addi t5, t5, 8
        addi a7, a7, 8
        addi t6, t6, -1
        bnez t6, 3b
        add t4, a6, t3
        \store v16, (t4)
        add t3, t3, t1
        bltu t3, t2, 1b
        ret
        .size \name, . - \name
.endm

        DELTA llm_rvv_delta_m8, vl8re8.v, vs8r.v
        DELTA llm_rvv_delta_m4, vl4re8.v, vs4r.v
