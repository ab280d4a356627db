// spin SECONDS: keeps one hart busy for SECONDS seconds of the guest's
// clock, then exits 0. Tests start it in the background to take harts
// away from other programs (tests/test_ai_service.py: the worker's pool
// measured again under contention).
#include "user/lib/user.h"

int
main(int argc, char *argv[])
{
  char *end;
  long s = argc == 2 ? strtol(argv[1], &end, 10) : -1;
  if (argc != 2 || *end != '\0' || s < 0) {
    fprintf(2, "usage: spin SECONDS\n");
    exit(2);
  }
  uint64 until = time_us() + (uint64)s * 1000000;
  while (time_us() < until)
    ;
  exit(0);
}
