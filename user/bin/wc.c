// wc: count lines, words and bytes of each file (or the standard input).
// A word is a run of characters other than space, tab, CR and newline.

#include "user/lib/user.h"
#include "kernel/include/fcntl.h"

static char buf[64 * 1024];

struct counts {
  long lines, words, bytes;
};

// Add fd's counts to c; returns 0, or 1 after reporting a read error.
static int
count(int fd, const char *name, struct counts *c)
{
  int n, i, inword = 0;

  while ((n = read(fd, buf, sizeof(buf))) > 0) {
    c->bytes += n;
    for (i = 0; i < n; i++) {
      if (buf[i] == '\n')
        c->lines++;
      if (strchr(" \t\r\n", buf[i]))
        inword = 0;
      else if (!inword) {
        inword = 1;
        c->words++;
      }
    }
  }
  if (n < 0) {
    fprintf(2, "wc: cannot read %s: %s\n", name, strerror(n));
    return 1;
  }
  return 0;
}

// Print one line of counts, followed by name unless it is 0.
static void
report(struct counts *c, const char *name)
{
  if (name)
    printf("%ld %ld %ld %s\n", c->lines, c->words, c->bytes, name);
  else
    printf("%ld %ld %ld\n", c->lines, c->words, c->bytes);
}

// wc [FILE...]: exit status 1 if a file could not be read.
int
main(int argc, char *argv[])
{
  struct counts one, total = { 0, 0, 0 };
  int i, fd, status = 0;

  if (argc < 2) {
    status = count(0, "standard input", &total);
    report(&total, 0);
    exit(status);
  }
  for (i = 1; i < argc; i++) {
    if ((fd = open(argv[i], O_RDONLY)) < 0) {
      fprintf(2, "wc: cannot open %s: %s\n", argv[i], strerror(fd));
      status = 1;
      continue;
    }
    one = (struct counts){ 0, 0, 0 };
    status |= count(fd, argv[i], &one);
    close(fd);
    report(&one, argv[i]);
    total.lines += one.lines;
    total.words += one.words;
    total.bytes += one.bytes;
  }
  if (argc > 2)
    report(&total, "total");
  exit(status);
}
