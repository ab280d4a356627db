// aitest: conformance suite of the kernel AI service (docs/AI_SERVICE.md).
//
// One "PASS name" or "FAIL name (got ...)" line per rule, then
// "N passed, M failed". Phases:
//   1. no worker since boot (an image without models): submit fails at once;
//   2. with the real ai_daemon: ai_call end to end, timing, batching (a
//      full batch, a request queued behind it, a cancel and an owner exit
//      mid-batch freeing places within a step), every bad argument (the
//      worker must keep running);
//   3. aitest takes the worker role itself (it kills the daemon, whose
//      restart then waits for the role) so that every state can be reached
//      on purpose: query in each state, one-shot, buffers, failures,
//      ownership, the cap, backpressure woken by each kind of slot release,
//      owner exit, kill in submit and wait, streaming in every state,
//      ai_take's fairness, the scheduling policies (their order, aging,
//      preemption, fair's bound, the step budget, switching under load),
//      the worker's sleep and death; ai_table in each state (and
//      snapshots taken while phase 2's batch runs);
//   4. it gives the role back; the restarted ai_daemon serves again, and is
//      killed in the middle of a request: its caller gets AIE_WORKERDIED
//      and the queued requests are served by the next daemon;
//   5. no slot leaked: the table is empty and fills to AI_NSLOT again.
// Phases 3 and 4 act as the worker, so aitest needs the AI worker right:
// boot with aiworker=console (rule 13); without it aitest says so and
// fails at once.
// Children report through their exit status; waits on children are bounded.

#include "user/tests/aitest.h"

// ---------------------------------------------------------------- phase 1

// Phase 1: with no worker since boot, submit and ai_call fail at once.
static void
no_worker(void)
{
  uint64 t0 = time_us();
  expect("no worker: submit fails at once with AIE_NOWORKER", ai_submit(P, 3, 1), -AIE_NOWORKER);
  expect("no worker: ai_call fails with AIE_NOWORKER", ai_call(P, 3, 1, buf, sizeof(buf)),
      -AIE_NOWORKER);
  result("no worker: without blocking", time_us() - t0 < 1000000, (int)(time_us() - t0));
  expect("no worker: worker-only call ai_next refused", ai_next(&job), -AIE_NOTWORKER);
  expect("no worker: no slot taken", used(), 0);
}

// ---------------------------------------------------------------- phase 5

// Phase 5: no slot leaked: the table is empty and fills to AI_NSLOT again.
static void
no_leak(void)
{
  struct filler f = { 0 };
  expect("no leak: the table is empty", used(), 0);
  int ok = 1;
  for (int i = 0; i < AI_PERPROC; i++)
    ok = ok && sub(P, 3, 1) > 0;
  ok = ok && filler_start(&f, AI_NSLOT - AI_PERPROC) == AI_NSLOT - AI_PERPROC;
  result("no leak: the table fills to AI_NSLOT again", ok && used() == AI_NSLOT, used());
  filler_stop(&f);
  for (int i = 0; i < nmine; i++)
    ai_cancel(mine[i]);
  nmine = 0;
  for (int i = 0; i < 100 && used() != 0; i++) // an orphan may still be running
    sleep(1);
  expect("no leak: empty again", used(), 0);
}

// Phase 3: every state and rule, with aitest as the worker.
static void
as_worker(void)
{
  states();
  table_states();
  buffers();
  reqids();
  ownership();
  cap();
  backpressure("backpressure: a blocked submitter is woken by a wait", BY_WAIT);
  backpressure("backpressure: ... by a cancel", BY_CANCEL);
  backpressure("backpressure: ... by an owner exit", BY_EXIT);
  backpressure("backpressure: ... by waiting for a failed request", BY_FAILED);
  backpressure("backpressure: ... by an orphan's completion", BY_ORPHAN);
  backpressure("backpressure: ... by the worker's death (orphan freed)", BY_DEATH);
  owner_exit();
  kills();
  streaming();
  stop_ids();
  fairness();
  scheduling();
  worker_rules();
}

// Runs the phases that the boot allows (see above); exit status 1 if a
// rule failed.
int
main(void)
{
  struct ai_info in = info();
  int daemon = in.worker_pid;
  printf("aitest: worker pid %d, vocab %d, runtime_seq_len %d\n", daemon, in.vocab, in.seq_len);
  if (!ai_right(0)) {
    printf("aitest: this process lacks the AI worker right, which its cases need: boot with "
           "aiworker=console (make qemu BOOTARGS=aiworker=console; docs/AI_SERVICE.md, rule "
           "13)\n");
    expect("the AI worker right", 0, 1);
    printf("%d passed, %d failed\n", npass, nfail);
    return 1;
  }
  if (!in.worker_seen)
    no_worker();
  if (daemon) {
    vocab = in.vocab;
    seqlen = in.seq_len;
    real_worker();
    batching_real();
    bad_arguments();
    if (!take_over(daemon))
      goto done;
  } else {
    expect("become the worker (no daemon)", ai_register(vocab, seqlen), 0);
    bad_arguments();
  }
  as_worker();
  if (daemon) {
    ai_register(0, 0);
    real_worker_death(daemon);
  }
done:
  no_leak();
  if (!daemon) {
    ai_register(0, 0);
    expect("no worker again: submit fails at once", ai_submit(P, 3, 1), -AIE_NOWORKER);
  }
  printf("%d passed, %d failed\n", npass, nfail);
  return nfail != 0;
}
