// The Qwen3.5 model, full attention and Gated DeltaNet layers
// (user/llm/qwen.c): its descriptor, for llmrun_qwen and ai_daemon.
#ifndef AISVC_LLM_QWEN_H
#define AISVC_LLM_QWEN_H

#include "user/llm/session.h"

extern const struct llm_model llm_model_qwen;

#endif
