// llmrun_smol: greedy generation with SmolLM2 (Llama layout) from the
// assets in /AI/SMOL. The command line is user/llm/cli.c's, the model
// user/llm/smol.c's.

#include "user/lib/user.h"
#include "user/llm/cli.h"
#include "user/llm/smol.h"

// llmrun_smol: the runtime's command line (user/llm/cli.c) for SmolLM2.
int
main(int argc, char **argv)
{
  return llm_cli_main(&llm_model_smol, argc, argv);
}
