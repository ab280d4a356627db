// llmrun_qwen: greedy generation with Qwen3.5 (full attention and Gated
// DeltaNet layers) from the assets in /AI/QWEN. The command line is
// user/llm/cli.c's, the model user/llm/qwen.c's.

#include "user/lib/user.h"
#include "user/llm/cli.h"
#include "user/llm/qwen.h"

// llmrun_qwen: the runtime's command line (user/llm/cli.c) for Qwen.
int
main(int argc, char **argv)
{
  return llm_cli_main(&llm_model_qwen, argc, argv);
}
