// What aitest's files share (aitest.c has the design comment): the
// counts of passed and failed rules, the requests aitest holds, and the
// helpers every phase uses (aitest_common.c); then each file's phases.
//   aitest.c         main, phase 1 (no worker) and 5 (no slot leaked)
//   aitest_common.c  results, requests, children, ai_table snapshots
//   aitest_real.c    phases 2 and 4: with the real ai_daemon
//   aitest_worker.c  phase 3: aitest as the worker, every state and rule
//   aitest_sched.c   phase 3's scheduling policies, and its simulated worker
//   aitest_resume.c  the window per tenant, paused requests under a full
//                    queue, fair's floor for a returning tenant
#ifndef AISVC_AITEST_H
#define AISVC_AITEST_H

#include "user/lib/user.h"
#include "kernel/include/aisvc.h"

#define BADADDR  ((void *)0x80000000UL) // kernel memory, never user memory
#define BADADDR2 ((void *)-1L)

extern int npass, nfail;
extern uint32 P[3], Q[2];                    // two small prompts
extern char buf[AI_RESULT_MAX + 1];          // a result's text
extern struct ai_job job;                    // the job aitest took last as the worker
extern int vocab, seqlen;                    // the fake worker's model
extern int mine[64], nmine;                  // requests aitest submitted
extern int taken[64], ntaken;                // requests aitest took as the worker
extern struct ai_table_view view;            // the last ai_table snapshot
extern char first_result[AI_RESULT_MAX + 1]; // the real worker's answer to (P, 4 ids)

// ---------------------------------------------------------------- results
// Counts and prints "PASS name" if ok, else "FAIL name (got got)"; returns ok.
int result(const char *name, int ok, int got);
// result(name, got == want, got).
int expect(const char *name, int got, int want);

// ---------------------------------------------------------------- requests
// The service's counts (ai_info), zeroed if the call fails.
struct ai_info info(void);
// Slots in use.
int used(void);
// ai_submit, remembering the reqid for drain.
int sub(const uint32 *ids, int n, int predict);
// As the worker: take the oldest queued request (call only when one is).
int take(void);
// As the worker: complete reqid with n ids 10, 11, 12, ...
int finish(int reqid, int n);
// The state of our request reqid, or ai_query's error.
int state_of(int reqid);
// Waits up to ticks for request reqid to leave state `from`; its state.
int wait_leave(int reqid, int from, int ticks);
// Waits up to ticks for the table to hold `n` used slots and no orphan.
int wait_used(int n, int ticks);
// Is s (len bytes, then a 0) n decimal ids separated by single spaces?
int is_id_text(const char *s, int len, int n);
// Leaves the table empty: as the worker, fail every queued request and
// every one it took; cancel its own.
void drain(void);

// ---------------------------------------------------------------- children
// Waits up to ticks for child pid: 1 (and *status) if it exited, else 0.
int wait_for(int pid, int ticks, int *status);
// Kills child pid (if running) and reaps it.
void stop(int pid);

// A child that submits n requests, reports how many it got and its last
// reqid, then stays until filler_stop writes to ctl.
struct filler {
  int pid, ctl, count, last;
};
// Starts f submitting n requests of P; returns how many it got.
int filler_start(struct filler *f, int n);
// Lets f exit and reaps it.
void filler_stop(struct filler *f);
// A child that submits once; exit status 0 if it got a reqid. Its pid.
int submitter(void);

// ---------------------------------------------------------------- ai_table
// The slot of the caller's request reqid in view, or -1.
int view_slot(int reqid);
// Slots in state st in view.
int view_count(int st);
// Does view hold together (see aitest_common.c)?
int view_consistent(void);
// A child that owns nothing: exit status 0 if ai_table shows it the
// owners of the used slots but none of their reqids.
int view_child(void);

// ---------------------------------------------------------------- phases
// Phase 2, with the real ai_daemon (aitest_real.c).
void real_worker(void);
void batching_real(void);
void bad_arguments(void);
// Kills the daemon and takes the worker role; 1 if it did.
int take_over(int daemon);
// Phase 4: the restarted daemon serves, and dies mid-request.
void real_worker_death(int old);

// Phase 3, aitest as the worker (aitest_worker.c).
enum { BY_WAIT, BY_CANCEL, BY_EXIT, BY_FAILED, BY_ORPHAN, BY_DEATH }; // how a slot is freed
void states(void);
void table_states(void);
void buffers(void);
void reqids(void);
void ownership(void);
void cap(void);
void backpressure(const char *name, int how);
void owner_exit(void);
void kills(void);
void streaming(void);
void stop_ids(void);
void fairness(void);
void worker_rules(void);
// The scheduling policies (aitest_sched.c).
void scheduling(void);
// Its simulated worker, which plans and steps as ai_daemon does, for the
// cases in aitest_resume.c too: the requests it holds, its last plan, the
// weighted tokens it served tenants 1 and 2.
struct held {
  int reqid, count, predict, tenant, fed, gen;
};
extern uint32 LONGP[AI_MAX_PROMPT]; // a long prompt of small ids
extern struct held hs[AI_NSLOT];
extern int nhs;
extern struct ai_plan plan;
extern uint64 served[2];
// Sets the policy and the step budget (0 keeps it); ai_sched's answer.
int set_sched(const char *name, int chunk);
// Submits n ids of LONGP to generate predict, with a tenant and a priority.
int sub_tp(int n, int predict, int tenant, int priority);
// As ai_daemon admits: ai_take while fewer than caches are held; how many.
int sim_admit(int places, int caches);
// One step as ai_daemon's (plan, run, report); the plan's run count or error.
int sim_step(int places, int caches);
// Collects every request aitest submitted that is done (ai_wait).
void collect(void);
// Steps until nothing is held or queued; the steps run.
int sim_drain(int places, int caches);
// Steps until nothing is held: whether tenants 1 and 2 stayed within fair's
// bound of each other while both had requests held (tenant 1 counted from
// a0); *worst is their largest difference.
int fair_gap(int places, int caches, uint64 a0, int *worst);
// The window per tenant, paused requests under a full queue, and fair's
// floor for a returning tenant (aitest_resume.c).
void tenant_window(void);
void resume_full(const char *policy);
void fair_return(void);

#endif
