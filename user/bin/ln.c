// ln: make NEW another name (a hard link) for the file OLD.

#include "user/lib/user.h"

// ln OLD NEW: exit status 1 if the link could not be made.
int
main(int argc, char *argv[])
{
  int r;

  if (argc != 3) {
    fprintf(2, "usage: ln OLD NEW\n");
    exit(1);
  }
  if ((r = link(argv[1], argv[2])) < 0) {
    fprintf(2, "ln: cannot link %s to %s: %s\n", argv[2], argv[1], strerror(r));
    exit(1);
  }
  exit(0);
}
