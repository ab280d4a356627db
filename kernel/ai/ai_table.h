// The AI service's request table (ai_table.c), shared by the files of the
// service only: ai_request.c (the callers' calls), ai_worker.c (the
// worker's calls). Every function here expects ai.lock held; each changes
// a slot only as the rules atop ai_table.c allow.
#ifndef AISVC_AI_TABLE_H
#define AISVC_AI_TABLE_H

#include "kernel/include/aisvc.h"

struct ai_slot {
  // ai.lock must be held when using these. slot_queue clears every field
  // before prompt[]; the arrays are written before they are read.
  int state; // AI_FREE .. AI_FAILED
  int reqid;
  int owner;                                               // submitter's pid; 0 once orphaned
  int runner;                                              // the worker's pid while RUNNING
  int err;                                                 // FAILED: the positive AIE_ code
  int count, predict;                                      // prompt ids, ids to generate
  struct ai_opts opts;                                     // stop ids, sampler, tenant, priority
  uint64 seq;                                              // submit order (ai.seq)
  uint64 started;                                          // start order (ai.starts)
  int fed;                                                 // positions run (ai_plan)
  int paused, pauses;                                      // out of the step now; times paused
  int tokens;                                              // ids generated so far
  int result_len;                                          // DONE: bytes of result
  uint64 submit_time, start_time, first_time, finish_time; // us, 0 = not yet
  int nids;                                                // ids[] known so far (emit, complete)
  int nlp;                                                 // lp[] known so far (ai_logprob)
  int cached;                                              // prompt positions from the KV cache
  uint32 prompt[AI_MAX_PROMPT];                            // count of them
  uint32 ids[AI_MAX_PREDICT];                              // the generated ids, for ai_stream
  struct ai_logprob lp[AI_MAX_PREDICT]; // their log-probabilities, if asked (13,260 bytes)
  char result[AI_RESULT_MAX + 1];       // DONE: "id id ...", NUL-terminated
};

struct ai_table {
  struct spinlock lock;

  // ai.lock must be held when using these:
  struct ai_slot slot[AI_NSLOT];
  int fifo[AI_NSLOT]; // indexes of QUEUED slots, oldest at head
  int head, nqueued;
  int worker;                     // pid of the registered worker, 0 if none
  int worker_seen;                // a worker has registered since boot
  int vocab, seq_len;             // its model's limits
  uint64 seq;                     // the next submit's sequence number (from 1)
  int reqid_max;                  // reqids run 1..reqid_max, then wrap (reqid_of)
  int completed;                  // requests completed since boot
  const struct ai_policy *policy; // the scheduling policy (ai_sched.c)
  int chunk;                      // positions per worker step
  int prefill;                    // prompt positions of a step with a decoder (ai_sched.c)
  int caches;                     // requests the worker can hold (ai_plan), >= its places
  uint64 starts;                  // requests started since boot (slot.started)
  int pauses;                     // running requests paused since boot
  struct ai_kvstat kv;            // the worker's KV cache, as last reported
  char freed, queued;             // sleep channels (only their addresses matter)
};

extern struct ai_table ai;

// A request as submitted: prompt ids, how many to generate at most, and
// its options.
struct submission {
  uint32 ids[AI_MAX_PROMPT];
  int count, predict;
  struct ai_opts opts;
};

// Finding slots.
struct ai_slot *slot_find(int reqid, int orphans_too);
struct ai_slot *slot_owned(int reqid, int *err);
struct ai_slot *slot_running(int reqid, int *err);
struct ai_slot *slot_unused(void);
int owned_count(int pid, int tenant);
int slot_first(struct ai_slot *a, struct ai_slot *b);
int fifo_oldest(void);
int fifo_at(int k);
int running_count(int pid);
uint64 now_us(void);

// The caller's side.
int submit_check(const struct submission *q);
int slot_queue(struct ai_slot *s, const struct submission *q);
void slot_free(struct ai_slot *s);
void slot_abandon(struct ai_slot *s);
void status_fill(struct ai_slot *s, struct ai_status *st);
void view_fill(struct ai_table_view *v);

// The worker's side.
int slot_start(int i, struct ai_job *job, int paused);
void slot_unstart(int reqid);
void slot_progress(struct ai_slot *s, int ntokens);
int slot_emit(struct ai_slot *s, const uint32 *ids, int n);
int slot_logprob(struct ai_slot *s, const struct ai_logprob *r);
int slot_complete(struct ai_slot *s, const uint32 *ids, int n);
void slot_fail(struct ai_slot *s, int err);
void worker_gone(int pid);

// A scheduling policy: the three decisions of docs/AI_SERVICE.md section
// 10, each made with ai.lock held. One file each (sched_*.c, with the
// policy's rules in its design comment); ai_sched.c applies them.
struct ai_policy {
  const char *name;
  // The queued slot to start next for a worker that runs `places`
  // requests at once (0: no limit), or -1 if none is queued.
  int (*pick)(int places);
  // Slot s's rank among the worker's requests: lower first, in the step's
  // order (its prefill positions go to the first) and for its places.
  int64 (*key)(struct ai_slot *s);
  // Whether running r gives its place to waiting w (queued or paused).
  int (*yields)(struct ai_slot *r, struct ai_slot *w);
  // Whether the most urgent request's prompt, when the step can hold the
  // rest of it, runs whole (the others wait a step; ai_sched.c).
  int whole_prompt;
  // Optional (0 if none): s was queued; s was served `prompt` prompt
  // positions and `gen` generated ids; the policy was just chosen.
  void (*arrive)(struct ai_slot *s);
  void (*charge)(struct ai_slot *s, int prompt, int gen);
  void (*reset)(void);
};

extern const struct ai_policy sched_fifo, sched_priority, sched_shortest, sched_fair;

// ai_sched.c: what the policies share.
int sched_least_queued(void);
int sched_take(int places, int *paused);

#endif
