"""`pyaisvc chat` driven through pexpect like a user at a terminal.

Questions to the real SmolLM2 in the guest: each answer must be the numpy
reference's greedy continuation of the same chat-template prompt (a second
turn's holding the first), decoded and cut at <|im_end|>, and must stream:
its text arrives at the terminal in several pieces, the first while the guest
still generates.
/stats must report the last request, and /quit must end the program and
QEMU (its pid gone). The template, the cutting and the incremental decoding
are also checked on the host against the tokenizer.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pexpect
import pytest
from host import llmcases as lc

from pyaisvc.guest.chat import (
    ChatConfig,
    ChatError,
    ChatSession,
    Reply,
    chat_text,
    conversation_text,
    encode_message,
    new_text,
    reply_text,
    stop_ids,
)
from pyaisvc.model.sampling import SamplingError, SamplingOptions
from pyaisvc.model.tokenizer import Tokenizer, load_smol_from_gguf, load_tokenizer

ROOT = Path(__file__).resolve().parent.parent
GEN = 12
QUESTION = "What is the capital of France?"


def test_template_is_smollm2_instructs_own():
    tok = load_tokenizer("smol")
    hf = load_smol_from_gguf()._tok
    if not getattr(hf, "chat_template", None):
        pytest.skip("the smol tokenizer carries no chat_template")
    want = hf.apply_chat_template([{"role": "user", "content": QUESTION}], tokenize=False,
                                  add_generation_prompt=True)
    assert chat_text(tok, QUESTION) == want
    assert encode_message(tok, QUESTION)[0] == tok.encode("<|im_start|>")[0]


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


def _cut(tok, ids: list[int]) -> list[int]:
    """ids up to and including the first end-of-turn / end-of-text id."""
    return lc.until_stop(ids, stop_ids(tok))


def _gone(pid: int, wait: float = 10.0) -> bool:
    end = time.monotonic() + wait
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _spawn_chat(*args: str) -> pexpect.spawn:
    """`pyaisvc chat ARGS` on a terminal of its own, with SIGINT at its default as a
    shell gives it: a test run started as a background job of a script inherits
    SIGINT ignored, and Python then never raises KeyboardInterrupt for Ctrl-C. One hart,
    as every guest of the suite unless a test asks for more."""
    return pexpect.spawn(sys.executable, ["-m", "pyaisvc", "chat", "--cpus", "1", *args], cwd=ROOT,
                         encoding="utf-8", timeout=300, dimensions=(50, 500),
                         preexec_fn=_default_sigint)


@pytest.mark.guest
def test_chat_streams_the_reference_reply_and_exits_cleanly(build):
    """One question at the terminal (the second turn, which holds the first:
    test_reply_stops_at_end_of_turn_and_the_next_turn_remembers)."""
    assets = lc.smol_or_skip()
    tok = load_tokenizer("smol")
    prompt = encode_message(tok, QUESTION)
    (ref,) = lc.reference_ids(assets, [prompt], GEN)
    child = _spawn_chat("--model", "smol", "--max-new-tokens", str(GEN))
    try:
        child.expect(r"QEMU pid (\d+)")
        qemu_pid = int(child.match.group(1))
        child.expect("you> ")
        child.sendline(QUESTION)
        child.expect("smol> ")
        answer, times = _read_answer(child)
        assert answer.strip(), "empty answer"
        assert answer == reply_text(tok, ref), (answer, ref)
        # streamed: the text came in several pieces spread over the decode,
        # not in one print at the end (a token's TPOT is over 10 ms in QEMU)
        assert len(times) >= 2, "the answer arrived in one piece"
        assert times[-1] - times[0] > 0.01 * (len(times) - 1), times
        child.sendline("/stats")
        child.expect(r"prompt (\d+) tokens, generated (\d+); load (\d+) ms .*TTFT (\d+) ms")
        assert int(child.match.group(1)) == len(prompt)
        assert int(child.match.group(2)) == len(_cut(tok, ref))
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
    lc.smol_or_skip()
    child = _spawn_chat("--max-new-tokens", "2")
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


# ---------------------------------------------------------------- a conversation

def test_conversation_is_the_templates_multi_turn_text():
    hf = load_smol_from_gguf()._tok
    tok = load_tokenizer("smol")
    turns = [("Hi!", "Hello! How can I help?"), ("What is 2+2?", "4.")]
    messages = [m for q, a in turns for m in ({"role": "user", "content": q},
                                             {"role": "assistant", "content": a})]
    messages.append({"role": "user", "content": "And 3+3?"})
    want = hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert conversation_text(tok, turns, "And 3+3?") == want
    assert conversation_text(tok, [], "Hi!") == chat_text(tok, "Hi!")


def test_oldest_turns_are_dropped_to_fit_the_runtime():
    tok = load_tokenizer("smol")
    cfg = ChatConfig("smol", Path("kernel"), Path("image"), "512M", max_new_tokens=16,
                     seq_len=120)
    session = ChatSession(cfg, tok)  # not started: prompt_for needs no guest
    session.turns = [(f"Question number {i}?", f"Answer number {i}.") for i in range(6)]
    ids, dropped = session.prompt_for("Last one?")
    assert len(ids) <= 120 - 16 and dropped > 0
    kept = session.turns[dropped:]
    assert ids == tok.encode(conversation_text(tok, kept, "Last one?"))
    longer = tok.encode(conversation_text(tok, session.turns[dropped - 1:], "Last one?"))
    assert len(longer) > 120 - 16  # dropping one fewer would not fit
    session.reset()
    assert session.prompt_for("Last one?") == (encode_message(tok, "Last one?"), 0)
    with pytest.raises(ChatError, match="Say it shorter, or lower --max-new-tokens"):
        session.prompt_for("word " * 200)


TWO_TURNS_GEN = 24  # the first reply ends after 12 ids; the second is cut at 24


def _smol_chat(service: bool) -> tuple[ChatConfig, Path, Tokenizer]:
    """A chat config for the real SmolLM2 (skips without it), its assets, its tokenizer."""
    from pyaisvc.guest.llmguest import MODELS, prepare

    assets = lc.smol_or_skip()
    p = prepare(ROOT, MODELS["smol"])
    cfg = ChatConfig("smol", p.kernel, p.image, "512M", max_new_tokens=TWO_TURNS_GEN,
                     service=service)
    return cfg, assets, load_tokenizer("smol")


def _two_turns(chat: ChatSession, assets: Path, tok: Tokenizer) -> tuple[Reply, Reply]:
    """Asks "What is 2+2?", then what was asked: each reply must be the reference's,
    cut at the end of turn, the first ending early and the second prompt holding the
    first turn."""
    gen = TWO_TURNS_GEN
    first = chat.ask("What is 2+2?")  # SmolLM2 answers in 11 ids, then <|im_end|>
    (ref1,) = lc.reference_ids(assets, [first.prompt_ids], gen)
    assert first.ids == _cut(tok, ref1)
    assert first.ids[-1] in stop_ids(tok) and len(first.ids) < gen, first.ids
    second = chat.ask("What did I just ask you?")
    assert second.prompt_ids == tok.encode(conversation_text(
        tok, [("What is 2+2?", first.text)], "What did I just ask you?"))
    (ref2,) = lc.reference_ids(assets, [second.prompt_ids], gen)
    assert second.ids == _cut(tok, ref2)
    return first, second


@pytest.mark.guest
def test_reply_stops_at_end_of_turn_and_the_next_turn_remembers(build):
    cfg, assets, tok = _smol_chat(service=False)
    with ChatSession(cfg, tok) as chat:
        first, second = _two_turns(chat, assets, tok)
        # The program ended the request itself (--stop) and printed its timing line.
        assert first.timing["gen"] == len(first.ids), first.timing
        # It saw the first turn: the same question without it gets another reply (with it,
        # SmolLM2 offers help with "math"; alone, with "personal or professional" matters).
        alone = tok.encode(conversation_text(tok, [], "What did I just ask you?"))
        (ref_alone,) = lc.reference_ids(assets, [alone], TWO_TURNS_GEN)
        assert second.ids != _cut(tok, ref_alone), second.text


@pytest.mark.guest
def test_unknown_command_and_ctrl_c_stop_only_the_reply(build):
    lc.smol_or_skip()
    child = _spawn_chat("--max-new-tokens", "200")
    try:
        child.expect(r"QEMU pid (\d+)")
        child.expect("you> ")
        child.sendline("/bogus")
        child.expect(r"chat: unknown command /bogus; commands: /stats")
        child.expect("you> ")
        child.sendline("Tell me a long story about a dragon and a knight.")
        child.expect("smol> ")
        child.expect(r"\w")  # the reply has begun
        child.sendintr()
        child.expect(re.escape("[stopped]"))
        child.expect("you> ")
        child.sendline("/stats")
        child.expect(r"generated (\d+)")
        assert 0 < int(child.match.group(1)) < 200
        child.expect("you> ")
        child.sendline("What is 2+2?")  # the session goes on; SmolLM2 ends this one early
        child.expect("smol> ")
        answer, _ = _read_answer(child, timeout=600)
        assert "4" in answer, answer
        child.sendline("/quit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0


@pytest.mark.guest
def test_chat_through_the_service_remembers_and_stops(build):
    """--service: each turn is `ai gen --stop ...` to the resident ai_daemon; the replies are
    the reference's, cut at the end of turn, and the table is empty afterwards."""
    cfg, assets, tok = _smol_chat(service=True)
    with ChatSession(cfg, tok) as chat:
        assert chat.load_us > 0  # the worker's load time, from its boot line
        _two_turns(chat, assets, tok)
        assert "slots 0/16 used" in chat.guest.run("ai info")


def test_chat_service_takes_six_decimal_places():
    """The service carries --temp and --top-p in millionths (struct ai_opts): a seventh
    decimal place is refused before booting, where llmrun_* would take it."""
    p = subprocess.run([sys.executable, "-m", "pyaisvc", "chat", "--service", "--temp",
                        "0.1234567"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 1
    assert p.stderr == ("pyaisvc chat: --temp: the AI service takes at most 6 decimal places "
                        "and values below 4295, not '0.1234567'\n"), p.stderr
    assert SamplingOptions("0.123456", 40, "0.95", 7).service_args() == \
        ["--temp", "0.123456", "--top-k", "40", "--top-p", "0.95", "--seed", "7"]
    with pytest.raises(SamplingError, match="--top-p"):
        SamplingOptions("1", 0, "0.9999999", 0).service_args()
