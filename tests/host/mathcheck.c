// Host driver for tests/test_llmrun_host.py: reads doubles (as 16 hex digits
// of their bits, one per line) and prints the bits of the runtime's
// llm_exp, llm_log (for x > 0, else 0), llm_sigmoid and llm_softplus of each,
// so the test can compare them bit for bit with pyaisvc.refmath.

#include "user/llm/kernels.h"

static uint64
bits(double x)
{
  union {
    double d;
    uint64 u;
  } v = { .d = x };
  return v.u;
}

int
main(void)
{
  char line[64];
  while (fgets(line, sizeof(line), stdin)) {
    union {
      uint64 u;
      double d;
    } v = { .u = strtoull(line, 0, 16) };
    double x = v.d;
    printf("%016lx %016lx %016lx %016lx\n", bits(llm_exp(x)),
        bits(x > 0 ? llm_log(x) : 0.0), bits(llm_sigmoid(x)), bits(llm_softplus(x)));
  }
  return 0;
}
