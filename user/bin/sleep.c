// sleep: wait for a number of seconds, which may have one decimal
// (sleep 2, sleep 0.5); the clock ticks 10 times a second.

#include "user/lib/user.h"

// sleep SECONDS: exit status 1 for a bad or missing number.
int
main(int argc, char *argv[])
{
  char *end;
  long ticks;

  if (argc != 2) {
    fprintf(2, "usage: sleep SECONDS  (e.g. 2 or 0.5)\n");
    exit(1);
  }
  ticks = strtol(argv[1], &end, 10) * 10;
  if (*end == '.' && end[1] >= '0' && end[1] <= '9') {
    ticks += end[1] - '0';
    end += 2;
  }
  if (argv[1][0] < '0' || argv[1][0] > '9' || *end != 0) {
    fprintf(2, "sleep: %s is not a number of seconds (e.g. 2 or 0.5)\n", argv[1]);
    exit(1);
  }
  sleep(ticks);
  exit(0);
}
