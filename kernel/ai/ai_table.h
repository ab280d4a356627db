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
  struct ai_opts opts;                                     // stop ids, sampler
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
  int worker;          // pid of the registered worker, 0 if none
  int worker_seen;     // a worker has registered since boot
  int vocab, seq_len;  // its model's limits
  uint64 seq;          // the next submit's sequence number (from 1)
  int reqid_max;       // reqids run 1..reqid_max, then wrap (reqid_of)
  int completed;       // requests completed since boot
  struct ai_kvstat kv; // the worker's KV cache, as last reported
  char freed, queued;  // sleep channels (only their addresses matter)
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
int owned_count(int pid);
int fifo_oldest(void);
int fair_pick(int places);

// The caller's side.
int submit_check(const struct submission *q);
int slot_queue(struct ai_slot *s, const struct submission *q);
void slot_free(struct ai_slot *s);
void slot_abandon(struct ai_slot *s);
void status_fill(struct ai_slot *s, struct ai_status *st);
void view_fill(struct ai_table_view *v);

// The worker's side.
int slot_start(int i, struct ai_job *job);
void slot_unstart(int reqid);
void slot_progress(struct ai_slot *s, int ntokens);
int slot_emit(struct ai_slot *s, const uint32 *ids, int n);
int slot_logprob(struct ai_slot *s, const struct ai_logprob *r);
int slot_complete(struct ai_slot *s, const uint32 *ids, int n);
void slot_fail(struct ai_slot *s, int err);
void worker_gone(int pid);

#endif
