// aitest's shared harness (user/tests/aitest.c): the results, the requests
// aitest submitted, and the simulated worker of its scheduling cases, for
// the case files linked into aitest beside it (aitest_resume.c).
#ifndef AISVC_AITEST_H
#define AISVC_AITEST_H

#include "kernel/include/aisvc.h"

// One held request of the simulated worker.
struct held {
  int reqid, count, predict, tenant, fed, gen;
};

extern char buf[AI_RESULT_MAX + 1];
extern struct ai_job job;
extern int vocab, seqlen;   // the fake worker's model
extern int mine[64], nmine; // requests aitest submitted
extern uint32 LONGP[AI_MAX_PROMPT];
extern struct held hs[AI_NSLOT]; // the simulated worker's held requests
extern int nhs;
extern struct ai_plan plan; // its last plan
extern uint64 served[2];    // weighted tokens served to tenants 1 and 2

int result(const char *name, int ok, int got);
int expect(const char *name, int got, int want);
int used(void);
int finish(int reqid, int n);
int state_of(int reqid);
int wait_used(int n, int ticks);
void stop(int pid);
int set_sched(const char *name, int chunk);
int sub_tp(int n, int predict, int tenant, int priority);
int sim_admit(int places, int caches);
int sim_step(int places, int caches);
void collect(void);
int sim_drain(int places, int caches);
int fair_gap(int places, int caches, uint64 a0, int *worst);

// aitest_resume.c: the window per tenant, and paused requests under a full
// queue.
void tenant_window(void);
void resume_full(const char *policy);
void fair_return(void);

#endif
