"""Guest programs name a bad option and say what they wait for
(user/llm/cli.c, user/ai/ai.c, user/bin/cksum.c, user/tests/aistress.c)."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.guest


def test_bad_options_and_help(boot_guest) -> None:
    g = boot_guest()
    out = g.run("llmrun_smol --bogus 1 2")
    assert out.splitlines()[0] == "llmrun_smol: unknown option --bogus"
    assert out.splitlines()[1].startswith("usage: llmrun_smol ")
    assert g.run("llmrun_qwen --predict").splitlines()[0] == (
        "llmrun_qwen: missing the value of --predict")
    assert g.run("cksum -x /echo") == "cksum: unknown option -x\nusage: cksum [-n] FILE...\n"
    assert g.run("aistress --bogus").splitlines()[0] == "aistress: unknown option --bogus"
    assert g.run("ai --bogus").splitlines()[0] == "ai: unknown option --bogus"
    assert g.run("ai bogus") == "ai: unknown command bogus (help lists the commands)\n"
    assert g.run("ai wait") == "ai: usage: wait REQID\n"
    names = re.findall(r"^  (\w+) ", g.run("ai help"), re.MULTILINE)
    assert names == ["submit", "query", "wait", "cancel", "call", "stream", "gen", "info",
                     "top", "sched", "err", "register", "right", "child", "sleep", "help", "quit"]


def test_llmrun_without_ids_on_a_terminal_says_it_waits(boot_guest) -> None:
    g = boot_guest()
    # No model in this image: the message comes first, then the load fails.
    out = g.run("llmrun_smol --predict 2")
    assert out.splitlines()[0] == (
        "llmrun_smol: no ids given: reading requests from the terminal, one per line: "
        "<predict> <id0> <id1> ... (exit or Ctrl-D ends)")
    # From a pipe or a file the server stays quiet.
    out = g.run("echo exit | llmrun_smol")
    assert "no ids given" not in out
