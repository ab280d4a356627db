// fpmix: two processes on one hart compute with floating point at the
// same time, each with its own rounding mode; if the kernel let one see
// the other's f registers or fcsr, a sum or a rounding mode would be off.
// Prints "fpmix: ok" or what went wrong.
#include "user/lib/user.h"

// frm values (fcsr bits 7:5).
#define RNE 0 // round to nearest, ties to even
#define RTZ 1 // round toward zero

static int
work(double step, int frm, long n)
{
  asm volatile("fsrm %0" : : "r"(frm));
  double sum = 0.0;
  for (long i = 0; i < n; i++)
    sum = sum + step;
  int got;
  asm volatile("frrm %0" : "=r"(got));
  if (sum != step * (double)n || got != frm) {
    fprintf(2, "fpmix: pid %d: sum %d (want %d), frm %d (want %d)\n", getpid(), (int)sum,
        (int)(step * (double)n), got, frm);
    return 1;
  }
  return 0;
}

int
main(void)
{
  // Enough iterations to span many 10 ms time slices.
  long n = 20000000;
  int pid = fork();
  if (pid < 0) {
    fprintf(2, "fpmix: fork: %s\n", strerror(pid));
    return 1;
  }
  if (pid == 0)
    exit(work(3.0, RTZ, n));
  int bad = work(1.0, RNE, n);
  int status;
  if (wait(&status) != pid || status != 0)
    bad = 1;
  if (bad)
    return 1;
  printf("fpmix: ok\n");
  return 0;
}
