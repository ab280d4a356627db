// rm: remove each named file (or empty directory).

#include "user/lib/user.h"

// rm PATH...: exit status 1 if one could not be removed.
int
main(int argc, char *argv[])
{
  int i, r, status = 0;

  if (argc < 2) {
    fprintf(2, "usage: rm FILE...\n");
    exit(1);
  }
  for (i = 1; i < argc; i++) {
    if ((r = unlink(argv[i])) < 0) {
      fprintf(2, "rm: cannot remove %s: %s\n", argv[i], strerror(r));
      status = 1;
    }
  }
  exit(status);
}
