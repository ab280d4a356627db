// aistress: many processes, many requests, random prompts and lengths,
// through the kernel AI service.
//
//   aistress [NPROC [NREQ [SEED [MAXPROMPT [MAXPREDICT]]]]]   (8 8 1 12 8)
//   aistress --bench PREDICT ID...     one process queues 8 copies at once
//
// Each process submits its NREQ requests (each with a random priority, as
// one of three tenants, so that every scheduling policy reorders and
// pauses them; blocking while the table is full
// and it owns none; on AIE_WOULDBLOCK it first waits for one of its own),
// then waits for the rest in a random order, and writes one line per
// request to /aistress.N:
//   R <proc> <req> <predict> : <prompt ids> : <result ids>
// or "E <proc> <req> <code>" on an error. When all have exited, the lines
// are printed in order, then "aistress: N ok, M errors, table used U":
// the host compares every result with the reference for its own prompt.
// --bench prints each request's queued/ttft/total times and the span from
// the first submit to the last finish.

#include "user/lib/user.h"
#include "kernel/include/fcntl.h"
#include "kernel/include/aisvc.h"

#define MAXREQ 64

static uint64 rng;

static int
rnd(int n)
{
  rng = rng * 6364136223846793005UL + 1442695040888963407UL;
  return (int)((rng >> 33) % (uint64)n);
}

struct req {
  int reqid, count, predict;
  struct ai_opts opts; // a random priority; the tenant: one of three
  uint32 ids[AI_MAX_PROMPT];
};

static struct req reqs[MAXREQ];
static char out[AI_RESULT_MAX + 1];
static char line[AI_RESULT_MAX + AI_MAX_PROMPT * 11 + 64];

static void
put_line(int fd, int proc, int k, struct req *r, int n)
{
  int len;
  if (n < 0) {
    len = snprintf(line, sizeof(line), "E %d %d %d\n", proc, k, n);
  } else {
    len = snprintf(line, sizeof(line), "R %d %d %d :", proc, k, r->predict);
    for (int i = 0; i < r->count; i++)
      len += snprintf(line + len, sizeof(line) - len, " %d", r->ids[i]);
    len += snprintf(line + len, sizeof(line) - len, " : %s\n", out);
  }
  write(fd, line, len);
}

// Waits for a random one of the outstanding requests and logs it.
static void
finish_one(int fd, int proc, int *outq, int *nout)
{
  int j = rnd(*nout), k = outq[j];
  outq[j] = outq[--*nout];
  int n = ai_wait(reqs[k].reqid, out, sizeof(out));
  put_line(fd, proc, k, &reqs[k], n);
}

// One process's share: submit everything, in order; when the service says
// "would block" (this process owns requests and the table is full, or it
// owns AI_PERPROC), wait for one of its own first. Then wait for the rest,
// in a random order.
static void
worker_proc(int proc, int nreq, int seed, int maxprompt, int maxpredict, int vocab)
{
  char name[32];
  int outq[MAXREQ], nout = 0;
  rng = seed * 1000003UL + proc;
  snprintf(name, sizeof(name), "/aistress.%d", proc);
  int fd = open(name, O_CREATE | O_TRUNC | O_WRONLY);
  for (int k = 0; k < nreq; k++) {
    struct req *r = &reqs[k];
    r->count = 1 + rnd(maxprompt);
    r->predict = 1 + rnd(maxpredict);
    for (int i = 0; i < r->count; i++)
      r->ids[i] = rnd(vocab);
    memset(&r->opts, 0, sizeof(r->opts));
    r->opts.priority = rnd(AI_PRIO_MAX + 1);
    r->opts.tenant = 1 + proc % 3;
  }
  for (int k = 0; k < nreq; k++) {
    struct req *r = &reqs[k];
    while (
        ((r->reqid = ai_submit_opts(r->ids, r->count, r->predict, &r->opts)) == -AIE_WOULDBLOCK ||
            r->reqid == -AIE_FULL) &&
        nout > 0)
      finish_one(fd, proc, outq, &nout);
    if (r->reqid > 0)
      outq[nout++] = k;
    else
      put_line(fd, proc, k, r, r->reqid);
  }
  while (nout > 0)
    finish_one(fd, proc, outq, &nout);
  close(fd);
  exit(0);
}

// Prints /aistress.N and counts its lines.
static void
collect(int proc, int *ok, int *bad)
{
  char name[32];
  snprintf(name, sizeof(name), "/aistress.%d", proc);
  int fd = open(name, O_RDONLY), n;
  if (fd < 0) {
    printf("E %d missing output\n", proc);
    (*bad)++;
    return;
  }
  while ((n = read(fd, line, sizeof(line))) > 0) {
    write(1, line, n);
    for (int i = 0; i < n; i++) {
      if (line[i] == 'R' && (i == 0 || line[i - 1] == '\n'))
        (*ok)++;
      if (line[i] == 'E' && (i == 0 || line[i - 1] == '\n'))
        (*bad)++;
    }
  }
  close(fd);
  unlink(name);
}

static int
bench(int argc, char **argv)
{
  static struct ai_status st[8];
  struct req *r = &reqs[0];
  r->predict = atoi(argv[2]);
  r->count = argc - 3 < AI_MAX_PROMPT ? argc - 3 : AI_MAX_PROMPT;
  for (int i = 0; i < r->count; i++)
    r->ids[i] = atoi(argv[3 + i]);
  int id[8];
  for (int k = 0; k < 8; k++)
    id[k] = ai_submit(r->ids, r->count, r->predict);
  for (int k = 0; k < 8; k++) {
    while (ai_query(id[k], &st[k]) == 0 && st[k].state < AI_DONE)
      sleep(1);
    int n = ai_wait(id[k], out, sizeof(out));
    printf("bench %d: reqid %d n=%d queued_us=%lu ttft_us=%lu total_us=%lu prefill+1_us=%lu: %s\n",
        k, id[k], n, st[k].queued_us, st[k].ttft_us, st[k].total_us,
        st[k].first_time - st[k].start_time, out);
  }
  printf("bench: 8 requests, first submit to last finish %lu ms\n",
      (st[7].finish_time - st[0].submit_time) / 1000);
  return 0;
}

int
main(int argc, char **argv)
{
  struct ai_info in;
  if (argc > 2 && strcmp(argv[1], "--bench") == 0)
    return bench(argc, argv);
  if (argc > 1 && argv[1][0] == '-') {
    if (strcmp(argv[1], "--bench") != 0)
      fprintf(2, "aistress: unknown option %s\n", argv[1]);
    fprintf(2,
        "usage: aistress [NPROC [NREQ [SEED [MAXPROMPT [MAXPREDICT]]]]] | "
        "aistress --bench PREDICT ID...\n");
    return 2;
  }
  int nproc = argc > 1 ? atoi(argv[1]) : 8;
  int nreq = argc > 2 ? atoi(argv[2]) : 8;
  int seed = argc > 3 ? atoi(argv[3]) : 1;
  int maxprompt = argc > 4 ? atoi(argv[4]) : 12;
  int maxpredict = argc > 5 ? atoi(argv[5]) : 8;
  if (nreq > MAXREQ || maxprompt > AI_MAX_PROMPT || maxpredict > AI_MAX_PREDICT || nproc < 1 ||
      nreq < 1 || maxprompt < 1 || maxpredict < 1) {
    fprintf(2, "aistress: bad arguments\n");
    return 2;
  }
  ai_info(&in);
  uint64 t0 = time_us();
  for (int p = 0; p < nproc; p++)
    if (fork() == 0)
      worker_proc(p, nreq, seed, maxprompt, maxpredict, in.vocab);
  for (int p = 0; p < nproc; p++)
    wait(0);
  uint64 t1 = time_us();
  int ok = 0, bad = 0;
  for (int p = 0; p < nproc; p++)
    collect(p, &ok, &bad);
  ai_info(&in);
  printf("aistress: %d ok, %d errors, table used %d, %lu ms\n", ok, bad, in.used, (t1 - t0) / 1000);
  return bad != 0 || in.used != 0;
}
