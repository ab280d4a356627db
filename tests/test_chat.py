"""`pyaisvc chat` driven through pexpect like a user at a terminal.

Two questions to the real SmolLM2 in the guest: each answer must be the
numpy reference's greedy continuation of the same chat-template prompt,
decoded and cut at <|im_end|>, and must stream: its text arrives at the
terminal in several pieces, the first while the guest still generates.
/stats must report the last request, and /quit must end the program and
QEMU (its pid gone). The template, the cutting and the incremental decoding
are also checked on the host against the tokenizer.
"""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import pexpect
import pytest
from host import llmcases as lc

from pyaisvc.chat import chat_text, encode_message, new_text, reply_text
from pyaisvc.tokenizer import load_smol_from_gguf, load_tokenizer

ROOT = Path(__file__).resolve().parent.parent
GEN = 12
QUESTIONS = ["What is the capital of France?", "Name three colors."]


def test_template_is_smollm2_instructs_own():
    tok = load_tokenizer("smol")
    hf = load_smol_from_gguf()._tok
    if not getattr(hf, "chat_template", None):
        pytest.skip("the smol tokenizer carries no chat_template")
    want = hf.apply_chat_template([{"role": "user", "content": QUESTIONS[0]}], tokenize=False,
                                  add_generation_prompt=True)
    assert chat_text("smol", QUESTIONS[0]) == want
    assert encode_message(tok, "smol", QUESTIONS[0])[0] == tok.encode("<|im_start|>")[0]


def test_reply_is_cut_at_end_of_turn():
    tok = load_tokenizer("smol")
    ids = tok.encode(" Paris.") + tok.encode("<|im_end|>") + tok.encode(" more")
    assert reply_text(tok, ids) == " Paris."
    assert reply_text(tok, tok.encode(" Paris.")) == " Paris."


def test_new_text_adds_up_and_holds_back_partial_characters():
    tok = load_tokenizer("smol")
    text = " Paris est belle, 東京 😀 aussi."
    ids = tok.encode(text) + tok.encode("<|im_end|>") + tok.encode(" x")
    shown, pieces = "", []
    for n in range(1, len(ids) + 1):
        piece = new_text(tok, ids[:n], shown)
        assert "\ufffd" not in piece
        pieces.append(piece)
        shown += piece
    assert shown == reply_text(tok, ids) == text
    assert sum(1 for p in pieces if p) > 5
    partial = [n for n in range(1, len(ids)) if tok.decode(ids[:n]).endswith("\ufffd")]
    assert partial, "no token in the sample splits a UTF-8 character"
    assert all(new_text(tok, ids[:n], reply_text(tok, ids[:n - 1])) == "" for n in partial)


def _read_answer(child: pexpect.spawn, timeout: float = 300) -> tuple[str, list[float]]:
    """After "smol> ": the answer up to the next prompt, and the arrival times of the
    terminal reads that brought some of its text."""
    end = time.monotonic() + timeout
    reads = [(time.monotonic(), child.buffer)]  # what expect("smol> ") read beyond it
    child.buffer = ""
    while "\r\nyou> " not in "".join(c for _, c in reads):
        chunk = child.read_nonblocking(4096, timeout=max(0.1, end - time.monotonic()))
        reads.append((time.monotonic(), chunk))
    answer, rest = "".join(c for _, c in reads).split("\r\nyou> ", 1)
    assert not rest, rest
    times, pos = [], 0
    for t, chunk in reads:
        if answer[pos:pos + len(chunk)].strip():
            times.append(t)
        pos += len(chunk)
    return answer.replace("\r\n", "\n"), times


def _gone(pid: int, wait: float = 10.0) -> bool:
    end = time.monotonic() + wait
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


@pytest.mark.guest
def test_chat_two_questions_and_clean_exit(build):
    assets = lc.smol_dir("v3")
    if assets is None:
        pytest.skip("models/SMOL is missing: run `make smol-assets`")
    tok = load_tokenizer("smol")
    prompts = [encode_message(tok, "smol", q) for q in QUESTIONS]
    expected = [reply_text(tok, ids) for ids in lc.reference_ids(assets, prompts, GEN)]
    child = pexpect.spawn(sys.executable, ["-m", "pyaisvc", "chat", "--model", "smol",
                                           "--max-new-tokens", str(GEN)],
                          cwd=ROOT, encoding="utf-8", timeout=300, dimensions=(50, 500))
    try:
        child.expect(r"QEMU pid (\d+)")
        qemu_pid = int(child.match.group(1))
        child.expect("you> ")
        for q, want in zip(QUESTIONS, expected, strict=True):
            child.sendline(q)
            child.expect("smol> ")
            answer, times = _read_answer(child)
            assert answer.strip(), f"empty answer to {q!r}"
            assert answer == want, (q, answer, want)
            # streamed: the text came in several pieces spread over the decode,
            # not in one print at the end (a token's TPOT is over 10 ms in QEMU)
            assert len(times) >= 2, f"the answer to {q!r} arrived in one piece"
            assert times[-1] - times[0] > 0.01 * (len(times) - 1), times
        child.sendline("/stats")
        child.expect(r"prompt (\d+) tokens, generated (\d+); load (\d+) ms .*TTFT (\d+) ms")
        assert int(child.match.group(1)) == len(prompts[1])
        assert int(child.match.group(2)) == GEN
        assert int(child.match.group(4)) > 0
        child.expect("you> ")
        child.sendline("/quit")
        child.expect("shutting the guest down")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0, child.before
    assert _gone(qemu_pid), f"QEMU (pid {qemu_pid}) still runs after /quit"


@pytest.mark.guest
def test_chat_ctrl_c_shuts_down(build):
    if lc.smol_dir("v3") is None:
        pytest.skip("models/SMOL is missing: run `make smol-assets`")
    child = pexpect.spawn(sys.executable, ["-m", "pyaisvc", "chat", "--max-new-tokens", "2"],
                          cwd=ROOT, encoding="utf-8", timeout=300)
    try:
        child.expect(r"QEMU pid (\d+)")
        qemu_pid = int(child.match.group(1))
        child.expect("you> ")
        child.sendintr()
        child.expect(re.escape("shutting the guest down"))
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    assert _gone(qemu_pid), f"QEMU (pid {qemu_pid}) still runs after Ctrl-C"
