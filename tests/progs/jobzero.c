// jobzero: the AI worker's job holds its request and nothing else
// (tests/test_ai_job.py).
//
//   jobzero      registers as the AI worker (it needs the worker right:
//                boot with aiworker=console), then for ai_next and for
//                ai_take: submits a one-id request, leaves freshly freed
//                memory full of DIRT in the kernel's free list, takes the
//                request as the worker and compares every byte of the
//                struct ai_job it got with the request's fields and id, all
//                else zero (the padding and the ids past count included).
//
// Prints "jobzero: CALL ok", or "jobzero: CALL byte OFF is X" for the first
// byte that differs; the exit status is the number of failures.
#include "user/lib/user.h"
#include "kernel/include/aisvc.h"

#define DIRT      0xa5
#define DIRTBYTES (64 * 4096) // user pages freed just before the job is built

static struct ai_job job, want;
static char text[AI_RESULT_MAX + 1];

// Leaves DIRTBYTES of pages filled with DIRT at the head of the kernel's
// free list: grows the heap, fills it and gives it back.
static void
dirty(void)
{
  char *p = sbrk(DIRTBYTES);

  if (p == (char *)-1) {
    fprintf(2, "jobzero: sbrk failed\n");
    exit(1);
  }
  memset(p, DIRT, DIRTBYTES);
  sbrk(-DIRTBYTES);
}

// Submits a one-id request, takes it with ai_next (take = 0) or ai_take,
// checks the job byte by byte and completes the request. Returns 0 if the
// job is exactly the request, else 1.
static int
check(const char *call, int take)
{
  uint32 id = 42;
  int reqid = ai_submit(&id, 1, 1);
  int got;

  if (reqid <= 0) {
    printf("jobzero: %s submit: %s\n", call, strerror(reqid));
    return 1;
  }
  dirty();
  got = take ? ai_take(&job, 1) : ai_next(&job);
  if (got != reqid) {
    printf("jobzero: %s returned %d, not reqid %d\n", call, got, reqid);
    return 1;
  }
  memset(&want, 0, sizeof(want));
  want.reqid = reqid;
  want.count = 1;
  want.predict = 1;
  want.opts = job.opts; // the kernel's defaults, not ours to check here
  want.tokens[0] = id;
  ai_complete(reqid, &id, 1);
  ai_wait(reqid, text, sizeof(text)); // frees the slot
  for (uint i = 0; i < sizeof(job); i++) {
    if (((uchar *)&job)[i] != ((uchar *)&want)[i]) {
      printf("jobzero: %s byte %d is %x\n", call, i, ((uchar *)&job)[i]);
      return 1;
    }
  }
  printf("jobzero: %s ok\n", call);
  return 0;
}

int
main(void)
{
  int r, failed;

  if ((r = ai_register(1000, 64)) < 0) {
    fprintf(2, "jobzero: ai_register: %s (boot with aiworker=console)\n", strerror(r));
    exit(1);
  }
  failed = check("ai_next", 0) + check("ai_take", 1);
  ai_register(0, 0);
  exit(failed);
}
