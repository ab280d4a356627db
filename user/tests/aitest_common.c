// aitest's helpers (aitest.h): results, requests, children and
// ai_table snapshots, shared by every phase.

#include "user/tests/aitest.h"

int npass, nfail;
uint32 P[3] = { 1, 2, 3 };
uint32 Q[2] = { 9, 8 };
char buf[AI_RESULT_MAX + 1];
struct ai_job job;
int vocab = 1000, seqlen = 64; // the fake worker's model
int mine[64], nmine;           // requests aitest submitted
int taken[64], ntaken;         // requests aitest took as the worker

// Counts and prints "PASS name" if ok, else "FAIL name (got got)"; returns ok.
int
result(const char *name, int ok, int got)
{
  if (ok) {
    npass++;
    printf("PASS %s\n", name);
  } else {
    nfail++;
    printf("FAIL %s (got %d)\n", name, got);
  }
  return ok;
}

// result(name, got == want, got).
int
expect(const char *name, int got, int want)
{
  return result(name, got == want, got);
}

// The service's counts (ai_info), zeroed if the call fails.
struct ai_info
info(void)
{
  struct ai_info in;
  memset(&in, 0, sizeof(in));
  ai_info(&in);
  return in;
}

// Slots in use.
int
used(void)
{
  return info().used;
}

// ai_submit, remembering the reqid for drain.
int
sub(const uint32 *ids, int n, int predict)
{
  int r = ai_submit(ids, n, predict);
  if (r > 0 && nmine < 64)
    mine[nmine++] = r;
  return r;
}

// As the worker: take the oldest queued request (call only when one is).
int
take(void)
{
  int r = ai_next(&job);
  if (r > 0 && ntaken < 64)
    taken[ntaken++] = r;
  return r;
}

// As the worker: complete reqid with n ids 10, 11, 12, ...
int
finish(int reqid, int n)
{
  static uint32 ids[AI_MAX_PREDICT];
  for (int i = 0; i < n && i < AI_MAX_PREDICT; i++)
    ids[i] = 10 + i;
  return ai_complete(reqid, ids, n);
}

// The state of our request reqid, or ai_query's error.
int
state_of(int reqid)
{
  struct ai_status st;
  int r = ai_query(reqid, &st);
  return r < 0 ? r : st.state;
}

// ---------------------------------------------------------------- children

static int zpid[64], zst[64], nz; // children reaped while waiting for another

// wait(), keeping any child other than pid for a later wait_for.
static int
reap_until(int pid, int *status)
{
  int st, w;
  while ((w = wait(&st)) > 0 && w != pid)
    if (nz < 64) {
      zpid[nz] = w;
      zst[nz++] = st;
    }
  if (w == pid && status)
    *status = st;
  return w;
}

// Waits up to ticks for child pid: 1 (and *status) if it exited, else 0.
int
wait_for(int pid, int ticks, int *status)
{
  int st, w, timer, done = 0, tdone = 0;
  for (int i = 0; i < nz; i++)
    if (zpid[i] == pid) {
      if (status)
        *status = zst[i];
      zpid[i] = 0;
      return 1;
    }
  if ((timer = fork()) == 0) {
    sleep(ticks);
    exit(0);
  }
  while (!done && !tdone && (w = wait(&st)) > 0) {
    if (w == pid) {
      done = 1;
      if (status)
        *status = st;
    } else if (w == timer)
      tdone = 1;
    else if (nz < 64) {
      zpid[nz] = w;
      zst[nz++] = st;
    }
  }
  if (!tdone) {
    kill(timer);
    reap_until(timer, 0);
  }
  return done;
}

// Kills child pid (if running) and reaps it.
void
stop(int pid)
{
  if (pid > 0) {
    kill(pid);
    wait_for(pid, 100, 0);
  }
}

// Starts f submitting n requests of P; returns how many it got.
int
filler_start(struct filler *f, int n)
{
  int rp[2], cp[2], msg[2] = { -1, 0 };
  pipe(rp);
  pipe(cp);
  if ((f->pid = fork()) == 0) {
    close(rp[0]);
    close(cp[1]);
    msg[0] = 0;
    for (int i = 0; i < n; i++)
      if ((msg[1] = ai_submit(P, 3, 1)) > 0)
        msg[0]++;
    write(rp[1], msg, sizeof(msg));
    read(cp[0], msg, 1);
    exit(0);
  }
  close(rp[1]);
  close(cp[0]);
  read(rp[0], msg, sizeof(msg));
  close(rp[0]);
  f->ctl = cp[1];
  f->count = msg[0];
  f->last = msg[1];
  return f->count;
}

// Lets f exit and reaps it.
void
filler_stop(struct filler *f)
{
  if (f->pid > 0) {
    // A byte, not just the close: other children hold copies of ctl.
    write(f->ctl, "x", 1);
    close(f->ctl);
    wait_for(f->pid, 100, 0);
  }
  f->pid = 0;
}

// A child that submits once; exit status 0 if it got a reqid.
int
submitter(void)
{
  int pid = fork();
  if (pid == 0) {
    int r = ai_submit(P, 3, 1);
    exit(r > 0 ? 0 : -r);
  }
  return pid;
}

// Leaves the table empty: as the worker, fail every queued request and
// every one it took; cancel its own.
void
drain(void)
{
  struct ai_info in;
  for (int guard = 0; guard < 64; guard++) {
    in = info();
    if (in.queued == 0 || in.worker_pid != getpid())
      break;
    int r = take();
    if (r < 0)
      break;
  }
  for (int i = 0; i < ntaken; i++)
    ai_fail(taken[i], AIE_RUNTIME);
  for (int i = 0; i < nmine; i++)
    ai_cancel(mine[i]);
  ntaken = nmine = 0;
}

// ---------------------------------------------------------------- ai_table

struct ai_table_view view;

// The slot of the caller's request reqid in view, or -1.
int
view_slot(int reqid)
{
  for (int i = 0; i < AI_NSLOT; i++)
    if (view.slot[i].state != AI_FREE && view.slot[i].reqid == reqid)
      return i;
  return -1;
}

// Slots in state st in view.
int
view_count(int st)
{
  int n = 0;
  for (int i = 0; i < AI_NSLOT; i++)
    n += view.slot[i].state == st;
  return n;
}

// Does view hold together: the FIFO names each QUEUED slot once, the batch
// each RUNNING one (a real worker serves), free slots are blank, progress
// is within predict and the times come in order?
int
view_consistent(void)
{
  int seen[AI_NSLOT] = { 0 };
  if (view.nqueued != view_count(AI_QUEUED) || view.nbatch != view_count(AI_RUNNING))
    return 0;
  for (int k = 0; k < view.nqueued; k++)
    if (view.slot[view.fifo[k]].state != AI_QUEUED || seen[view.fifo[k]]++)
      return 0;
  for (int k = 0; k < view.nbatch; k++)
    if (view.slot[view.batch[k]].state != AI_RUNNING || seen[view.batch[k]]++)
      return 0;
  for (int i = 0; i < AI_NSLOT; i++) {
    struct ai_slot_view *w = &view.slot[i];
    if (w->state == AI_FREE && (w->owner || w->reqid || w->predict || w->submit_time))
      return 0;
    if (w->state == AI_FREE)
      continue;
    if (w->tokens < 0 || w->tokens > w->predict || w->submit_time == 0 || w->submit_time > view.now)
      return 0;
    if (w->state >= AI_RUNNING && w->start_time < w->submit_time)
      return 0;
    if (w->first_time && w->first_time < w->start_time)
      return 0;
    if (w->state == AI_DONE && w->finish_time < w->first_time)
      return 0;
  }
  return 1;
}

// A child that owns nothing: exit status 0 if ai_table shows it the
// owners of the used slots but none of their reqids.
int
view_child(void)
{
  int pid = fork();
  if (pid == 0) {
    int ok = ai_table(&view, sizeof(view)) == 0 && view_count(AI_FREE) < AI_NSLOT;
    for (int i = 0; i < AI_NSLOT; i++)
      ok = ok && view.slot[i].reqid == 0 &&
          (view.slot[i].state == AI_FREE || view.slot[i].owner != 0);
    exit(ok ? 0 : 1);
  }
  int st = -1;
  wait_for(pid, 100, &st);
  return st;
}

// Is s (len bytes, then a 0) n decimal ids separated by single spaces?
int
is_id_text(const char *s, int len, int n)
{
  int words = 0;
  for (int i = 0; i < len; i++) {
    if (s[i] == ' ' && (i == 0 || s[i - 1] == ' ' || i == len - 1))
      return 0;
    if (s[i] != ' ' && (s[i] < '0' || s[i] > '9'))
      return 0;
    if (s[i] != ' ' && (i == 0 || s[i - 1] == ' '))
      words++;
  }
  return words == n && s[len] == 0;
}

// Waits up to ticks for request reqid to leave state `from`; its state.
int
wait_leave(int reqid, int from, int ticks)
{
  int s = state_of(reqid);
  for (int i = 0; i < ticks && s == from; i++) {
    sleep(1);
    s = state_of(reqid);
  }
  return s;
}

// Waits up to ticks for the table to hold `n` used slots and no orphan.
int
wait_used(int n, int ticks)
{
  struct ai_info in = info();
  for (int i = 0; i < ticks && (in.used != n || in.orphans != 0); i++) {
    sleep(1);
    in = info();
  }
  return in.used;
}
