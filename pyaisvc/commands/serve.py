"""`pyaisvc serve --model smol --port 8080`: the kernel AI service over HTTP.

    $ pyaisvc serve
    serve: SmolLM2-135M-Instruct in the guest (QEMU pid 4242, 1 hart(s)); gateway window 8
    serve: listening on http://127.0.0.1:8080 (OpenAI API at /v1; Ctrl-C stops)

Builds what is missing, boots the guest with the gateway port (a virtio
console on a Unix socket), waits for the worker and the gateway, and serves
OpenAI's /v1/completions and /v1/chat/completions, /v1/models, /health,
/metrics, /tokenize and /detokenize, and the kernel's table live (the page
at /, /v1/aisvc/table and its stream) on 127.0.0.1 only (pyaisvc/serve/).
A guest that dies is replaced by a fresh one; Ctrl-C (or SIGTERM) stops the
server and QEMU.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import socket
import sys
from pathlib import Path

from pyaisvc import qemu
from pyaisvc.assets import load_config
from pyaisvc.errors import AisvcError, CommandError
from pyaisvc.llmguest import MODELS, POLICIES, max_batch, max_chunk, max_prompt, prepare
from pyaisvc.serve.app import Limits, Service, create_app
from pyaisvc.serve.engine import QUEUE_MAX, Engine, EngineConfig
from pyaisvc.serve.metrics import Metrics
from pyaisvc.tokenizer import load_tokenizer

HOST = "127.0.0.1"  # loopback only: the service has no authentication


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The serve flags: model, assets, port, host queue, the worker's batch, the kernel's
    scheduling policy and step budget, harts, RAM, QEMU, --verbose."""
    parser.add_argument("--model", choices=sorted(MODELS), default="smol",
                        help="which model (default smol)")
    parser.add_argument("--assets", type=Path, metavar="DIR", help="asset directory (default "
                        + " or ".join(str(m.assets) for m in MODELS.values()) + ")")
    parser.add_argument("--port", type=int, default=8080, help="TCP port on 127.0.0.1 "
                        "(default 8080; 0: any free port, printed)")
    parser.add_argument("--queue", type=int, default=QUEUE_MAX, metavar="N",
                        help="requests the host queue holds beyond the gateway's window; "
                        f"more get 429 (default {QUEUE_MAX})")
    parser.add_argument("--batch", type=int, default=None, metavar="B",
                        help=f"the worker's places (1..{max_batch()}; boot argument "
                        f"aibatch=B; default: ai_daemon's {max_batch()}): fewer make the "
                        "kernel's queue visible at /")
    parser.add_argument("--sched", choices=POLICIES, default=None, metavar="NAME",
                        help="the kernel's scheduling policy: " + ", ".join(POLICIES) +
                        " (boot argument aisched=NAME; default fifo; docs/SCHEDULING.md)")
    parser.add_argument("--chunk", type=int, default=None, metavar="N",
                        help=f"positions per worker step (1..{max_chunk()}; boot argument "
                        f"aichunk=N; default {max_chunk()})")
    parser.add_argument("--cpus", type=int, default=qemu.default_cpus(),
                        help=f"guest harts (default: the host's cores, at most "
                        f"{qemu.MAX_DEFAULT_CPUS}; {qemu.default_cpus()} here)")
    parser.add_argument("--ram", help="guest RAM (default " + ", ".join(
        f"{m.ram} for {m.name}" for m in MODELS.values()) + ")")
    parser.add_argument("--qemu", default=qemu.default_qemu(),
                        help=f"the QEMU binary (default: ${qemu.QEMU_ENV} or {qemu.QEMU_NAME})")
    parser.add_argument("--verbose", "-v", action="store_true",
                        help="log every request and the guest's life")


def boot_arguments(args: argparse.Namespace) -> str:
    """The guest's boot arguments for --batch, --sched and --chunk (each checked;
    CommandError naming the flag), "" for none."""
    if args.batch is not None and not 1 <= args.batch <= max_batch():
        raise CommandError(f"serve: --batch {args.batch} must be 1..{max_batch()} "
                           "(ai_daemon's AI_BATCH)")
    if args.chunk is not None and not 1 <= args.chunk <= max_chunk():
        raise CommandError(f"serve: --chunk {args.chunk} must be 1..{max_chunk()} "
                           "(AI_CHUNK_MAX)")
    words = [f"aibatch={args.batch}" if args.batch is not None else "",
             f"aisched={args.sched}" if args.sched else "",
             f"aichunk={args.chunk}" if args.chunk is not None else ""]
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
    _check_port(args.port)
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
                                     queue_max=args.queue, append=append), metrics)
        app = create_app(Service(args.model, engine, tok, limits, metrics))
        signal.signal(signal.SIGTERM, signal.default_int_handler)  # kill PID: as Ctrl-C
        asyncio.run(_serve(engine, app, args.port, p.title, cpus))
    except AisvcError as e:
        raise CommandError(f"serve: {e}") from e
    except KeyboardInterrupt:
        print("serve: stopped", file=sys.stderr)
    return 0


def _check_port(port: int) -> None:
    """CommandError now, before the guest boots, when the port cannot be had."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError as e:
            raise CommandError(f"serve: cannot listen on {HOST}:{port} ({e.strerror}); "
                               "choose another --port") from e


async def _serve(engine: Engine, app, port: int, title: str, cpus: int) -> None:
    """Boots the guest (engine.start), then serves app on 127.0.0.1:port until the server
    stops; QEMU is stopped however it ends."""
    import uvicorn

    print(f"serve: booting the guest ({cpus} hart(s)) ...", file=sys.stderr, flush=True)
    try:
        await engine.start()
        ready = engine.ready
        assert ready is not None
        print(f"serve: {title} in the guest (QEMU pid {engine.qemu_pid}, {cpus} hart(s)); "
              f"gateway window {ready.window}, seq_len {ready.seq_len}",
              file=sys.stderr, flush=True)
        config = uvicorn.Config(app, host=HOST, port=port, log_level="warning",
                                timeout_graceful_shutdown=3, lifespan="off")
        server = uvicorn.Server(config)
        serving = asyncio.create_task(server.serve())
        while not server.started and not serving.done():
            await asyncio.sleep(0.05)
        if server.started:
            bound = server.servers[0].sockets[0].getsockname()[1]
            print(f"serve: listening on http://{HOST}:{bound} (OpenAI API at /v1; "
                  "Ctrl-C stops)", file=sys.stderr, flush=True)
        await serving
    finally:
        engine.close()
        print("serve: the guest is stopped", file=sys.stderr, flush=True)
