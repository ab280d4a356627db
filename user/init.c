// init: the first user process.
//
// It opens the console as fds 0, 1 and 2 (creating /console on a fresh
// image), then starts every program in the services table and keeps it
// running: when one exits, init starts it again. init is also the parent
// of every orphan, so its wait loop reaps them.

#include "user/user.h"
#include "kernel/include/fcntl.h"

#define CONSOLE_MAJOR 1   // CONSOLE in kernel/include/file.h
#define RESPAWN_TICKS 10  // a service that dies sooner waits this long first

struct service {
  char *path;
  char *argv[4];
  int pid;                // 0 while not running
  int started;            // uptime() when last started
};

// The programs init keeps alive. Issue 5's ai_daemon, which must be
// running before users submit work, belongs here as one more entry.
static struct service services[] = {
  { "/sh", { "sh", 0 } },
};
#define NSERVICE (sizeof(services) / sizeof(services[0]))

// Make fds 0, 1 and 2 the console. Without a console nothing can be
// reported, so failure exits (which stops the system).
static void
openconsole(void)
{
  int fd;

  fd = open("/console", O_RDWR);
  if(fd == -ENOENT && mknod("/console", CONSOLE_MAJOR, 0) == 0)
    fd = open("/console", O_RDWR);
  if(fd != 0)
    exit(1);
  dup(0);
  dup(0);
}

static void
start(struct service *s)
{
  int pid, err;

  // Back off when the service died at once, so a broken program (or a
  // missing one) does not spin the machine.
  if(s->started != 0 && uptime() - s->started < RESPAWN_TICKS)
    sleep(RESPAWN_TICKS);
  s->started = uptime();
  pid = fork();
  if(pid == 0){
    err = exec(s->path, s->argv);
    fprintf(2, "init: cannot run %s: %s\n", s->path, strerror(err));
    exit(1);
  }
  if(pid < 0)
    fprintf(2, "init: fork for %s failed: %s\n", s->path, strerror(pid));
  s->pid = pid > 0 ? pid : 0;
}

int
main(void)
{
  struct service *s;
  int pid, status;

  openconsole();
  for(;;){
    for(s = services; s < services + NSERVICE; s++)
      if(s->pid == 0)
        start(s);
    pid = wait(&status);
    for(s = services; s < services + NSERVICE; s++){
      if(pid > 0 && s->pid == pid){
        if(status != 0)
          fprintf(2, "init: %s exited with status %d; restarting it\n", s->path, status);
        s->pid = 0;
      }
    }
  }
}
