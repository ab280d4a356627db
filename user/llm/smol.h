// The SmolLM2 model, Llama layout (user/llm/smol.c): its descriptor, for
// llmrun_smol and ai_daemon.
#ifndef AISVC_LLM_SMOL_H
#define AISVC_LLM_SMOL_H

#include "user/llm/session.h"

extern const struct llm_model llm_model_smol;

#endif
