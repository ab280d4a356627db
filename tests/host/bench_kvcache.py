"""The KV cache's prefix reuse through `pyaisvc serve`: printed figures, no asserts.

    .venv/bin/python tests/host/bench_kvcache.py [--cpus N] [--gen G] [--turns T] [--turns8 T8]

Boots the guest behind an in-process `pyaisvc serve` (the same Engine and app as the
CLI, on a free loopback port), once per setting, and talks to it with the official
`openai` client, streaming, greedy:

- one chat of T turns (default 6), each turn resending the whole history (system line,
  every earlier question and reply): the client's TTFT per turn, with the worker's
  prefix reuse on (the default) and off (boot argument aicache=0);
- 8 such chats of T8 turns (default 4) interleaved turn by turn, with a pool that
  holds the history of 4
  (boot argument aikv=N, N from the first run's longest prompt): the pool's hit ratio
  (prompt positions taken from the cache, from `ai top`) and TTFT p50/p99;
- bytes per cached position for each model (CFG.BIN) and the pool's default capacity
  (the worker's `ai top` line of the first boot).

The goal for reading the figures (docs/KVCACHE.md): turn 6 at least 4x faster with
the cache, and within 1.5x of turn 1.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import socket
import statistics
import struct
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import uvicorn  # noqa: E402
from openai import OpenAI  # noqa: E402

from pyaisvc.guest.llmguest import MODELS, max_prompt, prepare, seq_len  # noqa: E402
from pyaisvc.guest.qemu import default_cpus, default_qemu  # noqa: E402
from pyaisvc.model.assets import load_config  # noqa: E402
from pyaisvc.model.tokenizer import load_tokenizer  # noqa: E402
from pyaisvc.serve.app import Limits, Service, create_app  # noqa: E402
from pyaisvc.serve.engine import Engine, EngineConfig  # noqa: E402
from pyaisvc.serve.metrics import Metrics  # noqa: E402

SYSTEM = "You are a helpful assistant. Answer in one or two short sentences."
QUESTIONS = ["What is the capital of France?", "What river flows through it?",
             "Name a famous museum there.", "What is its most famous painting?",
             "Who painted it?", "In which century did he live?"]
KV_LINE = re.compile(r"kv cache: (\d+) blocks of (\d+) positions: (\d+) used, (\d+) cached, "
                     r"(\d+) free\s+prefix reuse (\w+): (\d+) of (\d+) prompt positions cached, "
                     r"(\d+) evictions")


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


def turn(client: OpenAI, history: list[dict], gen: int) -> tuple[float, str, int, int]:
    """(client TTFT s, reply, prompt tokens, of those cached) of one streamed chat turn."""
    t0 = time.monotonic()
    ttft, parts, prompt, cached = 0.0, [], 0, 0
    stream = client.chat.completions.create(model="smol", messages=history, max_tokens=gen,
                                            temperature=0, stream=True,
                                            stream_options={"include_usage": True})
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            ttft = ttft or time.monotonic() - t0
            parts.append(chunk.choices[0].delta.content)
        if chunk.usage:
            prompt = chunk.usage.prompt_tokens
            details = chunk.usage.prompt_tokens_details
            cached = details.cached_tokens if details else 0
    return ttft, "".join(parts), prompt, cached


def chats(client: OpenAI, n: int, turns: int, gen: int
          ) -> tuple[list[list[float]], list[tuple[int, int]]]:
    """n chats, interleaved turn by turn: (TTFTs per chat, chat 0's (prompt, cached) per
    turn)."""
    hist = [[{"role": "system", "content": SYSTEM}] for _ in range(n)]
    ttfts: list[list[float]] = [[] for _ in range(n)]
    sizes = []
    for t in range(turns):
        for c in range(n):
            q = QUESTIONS[t % len(QUESTIONS)] if c == 0 else f"(chat {c}) " + QUESTIONS[t]
            hist[c].append({"role": "user", "content": q})
            ttft, reply, prompt, cached = turn(client, hist[c], gen)
            hist[c].append({"role": "assistant", "content": reply})
            ttfts[c].append(ttft)
            if c == 0:
                sizes.append((prompt, cached))
    return ttfts, sizes


async def with_server(append: str, cpus: int, work):
    """Boot a guest with boot arguments `append` behind serve, run work(client, engine)
    in a thread, and return what it returns."""
    spec = MODELS["smol"]
    p = prepare(ROOT, spec)
    tok = load_tokenizer("smol")
    metrics = Metrics()
    engine = Engine(EngineConfig(p.kernel, p.image, spec.ram, cpus, default_qemu(),
                                 append=append), metrics)
    app = create_app(Service("smol", engine, tok, Limits(tok.vocab_size, seq_len(p.assets),
                                                         max_prompt()), metrics))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    await engine.start()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="off"))
    serving = asyncio.create_task(server.serve())
    try:
        while not server.started:
            await asyncio.sleep(0.05)
        client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", timeout=900)
        return await asyncio.to_thread(work, client, engine)
    finally:
        server.should_exit = True
        await serving
        engine.close()


def kv_line(engine: Engine) -> tuple[int, ...]:
    m = KV_LINE.search(engine.run_at_console("ai top -n 1", 60))
    if not m:
        return ()
    return tuple(int(v) if v.isdigit() else int(v == "on") for v in m.groups())


def bytes_per_position(model: str) -> int:
    """docs/KVCACHE.md's formula over the model's CFG.BIN and LTY.BIN (kind 0: full)."""
    d = MODELS[model].assets
    cfg = load_config((d / "CFG.BIN").read_bytes())
    lty = d / "LTY.BIN"
    kinds = (struct.unpack(f"<{cfg.n_layers}I", lty.read_bytes()[4:4 + 4 * cfg.n_layers])
             if lty.exists() else [0] * cfg.n_layers)
    kvd = cfg.n_kv_heads * cfg.head_dim
    return 2 * (kvd + 4 * kvd // 32 + 8 * cfg.n_kv_heads) * sum(1 for k in kinds if k == 0)


async def main(args: argparse.Namespace) -> None:
    one = {}
    for mode, append in (("on", ""), ("off", "aicache=0")):
        def work(client, engine):
            turn(client, [{"role": "user", "content": "Hello"}], 2)  # warm-up
            ttfts, sizes = chats(client, 1, args.turns, args.gen)
            return ttfts[0], sizes, kv_line(engine)
        one[mode] = await with_server(append, args.cpus, work)
        print(f"chat, prefix cache {mode}: TTFT ms per turn "
              + " ".join(f"{t * 1e3:.0f}" for t in one[mode][0]), flush=True)
    print(f"\n{'turn':>4} {'prompt':>7} {'cached':>7} {'TTFT on ms':>11} {'TTFT off ms':>12} "
          f"{'off/on':>7}")
    for i, (a, b) in enumerate(zip(one["on"][0], one["off"][0], strict=True)):
        prompt, cached = one["on"][1][i]
        print(f"{i + 1:>4} {prompt:>7} {cached:>7} {a * 1e3:>11.0f} {b * 1e3:>12.0f} "
              f"{b / a:>7.2f}")
    on = one["on"][0]
    print(f"turn {args.turns} / turn 1 with the cache: x{on[-1] / on[0]:.2f}; "
          f"without / with at turn {args.turns}: x{one['off'][0][-1] / on[-1]:.2f}")
    kv = one["on"][2]
    if kv:
        print(f"pool default: {kv[0]} blocks of {kv[1]} positions = {kv[0] * kv[1]} positions")
    # a chat of the 8 asks "(chat c) " before each question: about 5 ids more per turn
    history = one["on"][1][args.turns8 - 1][0] + 5 * args.turns8 + args.gen
    blocks = max(16, 4 * -(-history // 16))
    print(f"\n8 chats interleaved, {args.turns8} turns each, pool aikv={blocks} "
          f"(4 histories of up to {history} positions)", flush=True)
    for mode, append in (("on", f"aikv={blocks}"), ("off", f"aikv={blocks} aicache=0")):
        def work8(client, engine):
            before = kv_line(engine)
            ttfts, _ = chats(client, 8, args.turns8, args.gen)
            return [t for c in ttfts for t in c], before, kv_line(engine)
        flat, before, after = await with_server(append, args.cpus, work8)
        ratio = ((after[6] - before[6]) / max(1, after[7] - before[7])) if after else 0.0
        print(f"  cache {mode}: hit ratio {ratio:.2f}, TTFT p50 {pct(flat, 50) * 1e3:.0f} ms, "
              f"p99 {pct(flat, 99) * 1e3:.0f} ms, mean {statistics.mean(flat) * 1e3:.0f} ms; "
              f"evictions {after[8] if after else '?'}", flush=True)
    print("\nbytes per cached position: "
          + ", ".join(f"{m} {bytes_per_position(m)}" for m in MODELS if MODELS[m].assets.exists()))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpus", type=int, default=default_cpus())
    ap.add_argument("--gen", type=int, default=24)
    ap.add_argument("--turns", type=int, default=6)
    ap.add_argument("--turns8", type=int, default=4, help="turns of each of the 8 chats")
    asyncio.run(main(ap.parse_args()))
