// The runner of the guest's self-tests (usertests, threadtests): runs each
// case in a child, collects its failure reason through a pipe, runs the
// leak checks around the cases, and prints the report. harness.h gives the
// report's format and the interface.

#include "user/lib/user.h"
#include "kernel/include/riscv.h"
#include "user/tests/harness.h"

#define NELEM(a) ((int)(sizeof(a) / sizeof((a)[0])))

static int failfd = -1; // the running case writes its failure reason here

// (contracts of failed, waitstatus and count_free_pages in harness.h)
void
failed(int line, const char *why)
{
  char msg[300];
  int n;

  n = snprintf(msg, sizeof(msg), "line %d: %s\n", line, why);
  if (n > (int)sizeof(msg) - 1)
    n = sizeof(msg) - 1;
  write(failfd, msg, n);
  exit(1);
}

void
waitstatus(int pid, int want, int line)
{
  char why[250];
  int r, st = -12345;

  r = wait(&st);
  if (r != pid)
    snprintf(why, sizeof(why), "wait returned %d (%s), expected child %d", r,
        r < 0 ? strerror(r) : "another pid", pid);
  else if (st != want)
    snprintf(why, sizeof(why), "child %d exited with status %d, expected %d", pid, st, want);
  else
    return;
  failed(line, why);
}

long
count_free_pages(void)
{
  long chunk, total = 0;
  int p[2], pid;

  if (pipe(p) < 0 || (pid = fork()) < 0)
    return -1;
  if (pid == 0) {
    for (chunk = 64L << 20; chunk >= PGSIZE; chunk /= 2)
      while (sbrk(chunk) != (char *)-1)
        total += chunk;
    write(p[1], &total, sizeof(total));
    exit(0);
  }
  close(p[1]);
  if (read(p[0], &total, sizeof(total)) != sizeof(total))
    total = -1;
  close(p[0]);
  wait(0);
  return total < 0 ? -1 : total / PGSIZE;
}

// One result line: name passed (why 0) or failed for reason why.
static void
report(const char *name, const char *why)
{
  if (why == 0)
    printf("test %s: OK\n", name);
  else
    printf("test %s: FAILED (%s)\n", name, why);
}

// Runs case t in a child, waiting for that child; returns 1 if it passed.
static int
run(struct test *t)
{
  char why[300];
  int p[2], pid, r, st = 0, n;

  if ((r = pipe(p)) < 0 || (pid = fork()) < 0) {
    snprintf(why, sizeof(why), "cannot start: %s", strerror(r < 0 ? r : pid));
    report(t->name, why);
    return 0;
  }
  if (pid == 0) {
    close(p[0]);
    failfd = p[1];
    t->fn();
    exit(0);
  }
  close(p[1]);
  while ((r = wait(&st)) != pid && r > 0)
    ;
  if (r == pid && st == 0) {
    report(t->name, 0);
    close(p[0]);
    return 1;
  }
  // Only a failed case is read: a passing one may have left a child
  // that still holds the pipe open, and the read would wait for it.
  n = read(p[0], why, sizeof(why) - 1);
  close(p[0]);
  why[n > 0 ? n : 0] = 0;
  if (strchr(why, '\n'))
    *strchr(why, '\n') = 0;
  if (n <= 0)
    snprintf(why, sizeof(why), "exit status %d, no reason given (killed?)", st);
  report(t->name, why);
  return 0;
}

// The result line of leak check l, whose count was before and is after
// now; returns 1 if nothing is missing.
static int
leakcheck(const struct leak *l, long before, long after)
{
  char why[100];

  if (before < 0 || after < before) {
    snprintf(why, sizeof(why), "%ld %s free before the tests, %ld after", before, l->what, after);
    report(l->name, why);
    return 0;
  }
  report(l->name, 0);
  return 1;
}

static struct test *
findtest(const struct suite *s, const char *name)
{
  for (struct test *t = s->tests; t->name; t++)
    if (strcmp(t->name, name) == 0)
      return t;
  return 0;
}

static void __attribute__((noreturn)) usage(const struct suite *s, const char *bad)
{
  fprintf(2, "%s: no test named %s\nusage: %s [-q] [NAME...]\ntests:", s->prog, bad, s->prog);
  for (struct test *t = s->tests; t->name; t++)
    fprintf(2, " %s", t->name);
  fprintf(2, "\n");
  exit(1);
}

// Whether the command line selects t: named, or all (the quick ones with -q).
static int
selected(struct test *t, int quick, int named, int argc, char *argv[])
{
  if (!named)
    return !(quick && t->slow);
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], t->name) == 0)
      return 1;
  return 0;
}

// (contract in harness.h)
void
harness_main(const struct suite *s, const char *banner, int argc, char *argv[])
{
  long before[4];
  int nleaks, quick = 0, named = 0, npass = 0, nfail = 0;

  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-q") == 0)
      quick = 1;
    else if (findtest(s, argv[i]) == 0)
      usage(s, argv[i]);
    else
      named = 1;
  }
  printf("%s\n", banner);
  for (nleaks = 0; s->leaks[nleaks].name && nleaks < NELEM(before); nleaks++)
    before[nleaks] = s->leaks[nleaks].count();
  for (struct test *t = s->tests; t->name; t++) {
    if (!selected(t, quick, named, argc, argv))
      continue;
    if (run(t))
      npass++;
    else
      nfail++;
  }
  for (int k = 0; k < nleaks; k++) {
    if (leakcheck(&s->leaks[k], before[k], s->leaks[k].count()))
      npass++;
    else
      nfail++;
  }
  printf("%d passed, %d failed\n", npass, nfail);
  if (nfail == 0)
    printf("ALL TESTS PASSED\n");
  exit(nfail != 0);
}
