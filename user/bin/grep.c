// grep: print the lines that match a pattern.
//
//   grep PATTERN [FILE...]
//
// PATTERN is a simple regular expression: c matches the character c,
// . any character, x* zero or more of x, ^ at the start anchors the match
// to the line's start, $ at the end to its end, and \c matches c literally
// (\. \* \^ \$). With several files, each line is prefixed by "name:".
// Exit status: 0 if a line matched, 1 if none did, 2 on an error.

#include "user/lib/user.h"
#include "kernel/include/fcntl.h"

#define MAXPAT 256

struct item {
  char c;    // the character to match
  char any;  // '.': matches any character
  char star; // followed by '*': repeats zero or more times
};

struct pattern {
  struct item it[MAXPAT];
  int n;
  int bol; // anchored at the start of the line
  int eol; // anchored at the end of the line
};

static struct pattern pat;
static char buf[64 * 1024]; // a longer line is matched in buf-sized pieces

// Turn re into pat; returns 0, or -1 after reporting an error.
static int
compile(const char *re, struct pattern *p)
{
  struct item *it;

  if (*re == '^') {
    p->bol = 1;
    re++;
  }
  while (*re) {
    if (re[0] == '$' && re[1] == 0) {
      p->eol = 1;
      break;
    }
    if (p->n == MAXPAT) {
      fprintf(2, "grep: pattern too long (at most %d items)\n", MAXPAT);
      return -1;
    }
    it = &p->it[p->n++];
    it->any = (*re == '.');
    if (*re == '\\' && re[1] != 0)
      re++;
    it->c = *re++;
    if (*re == '*') {
      it->star = 1;
      re++;
    }
  }
  return 0;
}

// Does item it match the character c?
static int
same(struct item *it, char c)
{
  return it->any || it->c == c;
}

// Do items k.. of p match the text starting at s (the line ends at end)?
static int
matchat(struct pattern *p, int k, const char *s, const char *end)
{
  struct item *it;

  for (; k < p->n; k++) {
    it = &p->it[k];
    if (it->star) {
      // Try the shortest run of repeats first, then longer ones.
      for (;; s++) {
        if (matchat(p, k + 1, s, end))
          return 1;
        if (s == end || !same(it, *s))
          return 0;
      }
    }
    if (s == end || !same(it, *s))
      return 0;
    s++;
  }
  return !p->eol || s == end;
}

// Does p match somewhere in the line [line, end) (only at its start if p
// is anchored)?
static int
match(struct pattern *p, const char *line, const char *end)
{
  const char *s = line;

  if (p->bol)
    return matchat(p, 0, s, end);
  for (;; s++) {
    if (matchat(p, 0, s, end))
      return 1;
    if (s == end)
      return 0;
  }
}

// The first newline in [s, end), or 0.
static char *
findnl(char *s, char *end)
{
  for (; s < end; s++)
    if (*s == '\n')
      return s;
  return 0;
}

// Print the line [s, end) if it matches, after "name:" if name is set.
static void
check(char *s, char *end, const char *name, int *found)
{
  if (!match(&pat, s, end))
    return;
  (*found)++;
  if (name)
    printf("%s:", name);
  write(1, s, end - s);
  write(1, "\n", 1);
}

// Print fd's matching lines. Returns the number of matches,
// or -1 after reporting a read error.
static int
grep(int fd, const char *name, const char *what)
{
  int n, m = 0, found = 0;
  char *s, *nl;

  for (;;) {
    if ((n = read(fd, buf + m, sizeof(buf) - m)) < 0) {
      fprintf(2, "grep: cannot read %s: %s\n", what, strerror(n));
      return -1;
    }
    m += n;
    for (s = buf; (nl = findnl(s, buf + m)) != 0; s = nl + 1)
      check(s, nl, name, &found);
    // What is left has no newline: the last line of input without one,
    // or a piece of a line longer than buf.
    if (n == 0 || (s == buf && m == sizeof(buf))) {
      if (s < buf + m)
        check(s, buf + m, name, &found);
      s = buf + m;
    }
    m = buf + m - s;
    memmove(buf, s, m);
    if (n == 0)
      return found;
  }
}

// grep PATTERN [FILE...]: exit status 0 if a line matched, 1 if none did,
// 2 for an error.
int
main(int argc, char *argv[])
{
  int i, fd, r, found = 0, error = 0;

  if (argc < 2) {
    fprintf(2, "usage: grep PATTERN [FILE...]\n");
    exit(2);
  }
  if (compile(argv[1], &pat) < 0)
    exit(2);
  if (argc == 2) {
    r = grep(0, 0, "standard input");
    exit(r < 0 ? 2 : r == 0);
  }
  for (i = 2; i < argc; i++) {
    if ((fd = open(argv[i], O_RDONLY)) < 0) {
      fprintf(2, "grep: cannot open %s: %s\n", argv[i], strerror(fd));
      error = 1;
      continue;
    }
    r = grep(fd, argc > 3 ? argv[i] : 0, argv[i]);
    close(fd);
    if (r < 0)
      error = 1;
    else
      found += r;
  }
  exit(error ? 2 : found == 0);
}
