// cat: copy each file (or the standard input) to the standard output.

#include "user/lib/user.h"
#include "kernel/include/fcntl.h"

static char buf[64 * 1024]; // big reads: cat is how large files get checked

// Copy fd to the standard output; returns 0, or 1 after reporting an error.
static int
copy(int fd, const char *name)
{
  int n, w;

  while ((n = read(fd, buf, sizeof(buf))) > 0) {
    if ((w = write(1, buf, n)) != n) {
      fprintf(2, "cat: write error: %s\n", w < 0 ? strerror(w) : "short write");
      return 1;
    }
  }
  if (n < 0) {
    fprintf(2, "cat: cannot read %s: %s\n", name, strerror(n));
    return 1;
  }
  return 0;
}

// cat [FILE...]: each file in turn (none: the standard input) to the
// standard output; exit status 1 if one could not be read.
int
main(int argc, char *argv[])
{
  int i, fd, status = 0;

  if (argc < 2)
    exit(copy(0, "standard input"));
  for (i = 1; i < argc; i++) {
    if ((fd = open(argv[i], O_RDONLY)) < 0) {
      fprintf(2, "cat: cannot open %s: %s\n", argv[i], strerror(fd));
      status = 1;
      continue;
    }
    status |= copy(fd, argv[i]);
    close(fd);
  }
  exit(status);
}
