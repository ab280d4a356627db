// kill: kill each process given by its pid.

#include "user/lib/user.h"

// kill PID...: exit status 1 if a pid could not be killed.
int
main(int argc, char *argv[])
{
  int i, r, pid, status = 0;
  char *end;

  if (argc < 2) {
    fprintf(2, "usage: kill PID...\n");
    exit(1);
  }
  for (i = 1; i < argc; i++) {
    pid = strtol(argv[i], &end, 10);
    if (end == argv[i] || *end != 0) {
      fprintf(2, "kill: %s is not a process id\n", argv[i]);
      status = 1;
    } else if ((r = kill(pid)) < 0) {
      fprintf(2, "kill: cannot kill %d: %s\n", pid, strerror(r));
      status = 1;
    }
  }
  exit(status);
}
