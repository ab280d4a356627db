// vprobe: what one vector instruction costs under QEMU's TCG, by kind and
// register-group size. Each probe runs one instruction 16 times per loop
// turn, PROBE_TURNS turns, five times, and prints the fastest run's time
// per instruction in picoseconds. tests/host/bench_vops.py boots a guest
// with V and runs it (docs/PERF_NOTES.md, facts 33 and 35, "what one vector
// instruction costs" and "float and 64-bit vector costs"). The probes sit in
// .text.hot, a page of their own (fact 4, "hot code in one 4 KiB page"). Without V
// the first vector instruction is illegal and the kernel kills the program,
// as for any.
#include "kernel/include/param.h"
#include "user/lib/user.h"

#define PROBE_TURNS 100000
#define TIMES16(s)  s s s s s s s s s s s s s s s s

// The operands every probe starts from (probe_setup, run before each
// probe: no compiler code between it and the probe touches vector or f
// registers). The float operands are normal doubles with inexact results
// and the inexact flag set, as in the runtime (a zero or subnormal
// operand, or a clear flag, takes QEMU's slower soft-float path): ft1 and
// e64 v8-v15 hold 1 + 2^-52, ft0 and v24-v31 1.5, v16-v23 zero. Integer
// ops cost the same whatever the bits.
static const double probe_floats[2] = { 1.5, 0x1.0000000000001p0 };

static void
probe_setup(void)
{
  asm volatile(".option push\n.option arch, +v\n"
               "fld ft0, 0(%0)\nfld ft1, 8(%0)\ncsrsi fflags, 1\n"
               "vsetvli t0, zero, e64, m8, ta, ma\n"
               "vfmv.v.f v8, ft1\nvmv.v.i v16, 0\nvfmv.v.f v24, ft0\n"
               ".option pop\n"
               :
               : "r"(probe_floats)
               : "t0", "ft0", "ft1", "memory");
}

// A probe: vtype's settings, then ins 16 times a turn. %0 holds a
// page-aligned buffer's address (for the loads; a scalar operand
// elsewhere). All probes fit in one page of .text.hot (fact 4, "hot code in one 4 KiB page").
#define PROBE(fn, vt, ins) \
  __attribute__((section(".text.hot"), noinline)) static uint64 fn(char *buf) \
  { \
    uint64 t0 = time_ticks(); \
    asm volatile(".option push\n.option arch, +v\n" \
                 "vsetvli t0, zero, " vt "\n" \
                 "li t1, %1\n" \
                 "1:\n" TIMES16(ins "\n") "addi t1, t1, -1\nbnez t1, 1b\n" \
                                          ".option pop\n" \
                 : \
                 : "r"(buf), "i"(PROBE_TURNS) \
                 : "t0", "t1", "ft0", "memory"); \
    return time_ticks() - t0; \
  }

PROBE(add_m1, "e32, m1, ta, ma", "vadd.vv v24, v24, v8")
PROBE(add_m2, "e32, m2, ta, ma", "vadd.vv v24, v24, v8")
PROBE(add_m4, "e32, m4, ta, ma", "vadd.vv v24, v24, v8")
PROBE(add_m8, "e32, m8, ta, ma", "vadd.vv v24, v24, v8")
PROBE(add_e8_m4, "e8, m4, ta, ma", "vadd.vv v24, v24, v8")
PROBE(mulvx_m4, "e32, m4, ta, ma", "vmul.vx v24, v8, %0")
PROBE(mulvv_m4, "e32, m4, ta, ma", "vmul.vv v24, v24, v8")
PROBE(add_e64_m2, "e64, m2, ta, ma", "vadd.vv v24, v24, v8")
PROBE(mulvv_e64_m2, "e64, m2, ta, ma", "vmul.vv v24, v24, v8")
PROBE(sra_m4, "e32, m4, ta, ma", "vsra.vi v24, v8, 24")
PROBE(and_m4, "e32, m4, ta, ma", "vand.vx v24, v8, %0")
PROBE(macc_m4, "e32, m4, ta, ma", "vmacc.vx v24, %0, v8")
PROBE(wmacc_m2, "e32, m2, ta, ma", "vwmacc.vv v16, v8, v12")
PROBE(wmacc_m4, "e32, m4, ta, ma", "vwmacc.vv v16, v8, v12")
PROBE(vsetvli2, "e32, m4, ta, ma",
    "vsetvli t0, zero, e16, m4, ta, ma\nvsetvli t0, zero, e32, m4, ta, ma")
PROBE(load1, "e32, m4, ta, ma", "vl1re8.v v8, (%0)")
PROBE(load8, "e32, m4, ta, ma", "vl8re8.v v8, (%0)")
PROBE(load8_e32, "e32, m4, ta, ma", "vl8re32.v v8, (%0)")
PROBE(scalar_add, "e32, m4, ta, ma", "add t0, t0, %0")
PROBE(scalar_fmul, "e32, m4, ta, ma", "fmul.d ft0, ft0, ft1")
PROBE(scalar_fcvt_ld, "e32, m4, ta, ma", "fcvt.l.d t0, ft1, rne")
PROBE(scalar_fcvt_dl, "e32, m4, ta, ma", "fcvt.d.l ft0, %0")
PROBE(fmul_fcvt_dyn, "e32, m4, ta, ma", "fmul.d ft0, ft1, ft1\nfcvt.l.d t0, ft0, rne")
PROBE(fmul_fcvt_rne, "e32, m4, ta, ma", "fmul.d ft0, ft1, ft1, rne\nfcvt.l.d t0, ft0, rne")
PROBE(vfmul_m4, "e64, m4, ta, ma", "vfmul.vv v24, v24, v8")
PROBE(vfmulvf_m4, "e64, m4, ta, ma", "vfmul.vf v24, v24, ft1")
PROBE(vfcvt_m4, "e64, m4, ta, ma", "vfcvt.f.x.v v24, v8")

static const struct {
  const char *name;
  uint64 (*fn)(char *);
} probes[] = {
  { "vadd.vv e32 m1", add_m1 },
  { "vadd.vv e32 m2", add_m2 },
  { "vadd.vv e32 m4", add_m4 },
  { "vadd.vv e32 m8", add_m8 },
  { "vadd.vv e8 m4", add_e8_m4 },
  { "vmul.vx e32 m4", mulvx_m4 },
  { "vmul.vv e32 m4", mulvv_m4 },
  { "vadd.vv e64 m2", add_e64_m2 },
  { "vmul.vv e64 m2", mulvv_e64_m2 },
  { "vsra.vi e32 m4", sra_m4 },
  { "vand.vx e32 m4", and_m4 },
  { "vmacc.vx e32 m4", macc_m4 },
  { "vwmacc.vv e32 m2", wmacc_m2 },
  { "vwmacc.vv e32 m4", wmacc_m4 },
  { "vsetvli, 2 of them", vsetvli2 },
  { "vl1re8.v", load1 },
  { "vl8re8.v", load8 },
  { "vl8re32.v", load8_e32 },
  { "add (scalar)", scalar_add },
  { "fmul.d (scalar)", scalar_fmul },
  { "fcvt.l.d rne (scalar)", scalar_fcvt_ld },
  { "fcvt.d.l (scalar)", scalar_fcvt_dl },
  { "fmul.d, fcvt.l.d rne", fmul_fcvt_dyn },
  { "fmul.d rne, fcvt.l.d rne", fmul_fcvt_rne },
  { "vfmul.vv e64 m4", vfmul_m4 },
  { "vfmul.vf e64 m4", vfmulvf_m4 },
  { "vfcvt.f.x.v e64 m4", vfcvt_m4 },
};

int
main(void)
{
  static char buf[4096] __attribute__((aligned(4096)));
  printf("vprobe: vlen %d bits\n", vlenb() * 8);
  for (int i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
    uint64 best = ~0UL;
    for (int run = 0; run < 5; run++) {
      probe_setup();
      uint64 t = probes[i].fn(buf);
      best = t < best ? t : best;
    }
    uint64 ps = best * (1000000000000UL / TIMEBASE_HZ) / (16UL * PROBE_TURNS);
    printf("vprobe: %s: %d ps\n", probes[i].name, (int)ps);
  }
  exit(0);
}
