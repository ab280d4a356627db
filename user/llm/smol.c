// The SmolLM2 model (Llama layout: every layer is full attention, no
// LTY.BIN needed): the forward pass that llmrun_smol and ai_daemon run
// (llm_model_smol), made of the shared blocks of user/llm/layers.c.

#include "user/lib/user.h"
#include "kernel/include/aisvc.h"
#include "user/llm/layers.h"
#include "user/llm/smol.h"

// The positions of st: embedding, then attention and MLP per layer. The
// head (llm_heads) runs afterwards, on the positions that need it.
static void
smol_forward(struct llm_runtime *rt, struct llm_session *s, const struct llm_step *st)
{
  llm_embed(rt, s, st);
  for (int l = 0; l < rt->cfg.n_layers; l++) {
    llm_apply_full_layer(rt, s, l, st);
    llm_apply_ffn(rt, s, l, st->n);
  }
}

const struct llm_model llm_model_smol = {
  .name = "llmrun_smol",
  .default_dir = AI_SMOL_DIR,
  .model_kind = LLM_MODEL_SMOL,
  .forward = smol_forward,
};
