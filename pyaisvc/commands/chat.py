"""`pyaisvc chat --model smol`: talk to the model in the guest, one line at a time.

    $ pyaisvc chat
    chat: SmolLM2-135M-Instruct loaded in 0.43 s (QEMU pid 4242, 2 hart(s), 512 MiB); ...
    you> What is the capital of France?
    smol> The capital of France is Paris.
    you> /stats
    you> /quit

Builds what is missing, boots the guest, starts `llmrun_smol --stdin --stream
--stop 0 --stop 2` (the end-of-text and end-of-turn ids: the guest ends a reply)
and keeps it running (the model stays loaded). Each line is wrapped, after
the conversation so far, in the model's chat template (pyaisvc/model/chattemplate.py),
encoded and sent, and the reply printed as the guest generates it: each id
is decoded as it arrives and the new text printed at once; the reply ends at
the model's end-of-turn token. /stats prints the last request's timings,
/reset forgets the conversation; /quit, Ctrl-D or Ctrl-C at the prompt shut
the guest down, Ctrl-C during a reply stops only that reply.

With --service the replies come from the kernel AI service instead: the
resident ai_daemon, through `ai gen --stop 0 --stop 2 ...` at the shell
(with the sampling options, which the service takes too, at most 6 decimal
places each; Ctrl-C kills `ai`, and the kernel drops its request).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pyaisvc.commands import add_sampling_arguments, sampling_options
from pyaisvc.errors import AisvcError, CommandError
from pyaisvc.guest.chat import ChatConfig, ChatError, ChatSession
from pyaisvc.guest.llmguest import MODELS, prepare
from pyaisvc.guest.qemu import default_cpus
from pyaisvc.model.assets import load_config
from pyaisvc.model.sampling import SamplingError
from pyaisvc.model.tokenizer import load_tokenizer

HELP = ("commands: /stats (last request's timings), /reset (forget the conversation), /help, "
        "/quit (or Ctrl-D / Ctrl-C); Ctrl-C during a reply stops it")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The chat's flags: model, assets, max new tokens, harts, RAM, --service and the
    sampling flags."""
    parser.add_argument("--model", choices=sorted(MODELS), default="smol",
                        help="which model (default smol)")
    parser.add_argument("--assets", type=Path, metavar="DIR", help="asset directory (default "
                        + " or ".join(str(m.assets) for m in MODELS.values()) + ")")
    parser.add_argument("--max-new-tokens", type=int, default=64,
                        help="tokens generated per reply (default 64)")
    parser.add_argument("--cpus", type=int, default=default_cpus(), help="guest harts "
                        f"(default: the host's cores, at most 4; {default_cpus()} here)")
    parser.add_argument("--ram", help="guest RAM (default " + ", ".join(
        f"{m.ram} for {m.name}" for m in MODELS.values()) + ")")
    parser.add_argument("--service", action="store_true",
                        help="ask the kernel AI service (the resident ai_daemon, through "
                             "`ai gen`) instead of running llmrun_* at the shell")
    parser.add_argument("--prefix-cache", choices=("on", "off"), default="on",
                        help="reuse the KV cache's cached prefix of each turn's history "
                             "(default on; off computes the whole history every turn)")
    add_sampling_arguments(parser)


def stats_line(session: ChatSession) -> str:
    """/stats: the last request's sizes and timings (the guest's, or the host clock's when
    the guest printed none)."""
    r = session.last
    if r is None:
        return f"no request yet (model loaded in {session.load_us / 1000:.0f} ms)"
    t = r.timing
    head = f"prompt {len(r.prompt_ids)} tokens, generated {len(r.ids)}"
    if not t:  # no timing line (stopped early, or the service): the host clock's view
        tpot = (r.wall_s - r.first_s) / max(1, len(r.ids) - 1)
        why = "the reply was stopped early" if r.stopped else "the service prints no timing"
        return (f"{head}; load {session.load_us / 1000:.0f} ms (once, at start); TTFT "
                f"{r.first_s * 1000:.0f} ms; TPOT {tpot * 1000:.1f} ms (host clock: {why}); "
                f"{r.wall_s:.1f} s on the host clock")
    return (f"{head}; load {t['load_us'] / 1000:.0f} ms (once, at start); TTFT "
            f"{t['ttft_us'] / 1000:.0f} ms; TPOT {t['tpot_us'] / 1000:.1f} ms; {r.wall_s:.1f} s "
            f"on the host clock; {t.get('cached', 0)} prompt tokens from the KV cache")


def _loop(session: ChatSession, model: str) -> None:
    """Reads lines at the `you>` prompt until /quit or end of input: commands (/stats,
    /reset, /help) or a message, whose reply streams out as it comes. A refused message
    is reported and the loop goes on."""
    while True:
        try:
            line = input("you> ").strip()
        except EOFError:
            print()
            return
        if not line:
            continue
        if line in ("/quit", "/exit"):
            return
        if line == "/stats":
            print(stats_line(session))
            continue
        if line == "/reset":
            session.reset()
            print("chat: conversation forgotten")
            continue
        if line == "/help":
            print(HELP)
            continue
        if line.startswith("/"):
            print(f"chat: unknown command {line.split()[0]}; {HELP}")
            continue
        print(f"{model}> ", end="", flush=True)
        try:
            reply = session.ask(line, on_text=lambda piece: print(piece, end="", flush=True))
        except ChatError as e:
            print(flush=True)
            print(f"chat: {e}", file=sys.stderr)
            continue
        print(" [stopped]" if reply.stopped else "", flush=True)
        if reply.dropped_turns:
            print(f"chat: the {reply.dropped_turns} oldest turn(s) were left out to fit the "
                  "model's runtime_seq_len", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    """pyaisvc chat: builds what is missing, boots the guest with the model loaded, chats
    until /quit, Ctrl-D or Ctrl-C and stops QEMU; 0, or CommandError for a bad flag or a
    failed boot."""
    if args.max_new_tokens < 1:
        raise CommandError("chat: --max-new-tokens must be at least 1")
    sampling = sampling_options(args, "chat")
    try:
        sampling_args = sampling.service_args() if args.service else sampling.guest_args()
    except SamplingError as e:
        raise CommandError(f"chat: {e}") from e
    spec = MODELS[args.model]
    try:
        print("chat: building what is missing and booting the guest ...", file=sys.stderr)
        p = prepare(Path("."), spec, args.assets)
        seq_len = load_config((p.assets / "CFG.BIN").read_bytes()).runtime_seq_len
        tok = load_tokenizer(args.model)
        cfg = ChatConfig(args.model, p.kernel, p.image, args.ram or spec.ram, args.cpus,
                         args.max_new_tokens, seq_len,
                         sampling_args=tuple(sampling_args), service=args.service,
                         prefix_cache=args.prefix_cache == "on")
        with ChatSession(cfg, tok) as session:
            g = session.guest
            where = " by the AI service's worker" if args.service else ""
            print(f"chat: {p.title} loaded{where} in {session.load_us / 1e6:.2f} s (QEMU pid "
                  f"{session.qemu_pid}, {g.harts} hart(s), {g.ram_mib} MiB); {HELP}",
                  file=sys.stderr, flush=True)
            try:
                _loop(session, args.model)
            except KeyboardInterrupt:
                print()
            print("chat: shutting the guest down", file=sys.stderr)
    except AisvcError as e:
        raise CommandError(f"chat: {e}") from e
    return 0
