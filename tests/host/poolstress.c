// A stress test of the runtime's thread pool (user/llm/pool.c), built
// natively with tests/host/hostcompat.h: more threads than host cores, so
// the host stops threads at arbitrary points, and steps whose chunk counts
// alternate (1, 3, 16 and 64 items with grains 1 and 4), as attention and
// matmul steps do in a token. Each step's function checks that it was
// given that step's argument and counts how often each item ran; after the
// step every item must have run exactly once.
//
// usage: llm_poolstress THREADS STEPS
// Prints "ok STEPS steps, THREADS threads" and exits 0, or names the first
// wrong step and exits 1.
#include "user/llm/loader.h"
#include "user/llm/pool.h"

const char *llm_prog = "llm_poolstress";

#define MAX_ITEMS 64

struct stepcase {
  uint64 magic; // which step this argument belongs to
  int n, grain;
  uint32 runs[MAX_ITEMS];
};

static volatile uint64 current_magic;
static volatile int stray_chunk; // a chunk ran with another step's argument

// The step function: records each item it runs; a call whose argument is
// not the current step's is an error.
static void
count_items(void *arg, int lo, int hi, int t)
{
  struct stepcase *c = arg;
  if (c->magic != current_magic || lo < 0 || hi > c->n || lo > hi) {
    stray_chunk = 1;
    return;
  }
  for (int i = lo; i < hi; i++)
    __atomic_add_fetch(&c->runs[i], 1, __ATOMIC_RELAXED);
}

int
main(int argc, char **argv)
{
  if (argc != 3) {
    fprintf(2, "usage: llm_poolstress THREADS STEPS\n");
    return 2;
  }
  int threads = atoi(argv[1]);
  long steps = atol(argv[2]);
  static const int shapes[][2] = { { 1, 1 }, { 64, 4 }, { 3, 1 }, { 16, 1 }, { 64, 1 } };
  static struct stepcase cases[5];
  int nshapes = sizeof(shapes) / sizeof(shapes[0]);

  int got = llm_pool_start(threads);
  if (got != threads) {
    fprintf(2, "llm_poolstress: %d threads started, not %d\n", got, threads);
    return 1;
  }
  for (long s = 0; s < steps; s++) {
    struct stepcase *c = &cases[s % nshapes];
    c->magic = (uint64)s + 1;
    c->n = shapes[s % nshapes][0];
    c->grain = shapes[s % nshapes][1];
    memset(c->runs, 0, sizeof(c->runs));
    current_magic = c->magic;
    llm_pool_run(count_items, c, c->n, c->grain);
    int bad = stray_chunk;
    for (int i = 0; i < c->n; i++)
      bad |= c->runs[i] != 1;
    if (bad) {
      fprintf(2, "llm_poolstress: step %ld (%d items, grain %d): %s\n", s, c->n, c->grain,
          stray_chunk ? "a chunk ran with another step's argument" : "an item ran other than once");
      return 1;
    }
  }
  llm_pool_stop();
  printf("ok %ld steps, %d threads\n", steps, threads);
  return 0;
}
