// The runner the guest's self-tests share (harness.c): usertests and
// threadtests each give a table of cases and the kernel resources to
// count, and harness_main runs them.
//
// Each case runs in a forked child and passes only if that child exits
// with status 0. A failing check writes its reason into a pipe shared with
// the runner and exits 1, so every case produces exactly one line:
//   test NAME: OK
//   test NAME: FAILED (line 123: read returned -14 (bad address), ...)
// A child killed by the kernel (a fault) fails with its exit status.
// Around the cases, each leak check counts a free kernel resource before
// and after, and reports one more such line: what the kernel failed to
// free is missing at the end. The run ends with "N passed, N failed" and,
// when none failed, "ALL TESTS PASSED"; the exit status is 1 if any failed.
#ifndef AISVC_HARNESS_H
#define AISVC_HARNESS_H

struct test {
  void (*fn)(void);
  const char *name;
  int slow; // left out by -q
};

// A kernel resource the cases must give back.
struct leak {
  const char *name;    // its result line's name, e.g. "memleak"
  const char *what;    // what count() counts, e.g. "pages"
  long (*count)(void); // how many are free now, or -1
};

// A self-test program: its name (for messages), its cases (ended by an
// entry with name 0), and its leak checks (ended likewise).
struct suite {
  const char *prog;
  struct test *tests;
  const struct leak *leaks;
};

// The program's main: `prog [-q] [NAME...]` runs every case, only the
// quick ones (-q: those not marked slow), or only the named ones. Prints
// banner first (after the arguments were checked), then the report; an
// unknown name gets a usage line that lists the cases. Never returns.
void __attribute__((noreturn))
harness_main(const struct suite *s, const char *banner, int argc, char *argv[]);

// Ends the running case as failed at source line `line`, with reason why.
void __attribute__((noreturn)) failed(int line, const char *why);

// fail("fmt", ...): end the case with a reason.
#define fail(...) \
  do { \
    char why_[250]; \
    snprintf(why_, sizeof(why_), __VA_ARGS__); \
    failed(__LINE__, why_); \
  } while (0)

// expect(cond, "fmt", ...): end the case with a reason unless cond holds.
#define expect(cond, ...) \
  do { \
    if (!(cond)) \
      fail(__VA_ARGS__); \
  } while (0)

// Waits for the child pid and requires that it exited with status want.
void waitstatus(int pid, int want, int line);
#define WAITSTATUS(pid, want) waitstatus((pid), (want), __LINE__)

// The free memory pages: a child grows its heap until sbrk fails, in
// halving steps, and reports how far it got. -1 if it cannot tell.
long count_free_pages(void);

#endif
