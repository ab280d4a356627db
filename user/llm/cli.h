// The command line of llmrun_smol and llmrun_qwen (user/llm/cli.c): parse
// the options, load the model once, serve the requests of the arguments,
// a prompt file or stdin.
#ifndef AISVC_LLM_CLI_H
#define AISVC_LLM_CLI_H

#include "user/llm/session.h"

// A program's main for model md. Returns the exit status: 0, 1 (a load or
// request failure) or 2 (bad usage).
int llm_cli_main(const struct llm_model *md, int argc, char **argv);

#endif
