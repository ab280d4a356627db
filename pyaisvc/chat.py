"""Chat with a model kept loaded in the guest: text in, text out.

``ChatSession`` boots the guest, starts ``llmrun_smol --stdin --stream`` (or
``llmrun_qwen``) at the shell and keeps it running, so the model is loaded
once. Each message is wrapped in the model's chat template, encoded on the
host, sent as one ``<predict> <id0> <id1> ...`` line, and the generated ids
that come back are cut at the end-of-turn token and decoded::

    with ChatSession(ChatConfig(model="smol", kernel=..., image=..., ram="512M"), tok) as chat:
        reply = chat.ask("What is the capital of France?",
                         on_text=lambda piece: print(piece, end="", flush=True))
        print(reply.text, reply.timing["ttft_us"])

Each message is a fresh single-turn conversation (the runtime starts every
request at position 0, and 256 positions leave little room for history).
With ``--stream`` the runtime writes each id the moment it has chosen it
(the finished line is the one it prints without), so ``on_text`` gets the
reply piece by piece while the guest still generates: the ids so far are
decoded again after each one and only the new end of the text is handed
out, held back while it ends in a partial UTF-8 character (U+FFFD).

The template is SmolLM2-Instruct's own (the chat_template in its GGUF):
ChatML with its default system line. Qwen3.5 gets plain ChatML without a
system line.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pexpect

from pyaisvc.errors import AisvcError
from pyaisvc.llmguest import MODELS, max_prompt, timing_fields, timing_pattern
from pyaisvc.qemu import PROMPT, Guest, QemuConfig, default_qemu
from pyaisvc.tokenizer import Tokenizer

SMOL_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
END_OF_TURN = "<|im_end|>"
# One id at the very start of the unread console output (pexpect searches its
# whole buffer, so \A is where the last match ended), then what follows it: a
# space before the next id, or the end of the line. Anchored, so that digits
# in a message line can never pass for an id.
ID = r"\A(\d+)( |\r*\n)"
WARMUP_ID = 198  # "\n" in SmolLM2; any id below the vocab size does


class ChatError(AisvcError):
    """The chat cannot go on; the message says why and what to do."""


@dataclass(frozen=True)
class ChatConfig:
    model: str
    kernel: Path
    image: Path
    ram: str  # guest RAM, e.g. MODELS[model].ram
    cpus: int = 1
    max_new_tokens: int = 64
    seq_len: int = 256  # the model's runtime_seq_len
    timeout: float = 600.0  # seconds one reply may take
    qemu: str = field(default_factory=default_qemu)
    llmrun_args: tuple[str, ...] = ()  # more llmrun options, e.g. sampling's


@dataclass
class Reply:
    prompt_ids: list[int]
    ids: list[int]  # everything the guest generated
    text: str  # decoded up to the end-of-turn token
    timing: dict[str, int] = field(default_factory=dict)  # load_us, ttft_us, tpot_us, ...
    wall_s: float = 0.0  # host seconds from sending the line to the last id


def chat_text(model: str, message: str) -> str:
    """The message in the model's chat template, ready for the assistant's turn."""
    system = f"<|im_start|>system\n{SMOL_SYSTEM}<|im_end|>\n" if model == "smol" else ""
    return f"{system}<|im_start|>user\n{message}<|im_end|>\n<|im_start|>assistant\n"


def encode_message(tok: Tokenizer, model: str, message: str) -> list[int]:
    return tok.encode(chat_text(model, message))


def reply_text(tok: Tokenizer, ids: list[int]) -> str:
    """The ids decoded, up to (not including) the first end-of-turn or end-of-text id."""
    stops = set(tok.encode(END_OF_TURN)) | set(tok.encode("<|endoftext|>"))
    cut = next((i for i, t in enumerate(ids) if t in stops), len(ids))
    return tok.decode(ids[:cut], skip_special_tokens=True)


def new_text(tok: Tokenizer, ids: list[int], shown: str) -> str:
    """What reply_text(ids) adds to the text already shown; "" while the text ends in
    the replacement character (a token that is only part of a UTF-8 character)."""
    text = reply_text(tok, ids)
    if text.endswith("\ufffd") or not text.startswith(shown):
        return ""
    return text[len(shown):]


class ChatSession:
    """One guest with the model loaded; use as a context manager."""

    def __init__(self, cfg: ChatConfig, tok: Tokenizer) -> None:
        self.cfg, self.tok = cfg, tok
        self.prog = MODELS[cfg.model].program
        self.guest = Guest(QemuConfig(kernel=cfg.kernel, image=cfg.image, ram=cfg.ram,
                                      cpus=cfg.cpus, snapshot=True, qemu=cfg.qemu))
        self.last: Reply | None = None
        self.load_us = 0

    def __enter__(self) -> ChatSession:
        try:
            self.start()
        except BaseException:
            self.close()  # also on Ctrl-C while booting: never leave QEMU behind
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def qemu_pid(self) -> int | None:
        return self.guest.child.pid if self.guest.child is not None else None

    def start(self) -> None:
        """Boots, starts the program with --stdin and waits until a warm-up request is served."""
        self.guest.boot()
        self.guest.send_line(" ".join([self.prog, "--stdin", "--stream",
                                       *self.cfg.llmrun_args]))
        warm = self._request([WARMUP_ID], 1, deadline=time.monotonic() + self.cfg.timeout)
        self.load_us = warm.timing["load_us"]

    def ask(self, message: str, on_text: Callable[[str], None] | None = None) -> Reply:
        """One message in, the model's reply out; on_text, if given, gets the reply's text
        piece by piece as the ids arrive (the pieces add up to reply.text)."""
        prompt = encode_message(self.tok, self.cfg.model, message)
        room = self.cfg.seq_len - self.cfg.max_new_tokens
        limit = min(room, max_prompt())
        if len(prompt) > limit:
            raise ChatError(f"the message is {len(prompt)} tokens with the template; at most "
                            f"{limit} fit beside {self.cfg.max_new_tokens} new tokens. "
                            "Say it shorter, or lower --max-new-tokens")
        shown = ""

        def on_ids(ids: list[int]) -> None:
            nonlocal shown
            piece = new_text(self.tok, ids, shown)
            if piece and on_text is not None:
                on_text(piece)
            shown += piece

        reply = self._request(prompt, self.cfg.max_new_tokens,
                              deadline=time.monotonic() + self.cfg.timeout, on_ids=on_ids)
        reply.text = reply_text(self.tok, reply.ids)
        rest = reply.text[len(shown):] if reply.text.startswith(shown) else ""
        if rest and on_text is not None:  # a partial character at the very end
            on_text(rest)
        self.last = reply
        return reply

    def close(self) -> None:
        """Ends the program (quit), then QEMU. Never raises."""
        child = self.guest.child
        if child is not None and child.isalive():
            try:
                self.guest.send_line("quit")
                child.expect([re.escape(PROMPT), pexpect.EOF, pexpect.TIMEOUT], timeout=5)
            except (pexpect.ExceptionPexpect, OSError):
                pass
        self.guest.close()

    # ------------------------------------------------------------ the console

    def _request(self, prompt: list[int], predict: int, deadline: float,
                 on_ids: Callable[[list[int]], None] | None = None) -> Reply:
        """Sends one request line; on_ids gets the ids so far after each one arrives."""
        line = f"{predict} " + " ".join(str(i) for i in prompt)
        t0 = time.monotonic()
        self.guest.send_line(line)
        self.guest.expect([re.escape(line) + r"\r*\n"], deadline, "the echo of the request")
        error = re.escape(self.prog) + r": (?!timing)([^\r\n]*)\r*\n"
        ids: list[int] = []
        while True:
            what = f"generated id {len(ids) + 1} of {predict}"
            if self.guest.expect([ID, error], deadline, what) == 1:
                raise ChatError(f"{self.prog} refused the request: {self.guest.match.group(1)}")
            ids.append(int(self.guest.match.group(1)))
            if on_ids is not None:
                on_ids(ids)
            if self.guest.match.group(2) != " ":
                break
        wall = time.monotonic() - t0
        self.guest.expect([timing_pattern(self.prog) + r"\r*\n"], deadline, "the timing line")
        return Reply(prompt, ids, "", timing_fields(self.guest.match), wall)
