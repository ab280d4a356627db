"""Chat with a model kept loaded in the guest: text in, text out.

``ChatSession`` boots the guest, starts ``llmrun_smol --stdin --stream`` (or
``llmrun_qwen``) at the shell and keeps it running, so the model is loaded
once. Each message, after the earlier turns, is rendered in the model's own
chat template (pyaisvc.model.chattemplate, the renderer ``pyaisvc serve`` uses
too), encoded on the host, sent as one ``<predict> <id0> <id1> ...`` line, and the generated ids
that come back are cut at the end-of-turn token and decoded::

    with ChatSession(ChatConfig(model="smol", kernel=..., image=..., ram="512M"), tok) as chat:
        reply = chat.ask("What is the capital of France?",
                         on_text=lambda piece: print(piece, end="", flush=True))
        print(reply.text, reply.timing["ttft_us"])

The conversation is kept: each request carries the earlier turns (the
user's messages and the replies as shown) before the new message. The
runtime keeps the KV cache's full blocks across requests (docs/KVCACHE.md),
so each turn computes only what follows the longest cached prefix (its
timing line's cached=, in ``Reply.timing["cached"]``); ``prefix_cache=False``
runs the program with ``--prefix-cache off`` (the service: boots with
``aicache=0``), so every turn computes its whole history. When that
would not fit beside max_new_tokens in runtime_seq_len (or exceed the prompt
limit), the oldest turns are dropped; ``reset()`` forgets them all.

A reply ends at the model's end-of-turn or end-of-text id, or after
max_new_tokens: the program runs with ``--stop`` for each of those ids, so
it ends the request itself and prints its timing line. Ctrl-C during a
reply (KeyboardInterrupt in ``ask``) stops that reply: the kernel kills the
console's foreground job on Ctrl-C (README, "Using the guest"), so the
program is interrupted and started again (the model loads anew, in well
under a second). The conversation survives.

With ``--stream`` the runtime writes each id the moment it has chosen it
(the finished line is the one it prints without), so ``on_text`` gets the
reply piece by piece while the guest still generates: the ids so far are
decoded again after each one and only the new end of the text is handed
out, held back while it ends in a partial UTF-8 character (U+FFFD).

With ``service=True`` the replies come from the kernel AI service instead:
the resident ai_daemon, which init started at boot with the model loaded.
Each request is one ``ai gen --stop ... PREDICT IDS`` command at the shell
(submit with the stop ids, stream the ids as they come, collect), so the
conversation shows the course's path from ``llmrun`` to the service; Ctrl-C
kills ``ai`` (the console's foreground job), and the kernel then drops the
request it owned. Timings are the host clock's there (the service reports
them to ``ai_query``, not on the console).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pexpect

from pyaisvc.errors import AisvcError
from pyaisvc.guest.llmguest import MODELS, max_prompt, timing_fields, timing_pattern
from pyaisvc.guest.qemu import PROMPT, Guest, QemuConfig, default_qemu
from pyaisvc.model.assets import DEFAULT_RUNTIME_SEQ_LEN
from pyaisvc.model.chattemplate import conversation, render, stop_ids
from pyaisvc.model.tokenizer import Tokenizer

# One id at the very start of the unread console output (pexpect searches its
# whole buffer, so \A is where the last match ended), then what follows it: a
# space before the next id, or the end of the line. Anchored, so that digits
# in a message line can never pass for an id.
ID = r"\A(\d+)( |\r*\n)"
WARMUP_ID = 198  # "\n" in SmolLM2; any id below the vocab size does
INTERRUPT = "\x03"  # ^C at the console


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
    seq_len: int = DEFAULT_RUNTIME_SEQ_LEN  # the model's runtime_seq_len (CFG.BIN)
    timeout: float = 600.0  # seconds one reply may take
    qemu: str = field(default_factory=default_qemu)
    sampling_args: tuple[str, ...] = ()  # --temp ... as llmrun_* and `ai gen` both take them
    service: bool = False  # through the AI service (`ai gen`), not llmrun_* --stdin
    prefix_cache: bool = True  # reuse the KV cache's cached prefixes (docs/KVCACHE.md)


@dataclass
class Reply:
    prompt_ids: list[int]
    ids: list[int]  # everything the guest generated
    text: str  # decoded up to the end-of-turn token
    timing: dict[str, int] = field(default_factory=dict)  # load_us, ttft_us, tpot_us, ...
    wall_s: float = 0.0  # host seconds from sending the line to the last id
    first_s: float = 0.0  # host seconds from sending the line to the first id
    stopped: bool = False  # Ctrl-C ended it
    dropped_turns: int = 0  # earlier turns left out to make room


def chat_text(tok: Tokenizer, message: str) -> str:
    """The message alone in the model's chat template, ready for the assistant's turn."""
    return conversation_text(tok, [], message)


def conversation_text(tok: Tokenizer, turns: list[tuple[str, str]], message: str) -> str:
    """Earlier (message, reply) turns, then message, in the model's chat template, ready
    for the assistant's turn (pyaisvc.model.chattemplate.render)."""
    return render(tok, conversation(turns, message))


def encode_message(tok: Tokenizer, message: str) -> list[int]:
    """The ids of the message alone in the model's chat template."""
    return tok.encode(chat_text(tok, message))


def reply_text(tok: Tokenizer, ids: list[int]) -> str:
    """The ids decoded, up to (not including) the first end-of-turn or end-of-text id."""
    stops = stop_ids(tok)
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
    """One guest with the model loaded and the conversation so far; a context manager."""

    def __init__(self, cfg: ChatConfig, tok: Tokenizer) -> None:
        """A chat with cfg's model in a guest not yet booted (start(), or use it as a context
        manager); tok encodes and decodes the turns."""
        self.cfg, self.tok = cfg, tok
        self.prog = MODELS[cfg.model].program
        self.guest = Guest(QemuConfig(kernel=cfg.kernel, image=cfg.image, ram=cfg.ram,
                                      cpus=cfg.cpus, snapshot=True, qemu=cfg.qemu,
                                      append="" if cfg.prefix_cache else "aicache=0"))
        self.last: Reply | None = None
        self.load_us = 0
        self.turns: list[tuple[str, str]] = []  # (message, reply text) in order
        self._stops = stop_ids(tok)
        self._stop_flags = " ".join(f"--stop {i}" for i in sorted(self._stops))

    def __enter__(self) -> ChatSession:
        """The session started (guest booted, program waiting); closed when the start fails."""
        try:
            self.start()
        except BaseException:
            self.close()  # also on Ctrl-C while booting: never leave QEMU behind
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        """Ends the program and stops QEMU."""
        self.close()

    @property
    def qemu_pid(self) -> int | None:
        """The QEMU process's id while it runs, else None."""
        return self.guest.child.pid if self.guest.child is not None else None

    def start(self) -> None:
        """Boots, starts the program with --stdin and waits until a warm-up request is
        served (with service=True: checks that the AI worker serves a model)."""
        self.guest.boot()
        if self.cfg.service:  # the worker loaded the model at boot and said how fast
            load = re.search(r"ai_daemon: pid \d+ serving .* load (\d+) ms", self.guest.transcript)
            if load is None:
                raise ChatError("no AI worker is serving a model in this guest; chat without "
                                "--service runs the model directly")
            self.load_us = int(load.group(1)) * 1000
            return
        self._start_program(time.monotonic() + self.cfg.timeout)
        warm = self._request([WARMUP_ID], 1, deadline=time.monotonic() + self.cfg.timeout)
        self.load_us = warm.timing["load_us"]

    def _command(self) -> str:
        """The program's command line: it serves request lines, writes each id as it is
        chosen, and ends a request at an end-of-turn or end-of-text id."""
        off = [] if self.cfg.prefix_cache else ["--prefix-cache", "off"]
        return " ".join([self.prog, "--stdin", "--stream", self._stop_flags, *off,
                         *self.cfg.sampling_args])

    def reset(self) -> None:
        """Forgets the conversation."""
        self.turns.clear()

    def prompt_for(self, message: str) -> tuple[list[int], int]:
        """The ids of the conversation ending in message, and how many of the oldest turns
        were left out so that they fit; ChatError if message alone does not fit."""
        limit = min(self.cfg.seq_len - self.cfg.max_new_tokens, max_prompt())
        for dropped in range(len(self.turns) + 1):
            ids = self.tok.encode(conversation_text(self.tok, self.turns[dropped:], message))
            if len(ids) <= limit:
                return ids, dropped
        raise ChatError(f"the message is {len(ids)} tokens with the template; at most "
                        f"{limit} fit beside {self.cfg.max_new_tokens} new tokens. "
                        "Say it shorter, or lower --max-new-tokens")

    def ask(self, message: str, on_text: Callable[[str], None] | None = None) -> Reply:
        """One message in (after the earlier turns), the model's reply out; on_text, if
        given, gets the reply's text piece by piece as the ids arrive (the pieces add up
        to reply.text). Ctrl-C stops the reply, keeping what came so far."""
        prompt, dropped = self.prompt_for(message)
        shown = ""

        def on_ids(ids: list[int]) -> None:
            """Passes on the text the ids so far add to what was shown."""
            nonlocal shown
            piece = new_text(self.tok, ids, shown)
            if piece and on_text is not None:
                on_text(piece)
            shown += piece

        reply = self._request(prompt, self.cfg.max_new_tokens,
                              deadline=time.monotonic() + self.cfg.timeout, on_ids=on_ids)
        reply.dropped_turns = dropped
        reply.text = reply_text(self.tok, reply.ids)
        rest = reply.text[len(shown):] if reply.text.startswith(shown) else ""
        if rest and on_text is not None:  # a partial character at the very end
            on_text(rest)
        self.turns = self.turns[dropped:] + [(message, reply.text)]
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

    def _stop_program(self, deadline: float) -> None:
        """Interrupts the running request (^C kills the console's foreground job) and,
        without the service, starts the program again; GuestTimeout if the shell prompt
        does not come back by deadline."""
        self.guest.child.send(INTERRUPT)
        self.guest.expect([re.escape(PROMPT)], deadline, "the shell prompt after ^C")
        if not self.cfg.service:
            self._start_program(deadline)

    def _start_program(self, deadline: float) -> None:
        """Starts the program and waits for its KV pool line (docs/KVCACHE.md), which it
        prints once loaded, before it reads a request: so that line never falls between a
        request's echo and its ids. ChatError if the program says something else."""
        self.guest.send_line(self._command())
        prog = re.escape(self.prog)
        if self.guest.expect([prog + r": kv pool [^\r\n]*\r*\n", prog + r": ([^\r\n]*)\r*\n"],
                             deadline, f"{self.prog} to start") == 1:
            raise ChatError(f"{self.prog} did not start: {self.guest.match.group(1)}")

    def _request(self, prompt: list[int], predict: int, deadline: float,
                 on_ids: Callable[[list[int]], None] | None = None) -> Reply:
        """Sends one request line; on_ids gets the ids so far after each one arrives. It
        ends at a stop id or the predict count (the program ends the line), or on Ctrl-C."""
        line = f"{predict} " + " ".join(str(i) for i in prompt)
        if self.cfg.service:
            line = " ".join(["ai gen", self._stop_flags, *self.cfg.sampling_args, line])
            who, error = "the AI service", r"(?:submit|stream|wait): (error [^\r\n]*)\r*\n"
            end = re.escape(PROMPT)  # ai prints no timing line
        else:
            who, error = self.prog, re.escape(self.prog) + r": (?!timing)([^\r\n]*)\r*\n"
            end = timing_pattern(self.prog) + r"\r*\n"
        t0 = time.monotonic()
        self.guest.send_line(line)
        self.guest.expect([re.escape(line) + r"\r*\n"], deadline, "the echo of the request")
        ids: list[int] = []
        first = 0.0
        try:
            while True:
                what = f"generated id {len(ids) + 1} of {predict}"
                if self.guest.expect([ID, error], deadline, what) == 1:
                    raise ChatError(f"{who} refused the request: {self.guest.match.group(1)}")
                ids.append(int(self.guest.match.group(1)))
                if len(ids) == 1:
                    first = time.monotonic() - t0
                if on_ids is not None:
                    on_ids(ids)
                if self.guest.match.group(2) != " ":
                    break
        except KeyboardInterrupt:
            wall = time.monotonic() - t0
            self._stop_program(time.monotonic() + 30)
            return Reply(prompt, ids, "", {}, wall, first, stopped=True)
        wall = time.monotonic() - t0
        self.guest.expect([end], deadline, "the end of the request")
        timing = {} if self.cfg.service else timing_fields(self.guest.match)
        if timing and (cached := re.search(r" cached=(\d+)", self.guest.match.group(0))):
            timing["cached"] = int(cached[1])
        return Reply(prompt, ids, "", timing, wall, first)
