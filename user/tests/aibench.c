// aibench: the scheduling cases of docs/SCHEDULING.md, measured inside the
// guest through the kernel AI service (tests/host/bench_sched.py boots
// one guest per policy and prints the comparison).
//
//   aibench CASE...   CASE: alone, behind, tenant, gaps, mixed, all
//
// Prompts are ids chosen by formula (their content does not change the
// time a step takes); every request is greedy with no stop ids. Times are
// the kernel's (struct ai_status: ttft_us from submit to the first id),
// or time_us() at each id a stream read returns. One line per case:
//   aibench alone ttft_us=T                       a 5-id request, alone
//   aibench behind ttft_us=T long_ttft_us=L       the same, submitted once a
//                                                 200-id prompt runs
//   aibench tenant ttft_us=T                      the same, from another
//                                                 process (tenant) while 8
//                                                 requests of 48 ids run
//   aibench gaps median_us=M max_us=X ids=N alone_us=A long_ttft_us=L
//                                                 a decoding request's gaps
//                                                 between ids while a 200-id
//                                                 prompt arrives (A: its
//                                                 median gap before; L: the
//                                                 prompt's TTFT)
//   aibench mixed ms=W positions=P gen=G          4 processes x 6 requests of
//                                                 random sizes and priorities

#include "user/lib/user.h"
#include "kernel/include/aisvc.h"

#define SHORT_N    5
#define SHORT_PRED 8

static int vocab;
static uint32 ids[AI_MAX_PROMPT];
static char out[AI_RESULT_MAX + 1];

// ids[0..n) by formula, different for each salt, below the vocab size.
static void
make_ids(int n, int salt)
{
  for (int i = 0; i < n; i++)
    ids[i] = 100 + (uint32)((i * 7919 + salt * 104729) % (vocab - 200));
}

static int
submit(int n, int predict, int salt, int priority)
{
  struct ai_opts o;
  memset(&o, 0, sizeof(o));
  o.priority = priority;
  make_ids(n, salt);
  return ai_submit_opts(ids, n, predict, &o);
}

// Polls request r until it is done (every tick); its status, then waits.
static struct ai_status
finish(int r)
{
  struct ai_status st;
  memset(&st, 0, sizeof(st));
  while (ai_query(r, &st) == 0 && st.state < AI_DONE)
    sleep(1);
  ai_wait(r, out, sizeof(out));
  return st;
}

// Polls request r until it has started.
static void
until_started(int r)
{
  struct ai_status st;
  while (ai_query(r, &st) == 0 && st.start_time == 0)
    sleep(1);
}

static void
alone(void)
{
  struct ai_status st = finish(submit(SHORT_N, SHORT_PRED, 1, 0));
  printf("aibench alone ttft_us=%lu\n", st.ttft_us);
}

static void
behind(void)
{
  int lng = submit(200, 8, 2, 0);
  until_started(lng);
  int r = submit(SHORT_N, SHORT_PRED, 1, 0);
  struct ai_status st = finish(r), sl = finish(lng);
  printf("aibench behind ttft_us=%lu long_ttft_us=%lu\n", st.ttft_us, sl.ttft_us);
}

static void
tenant(void)
{
  int fd[2], r[8];
  char c;
  pipe(fd);
  int pid = fork();
  if (pid == 0) {
    for (int k = 0; k < 8; k++)
      r[k] = submit(48, 32, 10 + k, 0);
    write(fd[1], "s", 1);
    for (int k = 0; k < 8; k++)
      ai_wait(r[k], out, sizeof(out));
    exit(0);
  }
  read(fd[0], &c, 1);
  struct ai_info in;
  for (int k = 0; k < 600; k++) { // until all 8 run (a minute at most)
    sleep(1);
    ai_info(&in);
    if (in.running >= 8)
      break;
  }
  struct ai_status st = finish(submit(SHORT_N, SHORT_PRED, 1, 0));
  printf("aibench tenant ttft_us=%lu\n", st.ttft_us);
  wait(0);
  close(fd[0]);
  close(fd[1]);
}

// Sorts a[0..n) (insertion sort: n is small).
static void
sort(uint64 *a, int n)
{
  for (int i = 1; i < n; i++)
    for (int k = i; k > 0 && a[k - 1] > a[k]; k--) {
      uint64 t = a[k - 1];
      a[k - 1] = a[k];
      a[k] = t;
    }
}

// The median of the gaps between the ids at at[from..to) (to > from + 1).
static uint64
median_gap(const uint64 *at, int from, int to)
{
  static uint64 gap[AI_MAX_PREDICT];
  int ng = 0;

  for (int i = from + 1; i < to; i++)
    gap[ng++] = at[i] - at[i - 1];
  sort(gap, ng);
  return gap[ng / 2];
}

static void
gaps(void)
{
  static uint64 at[AI_MAX_PREDICT];
  uint32 got[AI_MAX_PREDICT];
  int predict = 64, d = submit(SHORT_N, predict, 3, 0), from = 0, lng = 0, before = 0, n;
  while ((n = ai_stream(d, got, from, AI_MAX_PREDICT)) > 0) {
    uint64 t = time_us();
    for (int i = 0; i < n; i++)
      at[from + i] = t;
    from += n;
    if (lng == 0 && from >= 8) {
      lng = submit(200, 4, 4, 0);
      before = from;
    }
  }
  ai_wait(d, out, sizeof(out));
  struct ai_status sl = finish(lng);
  uint64 most = 0;
  for (int i = 2; i < from; i++) // from the second id on: decode only
    if (at[i] - at[i - 1] > most)
      most = at[i] - at[i - 1];
  printf("aibench gaps median_us=%lu max_us=%lu ids=%d alone_us=%lu long_ttft_us=%lu\n",
      from > 3 ? median_gap(at, 1, from) : 0, most, from,
      before > 3 ? median_gap(at, 1, before) : 0, sl.ttft_us);
}

static uint64 rng = 12345;

static int
rnd(int n)
{
  rng = rng * 6364136223846793005UL + 1442695040888963407UL;
  return (int)((rng >> 33) % (uint64)n);
}

static void
mixed(void)
{
  int positions = 0, gen = 0;
  uint64 t0 = time_us();
  for (int p = 0; p < 4; p++) {
    int count[6], predict[6], pri[6];
    for (int k = 0; k < 6; k++) {
      count[k] = 1 + rnd(64);
      predict[k] = 1 + rnd(32);
      pri[k] = rnd(AI_PRIO_MAX + 1);
      positions += count[k] + predict[k];
      gen += predict[k];
    }
    if (fork() == 0) {
      int r[6];
      for (int k = 0; k < 6; k++)
        r[k] = submit(count[k], predict[k], 100 * p + k, pri[k]);
      for (int k = 0; k < 6; k++)
        ai_wait(r[k], out, sizeof(out));
      exit(0);
    }
  }
  for (int p = 0; p < 4; p++)
    wait(0);
  printf("aibench mixed ms=%lu positions=%d gen=%d\n", (time_us() - t0) / 1000, positions, gen);
}

int
main(int argc, char **argv)
{
  static const struct {
    const char *name;
    void (*run)(void);
  } cases[] = { { "alone", alone }, { "behind", behind }, { "tenant", tenant }, { "gaps", gaps },
    { "mixed", mixed } };
  struct ai_info in;
  ai_info(&in);
  vocab = in.vocab;
  if (argc < 2 || in.worker_pid == 0 || vocab < 1000) {
    fprintf(2,
        "usage: aibench CASE... (alone, behind, tenant, gaps, mixed, all), with a "
        "worker serving a model\n");
    return 2;
  }
  for (int i = 1; i < argc; i++)
    for (int k = 0; k < 5; k++)
      if (strcmp(argv[i], "all") == 0 || strcmp(argv[i], cases[k].name) == 0)
        cases[k].run();
  return 0;
}
