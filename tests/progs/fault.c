// fault MODE: make one kind of fault, so tests can check that the kernel
// kills just this process, with a message naming the cause and address.
#include "user/lib/user.h"

// Recurses until the stack runs into its guard page; the test on n only
// hides the endless recursion from gcc's warning.
static int
recurse(int n)
{
  volatile char buf[1024];
  buf[0] = n;
  if (n < 0)
    return 0;
  return recurse(n + 1) + buf[0];
}

int
main(int argc, char **argv)
{
  if (argc != 2) {
    fprintf(2, "usage: fault load0|store0|kernel|kread|uart|illegal|jump0|stack\n");
    return 2;
  }
  char *m = argv[1];
  if (strcmp(m, "load0") == 0)
    return *(volatile int *)0;
  if (strcmp(m, "store0") == 0)
    *(volatile int *)0 = 1;
  if (strcmp(m, "kernel") == 0)
    *(volatile long *)0x80000000L = 1;
  // The kernel's text and a device: mapped in every page table, not for
  // user mode (kernel/core/vm.c).
  if (strcmp(m, "kread") == 0)
    return *(volatile int *)0x80000000L;
  if (strcmp(m, "uart") == 0)
    *(volatile char *)0x10000000L = 'x';
  if (strcmp(m, "illegal") == 0)
    asm volatile(".word 0");
  if (strcmp(m, "jump0") == 0)
    ((void (*)(void))0)();
  if (strcmp(m, "stack") == 0)
    return recurse(0);
  fprintf(2, "fault: %s did not fault\n", m);
  return 1;
}
