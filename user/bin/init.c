// init: the first user process.
//
//   init [aiworker=console] [aibatch=B] [aikv=N] [aicache=0] [aimmap=0] [aisched=NAME]
//        [aichunk=N] [aiprefill=N]
//       (its arguments are the boot command line's words without a dot:
//       kernel/core/bootargs.c)
//
// It opens the console as fds 0, 1 and 2 (creating /console on a fresh
// image), makes /port when the kernel has the gateway's port device
// (docs/GATEWAY.md), then starts every program in the services table and keeps it
// running: when one exits, init starts it again. A background service
// that keeps failing (exit status not 0, each time within a minute of
// its start) waits 1, 2, 4 ... s before each restart, and after
// RESPAWN_LIMIT failures in a row init gives it up with one line, so a
// missing or broken program cannot fill the console forever. The shell
// is always restarted (`exit 1` at the prompt is a failure too). init is
// also the parent of every orphan, so its wait loop reaps them.
//
// The AI worker right (docs/AI_SERVICE.md, rule 13): init holds it from
// the kernel and hands it on only to the services marked ai_worker
// (ai_daemon); every other service's child drops it before its exec, so
// the shell and whatever it starts can never register as the worker. The
// boot argument aiworker=console keeps it for the shell too: the tests
// that run aitest, usertests' AI cases and the fuzzer's worker from the
// console boot that way. aibatch=B starts the worker as ai_daemon --batch
// B (pyaisvc bench --burst compares batch sizes so, one boot each);
// aikv=N gives its KV pool N blocks (--kv-blocks N) and aicache=0 turns
// its prefix reuse off (--prefix-cache off), docs/KVCACHE.md; aimmap=0
// makes it read its weights into the heap instead of mapping them
// (--mmap off, docs/VM.md).
// aisched=NAME, aichunk=N and aiprefill=N set the AI service's scheduling
// policy, its worker's step budget and the prompt positions of a step in
// which a request decodes (ai_sched, with the right init holds; a bad
// value is named and the defaults stay: docs/AI_SERVICE.md section 11).

#include "user/lib/user.h"
#include "kernel/include/param.h"
#include "kernel/include/fcntl.h"
#include "kernel/include/stat.h"
#include "kernel/include/aisvc.h"

#define CONSOLE_MAJOR 1              // CONSOLE in kernel/include/file.h
#define PORT_MAJOR    3              // PORT in kernel/include/file.h
#define RESPAWN_TICKS TICK_HZ        // a service that dies sooner waits this long first
#define RESPAWN_LIMIT 4              // failures in a row after which init gives up
#define RESPAWN_RESET (60 * TICK_HZ) // a run this long ends a series of failures

#define SERVICE_ARGS 12 // room in a service's argv, its 0 included

struct service {
  char *path;
  char *argv[SERVICE_ARGS]; // 0-terminated; add_arg appends to it
  int (*wanted)(void);      // if set, started only while it returns 1
  int notify;               // init waits for a byte on its fd 3 (or its exit)
  int ai_worker;            // keeps the AI worker right
  int may_give_up;          // after RESPAWN_LIMIT failures in a row (see ended)
  int pid;                  // 0 while not running
  int started;              // uptime() when last started
  int failures;             // failed runs in a row (see ended)
};

// The AI worker runs when a model is installed.
static int
have_model(void)
{
  struct stat st;

  return stat(AI_SMOL_DIR, &st) == 0 || stat(AI_QWEN_DIR, &st) == 0;
}

// The gateway serves the host through the port (docs/GATEWAY.md) when
// QEMU has one (makeport made /port) and the worker runs.
static int
have_port_and_model(void)
{
  struct stat st;

  return stat("/port", &st) == 0 && have_model();
}

// The programs init keeps alive, started in this order. ai_daemon says
// when it is ready (model loaded, registered), so the gateway and the
// shell start only after that.
static struct service services[] = {
  { "/ai_daemon", { "ai_daemon", "--ready-fd", "3", 0 }, have_model, 1, 1, 1 },
  { "/gateway", { "gateway", 0 }, have_port_and_model, 0, 0, 1 },
  { "/sh", { "sh", 0 } },
};
#define NSERVICE (sizeof(services) / sizeof(services[0]))

// The service that runs program path; every caller names one in the table.
static struct service *
service(const char *path)
{
  struct service *s;

  for (s = services; strcmp(s->path, path) != 0; s++)
    ;
  return s;
}

// Appends argument a to the command line s starts with; when there is no
// room, says so and leaves it out.
static void
add_arg(struct service *s, char *a)
{
  int n = 0;

  while (s->argv[n] != 0)
    n++;
  if (n + 1 >= SERVICE_ARGS) {
    fprintf(2, "init: no room for argument '%s' of %s; left out\n", a, s->path);
    return;
  }
  s->argv[n] = a;
  s->argv[n + 1] = 0;
}

// A budget's boot argument as a number: 0 when not given (keep it), -1
// when empty, not a number or 0 (the kernel refuses it).
static int
budget_arg(const char *arg)
{
  int n = 0;

  for (const char *c = arg; c && *c; c++)
    n = *c >= '0' && *c <= '9' && n < 1000 ? n * 10 + *c - '0' : -1;
  return arg && n <= 0 ? -1 : n;
}

// The boot's AI scheduling settings (aisched=NAME, aichunk=N,
// aiprefill=N; 0 if not given), applied with ai_sched; a bad one is named
// and changes nothing.
static void
set_sched(const char *policy, const char *chunk, const char *prefill)
{
  struct ai_sched a;
  int r;

  memset(&a, 0, sizeof(a));
  if (policy)
    strncpy(a.policy, policy, sizeof(a.policy) - 1);
  a.chunk = budget_arg(chunk);
  a.prefill = budget_arg(prefill);
  if ((r = ai_sched(&a)) < 0) {
    fprintf(2, "init: aisched=%s aichunk=%s aiprefill=%s: %s; left as they were\n",
        policy ? policy : "-", chunk ? chunk : "-", prefill ? prefill : "-", ai_strerror(r));
    return;
  }
  printf("init: AI scheduling policy %s, %d positions per step", a.policy, a.chunk);
  if (a.prefill < a.chunk)
    printf(", %d for prompts beside a decoder", a.prefill);
  printf("\n");
}

// Make fds 0, 1 and 2 the console. Without a console nothing can be
// reported, so failure exits (which stops the system).
static void
openconsole(void)
{
  int fd;

  fd = open("/console", O_RDWR);
  if (fd == -ENOENT && mknod("/console", CONSOLE_MAJOR, 0) == 0)
    fd = open("/console", O_RDWR);
  if (fd != 0)
    exit(1);
  dup(0);
  dup(0);
}

// Makes /port, the gateway's device file, when the kernel has the port
// device, and removes it when not (an image last booted with a port), so
// /port exists exactly while the device does.
static void
makeport(void)
{
  int fd;

  fd = open("/port", O_RDWR);
  if (fd == -ENOENT && mknod("/port", PORT_MAJOR, 0) == 0)
    fd = open("/port", O_RDWR);
  if (fd == -ENXIO)
    unlink("/port");
  if (fd >= 0)
    close(fd);
}

// A notify service gets the write end of a pipe as fd 3; init reads
// until the service writes its byte or exits (closing the pipe).
static void
await_ready(int pid, int fds[2])
{
  char c;

  if (pid == 0) {
    close(fds[0]);
    if (fds[1] != 3) {
      close(3);
      dup(fds[1]);
      close(fds[1]);
    }
    return;
  }
  close(fds[1]);
  if (pid > 0)
    read(fds[0], &c, 1);
  close(fds[0]);
}

// Ticks to wait before restarting s after its failures so far: 1, 2,
// 4 ... s.
static int
backoff(struct service *s)
{
  return RESPAWN_TICKS << (s->failures - 1);
}

// Starts service s (unless it gave up or is not wanted): after a backoff
// if it failed or died at once, forks and execs it (without the AI worker
// right unless it is the AI worker); with notify, waits for its ready byte.
static void
start(struct service *s)
{
  int pid, err, fds[2];

  if (s->failures >= RESPAWN_LIMIT || (s->wanted && !s->wanted()))
    return;
  if (s->notify && pipe(fds) < 0)
    s->notify = 0;
  // Back off when the service failed or died at once, so a broken program
  // (or a missing one) does not spin the machine.
  if (s->failures > 0)
    sleep(backoff(s));
  else if (s->started != 0 && uptime() - s->started < RESPAWN_TICKS)
    sleep(RESPAWN_TICKS);
  s->started = uptime();
  pid = fork();
  if (s->notify)
    await_ready(pid, fds);
  if (pid == 0) {
    if (!s->ai_worker)
      ai_right(1);
    err = exec(s->path, s->argv);
    fprintf(2, "init: cannot run %s: %s\n", s->path, strerror(err));
    exit(1);
  }
  if (pid < 0)
    fprintf(2, "init: fork for %s failed: %s\n", s->path, strerror(pid));
  s->pid = pid > 0 ? pid : 0;
}

// Records that service s exited with status. For a service init may
// give up, a failure (status not 0) extends its series of failures,
// unless it ran for RESPAWN_RESET ticks; a clean exit ends the series.
// Says what init does next.
static void
ended(struct service *s, int status)
{
  s->pid = 0;
  if (status == 0 || !s->may_give_up) {
    s->failures = 0;
    if (status != 0)
      fprintf(2, "init: %s exited with status %d; restarting it\n", s->path, status);
    return;
  }
  if (uptime() - s->started >= RESPAWN_RESET)
    s->failures = 0;
  s->failures++;
  if (s->failures < RESPAWN_LIMIT)
    fprintf(2, "init: %s exited with status %d; restarting it in %d s\n", s->path, status,
        backoff(s) / TICK_HZ);
  else
    fprintf(2,
        "init: %s failed %d times in a row; init no longer restarts it "
        "(the lines above say why; fix that and reboot)\n",
        s->path, s->failures);
}

// init [WORD...]: opens the console, makes /port, takes the boot words
// (see above), then starts every service and restarts those that end,
// forever.
int
main(int argc, char *argv[])
{
  struct service *s;
  int pid, status;
  char *policy = 0, *chunk = 0, *prefill = 0;

  openconsole();
  makeport();
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "aiworker=console") == 0) {
      service("/sh")->ai_worker = 1;
    } else if (strncmp(argv[i], "aibatch=", 8) == 0) {
      add_arg(service("/ai_daemon"), "--batch"); // ai_daemon checks the number
      add_arg(service("/ai_daemon"), argv[i] + 8);
    } else if (strncmp(argv[i], "aikv=", 5) == 0) {
      add_arg(service("/ai_daemon"), "--kv-blocks"); // ai_daemon checks the number
      add_arg(service("/ai_daemon"), argv[i] + 5);
    } else if (strcmp(argv[i], "aicache=0") == 0) {
      add_arg(service("/ai_daemon"), "--prefix-cache");
      add_arg(service("/ai_daemon"), "off");
    } else if (strcmp(argv[i], "aimmap=0") == 0) {
      add_arg(service("/ai_daemon"), "--mmap");
      add_arg(service("/ai_daemon"), "off");
    } else if (strncmp(argv[i], "aisched=", 8) == 0) {
      policy = argv[i] + 8;
    } else if (strncmp(argv[i], "aichunk=", 8) == 0) {
      chunk = argv[i] + 8;
    } else if (strncmp(argv[i], "aiprefill=", 10) == 0) {
      prefill = argv[i] + 10;
    } else {
      fprintf(2, "init: unknown argument '%s' ignored\n", argv[i]);
    }
  }
  if (policy || chunk || prefill)
    set_sched(policy, chunk, prefill);
  for (;;) {
    for (s = services; s < services + NSERVICE; s++)
      if (s->pid == 0)
        start(s);
    pid = wait(&status);
    if (pid < 0) // no children: every service given up (or not wanted)
      sleep(RESPAWN_RESET);
    for (s = services; s < services + NSERVICE; s++)
      if (pid > 0 && s->pid == pid)
        ended(s, status);
  }
}
