// mkdir: create each named directory.

#include "user/lib/user.h"

// mkdir DIR...: exit status 1 if one could not be made.
int
main(int argc, char *argv[])
{
  int i, r, status = 0;

  if (argc < 2) {
    fprintf(2, "usage: mkdir DIR...\n");
    exit(1);
  }
  for (i = 1; i < argc; i++) {
    if ((r = mkdir(argv[i])) < 0) {
      fprintf(2, "mkdir: cannot create %s: %s\n", argv[i], strerror(r));
      status = 1;
    }
  }
  exit(status);
}
