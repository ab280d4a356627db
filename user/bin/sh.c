// sh: the shell.
//
// A line is a list of pipelines separated by ';' (run in order) or '&'
// (run without waiting). A pipeline is commands joined by '|', and each
// command is words with optional redirections: < in, > out, >> out.
// 'single' and "double" quotes make a word of anything inside them. The
// word $? (unquoted, on its own) is the exit status of the last
// foreground pipeline (its last command's; 127: not found, 126: exec
// failed), as in sh.
//
// The whole line is parsed before anything runs, so a syntax error runs
// nothing. Programs live in /: a command without a '/' is looked up
// there, so it works from any directory; cd and exit are built in.
//
// Job control, when the input is the console: each pipeline runs in a
// process group of its own (numbered by its first command's pid), made
// the console's foreground while the shell waits for it, so ^C kills that
// job and nothing else (kernel/core/console.c). Background jobs (&) get a
// group too but never the foreground; the shell stays in its own group
// and sets no foreground while it prompts. Reading a script (sh FILE),
// the shell does none of this, so ^C stops the script with its commands.

#include "user/lib/user.h"
#include "kernel/include/fcntl.h"
#include "kernel/include/stat.h"
#include "kernel/include/param.h"

#define MAXLINE 4096 // characters in one line, newline excluded
#define MAXCMDS 64   // commands in one line
#define MAXPIPE 16   // commands in one pipeline

enum { T_END, T_WORD, T_PIPE, T_SEMI, T_AMP, T_IN, T_OUT, T_APPEND, T_BADQUOTE };
static const char *toknames[] = {
  "end of line",
  "word",
  "|",
  ";",
  "&",
  "<",
  ">",
  ">>",
  "quote",
};

struct cmd {
  char *argv[MAXARG + 1];
  int argc;
  char *in;   // < file, or 0
  char *out;  // > or >> file, or 0
  int append; // out was given with >>
  int sep;    // token after the command: T_PIPE, T_SEMI, T_AMP or T_END
};

struct lexer {
  char *s;    // next input character
  char *w;    // next free byte of the word buffer
  char *word; // the word just read (T_WORD)
};

static int jobctl;           // the input is the console: run jobs in their own groups
static int status;           // exit status of the last foreground pipeline
static char status_word[12]; // what every unquoted $? word points to
static char line[MAXLINE + 2];
static char words[MAXLINE + 2];
static struct cmd cmds[MAXCMDS];

// Read the next token. Words are copied, without their quotes, into
// the word buffer, each terminated.
static int
lex(struct lexer *lx)
{
  char q;

  while (*lx->s && strchr(" \t\r\n", *lx->s))
    lx->s++;
  switch (*lx->s) {
  case 0: return T_END;
  case '|': lx->s++; return T_PIPE;
  case ';': lx->s++; return T_SEMI;
  case '&': lx->s++; return T_AMP;
  case '<': lx->s++; return T_IN;
  case '>':
    lx->s++;
    if (*lx->s != '>')
      return T_OUT;
    lx->s++;
    return T_APPEND;
  }
  lx->word = lx->w;
  char *start = lx->s;
  while (*lx->s && !strchr(" \t\r\n|;&<>", *lx->s)) {
    if (*lx->s != '"' && *lx->s != '\'') {
      *lx->w++ = *lx->s++;
      continue;
    }
    q = *lx->s++;
    while (*lx->s != q) {
      if (*lx->s == 0)
        return T_BADQUOTE;
      *lx->w++ = *lx->s++;
    }
    lx->s++;
  }
  *lx->w++ = 0;
  if (lx->s - start == 2 && start[0] == '$' && start[1] == '?')
    lx->word = status_word; // filled in when its pipeline starts
  return T_WORD;
}

// Report "sh: syntax error: WHAT `TOKEN'"; returns -1.
static int
syntax(const char *what, int tok)
{
  fprintf(2, "sh: syntax error: %s `%s'\n", what, toknames[tok]);
  return -1;
}

// Add token tok (and the file name after a redirection) to command c.
// Returns 0, or -1 after reporting an error.
static int
addword(struct lexer *lx, struct cmd *c, int tok)
{
  int t;

  if (tok == T_WORD) {
    if (c->argc == MAXARG) {
      fprintf(2, "sh: too many arguments (at most %d)\n", MAXARG);
      return -1;
    }
    c->argv[c->argc++] = lx->word;
    return 0;
  }
  if ((t = lex(lx)) == T_BADQUOTE)
    return syntax("unterminated", t);
  if (t != T_WORD)
    return syntax("missing file name after", tok);
  if (tok == T_IN)
    c->in = lx->word;
  else {
    c->out = lx->word;
    c->append = (tok == T_APPEND);
  }
  return 0;
}

// Parse the line into cmds. Returns the number of commands, or -1 after
// reporting an error.
static int
parse(char *s)
{
  struct lexer lx = { s, words, 0 };
  struct cmd *c = cmds;
  int tok, n = 0;

  memset(c, 0, sizeof(*c));
  for (;;) {
    tok = lex(&lx);
    if (tok == T_BADQUOTE)
      return syntax("unterminated", tok);
    if (tok == T_WORD || tok == T_IN || tok == T_OUT || tok == T_APPEND) {
      if (addword(&lx, c, tok) < 0)
        return -1;
      continue;
    }
    if (c->argc == 0) {
      // Nothing before this separator: fine only at the end of a line
      // that is empty or ends in ';' or '&'.
      if (c->in || c->out)
        return syntax("redirection without a command before", tok);
      if (n > 0 && cmds[n - 1].sep == T_PIPE)
        return syntax("missing command after", T_PIPE);
      if (tok == T_END)
        return n;
      return syntax("missing command before", tok);
    }
    c->argv[c->argc] = 0;
    c->sep = tok;
    n++;
    if (tok == T_END)
      return n;
    if (n == MAXCMDS) {
      fprintf(2, "sh: too many commands on one line (at most %d)\n", MAXCMDS);
      return -1;
    }
    memset(++c, 0, sizeof(*c));
  }
}

// Run cd or exit if c names one; returns -1 when c is not a builtin.
static int
builtin(struct cmd *c)
{
  char *dir;
  int r;

  if (strcmp(c->argv[0], "exit") == 0)
    exit(c->argc > 1 ? atoi(c->argv[1]) : 0);
  if (strcmp(c->argv[0], "cd") != 0)
    return -1;
  dir = c->argc > 1 ? c->argv[1] : "/";
  if ((r = chdir(dir)) < 0) {
    fprintf(2, "sh: cd: %s: %s\n", dir, strerror(r));
    return 1;
  }
  return 0;
}

// Make fd the file at path, opened with mode; exits on failure.
static void
redirect(int fd, const char *path, int mode)
{
  int f;
  char buf[512];

  f = open(path, mode);
  if (f < 0) {
    fprintf(2, "sh: cannot open %s: %s\n", path, strerror(f));
    exit(1);
  }
  // There is no O_APPEND or seek: >> opens for reading too and reads to
  // the end, so writes go after the old contents.
  if (mode & O_RDWR)
    while (read(f, buf, sizeof(buf)) > 0)
      ;
  close(fd);
  dup(f);
  close(f);
}

// In a child: set up c's redirections and run it. Never returns.
static void
runcmd(struct cmd *c)
{
  char path[MAXPATH];
  int r;

  if (c->in)
    redirect(0, c->in, O_RDONLY);
  if (c->out)
    redirect(1, c->out, O_CREATE | (c->append ? O_RDWR : O_WRONLY | O_TRUNC));
  if ((r = builtin(c)) >= 0)
    exit(r);
  if (strchr(c->argv[0], '/'))
    r = exec(c->argv[0], c->argv);
  else if (snprintf(path, sizeof(path), "/%s", c->argv[0]) >= (int)sizeof(path))
    r = -ENAMETOOLONG;
  else
    r = exec(path, c->argv);
  if (r == -ENOENT) {
    fprintf(2, "sh: %s: command not found\n", c->argv[0]);
    exit(127);
  }
  fprintf(2, "sh: exec %s failed: %s\n", c->argv[0], strerror(r));
  exit(126);
}

// Wait until every pid in pids[0..n) has exited; status becomes the
// last one's exit status. Background jobs that finish meanwhile are
// reaped too, quietly.
static void
waitall(int *pids, int n)
{
  int pid, i, left = 0, st;

  for (i = 0; i < n; i++)
    left += (pids[i] > 0);
  while (left > 0 && (pid = wait(&st)) > 0) {
    for (i = 0; i < n; i++)
      if (pids[i] == pid)
        left--;
    if (pid == pids[n - 1])
      status = st;
  }
}

// With job control: put pid into the job's group *pgid (a new one when
// *pgid is 0, which then becomes pid's) and, for a foreground job, make
// the group the console's foreground. Both the shell and the child call
// this, so it holds whichever of the two runs first.
static void
joinjob(int pid, int *pgid, int bg)
{
  if (!jobctl)
    return;
  if (*pgid == 0)
    *pgid = pid;
  setpgid(pid, *pgid);
  if (!bg)
    setfg(*pgid);
}

// Start the pipeline c[0..n), each command reading the previous one's
// output; wait for it unless bg.
static void
runpipeline(struct cmd *c, int n, int bg)
{
  int pids[MAXPIPE], p[2], in = -1, i, r, pgid = 0;

  for (i = 0; i < n; i++) {
    if (i < n - 1 && (r = pipe(p)) < 0) {
      fprintf(2, "sh: pipe failed: %s\n", strerror(r));
      break;
    }
    pids[i] = fork();
    if (pids[i] == 0) {
      joinjob(getpid(), &pgid, bg);
      if (in >= 0) {
        close(0);
        dup(in);
        close(in);
      }
      if (i < n - 1) {
        close(1);
        dup(p[1]);
        close(p[0]);
        close(p[1]);
      }
      runcmd(&c[i]);
    }
    if (pids[i] < 0)
      fprintf(2, "sh: fork failed: %s\n", strerror(pids[i]));
    else
      joinjob(pids[i], &pgid, bg);
    if (in >= 0)
      close(in);
    if (i < n - 1) {
      close(p[1]);
      in = p[0];
    }
  }
  if (i < n && in >= 0)
    close(in);
  status = i < n ? 1 : 0; // a pipeline that could not start fails
  if (bg && i == n && pids[n - 1] > 0)
    fprintf(2, "[%d]\n", pids[n - 1]);
  else if (!bg) {
    waitall(pids, i);
    if (jobctl)
      setfg(0);
  }
}

// Run the n parsed commands, one pipeline at a time.
static void
runline(int n)
{
  int i, j, r;

  for (i = 0; i < n; i = j + 1) {
    for (j = i; cmds[j].sep == T_PIPE; j++)
      ;
    if (j - i + 1 > MAXPIPE) {
      fprintf(2, "sh: pipeline too long (at most %d commands)\n", MAXPIPE);
      return;
    }
    snprintf(status_word, sizeof(status_word), "%d", status);
    // A lone cd or exit runs in the shell itself, so it takes effect.
    if (i == j && !cmds[i].in && !cmds[i].out && (r = builtin(&cmds[i])) >= 0) {
      status = r;
      continue;
    }
    runpipeline(&cmds[i], j - i + 1, cmds[j].sep == T_AMP);
  }
}

// Read one line from fd 0 into line, without its newline. Returns its
// length, -1 at the end of input, or -2 if it was longer than MAXLINE
// (the rest of it is read and dropped).
static int
readline(void)
{
  int n = 0, r;
  char c;

  while ((r = read(0, &c, 1)) == 1 && c != '\n') {
    if (n < MAXLINE + 1)
      line[n++] = c;
  }
  line[n] = 0;
  if (r != 1 && n == 0)
    return -1;
  return n > MAXLINE ? -2 : n;
}

// sh [FILE]: runs the lines of FILE, or of the standard input (with a
// prompt and job control at the console), until its end.
int
main(int argc, char *argv[])
{
  struct stat st;
  int n, fd, interactive;

  if (argc > 1) {
    // sh FILE runs the commands in FILE.
    if ((fd = open(argv[1], O_RDONLY)) < 0) {
      fprintf(2, "sh: cannot open %s: %s\n", argv[1], strerror(fd));
      exit(1);
    }
    close(0);
    dup(fd);
    close(fd);
  }
  interactive = fstat(0, &st) == 0 && st.type == T_DEVICE;
  jobctl = interactive;
  for (;;) {
    if (interactive)
      fprintf(2, "$ ");
    n = readline();
    if (n == -1)
      exit(0);
    if (n == -2) {
      fprintf(2, "sh: line too long (at most %d characters); ignored\n", MAXLINE);
      continue;
    }
    if ((n = parse(line)) > 0)
      runline(n);
  }
}
