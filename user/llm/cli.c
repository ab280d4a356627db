// The command line shared by llmrun_smol and llmrun_qwen (llm_cli_main):
//
//   PROG [--asset-dir DIR] [--predict N] [--threads N] [--quiet] [--profile] [--stream]
//        [--temp T [--top-k K] [--top-p P] [--seed S]] [--stop ID]... <id> ...
//   PROG [options] --prompt-file F      ids separated by white space
//   PROG [options] [--stdin [--batch B]] (also: no ids at all)
//   options also: [--prefix-cache on|off] [--kv-blocks N] [--prefix-hash-bits N]
//
// --stdin serves one request per line, `<predict> <id0> <id1> ...`, with the
// model loaded once, until `exit`, `quit` or the end of the input; a bad line
// gets a message and the loop goes on. Without ids or --stdin, a terminal
// as input is told that lines are awaited (so a forgotten id list is not a
// silent wait); a pipe or file is served quietly. An unknown option, or
// one without its value, is named, then the usage line is printed; --help
// prints the usage and what each option does on stdout, and exits 0.
// Generated ids go to stdout, one line per request; messages and timing to
// stderr, prefixed with PROG.
// --stream writes each id as soon as it is chosen instead of the whole line
// at the end (the finished line is the same), so a reader such as
// `pyaisvc chat` can show a reply as it grows. --threads N sizes the
// thread pool the matmuls are split across (default: one per hart that
// runs at once, user/llm/pool.c; the ids are the same for any N).
// Sampling (user/llm/sample.c): greedy unless --temp T > 0 is given; then
// --top-k (default 40, 0: the whole vocabulary), --top-p (default 0.95,
// 1: off) and --seed (default 0; every request starts from it, so the same
// request gives the same ids). T and P are decimals without exponent of at
// most 15 significant digits, read exactly as Python's float() reads them.
// --stop ID (up to 8 times) ends a request after ID is generated (it is
// printed, and gen= in the timing line counts it).
// --batch B (with --stdin) reads every request line first, then serves them
// all through the batched steps of ai_daemon (llm_batch_step), at most B
// at once, admitted in input order; the id lines and timing lines then
// come in input order, with ttft_us measured from the start of the batch.
// --batch is greedy (--temp is refused with it: a sampler serves one
// request at a time); --stop works per request. With --profile, one pair
// of profile lines (phase=batch) splits the whole batch's time.
// --presence-penalty P, --frequency-penalty F (signed decimals, |x| <= 2)
// and --logit-bias ID:B (B in [-100, 100], up to 8 times) change the
// logits before the choice (user/llm/sample.c, rule 0; at most 6
// decimals: the sampler holds millionths). --logprobs N (0..5) writes,
// after each generated id, one line to stderr:
//   PROG: logprob i=I id=ID lp=LP top=ID:LP,ID:LP,...
// with I the id's index in the request, LP its log-probability under the
// model's raw distribution as a decimal with 6 places (rounded to the
// nearest millionth), and top= the N most likely ids, best first (empty
// for N = 0). --batch refuses --logprobs.
//
// The KV cache is a pool of blocks (user/llm/kvcache.c), said on stderr at
// start unless --quiet: --kv-blocks N sizes it (default: a share of the
// free memory); with --prefix-cache on (the default) a request takes its
// prompt's longest cached prefix from it (cached= in its timing line), so
// --stdin requests that repeat a history run only what is new.
// --prefix-hash-bits N keeps N bits of the blocks' hash (0: every block
// hashes alike, so a lookup relies on its full comparison alone; for
// tests). At the end of --stdin, unless --quiet, one line gives the pool's
// counters (llm_kv_print).

#include "user/lib/user.h"
#include "kernel/include/fcntl.h"
#include "kernel/include/stat.h"
#include "user/llm/cli.h"
#include "user/llm/kernels_vec.h"
#include "user/llm/pool.h"

#define MAXIDS  1024 // ids parsed per request (more are counted, not kept)
#define MAXLINE 8192 // longest --stdin line
#define MAXBREQ 64   // --batch: requests read before serving

struct options {
  const char *dir;
  int predict;
  int threads; // 0: one per hart that runs at once (llm_pool_start)
  int quiet, profile, use_stdin, stream;
  int batch;      // --batch: requests at once (0: one after another)
  int kv_blocks;  // --kv-blocks: the KV pool's blocks (0: default)
  int prefix_off; // --prefix-cache off
  int hash_bits;  // --prefix-hash-bits (64: all)
  const char *prompt_file;
  int first_id;           // argv index of the first id, or argc
  struct llm_sampler smp; // --temp, --top-k, --top-p, --seed, --stop
};

// The usage line, to fd.
static void
usage_line(int fd)
{
  fprintf(fd,
      "usage: %s [--asset-dir DIR] [--predict N] [--threads N] [--quiet] [--profile] "
      "[--stream] [--kernels auto|scalar|vector] [--no-mmap] [--temp T [--top-k K] [--top-p P] [--seed S]] [--stop ID]... "
      "[--presence-penalty P] [--frequency-penalty F] [--logit-bias ID:B]... [--logprobs N] "
      "[--prefix-cache on|off] [--kv-blocks N] [--prefix-hash-bits N] "
      "[--prompt-file F | --stdin [--batch B] | <id> ...]\n",
      llm_prog);
}

// Print "PROG: WHAT OPTION" and the usage line; returns -1.
static int
usage(const char *what, const char *option)
{
  fprintf(2, "%s: %s %s\n", llm_prog, what, option);
  usage_line(2);
  return -1;
}

// --help: the usage line and what each option does, on stdout.
static void
help(const char *dir)
{
  usage_line(1);
  printf("  <id> ...           the prompt's token ids (pyaisvc translate makes them)\n"
         "  --asset-dir DIR    the model's directory (default %s)\n"
         "  --predict N        ids to generate (default 1)\n"
         "  --threads N        threads (default: one per hart the host runs at once)\n"
         "  --kernels K        auto, scalar or vector matmuls (default auto: vector with V)\n"
         "  --no-mmap          read the weights into the heap (default: map a version 4 model's)\n"
         "  --temp T           sample at temperature T (default 0: greedy);\n"
         "                     --top-k K (40), --top-p P (0.95), --seed S (0)\n"
         "  --stop ID          end a request after this id (up to %d times)\n"
         "  --presence-penalty P, --frequency-penalty F   penalise generated ids (-2..2)\n"
         "  --logit-bias ID:B  add B (-100..100) to id's logit (up to %d times)\n"
         "  --logprobs N       each id's log-probability and the N (0..%d) likeliest\n"
         "  --stream           print each id as soon as it is chosen\n"
         "  --quiet            no timing line; --profile: time per phase and thread\n"
         "  --prefix-cache C   on (default): reuse cached prompt prefixes; off: never\n"
         "  --kv-blocks N      KV pool of N blocks of %d positions (default: a share of memory)\n"
         "  --prefix-hash-bits N  keep N of the block hash's 64 bits (tests: 0 collides all)\n"
         "  --prompt-file F    read the ids from file F\n"
         "  --stdin            one request per line: <predict> <id> ...; --batch B serves\n"
         "                     up to B of them at once, as the AI service does\n",
      dir, LLM_MAX_STOP, LLM_MAX_BIAS, LLM_MAX_TOPLP, LLM_KV_BLOCK);
}

// A decimal number below 2^31 -> 0 and *v; else -1.
static int
parse_num(const char *s, int len, int *v)
{
  long n = 0;
  if (len == 0 || len > 10)
    return -1;
  for (int i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9')
      return -1;
    n = n * 10 + (s[i] - '0');
  }
  if (n > 0x7fffffff)
    return -1;
  *v = (int)n;
  return 0;
}

// A decimal "DIGITS[.DIGITS]" of at most 15 significant digits and 22
// decimals -> 0 and *v, the double nearest to it: m / 10^k with m and
// 10^k exact doubles, and IEEE division rounds correctly. Else -1.
static int
parse_decimal(const char *s, double *v)
{
  uint64 m = 0;
  int digits = 0, sig = 0, frac = -1;
  for (; *s; s++) {
    if (*s == '.' && frac < 0 && digits > 0) {
      frac = 0;
      continue;
    }
    if (*s < '0' || *s > '9')
      return -1;
    m = m * 10 + (*s - '0');
    digits++;
    if ((m > 0 && ++sig > 15) || (frac >= 0 && ++frac > 22))
      return -1;
  }
  if (digits == 0 || frac == 0)
    return -1;
  double p = 1.0;
  for (int i = 0; i < frac; i++)
    p *= 10.0;
  *v = (double)m / p;
  return 0;
}

// A signed decimal "[-]DIGITS[.DIGITS]" of at most 6 decimals whose
// magnitude is at most hi (whole units) -> 0 and *v, its value in
// millionths (exact); else -1.
static int
parse_micro(const char *s, int64 hi, int64 *v)
{
  int neg = *s == '-', digits = 0, frac = -1;
  int64 m = 0;
  for (s += neg; *s; s++) {
    if (*s == '.' && frac < 0 && digits > 0) {
      frac = 0;
      continue;
    }
    if (*s < '0' || *s > '9' || (frac >= 0 && ++frac > 6) || m > hi * LLM_MICRO)
      return -1;
    m = m * 10 + (*s - '0');
    digits++;
  }
  if (digits == 0 || frac == 0)
    return -1;
  for (int i = frac < 0 ? 0 : frac; i < 6; i++)
    m *= 10;
  if (m > hi * LLM_MICRO)
    return -1;
  *v = neg ? -m : m;
  return 0;
}

// --logit-bias ID:B into sp's next pair; -1 if malformed or full.
static int
parse_bias(struct llm_sampler *sp, const char *v)
{
  char id[12];
  int n = 0, x;
  while (v[n] && v[n] != ':' && n < (int)sizeof(id) - 1) {
    id[n] = v[n];
    n++;
  }
  id[n] = 0;
  if (v[n] != ':' || sp->nbias == LLM_MAX_BIAS || parse_num(id, n, &x) < 0 ||
      parse_micro(v + n + 1, 100, &sp->bias_micro[sp->nbias]) < 0)
    return -1;
  sp->bias_id[sp->nbias++] = x;
  return 0;
}

// The white space between ids.
static int
is_space(char c)
{
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

// Parse white-space separated numbers from s: the first `cap` land in v,
// all are counted in *count. -1 after a message on a bad word.
static int
parse_ids(const char *s, int *v, int cap, int *count, const char *where)
{
  *count = 0;
  while (*s) {
    while (is_space(*s))
      s++;
    int len = 0, x;
    while (s[len] && !is_space(s[len]))
      len++;
    if (len == 0)
      break;
    if (parse_num(s, len, &x) < 0) {
      char word[24]; // the guest's printf has no %.*s
      int n = len < (int)sizeof(word) - 1 ? len : (int)sizeof(word) - 1;
      memmove(word, s, n);
      word[n] = 0;
      fprintf(2, "%s: %s: '%s' is not a token id (a decimal number below 2^31)\n", llm_prog, where,
          word);
      return -1;
    }
    if (*count < cap)
      v[*count] = x;
    (*count)++;
    s += len;
  }
  return 0;
}

// Parse v into *out if it is a number from 1 to hi; range gets the text
// "a number from 1 to HI" for the message. Returns 0, or -1 if not.
static int
in_range(const char *v, int hi, int *out, char *range, int size)
{
  snprintf(range, size, "a number from 1 to %d", hi);
  return parse_num(v, strlen(v), out) < 0 || *out < 1 || *out > hi ? -1 : 0;
}

// The options that take a value, in value_option's order.
enum {
  OPT_DIR,
  OPT_FILE,
  OPT_PREDICT,
  OPT_TEMP,
  OPT_TOP_K,
  OPT_TOP_P,
  OPT_SEED,
  OPT_STOP,
  OPT_KERNELS,
  OPT_THREADS,
  OPT_BATCH,
  OPT_PRESENCE,
  OPT_FREQUENCY,
  OPT_BIAS,
  OPT_LOGPROBS,
  OPT_PREFIX,
  OPT_KVBLOCKS,
  OPT_HASHBITS,
  NVALUE_OPTS
};
static const char *const value_opts[NVALUE_OPTS] = { "--asset-dir", "--prompt-file", "--predict",
  "--temp", "--top-k", "--top-p", "--seed", "--stop", "--kernels", "--threads", "--batch",
  "--presence-penalty", "--frequency-penalty", "--logit-bias", "--logprobs", "--prefix-cache",
  "--kv-blocks", "--prefix-hash-bits" };

// The value-taking options that set the sampler (the others set the run).
static int
is_sampling(int k)
{
  return k == OPT_TEMP || k == OPT_TOP_K || k == OPT_TOP_P || k == OPT_SEED || k == OPT_STOP ||
      k == OPT_PRESENCE || k == OPT_FREQUENCY || k == OPT_BIAS || k == OPT_LOGPROBS;
}

// Stores value v of sampling option k in sp. Returns 0; -1 if v is not
// what *want (or range, which it may fill) says; -2 after a message of
// its own.
static int
sampling_value(struct llm_sampler *sp, int k, const char *v, const char **want, char *range)
{
  switch (k) {
  case OPT_TEMP:
    *want = "a decimal such as 0.8 (at most 15 digits, no exponent)";
    return parse_decimal(v, &sp->temp);
  case OPT_TOP_K: return parse_num(v, strlen(v), &sp->top_k);
  case OPT_TOP_P:
    *want = "a decimal above 0 and at most 1, such as 0.9";
    return parse_decimal(v, &sp->top_p) < 0 || sp->top_p <= 0.0 || sp->top_p > 1.0 ? -1 : 0;
  case OPT_SEED: *want = "a number below 2^64"; return parse_u64(v, &sp->seed);
  case OPT_STOP:
    if (sp->nstop == LLM_MAX_STOP) {
      fprintf(2, "%s: --stop: at most %d ids\n", llm_prog, LLM_MAX_STOP);
      return -2;
    }
    return parse_num(v, strlen(v), &sp->stop[sp->nstop++]);
  case OPT_PRESENCE:
  case OPT_FREQUENCY:
    *want = "a decimal from -2 to 2 with at most 6 decimals";
    return parse_micro(v, 2, k == OPT_PRESENCE ? &sp->presence_micro : &sp->frequency_micro);
  case OPT_BIAS:
    snprintf(range, 32, "ID:BIAS (at most %d)", LLM_MAX_BIAS);
    *want = range; // BIAS from -100 to 100, at most 6 decimals (--help)
    return parse_bias(sp, v);
  default: // OPT_LOGPROBS
    *want = "a number from 0 to " AI_STR(LLM_MAX_TOPLP);
    sp->logprobs = 1;
    return parse_num(v, strlen(v), &sp->top_logprobs) < 0 || sp->top_logprobs > LLM_MAX_TOPLP ? -1
                                                                                              : 0;
  }
}

// Stores value v of run option k (not is_sampling) in o, as
// sampling_value does.
static int
run_value(struct options *o, int k, const char *v, const char **want, char *range)
{
  *want = range;
  switch (k) {
  case OPT_DIR: o->dir = v; return 0;
  case OPT_FILE: o->prompt_file = v; return 0;
  case OPT_PREDICT: *want = "a number"; return parse_num(v, strlen(v), &o->predict);
  case OPT_KERNELS: return llm_kernels_select(llm_prog, v) < 0 ? -2 : 0; // it named the choices
  case OPT_THREADS: return in_range(v, LLM_MAX_THREADS, &o->threads, range, 32);
  case OPT_BATCH: return in_range(v, LLM_MAXCACHE, &o->batch, range, 32);
  case OPT_PREFIX:
    *want = "on or off";
    o->prefix_off = strcmp(v, "off") == 0;
    return strcmp(v, "on") == 0 || o->prefix_off ? 0 : -1;
  case OPT_KVBLOCKS: return in_range(v, 1 << 20, &o->kv_blocks, range, 32);
  default: // OPT_HASHBITS
    *want = "a number of bits, 0..64";
    return parse_num(v, strlen(v), &o->hash_bits) < 0 || o->hash_bits > 64 ? -1 : 0;
  }
}

// Store value v of option a (v is 0 when argv ends after a). Returns 0,
// 1 if a takes no value, or -1 after a message.
static int
value_option(struct options *o, const char *a, const char *v)
{
  const char *want = "a number";
  char range[32];
  int k = 0;
  while (k < NVALUE_OPTS && strcmp(a, value_opts[k]) != 0)
    k++;
  if (k == NVALUE_OPTS)
    return 1;
  if (v == 0)
    return usage("missing the value of", a);
  int bad = is_sampling(k) ? sampling_value(&o->smp, k, v, &want, range)
                           : run_value(o, k, v, &want, range);
  if (bad == -1)
    fprintf(2, "%s: %s: '%s' is not %s\n", llm_prog, a, v, want);
  return bad < 0 ? -1 : 0;
}

// Fill o from the --options of argv (defaults: md's directory, predict 1,
// greedy, stdin when no ids and no file). Returns 0; 1 after --help's
// text; -1 after a message.
static int
parse_options(int argc, char **argv, struct options *o)
{
  const char *default_dir = o->dir;
  o->predict = 1;
  o->hash_bits = 64;
  o->smp.top_k = 40;
  o->smp.top_p = 0.95;
  int i;
  for (i = 1; i < argc && argv[i][0] == '-' && argv[i][1] == '-'; i++) {
    const char *a = argv[i];
    int r;
    if (strcmp(a, "--help") == 0) {
      help(default_dir);
      return 1;
    } else if (strcmp(a, "--quiet") == 0)
      o->quiet = 1;
    else if (strcmp(a, "--profile") == 0)
      o->profile = 1;
    else if (strcmp(a, "--stdin") == 0)
      o->use_stdin = 1;
    else if (strcmp(a, "--stream") == 0)
      o->stream = 1;
    else if (strcmp(a, "--no-mmap") == 0)
      llm_map_weights = 0;
    else if ((r = value_option(o, a, i + 1 < argc ? argv[i + 1] : 0)) < 0)
      return -1;
    else if (r == 0)
      i++;
    else
      return usage("unknown option", a);
  }
  o->first_id = i;
  if ((o->prompt_file != 0) + o->use_stdin + (i < argc) > 1) {
    fprintf(2, "%s: give ids, --prompt-file or --stdin, not several\n", llm_prog);
    return -1;
  }
  if (i == argc && o->prompt_file == 0 && !o->use_stdin) {
    o->use_stdin = 1;
    struct stat st = { 0 };
    if (fstat(0, &st) == 0 && st.type == T_DEVICE)
      fprintf(2,
          "%s: no ids given: reading requests from the terminal, one per line: "
          "<predict> <id0> <id1> ... (exit or Ctrl-D ends)\n",
          llm_prog);
  }
  if (o->batch && (!o->use_stdin || o->stream || o->smp.temp > 0 || o->smp.logprobs)) {
    fprintf(
        2, "%s: --batch serves --stdin only, greedy, without --stream or --logprobs\n", llm_prog);
    return -1;
  }
  return 0;
}

static int stream_last;                 // --stream: index of the request's last id
static struct llm_sampler *stream_stop; // --stream, --logprobs: the sampler, or 0

// --stream's llm_token_hook: id i of the request goes out at once, in
// print_ids' format (space before all but the first, newline after the
// last, which is a stop id or the predict-th). One write per id, straight
// to fd 1: nothing buffers it.
static void
stream_id(int i, int id)
{
  char buf[16];
  int n = snprintf(buf, sizeof(buf), i ? " %d" : "%d", id);
  if (i == stream_last || llm_is_stop(stream_stop, id))
    buf[n++] = '\n';
  write(1, buf, n);
}

// A log-probability in millionths as a decimal: "-0.512345".
static void
lp_text(char *buf, int size, int micro)
{
  uint64 a = micro < 0 ? -(int64)micro : micro;
  snprintf(buf, size, "%s%lu.%06lu", micro < 0 ? "-" : "", a / LLM_MICRO, a % LLM_MICRO);
}

// The token hook of --stream and --logprobs: the id as --stream writes it
// (the finished line is the same), then --logprobs' line (format atop).
static void
token_out(int i, int id)
{
  stream_id(i, id);
  struct llm_logprob *r = &stream_stop->last;
  if (!stream_stop->logprobs)
    return;
  char line[256], lp[24];
  lp_text(lp, sizeof(lp), llm_lp_micro(r->lp));
  int n = snprintf(line, sizeof(line), "%s: logprob i=%d id=%d lp=%s top=", llm_prog, i, id, lp);
  for (int k = 0; k < r->ntop; k++) {
    lp_text(lp, sizeof(lp), llm_lp_micro(r->top_lp[k]));
    n += snprintf(line + n, sizeof(line) - n, "%s%d:%s", k ? "," : "", r->top_id[k], lp);
  }
  line[n++] = '\n';
  write(2, line, n);
}

// One request from a list of ids (count may exceed what ids holds).
static int
run(const struct llm_model *md, struct llm_runtime *rt, struct llm_session *s, const int *ids,
    int count, int predict, int quiet)
{
  if (count > MAXIDS) { // (ids holds MAXIDS; the check names the real limit)
    fprintf(2, "%s: request: prompt of %d ids exceeds the limit of %d prompt ids\n", llm_prog,
        count, AI_MAX_PROMPT);
    return -1;
  }
  stream_last = predict - 1;
  return llm_session_run(md, rt, s, ids, count, predict, quiet);
}

// Buffered line reader over fd 0. Returns the length (line without its
// newline), -1 at the end of the input, -2 for a line longer than max-1
// (the rest of it is skipped).
static int
read_line(char *line, int max)
{
  static char buf[4096];
  static int pos, len;
  int n = 0, toolong = 0;
  for (;;) {
    if (pos == len) {
      len = read(0, buf, sizeof(buf));
      pos = 0;
      if (len <= 0) {
        len = 0;
        if (n == 0 && !toolong)
          return -1;
        break;
      }
    }
    char c = buf[pos++];
    if (c == '\n')
      break;
    if (n < max - 1)
      line[n++] = c;
    else
      toolong = 1;
  }
  line[n] = 0;
  return toolong ? -2 : n;
}

// --batch: the requests read, then served together.
struct breq {
  int *ids; // prompt, then (once served) the generated ids after it
  int n, predict;
  int gen;                 // ids generated (fewer than predict after a stop id)
  int ok;                  // served
  int cached;              // prompt positions from the KV pool
  uint64 first_us, end_us; // first and last id, from the start of the batch
};
static struct breq breqs[MAXBREQ];
static int nbreq;

// Keep one request for serve_batch; -1 after a message if there are too
// many or no memory.
static int
batch_add(const int *ids, int count, int predict)
{
  if (count > MAXIDS) {
    fprintf(2, "%s: request: prompt of %d ids exceeds the limit of %d prompt ids\n", llm_prog,
        count, AI_MAX_PROMPT);
    return -1;
  }
  struct breq *b = &breqs[nbreq];
  if (nbreq == MAXBREQ || (b->ids = malloc((count + (uint64)predict) * sizeof(int))) == 0) {
    fprintf(2, "%s: --batch: at most %d requests (or out of memory)\n", llm_prog, MAXBREQ);
    return -1;
  }
  memmove(b->ids, ids, count * sizeof(int));
  b->n = count;
  b->predict = predict;
  nbreq++;
  return 0;
}

// The requests serve_batch runs: req[0..n) in admission order, req[i]
// the one of breqs[who[i]].
struct batch_run {
  struct llm_req req[LLM_MAXCACHE];
  int who[LLM_MAXCACHE];
  int n;
};

// One of the session's first ncache caches that no running request holds.
static struct llm_cache *
batch_free_cache(struct llm_session *s, const struct batch_run *br, int ncache)
{
  struct llm_cache *kv = 0;
  for (int c = 0; c < ncache && kv == 0; c++) {
    kv = &s->kv[c];
    for (int i = 0; i < br->n; i++)
      if (br->req[i].kv == kv)
        kv = 0;
  }
  return kv;
}

// Admits the kept requests from breqs[next] on, in input order, while
// fewer than ncache run (one that cannot start is passed over). Returns
// the next one to admit.
static int
batch_admit(
    struct llm_runtime *rt, struct llm_session *s, struct batch_run *br, int ncache, int next)
{
  while (br->n < ncache && next < nbreq) {
    struct breq *b = &breqs[next];
    struct llm_req *r = &br->req[br->n];
    if (llm_req_start(rt, r, batch_free_cache(s, br, ncache), b->ids, b->n, b->predict) == 0) {
      b->cached = r->cached;
      r->sampler = s->sampler; // greedy here: its --stop ids only
      br->who[br->n++] = next;
    }
    next++;
  }
  return next;
}

// After a step at `now` us from the batch's start: notes each request's
// first id; a finished one keeps its ids and times in breqs and leaves
// (its cache free for the next one), the others keep their order.
static void
batch_collect(struct batch_run *br, uint64 now)
{
  for (int i = 0; i < br->n; i++) {
    struct llm_req *r = &br->req[i];
    struct breq *b = &breqs[br->who[i]];
    if (r->gen == 1 && b->first_us == 0)
      b->first_us = now;
    if (!r->done)
      continue;
    b->gen = r->gen;
    memmove(b->ids + b->n, r->kv->seq + b->n, b->gen * sizeof(int));
    b->end_us = now;
    b->ok = 1;
    llm_req_end(r);
    for (int j = i; j + 1 < br->n; j++) {
      br->req[j] = br->req[j + 1];
      br->who[j] = br->who[j + 1];
    }
    br->n--;
    i--;
  }
}

// Prints the served requests' id lines and (unless quiet) timing lines in
// input order, and with --profile the batch's profile lines for the span
// us it took.
static void
batch_print(struct llm_session *s, int quiet, uint64 span)
{
  int positions = 0;
  for (int k = 0; k < nbreq; k++) {
    struct breq *b = &breqs[k];
    if (!b->ok)
      continue;
    llm_print_ids(b->ids + b->n, b->gen);
    if (!quiet)
      llm_print_timing(s, b->first_us, b->gen > 1 ? (b->end_us - b->first_us) / (b->gen - 1) : 0,
          b->n, b->cached, b->gen);
    positions += b->n + b->gen - 1; // the last id is never fed back
  }
  if (s->tm.profile)
    llm_profile_lines(&s->tm, "batch", span, positions);
}

// Serve the kept requests at most `batch` at once (FIFO admission; a
// finished request's cache goes to the next one at once), then print
// their id lines and timing lines in input order, and with --profile the
// batch's profile lines.
static int
serve_batch(
    const struct llm_model *md, struct llm_runtime *rt, struct llm_session *s, int batch, int quiet)
{
  static struct batch_run br;
  struct llm_req *run[LLM_MAXCACHE];
  int next = 0;
  int ncache = llm_session_add_caches(s, rt, batch);
  for (int i = 0; i < LLM_MAXCACHE; i++)
    run[i] = &br.req[i];
  br.n = 0;
  llm_pool_profile(s->tm.profile);
  uint64 t0 = time_us();
  while (next < nbreq || br.n > 0) {
    next = batch_admit(rt, s, &br, ncache, next);
    if (br.n == 0)
      break;
    llm_batch_step(md, rt, s, run, br.n);
    batch_collect(&br, time_us() - t0);
  }
  batch_print(s, quiet, time_us() - t0);
  return 0;
}

// Serve `<predict> <id> ...` lines until exit/quit/end of input (with
// --batch: keep them, then serve them together).
static int
serve_stdin(
    const struct llm_model *md, struct llm_runtime *rt, struct llm_session *s, int quiet, int batch)
{
  static char line[MAXLINE];
  static int ids[MAXIDS + 1];
  int n, count;
  for (int lineno = 1; (n = read_line(line, sizeof(line))) != -1; lineno++) {
    char where[24];
    snprintf(where, sizeof(where), "stdin line %d", lineno);
    if (n == -2) {
      fprintf(2, "%s: %s: longer than %d bytes\n", llm_prog, where, MAXLINE - 1);
      continue;
    }
    char *p = line;
    while (is_space(*p))
      p++;
    if (*p == 0)
      continue;
    if ((strncmp(p, "exit", 4) == 0 || strncmp(p, "quit", 4) == 0) && (p[4] == 0 || is_space(p[4])))
      break;
    if (parse_ids(p, ids, MAXIDS + 1, &count, where) < 0)
      continue;
    if (count < 2) {
      fprintf(2, "%s: %s: expected '<predict> <id0> <id1> ...'\n", llm_prog, where);
      continue;
    }
    if (batch)
      batch_add(ids + 1, count - 1, ids[0]);
    else
      run(md, rt, s, ids + 1, count - 1, ids[0], quiet);
  }
  return batch ? serve_batch(md, rt, s, batch, quiet) : 0;
}

// The ids of --prompt-file: read whole, then parsed.
static int
prompt_from_file(const char *path, int *ids, int *count)
{
  struct stat st = { 0 };
  int fd = open(path, O_RDONLY);
  if (fd < 0) {
    fprintf(2, "%s: %s: cannot open: %s\n", llm_prog, path, strerror(fd));
    return -1;
  }
  int r = fstat(fd, &st);
  char *text = r == 0 && st.size < (1 << 20) ? malloc(st.size + 1) : 0;
  if (text == 0) {
    fprintf(2, "%s: %s: cannot read (too large?)\n", llm_prog, path);
    close(fd);
    return -1;
  }
  int n = read(fd, text, st.size);
  close(fd);
  text[n > 0 ? n : 0] = 0;
  r = parse_ids(text, ids, MAXIDS + 1, count, path);
  free(text);
  return r;
}

// Ids from the command line.
static int
prompt_from_args(int argc, char **argv, int first, int *ids, int *count)
{
  *count = 0;
  for (int i = first; i < argc; i++) {
    int c;
    if (parse_ids(argv[i], ids + *count, MAXIDS + 1 - *count, &c, "argument") < 0)
      return -1;
    *count += c;
  }
  return 0;
}

// Check the --stop ids against the vocabulary and, when sampling, give
// the sampler its workspace. Returns 0, or -1 after a message.
static int
use_sampler(struct llm_sampler *sp, int vocab)
{
  for (int i = 0; i < sp->nstop; i++)
    if (sp->stop[i] >= vocab) {
      fprintf(2, "%s: --stop: id %d is not below vocab_size %d\n", llm_prog, sp->stop[i], vocab);
      return -1;
    }
  for (int i = 0; i < sp->nbias; i++)
    if (sp->bias_id[i] >= vocab) {
      fprintf(2, "%s: --logit-bias: id %d is not below vocab_size %d\n", llm_prog, sp->bias_id[i],
          vocab);
      return -1;
    }
  if (llm_sampler_needs_work(sp) && llm_sampler_alloc(sp, vocab) < 0) {
    fprintf(2, "%s: out of memory for the sampler\n", llm_prog);
    return -1;
  }
  return 0;
}

// (contract in user/llm/cli.h)
int
llm_cli_main(const struct llm_model *md, int argc, char **argv)
{
  static struct llm_runtime rt;
  static struct llm_session s;
  static int ids[MAXIDS + 1];
  struct options o = { md->default_dir };
  int count = 0, r;
  llm_prog = md->name;
  if ((r = parse_options(argc, argv, &o)) != 0)
    return r < 0 ? 2 : 0;
  if (o.prompt_file)
    r = prompt_from_file(o.prompt_file, ids, &count);
  else
    r = prompt_from_args(argc, argv, o.first_id, ids, &count);
  if (r < 0)
    return 1;
  if (llm_session_init(&s, &rt, o.dir, md->model_kind) < 0)
    return 1;
  s.tm.profile = o.profile;
  if (use_sampler(&o.smp, rt.cfg.vocab_size) < 0) {
    llm_session_free(&s, &rt);
    return 1;
  }
  s.sampler = &o.smp;
  llm_session_add_caches(&s, &rt, o.batch); // --batch: fewer if memory is short
  if (llm_session_pool(&s, &rt, o.kv_blocks, !o.prefix_off, o.quiet) < 0) {
    llm_session_free(&s, &rt);
    return 1;
  }
  s.pool.hash_bits = o.hash_bits;
  llm_pool_start(o.threads); // 0: as many as run at once
  stream_stop = &o.smp;
  if (o.stream || o.smp.logprobs)
    llm_token_hook = token_out; // llm_session_run then prints no id line
  if (o.use_stdin)
    r = serve_stdin(md, &rt, &s, o.quiet, o.batch);
  else
    r = run(md, &rt, &s, ids, count, o.predict, o.quiet);
  if (o.use_stdin && !o.quiet)
    llm_kv_print(&s.pool, llm_prog);
  llm_sampler_free(&o.smp);
  llm_session_free(&s, &rt);
  return r < 0 ? 1 : 0;
}
