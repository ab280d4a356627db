// uptime: how long the system has been running.

#include "user/lib/user.h"

// uptime: the time since boot.
int
main(void)
{
  int t = uptime();

  // uptime() counts ticks of a tenth of a second.
  printf("up %d.%d seconds (%d ticks)\n", t / 10, t % 10, t);
  exit(0);
}
