"""`pyaisvc serve --model smol --port 8080`: the kernel AI service over HTTP.

    $ pyaisvc serve
    serve: SmolLM2-135M-Instruct in the guest (QEMU pid 4242, 1 hart(s)); gateway window 8 per user
    serve: listening on http://127.0.0.1:8080 (OpenAI API at /v1; Ctrl-C stops)

Builds what is missing, boots the guest with the gateway port (a virtio
console on a Unix socket), waits for the worker and the gateway, and serves
OpenAI's /v1/completions and /v1/chat/completions, /v1/models, /health,
/metrics, /tokenize and /detokenize, and the kernel's table live (the page
at /, /v1/aisvc/table and its stream) (pyaisvc/serve/). On 127.0.0.1 by
default; `--host ADDR` serves another address (a room: `--host 0.0.0.0`),
which needs `--api-key KEY` (or $AISVC_API_KEY): then every request but
/health and the page's files needs `Authorization: Bearer KEY`.
A guest that dies is replaced by a fresh one; Ctrl-C (or SIGTERM) stops the
server and QEMU.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import sys
from pathlib import Path

from pyaisvc.errors import AisvcError, CommandError
from pyaisvc.guest import qemu
from pyaisvc.guest.llmguest import MODELS, POLICIES, max_batch, max_chunk, max_prompt, prepare
from pyaisvc.model.assets import load_config
from pyaisvc.model.tokenizer import load_tokenizer
from pyaisvc.serve.app import BODY_SECONDS, Limits, Service, create_app
from pyaisvc.serve.bounds import header_deadline, raise_open_files
from pyaisvc.serve.engine import QUEUE_MAX, Engine, EngineConfig
from pyaisvc.serve.metrics import Metrics
from pyaisvc.serve.security import Access, is_loopback, server_names

HOST = "127.0.0.1"  # the default: loopback, where no key is needed
KEY_ENV = "AISVC_API_KEY"
MAX_CONNECTIONS = 2048  # a room of 100 browsers holds about 600 (6 each)
IDLE_SECONDS = 5.0  # a connection without a request head this long is closed


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The serve flags: model, assets, port, host queue, the worker's batch, the kernel's
    scheduling policy and step budget, harts, RAM, QEMU, --verbose."""
    parser.add_argument("--model", choices=sorted(MODELS), default="smol",
                        help="which model (default smol)")
    parser.add_argument("--assets", type=Path, metavar="DIR", help="asset directory (default "
                        + " or ".join(str(m.assets) for m in MODELS.values()) + ")")
    _door_arguments(parser)
    parser.add_argument("--queue", type=int, default=QUEUE_MAX, metavar="N",
                        help="requests the host queue holds beyond what the gateway holds "
                        f"(its window per user, 16 in all); more get 429 (default {QUEUE_MAX})")
    _guest_arguments(parser)
    parser.add_argument("--verbose", "-v", action="store_true",
                        help="log every request and the guest's life")



def _door_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of who may connect and for how long: address, port, key, origins,
    connections and their time limits."""
    parser.add_argument("--host", default=HOST, metavar="ADDR",
                        help=f"the address to listen on (default {HOST}; 0.0.0.0: every "
                        "address, for a room); any but loopback needs --api-key")
    parser.add_argument("--port", type=int, default=8080, help="TCP port "
                        "(default 8080; 0: any free port, printed)")
    parser.add_argument("--api-key", default=os.environ.get(KEY_ENV), metavar="KEY",
                        help="every request but /health and the page's files must send "
                        f"'Authorization: Bearer KEY' (default: ${KEY_ENV}; none)")
    parser.add_argument("--cors-origin", action="append", default=[], metavar="ORIGIN",
                        help="let pages of ORIGIN (e.g. http://lab.example:3000) call the "
                        "API from a browser (repeatable; default: the server's own only)")
    parser.add_argument("--enable-burst", action="store_true",
                        help="serve /v1/aisvc/burst without an API key (on with a key)")
    parser.add_argument("--max-connections", type=int, default=MAX_CONNECTIONS, metavar="N",
                        help=f"open connections at most; more get 503 (default "
                        f"{MAX_CONNECTIONS})")
    parser.add_argument("--idle-timeout", type=float, default=IDLE_SECONDS, metavar="S",
                        help="close a connection that sends no request head for S seconds "
                        f"(default {IDLE_SECONDS:g})")
    parser.add_argument("--body-timeout", type=float, default=BODY_SECONDS, metavar="S",
                        help=f"408 for a request body not received in S seconds (default "
                        f"{BODY_SECONDS:g})")


def _guest_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of the guest behind the server: the worker's batch and cache, the
    kernel's policy and budgets, harts, RAM, QEMU and how the guest starts."""
    parser.add_argument("--batch", type=int, default=None, metavar="B",
                        help=f"the worker's places (1..{max_batch()}; boot argument "
                        f"aibatch=B; default: ai_daemon's {max_batch()}): fewer make the "
                        "kernel's queue visible at /")
    parser.add_argument("--prefix-cache", choices=("on", "off"), default="on",
                        help="the worker reuses cached prompt prefixes from its KV cache "
                        "(default on; off: boot argument aicache=0, docs/KVCACHE.md)")
    parser.add_argument("--sched", choices=POLICIES, default=None, metavar="NAME",
                        help="the kernel's scheduling policy: " + ", ".join(POLICIES) +
                        " (boot argument aisched=NAME; default fifo; docs/SCHEDULING.md)")
    parser.add_argument("--chunk", type=int, default=None, metavar="N",
                        help=f"positions per worker step (1..{max_chunk()}; boot argument "
                        f"aichunk=N; default {max_chunk()})")
    parser.add_argument("--prefill", type=int, default=None, metavar="N",
                        help=f"prompt positions of a step in which a request decodes "
                        f"(1..{max_chunk()}; boot argument aiprefill=N; default: no bound "
                        "but --chunk): lower keeps the time between tokens steady while "
                        "long prompts arrive (docs/SCHEDULING.md)")
    parser.add_argument("--cpus", type=int, default=qemu.default_cpus(),
                        help=f"guest harts (default: the host's cores, at most "
                        f"{qemu.MAX_DEFAULT_CPUS}; {qemu.default_cpus()} here)")
    parser.add_argument("--ram", help="guest RAM (default " + ", ".join(
        f"{m.ram} for {m.name}" for m in MODELS.values()) + ")")
    parser.add_argument("--qemu", default=qemu.default_qemu(),
                        help=f"the QEMU binary (default: ${qemu.QEMU_ENV} or {qemu.QEMU_NAME})")
    parser.add_argument("--cold-boot", action="store_true",
                        help="boot every guest; by default each starts as a clone of the "
                        "machine's template, saved once with the model loaded "
                        "(docs/COLDSTART.md)")

def boot_arguments(args: argparse.Namespace) -> str:
    """The guest's boot arguments for --batch, --prefix-cache, --sched, --chunk and
    --prefill (each checked; CommandError naming the flag), "" for none."""
    if args.batch is not None and not 1 <= args.batch <= max_batch():
        raise CommandError(f"serve: --batch {args.batch} must be 1..{max_batch()} "
                           "(ai_daemon's AI_BATCH)")
    for flag in ("chunk", "prefill"):
        n = getattr(args, flag)
        if n is not None and not 1 <= n <= max_chunk():
            raise CommandError(f"serve: --{flag} {n} must be 1..{max_chunk()} (AI_CHUNK_MAX)")
    words = [f"aibatch={args.batch}" if args.batch is not None else "",
             f"aisched={args.sched}" if args.sched else "",
             f"aichunk={args.chunk}" if args.chunk is not None else "",
             f"aiprefill={args.prefill}" if args.prefill is not None else "",
             "aicache=0" if args.prefix_cache == "off" else ""]
    return " ".join(w for w in words if w)


def run(args: argparse.Namespace) -> int:
    """pyaisvc serve: checks the flags and the port, builds what is missing, boots the guest
    and serves HTTP until Ctrl-C or SIGTERM; 0, or CommandError."""
    if not 0 <= args.port <= 65535:
        raise CommandError(f"serve: --port {args.port} must be 0..65535")
    if args.queue < 0:
        raise CommandError("serve: --queue must be 0 or more")
    cpus = args.cpus
    if cpus < 1:
        raise CommandError("serve: --cpus must be at least 1")
    append = boot_arguments(args)
    access = _access(args)
    _check_port(args.host, args.port)
    _open_files(args.max_connections)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="serve: %(message)s", stream=sys.stderr)
    spec = MODELS[args.model]
    try:
        print("serve: building what is missing ...", file=sys.stderr, flush=True)
        p = prepare(Path("."), spec, args.assets)
        tok = load_tokenizer(args.model)
        cfg = load_config((p.assets / "CFG.BIN").read_bytes())
        # ids must be below both the model's vocabulary and the tokenizer's
        limits = Limits(vocab=min(cfg.vocab_size, tok.vocab_size), seq_len=cfg.runtime_seq_len,
                        max_prompt=max_prompt())
        metrics = Metrics()
        engine = Engine(EngineConfig(p.kernel, p.image, args.ram or spec.ram, cpus, args.qemu,
                                     queue_max=args.queue, append=append,
                                     cold_boot=args.cold_boot), metrics)
        service = Service(args.model, engine, tok, limits, metrics, burst=args.enable_burst)
        app = create_app(service, access, args.body_timeout)
        signal.signal(signal.SIGTERM, signal.default_int_handler)  # kill PID: as Ctrl-C
        asyncio.run(_serve(engine, app, args, p.title))
    except AisvcError as e:
        raise CommandError(f"serve: {e}") from e
    except KeyboardInterrupt:
        print("serve: stopped", file=sys.stderr)
    return 0


def _access(args: argparse.Namespace) -> Access:
    """Who the server lets in, from --host, --api-key and --cors-origin; CommandError for
    a non-loopback address without a key, or a bad limit."""
    key = args.api_key or None
    if not is_loopback(args.host) and key is None:
        raise CommandError(f"serve: --host {args.host} opens the server to other machines; "
                           f"give it a key: --api-key KEY (or ${KEY_ENV}=KEY)")
    if args.max_connections < 16:
        raise CommandError("serve: --max-connections must be at least 16")
    if args.idle_timeout <= 0 or args.body_timeout <= 0:
        raise CommandError("serve: --idle-timeout and --body-timeout must be above 0")
    bad = [o for o in args.cors_origin if not o.startswith(("http://", "https://"))
           or o.count("/") != 2]
    if bad:
        raise CommandError(f"serve: --cors-origin {bad[0]!r} is not an origin; write it as "
                           "scheme://host[:port], e.g. http://lab.example:3000")
    return Access(key=key, hosts=server_names(args.host), origins=frozenset(args.cors_origin))


def _open_files(connections: int) -> None:
    """Raises the open-file limit to fit the connections; says so when it cannot."""
    soft, fits = raise_open_files(connections)
    if fits < connections:
        print(f"serve: the open-file limit is {soft} (its hard limit): about {fits} "
              f"connections fit, not {connections}; raise it (ulimit -Hn) or lower "
              "--max-connections", file=sys.stderr)


def _check_port(host: str, port: int) -> None:
    """CommandError now, before the guest boots, when the address cannot be had."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            raise CommandError(f"serve: cannot listen on {host}:{port} ({e.strerror}); "
                               "choose another --port or --host") from e


async def _serve(engine: Engine, app, args: argparse.Namespace, title: str) -> None:
    """Starts the guest (engine.start), then serves app on --host:--port until the server
    stops; QEMU is stopped however it ends."""
    import uvicorn

    cpus = args.cpus
    how = "booting" if args.cold_boot else "starting (from its template)"
    print(f"serve: {how} the guest ({cpus} hart(s)) ...", file=sys.stderr, flush=True)
    try:
        await engine.start()
        ready = engine.ready
        assert ready is not None
        print(f"serve: {title} in the guest (QEMU pid {engine.qemu_pid}, {cpus} hart(s)); "
              f"gateway window {ready.window} per user, seq_len {ready.seq_len}",
              file=sys.stderr, flush=True)
        config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning",
                                timeout_graceful_shutdown=3, lifespan="off",
                                http=header_deadline(args.idle_timeout),
                                timeout_keep_alive=max(1, round(args.idle_timeout)),
                                limit_concurrency=args.max_connections, backlog=1024)
        server = uvicorn.Server(config)
        serving = asyncio.create_task(server.serve())
        while not server.started and not serving.done():
            await asyncio.sleep(0.05)
        if server.started:
            bound = server.servers[0].sockets[0].getsockname()[1]
            where = f"[{args.host}]" if ":" in args.host else args.host
            keyed = "; API key required" if app.state.access.key else ""
            print(f"serve: listening on http://{where}:{bound} (OpenAI API at /v1{keyed}; "
                  "Ctrl-C stops)", file=sys.stderr, flush=True)
        await serving
    finally:
        engine.close()
        print("serve: the guest is stopped", file=sys.stderr, flush=True)
