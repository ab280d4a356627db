// Formatted output for user programs: printf, fprintf and snprintf.
//
// Conversions: %d %i %u %x %X %p %s %c %% and %f, with the length modifiers
// l and ll, the flags - (left-justify) and 0 (pad with zeros), a field
// width and a precision (%.3f, %.5s; %f shows at most 9 decimals).
// One formatter writes into a struct out that either buffers for a file
// descriptor, flushed with a single write per 256 bytes (a write per
// character would interleave processes' output letter by letter), or
// fills a caller's array.

#include <stdarg.h>
#include "user/lib/user.h"

#define OUTBUF   256
#define FLOATBUF 352 // 20 digits, 290 more zeros up to 1.8e308, '.', 9 decimals

struct out {
  int fd;           // file descriptor to flush to, or -1 for a string
  char *dst;        // string target (snprintf)
  int size;         // capacity of dst including the terminator
  int total;        // characters produced so far
  char buf[OUTBUF]; // pending bytes for fd
  int nbuf;
};

// Writes o's buffered bytes out (a descriptor's output only).
static void
flush(struct out *o)
{
  if (o->fd >= 0 && o->nbuf > 0)
    write(o->fd, o->buf, o->nbuf);
  o->nbuf = 0;
}

// Adds c to o's output: buffered for a descriptor, else into dst while
// room is left; total counts every character either way.
static void
putch(struct out *o, char c)
{
  if (o->fd >= 0) {
    if (o->nbuf == OUTBUF)
      flush(o);
    o->buf[o->nbuf++] = c;
  } else if (o->total < o->size - 1) {
    o->dst[o->total] = c;
  }
  o->total++;
}

// A field being printed: its text, an optional sign or 0x prefix, and
// how to pad it to the requested width.
struct field {
  const char *prefix;
  const char *text;
  int len;
  int width;
  int left; // '-' flag
  int zero; // '0' flag (numbers only)
};

// Prints field f padded to its width: spaces before or after, or zeros
// after the prefix.
static void
putfield(struct out *o, struct field *f)
{
  int pad = f->width - f->len - (int)strlen(f->prefix);
  const char *p;

  if (!f->left && !f->zero)
    for (; pad > 0; pad--)
      putch(o, ' ');
  for (p = f->prefix; *p; p++)
    putch(o, *p);
  if (!f->left && f->zero)
    for (; pad > 0; pad--)
      putch(o, '0');
  for (p = f->text; p < f->text + f->len; p++)
    putch(o, *p);
  for (; pad > 0; pad--)
    putch(o, ' ');
}

// Write v in base into the end of buf[0..n); returns the first digit.
static char *
utoa(char *buf, int n, uint64 v, int base, int upper)
{
  const char *digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  char *p = buf + n;

  do {
    *--p = digits[v % base];
    v /= base;
  } while (v != 0);
  return p;
}

// Format d (finite, >= 0) with prec digits after the point into buf,
// which must hold FLOATBUF bytes. Values of 1e18 or more lose their low
// digits (shown as zeros): enough for the LLM tools, which print
// probabilities and timings.
static int
ftoa(char *buf, double d, int prec)
{
  uint64 ip, fp, last, scale = 1;
  int i, shift = 0, n = 0;
  double frac, f, r, rem;
  char *s;

  if (prec > 9)
    prec = 9;
  for (i = 0; i < prec; i++)
    scale *= 10;
  for (; d >= 1e18; shift++)
    d /= 10;
  ip = (uint64)d;
  frac = d - (double)ip;
  f = frac * (double)scale;
  // r is the rounding error of that product, exactly (fma rounds once),
  // so 0.05 (a bit above 1/20) is not taken for the tie 0.5 at %.1f.
  r = __builtin_fma(frac, (double)scale, -f);
  fp = (uint64)f;
  rem = f - (double)fp;
  // Round to nearest, ties to even on the last digit printed, as C and
  // Python do (2.5 prints as "2" with %.0f, 0.125 as "0.12" with %.2f).
  last = prec == 0 ? ip : fp;
  if (rem > 0.5 || (rem == 0.5 && (r > 0 || (r == 0 && (last & 1)))))
    fp++;
  if (fp >= scale) {
    // The fraction rounded up to a whole unit, e.g. 0.9999 with %.2f.
    ip++;
    fp -= scale;
  }
  for (s = utoa(buf + 24, 24, ip, 10, 0); s < buf + 48;)
    buf[n++] = *s++;
  for (; shift > 0; shift--)
    buf[n++] = '0';
  if (prec > 0) {
    buf[n++] = '.';
    for (i = prec - 1; i >= 0; i--, fp /= 10)
      buf[n + i] = '0' + fp % 10;
    n += prec;
  }
  return n;
}

// Prints d (%f) with prec decimals as field f: nan, inf, sign.
static void
fmtfloat(struct out *o, struct field *f, double d, int prec)
{
  char buf[FLOATBUF];

  if (d != d) {
    f->text = "nan";
    f->len = 3;
  } else {
    if (__builtin_signbit(d)) {
      f->prefix = "-";
      d = -d;
    }
    if (d == __builtin_inf()) {
      f->text = "inf";
      f->len = 3;
    } else {
      f->text = buf;
      f->len = ftoa(buf, d, prec < 0 ? 6 : prec);
    }
  }
  putfield(o, f);
}

// Prints the next argument of ap, an int (long with lng) in conversion
// conv (d or i, u, x or X, p: 16 hex digits), as field f.
static void
fmtint(struct out *o, struct field *f, char conv, int lng, va_list *ap)
{
  char buf[24];
  uint64 u;
  long s;
  int i;

  if (conv == 'd' || conv == 'i') {
    s = lng ? va_arg(*ap, long) : va_arg(*ap, int);
    u = s < 0 ? -(uint64)s : (uint64)s;
    if (s < 0)
      f->prefix = "-";
  } else if (conv == 'p') {
    u = (uint64)va_arg(*ap, void *);
    f->prefix = "0x";
  } else {
    u = lng ? va_arg(*ap, uint64) : va_arg(*ap, uint);
  }
  if (conv == 'p') {
    // Always 16 digits, so addresses line up.
    for (i = 1; i <= 16; i++, u >>= 4)
      buf[sizeof(buf) - i] = "0123456789abcdef"[u & 15];
    f->text = buf + sizeof(buf) - 16;
  } else {
    f->text = utoa(buf, sizeof(buf), u, conv == 'x' || conv == 'X' ? 16 : 10, conv == 'X');
  }
  f->len = buf + sizeof(buf) - f->text;
  putfield(o, f);
}

// Format one conversion starting after '%'; returns the character after it.
static const char *
convert(struct out *o, const char *fmt, va_list *ap)
{
  struct field f = { "", "", 0, 0, 0, 0 };
  int prec = -1, lng = 0;
  char c;

  for (; *fmt == '-' || *fmt == '0'; fmt++) {
    if (*fmt == '-')
      f.left = 1;
    else
      f.zero = 1;
  }
  for (; *fmt >= '0' && *fmt <= '9'; fmt++)
    f.width = f.width * 10 + (*fmt - '0');
  if (*fmt == '.')
    for (prec = 0, fmt++; *fmt >= '0' && *fmt <= '9'; fmt++)
      prec = prec * 10 + (*fmt - '0');
  for (; *fmt == 'l'; fmt++)
    lng = 1;
  switch (c = *fmt) {
  case 'd':
  case 'i':
  case 'u':
  case 'x':
  case 'X':
  case 'p': fmtint(o, &f, c, lng, ap); break;
  case 'f': fmtfloat(o, &f, va_arg(*ap, double), prec); break;
  case 's':
    f.zero = 0;
    f.text = va_arg(*ap, const char *);
    if (f.text == 0)
      f.text = "(null)";
    for (f.len = 0; f.text[f.len] && (prec < 0 || f.len < prec); f.len++)
      ;
    putfield(o, &f);
    break;
  case 'c': putch(o, va_arg(*ap, int)); break;
  case 0: return fmt;
  default:
    // Unknown conversion: show it as written so the mistake is visible.
    putch(o, '%');
    putch(o, c);
  }
  return fmt + 1;
}

// Prints fmt with the arguments ap into o.
static void
vformat(struct out *o, const char *fmt, va_list ap)
{
  va_list aq;

  // va_copy gives a va_list that can be passed by address on every ABI.
  va_copy(aq, ap);
  while (*fmt) {
    if (*fmt != '%')
      putch(o, *fmt++);
    else if (fmt[1] == '%') {
      putch(o, '%');
      fmt += 2;
    } else
      fmt = convert(o, fmt + 1, &aq);
  }
  va_end(aq);
}

void
fprintf(int fd, const char *fmt, ...)
{
  struct out o = { .fd = fd };
  va_list ap;

  va_start(ap, fmt);
  vformat(&o, fmt, ap);
  va_end(ap);
  flush(&o);
}

void
printf(const char *fmt, ...)
{
  struct out o = { .fd = 1 };
  va_list ap;

  va_start(ap, fmt);
  vformat(&o, fmt, ap);
  va_end(ap);
  flush(&o);
}

// Like C's snprintf: writes at most size-1 characters and a terminator,
// returns the length the whole result would have had.
int
snprintf(char *buf, int size, const char *fmt, ...)
{
  struct out o = { .fd = -1, .dst = buf, .size = size };
  va_list ap;

  va_start(ap, fmt);
  vformat(&o, fmt, ap);
  va_end(ap);
  if (size > 0)
    buf[o.total < size ? o.total : size - 1] = 0;
  return o.total;
}
