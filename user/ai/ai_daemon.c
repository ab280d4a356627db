// ai_daemon: the AI service's worker (kernel/core/ai_service.c).
//
//   ai_daemon [--ready-fd N] [asset-dir]    (default /AI/SMOL, else /AI/QWEN)
//
// Each request runs on the runtime's thread pool, one thread per hart
// (user/llm/pool.c); the workers sleep between requests.
// Loads the model once, with the runtime and models of llmrun_smol /
// llmrun_qwen (CFG.BIN's model_kind, read by the runtime's loader, picks
// which), registers with the kernel as the worker, then serves forever:
// ai_next, generate (reporting each token with ai_progress), ai_complete;
// a request the runtime refuses gets ai_fail and the daemon goes on. With
// --ready-fd, one byte is written to fd N once registered, and N closed:
// init waits for it before starting the shell. If the model cannot be
// loaded, it says so once and idles (init would restart it every second).
// If another worker is registered (aitest takes the role for its
// deterministic cases), the daemon keeps the model and retries every
// second.

#include "user/lib/user.h"
#include "kernel/include/fcntl.h"
#include "kernel/include/aisvc.h"
#include "user/llm/session.h"
#include "user/llm/pool.h"
#include "user/llm/smol.h"
#include "user/llm/qwen.h"

static int cur_reqid; // the request being generated

// Called by the runtime after each generated id: the kernel counts it.
static void
on_token(int i, int id)
{
  ai_progress(cur_reqid, i + 1);
}

// The model for dir's CFG.BIN (version 1 files are all Llama); 0 after a
// message if it cannot be read or checked.
static const struct llm_model *
model_for(const char *dir)
{
  struct llm_config cfg;
  if (llm_config_load(dir, LLM_MODEL_ANY, &cfg) < 0) {
    fprintf(2, "ai_daemon: %s: no readable CFG.BIN with a known model_kind\n", dir);
    return 0;
  }
  return cfg.model_kind == LLM_MODEL_QWEN ? &llm_model_qwen : &llm_model_smol;
}

// /AI/SMOL if it holds a model, else /AI/QWEN.
static const char *
default_dir(void)
{
  int fd = open("/AI/SMOL/CFG.BIN", O_RDONLY);
  if (fd >= 0) {
    close(fd);
    return "/AI/SMOL";
  }
  return "/AI/QWEN";
}

// Register, retrying while another worker holds the role.
static int
register_worker(const struct llm_config *g)
{
  int said = 0, r;
  while ((r = ai_register(g->vocab_size, g->runtime_seq_len)) == -AIE_BUSY) {
    if (!said)
      fprintf(2, "ai_daemon: another worker is registered; retrying every second\n");
    said = 1;
    sleep(10);
  }
  if (r < 0)
    fprintf(2, "ai_daemon: cannot register: %s\n", ai_strerror(r));
  return r;
}

// One request: generate, then hand the ids (or the failure) to the kernel.
static void
serve_one(const struct llm_model *md, struct llm_runtime *rt,
    struct llm_session *s, struct ai_job *job)
{
  static int ids[AI_MAX_PROMPT];
  static uint32 out[AI_MAX_PREDICT];
  uint64 ttft, tpot;
  for (int i = 0; i < job->count; i++)
    ids[i] = job->tokens[i] > 0x7fffffff ? -1 : (int)job->tokens[i];
  cur_reqid = job->reqid;
  if (llm_session_generate(md, rt, s, ids, job->count, job->predict, &ttft, &tpot) < 0) {
    ai_fail(job->reqid, -AIE_RUNTIME);
    return;
  }
  for (int i = 0; i < job->predict; i++)
    out[i] = s->seq[job->count + i];
  int r = ai_complete(job->reqid, out, job->predict);
  if (r < 0 && r != -AIE_NOREQ)
    fprintf(2, "ai_daemon: request %d: complete: %s\n", job->reqid, ai_strerror(r));
}

// The model cannot be loaded: rather than exit and be restarted by init
// every second (a message each time), tell init to go on and stay idle.
// Submits get AIE_NOWORKER; kill this process to try again.
static void __attribute__((noreturn))
idle(int ready_fd)
{
  fprintf(2, "ai_daemon: not serving; fix the assets, then kill pid %d to retry\n", getpid());
  if (ready_fd >= 0)
    close(ready_fd);
  for (;;)
    sleep(1000);
}

// Take and serve requests until this process is no longer the worker.
static void
serve(const struct llm_model *md, struct llm_runtime *rt, struct llm_session *s)
{
  static struct ai_job job;
  for (;;) {
    int r = ai_next(&job);
    if (r == -AIE_NOTWORKER) {
      fprintf(2, "ai_daemon: no longer the worker; exiting\n");
      exit(1);
    }
    if (r < 0) {
      fprintf(2, "ai_daemon: next: %s\n", ai_strerror(r));
      sleep(1);
      continue;
    }
    serve_one(md, rt, s, &job);
  }
}

int
main(int argc, char **argv)
{
  static struct llm_runtime rt;
  static struct llm_session s;
  int ready_fd = -1, i = 1;
  if (argc > 2 && strcmp(argv[1], "--ready-fd") == 0) {
    ready_fd = atoi(argv[2]);
    i = 3;
  }
  if (i < argc && argv[i][0] == '-') {
    fprintf(2, "ai_daemon: unknown option %s\nusage: ai_daemon [--ready-fd FD] [ASSET_DIR]\n",
        argv[i]);
    return 2;
  }
  const char *dir = i < argc ? argv[i] : default_dir();
  llm_prog = "ai_daemon";
  const struct llm_model *md = model_for(dir);
  if (md == 0 || llm_session_init(&s, &rt, dir, md->model_kind) < 0)
    idle(ready_fd);
  llm_token_hook = on_token;
  llm_pool_start(nharts());
  if (register_worker(&rt.cfg) < 0)
    return 1;
  printf("ai_daemon: pid %d serving %s (vocab %d, runtime_seq_len %d), load %lu ms\n",
      getpid(), dir, rt.cfg.vocab_size, rt.cfg.runtime_seq_len, s.tm.init_us / 1000);
  if (ready_fd >= 0) {
    write(ready_fd, "r", 1);
    close(ready_fd);
  }
  serve(md, &rt, &s);
  return 0;
}
