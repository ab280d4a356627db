// Formatted output to the console: printf and panic.
//
// printf supports %d %u %x %p %s %c %% and the l prefix (%ld %lu %lx).
// A lock keeps lines of different harts from interleaving; panic prints
// without it (the lock holder may be the one panicking) and freezes
// every other hart's output.
#include <stdarg.h>

#include "kernel/include/types.h"
#include "kernel/include/param.h"
#include "kernel/include/spinlock.h"
#include "kernel/include/riscv.h"
#include "kernel/include/defs.h"

volatile int panicked = 0;

static struct {
  struct spinlock lock;
  int locking; // 0 while panicking
} pr;

static const char digits[] = "0123456789abcdef";

// Prints x in base (10 or 16), as signed if sign.
static void
printint(uint64 x, int base, int sign)
{
  char buf[24];
  int i = 0;
  int neg = sign && (int64)x < 0;

  if (neg)
    x = -(int64)x;
  do {
    buf[i++] = digits[x % base];
    x /= base;
  } while (x != 0);
  if (neg)
    buf[i++] = '-';
  while (--i >= 0)
    consputc(buf[i]);
}

// One conversion at fmt (just after the '%'); returns characters consumed.
static int
printarg(const char *fmt, va_list *ap)
{
  int lng = (fmt[0] == 'l');
  char c = fmt[lng];
  const char *s;

  switch (c) {
  case 'd': printint(lng ? va_arg(*ap, int64) : va_arg(*ap, int), 10, 1); break;
  case 'u': printint(lng ? va_arg(*ap, uint64) : va_arg(*ap, uint), 10, 0); break;
  case 'x': printint(lng ? va_arg(*ap, uint64) : va_arg(*ap, uint), 16, 0); break;
  case 'p':
    consputc('0');
    consputc('x');
    printint(va_arg(*ap, uint64), 16, 0);
    break;
  case 'c': consputc(va_arg(*ap, int)); break;
  case 's':
    if ((s = va_arg(*ap, const char *)) == 0)
      s = "(null)";
    while (*s)
      consputc(*s++);
    break;
  case '%': consputc('%'); break;
  case 0: return lng;
  default:
    consputc('%');
    consputc(c);
    break;
  }
  return lng + 1;
}

void
printf(const char *fmt, ...)
{
  va_list ap;
  int locking = pr.locking;

  if (locking)
    acquire(&pr.lock);
  va_start(ap, fmt);
  for (int i = 0; fmt[i]; i++) {
    if (fmt[i] != '%')
      consputc(fmt[i]);
    else
      i += printarg(fmt + i + 1, &ap);
  }
  va_end(ap);
  if (locking)
    release(&pr.lock);
}

void
panic(const char *s)
{
  pr.locking = 0;
  printf("panic: %s\n", s);
  panicked = 1;
  for (;;)
    ;
}

void
printfinit(void)
{
  initlock(&pr.lock, "pr");
  pr.locking = 1;
}
