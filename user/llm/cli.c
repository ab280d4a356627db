// The command line shared by llmrun_smol and llmrun_qwen (llm_cli_main):
//
//   PROG [--asset-dir DIR] [--predict N] [--quiet] [--profile] [--stream] <id> ...
//   PROG [options] --prompt-file F      ids separated by white space
//   PROG [options] [--stdin]            (also: no ids at all)
//
// --stdin serves one request per line, `<predict> <id0> <id1> ...`, with the
// model loaded once, until `exit`, `quit` or the end of the input; a bad line
// gets a message and the loop goes on. Generated ids go to stdout, one line
// per request; messages and timing to stderr, prefixed with PROG.
// --stream writes each id as soon as it is chosen instead of the whole line
// at the end (the finished line is the same), so a reader such as
// `pyaisvc chat` can show a reply as it grows.
// --batch B (with --stdin) reads every request line first, then serves them
// all through the batched steps of ai_daemon (llm_batch_step), at most B
// at once, admitted in input order; the id lines and timing lines then
// come in input order, with ttft_us measured from the start of the batch.

#include "user/lib/user.h"
#include "kernel/include/fcntl.h"
#include "kernel/include/stat.h"
#include "user/llm/cli.h"

#define MAXIDS  1024 // ids parsed per request (more are counted, not kept)
#define MAXLINE 8192 // longest --stdin line
#define MAXBREQ 64   // --batch: requests read before serving

struct options {
  const char *dir;
  int predict;
  int quiet, profile, use_stdin, stream;
  int batch; // --batch: requests at once (0: one after another)
  const char *prompt_file;
  int first_id; // argv index of the first id, or argc
};

// Print the usage line; returns -1.
static int
usage(void)
{
  fprintf(2, "usage: %s [--asset-dir DIR] [--predict N] [--quiet] [--profile] "
             "[--stream] [--prompt-file F | --stdin [--batch B] | <id> ...]\n",
      llm_prog);
  return -1;
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
      fprintf(2, "%s: %s: '%s' is not a token id (a decimal number below 2^31)\n",
          llm_prog, where, word);
      return -1;
    }
    if (*count < cap)
      v[*count] = x;
    (*count)++;
    s += len;
  }
  return 0;
}

// Fill o from the --options of argv (defaults: md's directory, predict 1,
// stdin when no ids and no file). Returns 0, or -1 after a message.
static int
parse_options(int argc, char **argv, struct options *o)
{
  o->predict = 1;
  int i;
  for (i = 1; i < argc && argv[i][0] == '-' && argv[i][1] == '-'; i++) {
    const char *a = argv[i];
    int more = i + 1 < argc;
    if (strcmp(a, "--quiet") == 0)
      o->quiet = 1;
    else if (strcmp(a, "--profile") == 0)
      o->profile = 1;
    else if (strcmp(a, "--stdin") == 0)
      o->use_stdin = 1;
    else if (strcmp(a, "--stream") == 0)
      o->stream = 1;
    else if (strcmp(a, "--asset-dir") == 0 && more)
      o->dir = argv[++i];
    else if (strcmp(a, "--prompt-file") == 0 && more)
      o->prompt_file = argv[++i];
    else if (strcmp(a, "--predict") == 0 && more) {
      const char *n = argv[++i];
      if (parse_num(n, strlen(n), &o->predict) < 0) {
        fprintf(2, "%s: --predict: '%s' is not a number\n", llm_prog, n);
        return -1;
      }
    } else if (strcmp(a, "--batch") == 0 && more) {
      const char *n = argv[++i];
      if (parse_num(n, strlen(n), &o->batch) < 0 || o->batch < 1 || o->batch > LLM_MAXCACHE) {
        fprintf(2, "%s: --batch: '%s' is not a number from 1 to %d\n", llm_prog, n, LLM_MAXCACHE);
        return -1;
      }
    } else
      return usage();
  }
  o->first_id = i;
  if ((o->prompt_file != 0) + o->use_stdin + (i < argc) > 1) {
    fprintf(2, "%s: give ids, --prompt-file or --stdin, not several\n", llm_prog);
    return -1;
  }
  if (i == argc && o->prompt_file == 0)
    o->use_stdin = 1;
  if (o->batch && (!o->use_stdin || o->stream || o->profile)) {
    fprintf(2, "%s: --batch serves --stdin only, without --stream or --profile\n", llm_prog);
    return -1;
  }
  return 0;
}

static int stream_last; // --stream: index of the request's last id

// --stream's llm_token_hook: id i of the request goes out at once, in
// print_ids' format (space before all but the first, newline after the
// last). One write per id, straight to fd 1: nothing buffers it.
static void
stream_id(int i, int id)
{
  char buf[16];
  int n = snprintf(buf, sizeof(buf), i ? " %d" : "%d", id);
  if (i == stream_last)
    buf[n++] = '\n';
  write(1, buf, n);
}

// One request from a list of ids (count may exceed what ids holds).
static int
run(const struct llm_model *md, struct llm_runtime *rt, struct llm_session *s,
    const int *ids, int count, int predict, int quiet)
{
  if (count > MAXIDS) { // (ids holds MAXIDS; the check names the real limit)
    fprintf(2, "%s: request: prompt of %d ids exceeds the limit of %d prompt ids\n",
        llm_prog, count, AI_MAX_PROMPT);
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
  int ok;                  // served
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
    fprintf(2, "%s: request: prompt of %d ids exceeds the limit of %d prompt ids\n",
        llm_prog, count, AI_MAX_PROMPT);
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

// Serve the kept requests at most `batch` at once (FIFO admission; a
// finished request's cache goes to the next one at once), then print
// their id lines and timing lines in input order.
static int
serve_batch(const struct llm_model *md, struct llm_runtime *rt,
    struct llm_session *s, int batch, int quiet)
{
  struct llm_req req[LLM_MAXCACHE], *run[LLM_MAXCACHE];
  int who[LLM_MAXCACHE], nrun = 0, next = 0;
  int ncache = llm_session_add_caches(s, rt, batch);
  for (int i = 0; i < LLM_MAXCACHE; i++)
    run[i] = &req[i];
  uint64 t0 = time_us();
  while (next < nbreq || nrun > 0) {
    while (nrun < ncache && next < nbreq) { // admit, in input order
      struct breq *b = &breqs[next];
      struct llm_cache *kv = 0;
      for (int c = 0; c < ncache && kv == 0; c++) { // one no running request holds
        kv = &s->kv[c];
        for (int i = 0; i < nrun; i++)
          if (req[i].kv == kv)
            kv = 0;
      }
      if (llm_req_start(rt, &req[nrun], kv, b->ids, b->n, b->predict) == 0)
        who[nrun++] = next;
      next++;
    }
    if (nrun == 0)
      break;
    llm_batch_step(md, rt, s, run, nrun);
    uint64 now = time_us() - t0;
    for (int i = 0; i < nrun; i++) {
      struct breq *b = &breqs[who[i]];
      if (req[i].gen == 1 && b->first_us == 0)
        b->first_us = now;
      if (req[i].gen < req[i].predict)
        continue;
      memmove(b->ids + b->n, req[i].kv->seq + b->n, b->predict * sizeof(int));
      b->end_us = now;
      b->ok = 1;
      for (int j = i; j + 1 < nrun; j++) { // keep the others in order
        req[j] = req[j + 1];
        who[j] = who[j + 1];
      }
      nrun--;
      i--;
    }
  }
  for (int k = 0; k < nbreq; k++) {
    struct breq *b = &breqs[k];
    if (!b->ok)
      continue;
    llm_print_ids(b->ids + b->n, b->predict);
    if (!quiet)
      fprintf(2, "%s: timing load_us=%lu init_us=%lu ttft_us=%lu tpot_us=%lu "
                 "prompt=%d gen=%d\n",
          llm_prog, s->tm.load_us, s->tm.init_us, b->first_us,
          b->predict > 1 ? (b->end_us - b->first_us) / (b->predict - 1) : 0,
          b->n, b->predict);
  }
  return 0;
}

// Serve `<predict> <id> ...` lines until exit/quit/end of input (with
// --batch: keep them, then serve them together).
static int
serve_stdin(const struct llm_model *md, struct llm_runtime *rt,
    struct llm_session *s, int quiet, int batch)
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
  if (parse_options(argc, argv, &o) < 0)
    return 2;
  if (o.prompt_file)
    r = prompt_from_file(o.prompt_file, ids, &count);
  else
    r = prompt_from_args(argc, argv, o.first_id, ids, &count);
  if (r < 0)
    return 1;
  if (llm_session_init(&s, &rt, o.dir, md->model_kind) < 0)
    return 1;
  s.tm.profile = o.profile;
  if (o.stream)
    llm_token_hook = stream_id; // llm_session_run then prints no id line
  if (o.use_stdin)
    r = serve_stdin(md, &rt, &s, o.quiet, o.batch);
  else
    r = run(md, &rt, &s, ids, count, o.predict, o.quiet);
  llm_session_free(&s, &rt);
  return r < 0 ? 1 : 0;
}
