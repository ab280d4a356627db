// llmrun_smol: greedy generation with SmolLM2 (Llama layout: every layer is
// full attention) from the assets in /AI/SMOL. See user/llm/cli.c for the
// command line and user/llm/runtime.c for loading, serving and timing.

#include "user/lib/user.h"
#include "user/llm/runtime.h"

// Positions [pos, pos+n): embedding, then attention and MLP per layer. The
// head (llm_head) runs afterwards, on the last position only.
static void
token_forward(struct llm_runtime *rt, struct llm_session *s, int pos, int n)
{
  llm_embed(rt, s, pos, n);
  for (int l = 0; l < rt->cfg.n_layers; l++) {
    llm_apply_full_layer(rt, s, l, pos, n);
    llm_apply_ffn(rt, s, l, n);
  }
}

static const struct llm_model smol = {
  .name = "llmrun_smol",
  .default_dir = "/AI/SMOL",
  .model_kind = 0,
  .forward = token_forward,
};

#ifdef LLM_MODEL_ONLY
// Built with -DLLM_MODEL_ONLY, this file gives ai_daemon the model instead.
const struct llm_model *const llm_smol_model = &smol;
#else
int
main(int argc, char **argv)
{
  return llm_main(&smol, argc, argv);
}
#endif
