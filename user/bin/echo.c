// echo: print the arguments, separated by spaces, and a newline.
// The line goes out in one write, so concurrent echoes do not interleave.

#include "user/lib/user.h"

static char buf[8192];

// echo [WORD...]: the words and a newline, in one write.
int
main(int argc, char *argv[])
{
  int i, n = 0, len;

  for (i = 1; i < argc; i++) {
    len = strlen(argv[i]);
    if (n + len + 1 > sizeof(buf)) {
      write(1, buf, n);
      n = 0;
    }
    if (len + 1 > sizeof(buf)) {
      write(1, argv[i], len);
      len = 0;
    }
    memmove(buf + n, argv[i], len);
    n += len;
    buf[n++] = (i + 1 < argc) ? ' ' : '\n';
  }
  if (argc < 2)
    buf[n++] = '\n';
  write(1, buf, n);
  exit(0);
}
