// The kernel AI service (kernel/ai/ai_table.c and the files beside it):
// limits, request states, error codes and the structures its system calls
// exchange. Shared by the kernel and user programs (user/lib/user.h has
// the calls' prototypes).
#ifndef AISVC_AISVC_H
#define AISVC_AISVC_H

#include "types.h"

#define AI_NSLOT       16                    // request slots in the kernel's table
#define AI_PERPROC     8                     // live requests one process may own per tenant
#define AI_MAX_PROMPT  255                   // most prompt ids per request
#define AI_MAX_PREDICT 255                   // most generated ids per request
#define AI_MAX_STOP    4                     // stop ids per request (struct ai_opts)
#define AI_MICRO       1000000               // 1.0 in struct ai_opts' millionths
#define AI_MAX_BIAS    8                     // logit bias pairs per request (struct ai_opts)
#define AI_MAX_TOPLP   5                     // alternatives per log-probability record
#define AI_PENALTY_MAX (2 * AI_MICRO)        // |presence|, |frequency| at most 2
#define AI_BIAS_MAX    (100 * AI_MICRO)      // |bias| at most 100
#define AI_RESULT_MAX  (AI_MAX_PREDICT * 11) // "id id ...": 10 digits + space each
#define AI_REQID_MAX   0x7fffffff            // reqids run 1..2^31-1, then wrap, skipping live ones
#define AI_PRIO_MAX    100                   // struct ai_opts' priority: 0 (default) .. AI_PRIO_MAX
#define AI_CHUNK_MAX   8                     // most positions in one worker step (aichunk=N)
#define AI_POLICY_LEN  12                    // a policy's name, NUL included (struct ai_sched)

// The policies' constants (kernel/ai/sched_*.c; docs/AI_SERVICE.md section
// 10 states what each guarantees with them).
#define AI_AGING_US     100000 // priority: 1 level of priority is worth this much waiting
#define AI_SHORT_US     10000  // shortest: the wait a request of 1 id of work is worth
#define AI_FAIR_WPROMPT 1      // fair: the weight of a prompt position served
#define AI_FAIR_WGEN    2      // fair: the weight of an id generated
#define AI_FAIR_SLACK   32     // fair: the lead in weighted tokens that moves a place

// Where the models' assets lie in the guest's file system: init starts the
// worker when either exists, which serves SmolLM2's if both do. The host
// builds its images to these paths (pyaisvc.guest.llmguest reads them here).
#define AI_SMOL_DIR "/AI/SMOL"
#define AI_QWEN_DIR "/AI/QWEN"

// Request states, as ai_query reports them.
#define AI_FREE    0 // (internal) slot unused
#define AI_QUEUED  1 // in the FIFO, waiting for the worker
#define AI_RUNNING 2 // taken by the worker
#define AI_DONE    3 // result ready for one ai_wait
#define AI_FAILED  4 // failed; the next ai_wait reports err once

// Error codes: the AI calls return the negated code (-AIE_NOREQ, ...).
// They start at 100, apart from errno.h's, so every AI failure has its own.
#define AIE_COUNT    100 // token count is 0 or above AI_MAX_PROMPT
#define AIE_PREDICT  101 // predict count below 1 or above AI_MAX_PREDICT
#define AIE_TOKEN    102 // a token id is not below the model's vocab size
#define AIE_TOOLONG  103 // prompt + predict exceed the runtime_seq_len
#define AIE_FAULT    104 // bad user address
#define AIE_NOREQ    105 // no such request (never issued, or consumed)
#define AIE_NOTOWNER 106 // the request belongs to another process
#define AIE_TOOSMALL 107 // out_cap below result_len; the result is kept
#define AIE_NOWORKER 108 // no AI worker (no model on this system)
#define AIE_INTR     109 // interrupted: the caller was killed
// AIE_WOULDBLOCK: the caller owns AI_PERPROC live requests for the request's
// tenant (its own pid's unless it names one): wait for one of them first.
#define AIE_WOULDBLOCK 110
#define AIE_WORKERDIED 111 // the worker died while running the request
#define AIE_RUNTIME    112 // the model runtime refused or failed the request
#define AIE_NOTWORKER  113 // worker-only call from another process
#define AIE_BUSY       114 // another worker is already registered
#define AIE_BADARG     115 // other invalid argument (negative out_cap, ...)
#define AIE_NOMEM      116 // the kernel ran out of memory
// 117 is reserved: never returned, and never to be given a meaning
// (docs/AI_SERVICE.md, section 5).
#define AIE_PERM     118 // the process lacks the AI worker right (ai_register, ai_sched)
#define AIE_POLICY   119 // no scheduling policy of that name (ai_sched)
#define AIE_PRIORITY 120 // priority out of range (struct ai_opts: 0..AI_PRIO_MAX)
#define AIE_CHUNK    121 // step or prompt budget out of range (ai_sched: 1..AI_CHUNK_MAX)
#define AIE_FULL     122 // the table is full and the caller owns requests: wait for one first

// Progress and timing of one request (ai_query). Times are microseconds
// since boot, 0 while the event has not happened; the *_us spans are
// derived from them (0 while unknown).
struct ai_status {
  int reqid, state, err, result_len; // the course's four fields first
  int queue_pos;                     // QUEUED: requests ahead of it (0 = next); else -1
  int tokens;                        // ids generated so far
  int prompt_len, predict;
  uint64 submit_time, start_time, first_time, finish_time;
  uint64 queued_us; // start - submit: time in the queue
  uint64 ttft_us;   // first - submit: time to first token, as seen by the caller
  uint64 total_us;  // finish - submit
  int cached;       // prompt positions the worker took from its KV cache
};

// One logit bias of struct ai_opts.
struct ai_bias {
  uint32 id;   // below the vocab size
  int32 micro; // added to the id's logit, x 10^6, |x| <= AI_BIAS_MAX
};

// A request's options (ai_submit_opts): the ids that end it, and how the
// worker chooses each id (user/llm/sample.c's rule: the same ids as
// llmrun_* with --temp, --top-k, --top-p and --seed). All zeros: greedy,
// no stop ids. The kernel does no floating point, so the two decimals are
// millionths (AI_MICRO is 1.0): the worker divides them by 10^6, which
// gives the same double as llmrun's reading of the decimal typed.
struct ai_opts {
  int nstop;                // stop ids in stop[], 0..AI_MAX_STOP
  uint32 stop[AI_MAX_STOP]; // the request ends after any of them is generated
  uint32 temp_micro;        // temperature x 10^6; 0: greedy
  uint32 top_k;             // keep the k most likely ids; 0: all
  uint32 top_p_micro;       // then the fewest reaching top_p x 10^6 (<= AI_MICRO); 0: all
  uint64 seed;              // the request's generator starts from it
  // Penalties, biases, log-probabilities (user/llm/sample.c, rule 0; the
  // AI service's section 10): millionths, all checked at submit.
  int32 presence_micro;  // presence penalty, |x| <= AI_PENALTY_MAX
  int32 frequency_micro; // frequency penalty, |x| <= AI_PENALTY_MAX
  int32 logprobs;        // 0: none; 1 + N: a struct ai_logprob per id, N <= AI_MAX_TOPLP
  int32 nbias;           // pairs in bias[], 0..AI_MAX_BIAS
  struct ai_bias bias[AI_MAX_BIAS];
  int tenant;   // whom the request serves (policy fair); 0: the submitter's pid
  int priority; // 0..AI_PRIO_MAX, higher first (policy priority); 0 by default
};

// An id and its log-probability x 10^6 (struct ai_logprob).
struct ai_lp_pair {
  uint32 id;
  int32 lp;
};

// One generated id's log-probabilities under the model's raw distribution
// (ai_logprob from the worker, ai_logprobs to the owner): 52 bytes.
struct ai_logprob {
  uint32 id;                           // the generated id
  int32 lp;                            // its log-probability x 10^6
  int32 ntop;                          // entries in top[]: the request's N
  struct ai_lp_pair top[AI_MAX_TOPLP]; // the N likeliest ids, best first
};

// One request as the worker receives it (ai_next).
struct ai_job {
  int reqid;
  int count;   // prompt ids in tokens[]
  int predict; // ids to generate at most
  struct ai_opts opts;
  uint32 tokens[AI_MAX_PROMPT];
};

// The whole table at a glance (ai_info): for tools and leak checks.
struct ai_info {
  int nslot, perproc; // AI_NSLOT, AI_PERPROC
  int used;           // slots not FREE (orphans included)
  int queued, running, done, failed;
  int orphans;        // running requests whose owner is gone
  int worker_pid;     // 0 when no worker is registered
  int worker_seen;    // a worker registered since boot
  int vocab, seq_len; // the model's limits, as the worker registered them
  int completed;      // requests the worker finished since boot
  int pauses;         // times a policy paused a running request since boot
};

// One slot of the table as anyone may see it (ai_table): no prompt and no
// result, and the reqid only of the caller's own requests. Times as in
// struct ai_status (us since boot, 0 = not yet).
struct ai_slot_view {
  int state; // AI_FREE .. AI_FAILED
  int reqid; // the caller's own request's reqid; 0 for anyone else's
  int owner; // the submitter's pid; 0 when FREE or orphaned
  int prompt_len, predict;
  int tokens; // ids generated so far
  uint64 submit_time, start_time, first_time, finish_time;
  int tenant, priority; // struct ai_opts' (tenant: the submitter's pid unless given)
  int paused, pauses;   // RUNNING but not in this step (a policy's preemption); times paused
  int cached;           // prompt positions the worker took from its KV cache
};

// The worker's KV cache, as it last reported it (ai_kvreport;
// user/llm/kvcache.h): a pool of blocks of block_positions positions, each
// block used (by a running request), cached (kept for a later prompt
// with the same prefix) or free; and its lookups since it started.
struct ai_kvstat {
  int blocks, used, cached, free;
  int block_positions;
  int reuse;      // prefix reuse on
  uint64 lookups; // prompts looked up
  uint64 prompt;  // their positions
  uint64 hits;    // of those, positions taken from the cache
  uint64 evictions;
};

// The whole table, taken in one go under the service's lock (ai_table):
// every slot, the FIFO's order and the worker's batch, all of one instant.
struct ai_table_view {
  uint64 now;          // when it was taken, us since boot (as time_us())
  int worker_pid;      // 0 when no worker is registered
  int completed;       // requests the worker finished since boot
  int nqueued;         // entries of fifo[]
  int fifo[AI_NSLOT];  // slot numbers of the QUEUED requests, next first
  int nbatch;          // entries of batch[]
  int batch[AI_NSLOT]; // slot numbers the worker runs now, ascending
  struct ai_slot_view slot[AI_NSLOT];
  struct ai_kvstat kv;        // the worker's KV cache (all 0 before its first report)
  char policy[AI_POLICY_LEN]; // the scheduling policy (ai_sched)
  int chunk;                  // positions per worker step
  int prefill;                // prompt positions of a step in which a request decodes
};

// The scheduler's settings (ai_sched): read by anyone, set by the holder
// of the AI worker right (docs/AI_SERVICE.md section 11).
struct ai_sched {
  char policy[AI_POLICY_LEN]; // "fifo", "priority", "shortest" or "fair"; "" keeps it
  int chunk;                  // positions per worker step, 1..AI_CHUNK_MAX; 0 keeps it
  int prefill; // prompt positions of a step in which a request decodes, 1..AI_CHUNK_MAX
               // (AI_CHUNK_MAX: the step's budget alone bounds them); 0 keeps it
};

// One step's plan (ai_plan): the worker gives the requests it holds and
// how far each is; the kernel puts them in the policy's order, most urgent
// first, and says how many of them run this step: the rest are paused
// (they keep their KV caches and slots and resume later, token-exact).
struct ai_plan_entry {
  int reqid;
  int fed; // positions run so far (prompt, then generated ids fed back)
};
struct ai_plan {
  int places;                       // in: requests the worker runs at once at most
  int caches;                       // in: requests it can hold (a KV cache each), >= places
  int n;                            // in: entries of e[]
  int run;                          // out: e[0..run) run this step, the others wait
  int chunk;                        // out: positions this step, at most
  struct ai_plan_entry e[AI_NSLOT]; // in: held requests; out: in the policy's order
};

#define AI_STR_(x) #x
#define AI_STR(x)  AI_STR_(x) // a limit above as text, e.g. "255"

// Words for an AI error code (either sign); 0 for codes it does not know.
static inline const char *
ai_strerror(int err)
{
  static const char *msg[] = {
    [AIE_COUNT - 100] "token count is 0 or above " AI_STR(AI_MAX_PROMPT),
    [AIE_PREDICT - 100] "predict count out of range (1.." AI_STR(AI_MAX_PREDICT) ")",
    [AIE_TOKEN - 100] "token id not below the model's vocab size",
    [AIE_TOOLONG - 100] "prompt + predict exceed the model's runtime_seq_len",
    [AIE_FAULT - 100] "bad address",
    [AIE_NOREQ - 100] "no such request",
    [AIE_NOTOWNER - 100] "not the owner of the request",
    [AIE_TOOSMALL - 100] "output buffer too small (result kept)",
    [AIE_NOWORKER - 100] "no AI worker (no model installed)",
    [AIE_INTR - 100] "interrupted (killed)",
    [AIE_WOULDBLOCK - 100] "would block: this tenant's " AI_STR(
        AI_PERPROC) " requests are live; wait for one first",
    [AIE_WORKERDIED - 100] "the AI worker died while running the request",
    [AIE_RUNTIME - 100] "the model runtime failed the request",
    [AIE_NOTWORKER - 100] "not the registered AI worker",
    [AIE_BUSY - 100] "an AI worker is already registered",
    [AIE_BADARG - 100] "invalid argument",
    [AIE_NOMEM - 100] "out of kernel memory",
    [AIE_PERM - 100] "not entitled to the AI worker role (no worker right)",
    [AIE_POLICY - 100] "no such scheduling policy (fifo, priority, shortest, fair)",
    [AIE_PRIORITY - 100] "priority out of range (0.." AI_STR(AI_PRIO_MAX) ")",
    [AIE_CHUNK - 100] "step or prompt budget out of range (1.." AI_STR(AI_CHUNK_MAX) " positions)",
    [AIE_FULL - 100] "the table is full: wait for one of this process's requests first",
  };
  if (err < 0)
    err = -err;
  if (err < 100 || err - 100 >= (int)(sizeof(msg) / sizeof(msg[0])))
    return 0;
  return msg[err - 100];
}

#endif
