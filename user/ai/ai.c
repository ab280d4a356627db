// ai: try the kernel AI service by hand.
//
//   ai CMD ARGS          run one command
//   ai                   read commands from stdin, one per line, until
//                        `quit` or the end of input (prompt "ai> ")
//
// A request belongs to the process that submitted it, and it is reclaimed
// when that process exits, so submit / query / wait belong in one `ai`
// session (the second form); `child CMD` runs a command in a child process
// to show what another process gets.
//
//   submit PREDICT ID...   queue a request; prints its reqid. Before
//                          PREDICT, as for call and gen (ai_submit_opts):
//                          --stop ID (up to 4 times) ends the request
//                          early after ID; --temp T (0: greedy), --top-k
//                          K, --top-p P and --seed S sample its ids as
//                          llmrun_* does (T and P: at most 6 decimals);
//                          --presence-penalty P, --frequency-penalty F
//                          (-2..2), --logit-bias ID:B (-100..100, up to
//                          8 times) and --logprobs N (0..5) as llmrun_*
//                          takes them; gen prints, after the ids, a line
//                          per id: logprob i=I id=ID lp=LP top=ID:LP,...
//                          --tenant T names whom it serves (policy fair;
//                          default this process), --priority P (0..100,
//                          policy priority; default 0)
//   query REQID            state, queue position, tokens so far, timings
//   wait REQID             block until it is done; prints the generated ids
//   cancel REQID           give the request up
//   call PREDICT ID...     submit + wait
//   stream REQID           print its ids as they are produced (ai_stream),
//                          one line; the request stays for `wait`
//   gen PREDICT ID...      submit, stream, then collect (wait) the request
//   info                   the kernel's table at a glance
//   top [-n N]             the table live (ai_table), as top shows
//                          processes: refreshed 4 times a second until
//                          Ctrl-C, or N times
//   sched [NAME [CHUNK [PREFILL]]]
//                          the scheduling policy, the positions per step
//                          and those prompts get in a step in which a
//                          request decodes; with NAME (fifo, priority,
//                          shortest, fair), CHUNK and PREFILL (1..8) sets
//                          them, which needs the worker right
//                          (docs/AI_SERVICE.md section 11)
//   err CODE               what an error code means (either sign)
//   register VOCAB SEQLEN  try to become the AI worker (and resign at once
//                          if that worked): only a process with the worker
//                          right may (docs/AI_SERVICE.md, rule 13)
//   right                  whether this process holds the worker right
//   child CMD ARGS         run CMD in a child process
//   sleep TICKS            (10 per second)
//   help                   list the commands

#include "user/lib/user.h"
#include "kernel/include/aisvc.h"

#define MAXWORDS (AI_MAX_PROMPT + 8)

static char outbuf[AI_RESULT_MAX + 1];

static const char *states[] = { "free", "queued", "running", "done", "failed" };

static int
report(const char *what, int r)
{
  if (r < 0)
    printf("%s: error %d: %s\n", what, r, ai_strerror(r) ? ai_strerror(r) : strerror(r));
  return r;
}

// A request as the commands take it.
struct request {
  uint32 ids[MAXWORDS];
  int count, predict;
  struct ai_opts opts; // all zeros: none (greedy, no stop ids)
};

// A decimal with at most 6 decimals ("0.8", "1", "0.95") -> 0 and *v in
// millionths (struct ai_opts); -1 if s is not one or is 4295 or more.
static int
parse_micro(const char *s, uint32 *v)
{
  uint64 m = 0;
  int digits = 0, frac = -1;
  for (; *s; s++) {
    if (*s == '.' && frac < 0 && digits > 0) {
      frac = 0;
      continue;
    }
    if (*s < '0' || *s > '9' || frac == 6 || m > 0xffffffffUL)
      return -1;
    m = m * 10 + (*s - '0');
    digits++;
    frac += frac >= 0;
  }
  if (digits == 0 || frac == 0)
    return -1;
  for (int i = frac < 0 ? 0 : frac; i < 6; i++)
    m *= 10;
  if (m > 0xffffffffUL)
    return -1;
  *v = (uint32)m;
  return 0;
}

// A signed decimal of at most 6 decimals and magnitude at most hi
// millionths -> 0 and *v in millionths; else -1.
static int
parse_signed(const char *s, int32 hi, int32 *v)
{
  uint32 m;
  if (parse_micro(s + (*s == '-'), &m) < 0 || m > (uint32)hi)
    return -1;
  *v = *s == '-' ? -(int32)m : (int32)m;
  return 0;
}

// --logit-bias ID:B into o's next pair; -1 if malformed or full.
static int
parse_bias(const char *v, struct ai_opts *o)
{
  char *colon = strchr(v, ':');
  if (colon == 0 || colon == v || o->nbias == AI_MAX_BIAS)
    return -1;
  for (const char *p = v; p < colon; p++)
    if (*p < '0' || *p > '9')
      return -1;
  o->bias[o->nbias].id = (uint32)strtol(v, 0, 10);
  return parse_signed(colon + 1, AI_BIAS_MAX, &o->bias[o->nbias++].micro);
}

// The penalty, bias and logprobs options -> 0 or -1 (bad value); 1 if
// name is none of them.
static int
parse_adjust(const char *name, const char *value, struct ai_opts *o)
{
  if (strcmp(name, "--presence-penalty") == 0)
    return parse_signed(value, AI_PENALTY_MAX, &o->presence_micro);
  if (strcmp(name, "--frequency-penalty") == 0)
    return parse_signed(value, AI_PENALTY_MAX, &o->frequency_micro);
  if (strcmp(name, "--logit-bias") == 0)
    return parse_bias(value, o);
  if (strcmp(name, "--logprobs") != 0)
    return 1;
  int n = atoi(value);
  o->logprobs = 1 + n;
  return value[0] < '0' || value[0] > '9' || value[1] != 0 || n > AI_MAX_TOPLP ? -1 : 0;
}

// One option (name, value) of a request into o -> 0, or -1 after a
// message; 1 if name is not an option.
static int
parse_option(const char *name, const char *value, struct ai_opts *o)
{
  int bad;
  if ((bad = parse_adjust(name, value, o)) <= 0) {
    if (bad)
      printf("%s %s: not a valid value (--presence-penalty and --frequency-penalty -2..2, "
             "--logit-bias ID:B with B -100..100 (up to %d), --logprobs 0..%d)\n",
          name, value, AI_MAX_BIAS, AI_MAX_TOPLP);
    return bad;
  } else if (strcmp(name, "--stop") == 0) {
    if (o->nstop == AI_MAX_STOP) {
      printf("at most %d --stop ids per request (AI_MAX_STOP); give fewer\n", AI_MAX_STOP);
      return -1;
    }
    o->stop[o->nstop++] = (uint32)strtol(value, 0, 10);
    return 0;
  } else if (strcmp(name, "--temp") == 0)
    bad = parse_micro(value, &o->temp_micro);
  else if (strcmp(name, "--top-p") == 0)
    bad =
        parse_micro(value, &o->top_p_micro) < 0 || o->top_p_micro == 0 || o->top_p_micro > AI_MICRO;
  else if (strcmp(name, "--top-k") == 0) {
    uint64 k = 0;
    bad = parse_u64(value, &k) < 0 || k > 0xffffffffUL;
    o->top_k = (uint32)k;
  } else if (strcmp(name, "--seed") == 0)
    bad = parse_u64(value, &o->seed);
  else if (strcmp(name, "--tenant") == 0 || strcmp(name, "--priority") == 0) {
    char *end;
    long v = strtol(value, &end, 10); // the kernel checks the range
    bad = *value == 0 || *end != 0 || v != (int)v;
    *(name[2] == 't' ? &o->tenant : &o->priority) = (int)v;
  } else
    return 1;
  if (bad)
    printf("%s %s: not a valid value (--temp 0.8, --top-k 40, --top-p 0.95 (above 0, at "
           "most 1), --seed 7, --tenant 12, --priority 5)\n",
        name, value);
  return bad ? -1 : 0;
}

// [OPTION VALUE]... PREDICT ID... from words w[0..n) -> 0, or -1 after a
// message.
static int
parse_request(char **w, int n, struct request *q)
{
  memset(&q->opts, 0, sizeof(q->opts));
  for (; n >= 2 && w[0][0] == '-' && w[0][1] == '-'; w += 2, n -= 2) {
    int r = parse_option(w[0], w[1], &q->opts);
    if (r < 0)
      return -1;
    if (r > 0) {
      printf("unknown option %s (--stop, --temp, --top-k, --top-p, --seed, "
             "--presence-penalty, --frequency-penalty, --logit-bias, --logprobs, --tenant, "
             "--priority)\n",
          w[0]);
      return -1;
    }
  }
  if (n < 2) {
    printf("need [--stop ID | --temp T | --top-k K | --top-p P | --seed S | --tenant T | "
           "--priority P]... PREDICT ID...\n");
    return -1;
  }
  q->predict = atoi(w[0]);
  q->count = n - 1;
  for (int i = 1; i < n; i++)
    q->ids[i - 1] = (uint32)strtol(w[i], 0, 10);
  return 0;
}

// Submits q with its options; returns the reqid or the code.
static int
submit(const struct request *q)
{
  return ai_submit_opts(q->ids, q->count, q->predict, &q->opts);
}

// Does q carry options other than the defaults (greedy, no stop ids)?
static int
has_options(const struct request *q)
{
  static const struct ai_opts none;
  return memcmp(&q->opts, &none, sizeof(none)) != 0;
}

static void
print_status(struct ai_status *st)
{
  printf("reqid %d: %s", st->reqid, st->state <= AI_FAILED ? states[st->state] : "?");
  if (st->state == AI_QUEUED)
    printf(", %d ahead in the queue", st->queue_pos);
  if (st->state == AI_RUNNING)
    printf(", %d of %d tokens", st->tokens, st->predict);
  if (st->state == AI_DONE)
    printf(", result_len %d", st->result_len);
  if (st->state == AI_FAILED)
    printf(", err %d (%s)", st->err, ai_strerror(st->err));
  printf("\n  prompt %d, predict %d; queued_us %lu ttft_us %lu total_us %lu\n", st->prompt_len,
      st->predict, st->queued_us, st->ttft_us, st->total_us);
  printf("  cached %d (prompt positions taken from the worker's KV cache)\n", st->cached);
}

static void
print_info(void)
{
  struct ai_info in;
  if (report("info", ai_info(&in)) < 0)
    return;
  printf("worker pid %d%s, vocab %d, runtime_seq_len %d, %d completed\n", in.worker_pid,
      in.worker_seen ? "" : " (none since boot)", in.vocab, in.seq_len, in.completed);
  printf("slots %d/%d used: %d queued, %d running (%d orphaned), %d done, %d failed; "
         "at most %d per process and tenant\n",
      in.used, in.nslot, in.queued, in.running, in.orphans, in.done, in.failed, in.perproc);
  printf("%d pauses by the scheduling policy since boot\n", in.pauses);
}

// ---------------------------------------------------------------- top

#define TOP_TICKS 2 // between refreshes (10 ticks per second)

static const char *state_names[] = { "FREE", "QUEUED", "RUNNING", "DONE", "FAILED" };

// A span in ms as a column of width w after a space, "-" while it is
// unknown (either end not yet reached).
static void
print_ms(uint64 from, uint64 to, int w)
{
  char text[24];
  if (from == 0 || to < from)
    snprintf(text, sizeof(text), "-");
  else
    snprintf(text, sizeof(text), "%lu", (to - from) / 1000);
  printf(" ");
  for (int k = strlen(text); k < w; k++)
    printf(" ");
  printf("%s", text);
}

// The scheduling settings in one line: the prompt budget only when it
// bounds more than the step's budget does.
static void
print_sched(const char *policy, int chunk, int prefill)
{
  printf("policy %s, %d positions per step", policy, chunk);
  if (prefill < chunk)
    printf(", %d for prompts beside a decoder", prefill);
  printf("\n");
}

// One row per used slot of v (a running request the policy paused is
// PAUSED): 80 columns at most. CACHED: the prompt positions the worker
// took from its KV cache (docs/KVCACHE.md); the last four columns are
// spans in ms from the submit: age, queue, first token, total.
static void
print_slots(const struct ai_table_view *v)
{
  printf("SLOT STATE   OWNER PROMPT IDS/PRED CACHED TENANT PRI    AGE  QUEUE   TTFT  TOTAL\n");
  for (int i = 0; i < AI_NSLOT; i++) {
    const struct ai_slot_view *w = &v->slot[i];
    char owner[12], progress[12];
    if (w->state == AI_FREE)
      continue;
    if (w->owner)
      snprintf(owner, sizeof(owner), "%d", w->owner);
    else
      snprintf(owner, sizeof(owner), "gone"); // an orphan
    snprintf(progress, sizeof(progress), "%d/%d", w->tokens, w->predict);
    const char *state = w->paused ? "PAUSED" : w->state <= AI_FAILED ? state_names[w->state] : "?";
    printf("%4d %-7s %5s %6d %8s %6d %6d %3d", i, state, owner, w->prompt_len, progress, w->cached,
        w->tenant, w->priority);
    print_ms(w->submit_time, w->finish_time ? w->finish_time : v->now, 6);
    print_ms(w->submit_time, w->start_time, 6);
    print_ms(w->submit_time, w->first_time, 6);
    print_ms(w->submit_time, w->finish_time, 6);
    printf("\n");
  }
}

// "NAME: slot slot ..." for the n slot numbers in list.
static void
print_list(const char *name, const int *list, int n)
{
  printf("%s:", name);
  for (int k = 0; k < n; k++)
    printf(" %d", list[k]);
  printf(n == 0 ? " (empty)\n" : "\n");
}

// One screen of v: a header, the used slots, the FIFO and the batch.
static void
print_table(const struct ai_table_view *v)
{
  int used = 0;
  for (int i = 0; i < AI_NSLOT; i++)
    used += v->slot[i].state != AI_FREE;
  printf("\033[H\033[2J"); // cursor home, clear the screen
  printf("ai top: the kernel's AI table at %lu.%lu s (Ctrl-C ends)\n", v->now / 1000000,
      v->now / 100000 % 10);
  printf("worker pid %d, %d completed; slots %d/%d used, queue %d, batch %d\n", v->worker_pid,
      v->completed, used, AI_NSLOT, v->nqueued, v->nbatch);
  print_sched(v->policy, v->chunk, v->prefill);
  printf("\n");
  print_slots(v);
  const struct ai_kvstat *k = &v->kv;
  printf("\nkv cache: %d blocks of %d positions: %d used, %d cached, %d free\n", k->blocks,
      k->block_positions, k->used, k->cached, k->free);
  printf("  prefix reuse %s: %lu of %lu prompt positions cached, %lu evictions\n",
      k->reuse ? "on" : "off", k->hits, k->prompt, k->evictions);
  print_list("FIFO (next first)", v->fifo, v->nqueued);
  print_list("BATCH (the worker runs these slots)", v->batch, v->nbatch);
}

// top [-n N]: the table every TOP_TICKS until Ctrl-C, or N times.
static void
top(char **w, int n)
{
  static struct ai_table_view v;
  int times = -1;
  if (n == 3 && strcmp(w[1], "-n") == 0 && (times = atoi(w[2])) > 0)
    n = 1;
  if (n != 1) {
    printf("ai: usage: top [-n N]   (N >= 1 refreshes; without -n until Ctrl-C)\n");
    return;
  }
  for (int k = 0; times < 0 || k < times; k++) {
    if (k > 0)
      sleep(TOP_TICKS);
    if (report("top", ai_table(&v, sizeof(v))) < 0)
      return;
    print_table(&v);
  }
}

static void run(char **w, int n);

static void
child(char **w, int n)
{
  int pid = fork();
  if (pid == 0) {
    printf("(child pid %d) ", getpid());
    run(w, n);
    exit(0);
  }
  if (pid > 0)
    wait(0);
}

// submit, or call (ai_call; with options, submit then wait).
static void
submit_or_call(char **w, int n, int call)
{
  static struct request q;
  if (parse_request(w, n, &q) < 0)
    return;
  if (!call) {
    int r = submit(&q);
    if (report("submit", r) > 0)
      printf("reqid %d\n", r);
    return;
  }
  uint64 t0 = time_us();
  int opts = has_options(&q);
  int r = opts ? submit(&q) : ai_call(q.ids, q.count, q.predict, outbuf, sizeof(outbuf));
  if (opts && r > 0)
    r = ai_wait(r, outbuf, sizeof(outbuf));
  if (report("call", r) >= 0)
    printf("%s\n(%lu ms)\n", outbuf, (time_us() - t0) / 1000);
}

// Print request id's ids as they come, on one line; returns 0 at its end
// (done) or the negative code that ended the stream.
static int
stream(int id)
{
  static uint32 ids[AI_MAX_PREDICT];
  char text[16];
  int from = 0, k;
  while ((k = ai_stream(id, ids, from, AI_MAX_PREDICT)) > 0) {
    for (int i = 0; i < k; i++) {
      int len = snprintf(text, sizeof(text), from + i ? " %d" : "%d", ids[i]);
      write(1, text, len);
    }
    from += k;
  }
  printf("\n");
  return report("stream", k);
}

// A log-probability in millionths as a decimal: "-0.512345".
static void
lp_text(char *buf, int size, int32 micro)
{
  uint32 a = micro < 0 ? -(uint32)micro : (uint32)micro;
  snprintf(buf, size, "%s%u.%06u", micro < 0 ? "-" : "", a / AI_MICRO, a % AI_MICRO);
}

// Print request id's log-probability records (ai_logprobs), one line
// each: logprob i=I id=ID lp=LP top=ID:LP,... (as llmrun_* --logprobs).
static void
print_logprobs(int id)
{
  static struct ai_logprob lp[AI_MAX_PREDICT];
  char text[16];
  int n = 0, k;
  while ((k = ai_logprobs(id, lp + n, n, AI_MAX_PREDICT - n)) > 0)
    n += k;
  for (int i = 0; i < n; i++) {
    lp_text(text, sizeof(text), lp[i].lp);
    printf("logprob i=%d id=%u lp=%s top=", i, lp[i].id, text);
    for (int t = 0; t < lp[i].ntop; t++) {
      lp_text(text, sizeof(text), lp[i].top[t].lp);
      printf("%s%u:%s", t ? "," : "", lp[i].top[t].id, text);
    }
    printf("\n");
  }
  report("logprobs", k);
}

// submit, stream, then wait (which collects the request and frees it);
// with --logprobs, the records between the two.
static void
generate(char **w, int n)
{
  static struct request q;
  if (parse_request(w, n, &q) < 0)
    return;
  int r = submit(&q);
  if (report("submit", r) < 0)
    return;
  stream(r);
  if (q.opts.logprobs)
    print_logprobs(r);
  report("wait", ai_wait(r, outbuf, sizeof(outbuf)));
}

// Tries to take the worker role, as an impostor would; gives it back at
// once if it got it.
static void
try_register(int vocab, int seq_len)
{
  if (report("register", ai_register(vocab, seq_len)) == 0) {
    printf("registered as the AI worker; resigning\n");
    ai_register(0, 0);
  }
}

// A budget word of `ai sched` as a number: -1 (which the kernel refuses)
// unless it is a positive int.
static int
budget_word(const char *word)
{
  char *end;
  long c = strtol(word, &end, 10);
  return *end != 0 || c != (int)c || c <= 0 ? -1 : (int)c;
}

// sched [NAME [CHUNK [PREFILL]]]: shows the scheduling settings, after
// setting them.
static void
sched(char **w, int n)
{
  struct ai_sched a;
  memset(&a, 0, sizeof(a));
  if (n >= 2)
    strncpy(a.policy, w[1], sizeof(a.policy) - 1);
  if (n >= 3)
    a.chunk = budget_word(w[2]);
  if (n == 4)
    a.prefill = budget_word(w[3]);
  if (report("sched", ai_sched(&a)) == 0)
    print_sched(a.policy, a.chunk, a.prefill);
  else if (n >= 2 && !ai_right(0))
    printf("(setting needs the worker right: boot with aisched=NAME aichunk=N aiprefill=N, "
           "or aiworker=console)\n");
}

// The commands, for help and for the usage of one with wrong arguments.
static const struct {
  const char *name, *args, *what;
} commands[] = {
  { "submit", "[OPT V]... PREDICT ID...", "queue a request; prints its reqid" },
  { "query", "REQID", "state, queue position, tokens so far, timings" },
  { "wait", "REQID", "block until it is done; prints the generated ids" },
  { "cancel", "REQID", "give the request up" },
  { "call", "[OPT V]... PREDICT ID...", "submit + wait" },
  { "stream", "REQID", "print its ids as they are produced; wait collects it" },
  { "gen", "[OPT V]... PREDICT ID...", "submit, stream, then wait" },
  { "info", "", "the kernel's table at a glance" },
  { "top", "[-n N]", "the table live until Ctrl-C (or N refreshes)" },
  { "sched", "[NAME [CHUNK [PREFILL]]]", "the scheduling policy and budgets; set them" },
  { "err", "CODE", "what an error code means (either sign)" },
  { "register", "VOCAB SEQLEN", "try to become the worker (resigns if it did)" },
  { "right", "", "whether this process may become the worker" },
  { "child", "CMD ARGS", "run CMD in a child process" },
  { "sleep", "TICKS", "sleep (10 ticks per second)" },
  { "help", "", "this list" },
  { "quit", "", "end the session (also: exit, Ctrl-D)" },
};
#define NCOMMANDS ((int)(sizeof(commands) / sizeof(commands[0])))

// Lists the commands.
static void
help(void)
{
  printf("usage: ai [CMD ARGS]   (no CMD: a session, one command per line)\n");
  for (int i = 0; i < NCOMMANDS; i++) {
    printf("  %s %s ", commands[i].name, commands[i].args);
    for (int pad = strlen(commands[i].name) + strlen(commands[i].args); pad < 32; pad++)
      printf(" ");
    printf("%s\n", commands[i].what);
  }
  printf("OPT V, before PREDICT: --stop ID (up to %d), --temp T (0: greedy), --top-k K, "
         "--top-p P, --seed S, --presence-penalty P, --frequency-penalty F, --logit-bias ID:B, "
         "--logprobs N (gen prints them), --tenant T, --priority P (0..%d)\n",
      AI_MAX_STOP, AI_PRIO_MAX);
}

// c is a command with the wrong arguments, or no command at all: say so.
static void
bad_command(const char *c)
{
  for (int i = 0; i < NCOMMANDS; i++)
    if (strcmp(c, commands[i].name) == 0) {
      printf("ai: usage: %s %s\n", c, commands[i].args);
      return;
    }
  printf("ai: unknown command %s (help lists the commands)\n", c);
}

// One command; w[0] is its name.
static void
run(char **w, int n)
{
  struct ai_status st;
  char *c = w[0];
  int id = n > 1 ? atoi(w[1]) : 0;
  if (strcmp(c, "submit") == 0 || strcmp(c, "call") == 0)
    submit_or_call(w + 1, n - 1, c[0] == 'c');
  else if (strcmp(c, "query") == 0 && n == 2) {
    if (report("query", ai_query(id, &st)) == 0)
      print_status(&st);
  } else if (strcmp(c, "wait") == 0 && n == 2) {
    int r = ai_wait(id, outbuf, sizeof(outbuf));
    if (report("wait", r) >= 0)
      printf("%s\n", outbuf);
  } else if (strcmp(c, "stream") == 0 && n == 2) {
    stream(id);
  } else if (strcmp(c, "gen") == 0) {
    generate(w + 1, n - 1);
  } else if (strcmp(c, "cancel") == 0 && n == 2) {
    if (report("cancel", ai_cancel(id)) == 0)
      printf("cancelled %d\n", id);
  } else if (strcmp(c, "info") == 0 && n == 1)
    print_info();
  else if (strcmp(c, "top") == 0)
    top(w, n);
  else if (strcmp(c, "sched") == 0 && n <= 4)
    sched(w, n);
  else if (strcmp(c, "err") == 0 && n == 2) {
    const char *m = ai_strerror(id);
    printf("%d: %s\n", id, m ? m : strerror(id));
  } else if (strcmp(c, "register") == 0 && n == 3)
    try_register(id, atoi(w[2]));
  else if (strcmp(c, "right") == 0 && n == 1)
    printf("AI worker right: %s\n", ai_right(0) ? "yes" : "no");
  else if (strcmp(c, "child") == 0 && n > 1)
    child(w + 1, n - 1);
  else if (strcmp(c, "sleep") == 0 && n == 2)
    sleep(id);
  else if (strcmp(c, "help") == 0 && n == 1)
    help();
  else
    bad_command(c);
}

// Splits line into words (in place); returns their number.
static int
split(char *line, char **w, int max)
{
  int n = 0;
  char *p = line;
  while (*p && n < max) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
      *p++ = 0;
    if (*p == 0)
      break;
    w[n++] = p;
    while (*p && *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
      p++;
  }
  return n;
}

int
main(int argc, char **argv)
{
  static char line[4096];
  static char *w[MAXWORDS];
  if (argc > 1 && argv[1][0] == '-') {
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
      help();
      return 0;
    }
    fprintf(
        2, "ai: unknown option %s\nusage: ai [CMD ARGS]   (ai help lists the commands)\n", argv[1]);
    return 2;
  }
  if (argc > 1) {
    run(argv + 1, argc - 1);
    return 0;
  }
  for (;;) {
    printf("ai> ");
    if (gets(line, sizeof(line))[0] == 0)
      break;
    int n = split(line, w, MAXWORDS);
    if (n == 0)
      continue;
    if (strcmp(w[0], "quit") == 0 || strcmp(w[0], "exit") == 0)
      break;
    run(w, n);
  }
  return 0;
}
