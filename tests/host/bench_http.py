"""HTTP serving against the in-guest figure, in one guest: printed figures, no asserts.

    .venv/bin/python tests/host/bench_http.py [--cpus N] [--rounds R] [--gen G]

Boots the guest once behind an in-process `pyaisvc serve` (the same Engine and
app as the CLI, on a free loopback port), then per round:

- HTTP: 8 concurrent streaming clients (httpx), each "The capital of France
  is" (ids 504 3575 282 4649 314), G ids, greedy; TTFT is the client's clock
  from sending the request to the first chunk with text; aggregate tokens/s
  is all completion tokens over the span from the first send to the last end;
- in the guest: `aistress --bench G 504 3575 282 4649 314` at the console of
  the same guest (8 copies submitted at once by one process; TTFT from
  ai_submit, tokens/s over its first-submit-to-last-finish span);
- one request alone over HTTP: the client's TTFT against the kernel's own
  ttft_us for that request (the reply's `timings`), so the difference is what
  the HTTP path adds (host queue, frames, virtio port, gateway, SSE).

The issue's goals, for reading the figures: HTTP adds at most 10% to TTFT,
aggregate tokens/s at least 90% of the in-guest figure, and a single
request's TTFT within 50 ms of the kernel's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import uvicorn  # noqa: E402

from pyaisvc.bench.burst import parse_burst  # noqa: E402
from pyaisvc.guest.llmguest import MODELS, max_prompt, prepare, seq_len  # noqa: E402
from pyaisvc.guest.qemu import default_cpus, default_qemu  # noqa: E402
from pyaisvc.model.tokenizer import load_tokenizer  # noqa: E402
from pyaisvc.serve.app import Limits, Service, create_app  # noqa: E402
from pyaisvc.serve.engine import Engine, EngineConfig  # noqa: E402
from pyaisvc.serve.metrics import Metrics  # noqa: E402

PROMPT = [504, 3575, 282, 4649, 314]
CLIENTS = 8


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


async def one(client: httpx.AsyncClient, url: str, gen: int) -> tuple[float, int, dict, float]:
    """(client TTFT s, completion tokens, kernel timings, end time) of one streamed request."""
    body = {"model": "smol", "prompt": PROMPT, "max_tokens": gen, "temperature": 0,
            "stream": True, "stream_options": {"include_usage": True}}
    t0 = time.monotonic()
    ttft, tokens, timings = 0.0, 0, {}
    async with client.stream("POST", url + "/v1/completions", json=body) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line[6:])
            if chunk["choices"] and chunk["choices"][0]["text"] and not ttft:
                ttft = time.monotonic() - t0
            if chunk.get("timings"):
                timings = chunk["timings"]
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
    return ttft, tokens, timings, time.monotonic()


async def http_burst(url: str, gen: int) -> tuple[list[float], float, list[float]]:
    """(client TTFTs in s, aggregate tokens/s, the kernel's TTFTs in s) of CLIENTS
    concurrent requests."""
    async with httpx.AsyncClient(timeout=600) as client:
        t0 = time.monotonic()
        res = await asyncio.gather(*(one(client, url, gen) for _ in range(CLIENTS)))
    span = max(r[3] for r in res) - t0
    return ([r[0] for r in res], sum(r[1] for r in res) / span,
            [r[2]["ttft_us"] / 1e6 for r in res])


async def main(args: argparse.Namespace) -> None:
    spec = MODELS["smol"]
    p = prepare(ROOT, spec)
    tok = load_tokenizer("smol")
    metrics = Metrics()
    engine = Engine(EngineConfig(p.kernel, p.image, spec.ram, args.cpus, default_qemu()),
                    metrics)
    app = create_app(Service("smol", engine, tok, Limits(tok.vocab_size, seq_len(p.assets),
                                                         max_prompt()), metrics))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    await engine.start()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="off"))
    serving = asyncio.create_task(server.serve())
    try:
        while not server.started:
            await asyncio.sleep(0.05)
        await one(httpx.AsyncClient(timeout=600), url, 4)  # warm-up
        http_ttft, http_tps, guest_ttft, guest_tps, http_kernel = [], [], [], [], []
        for r in range(args.rounds):
            ttfts, tps, kernel_ttfts = await http_burst(url, args.gen)
            http_ttft += ttfts
            http_kernel += kernel_ttfts
            http_tps.append(tps)
            out = await asyncio.to_thread(
                engine.run_at_console, f"aistress --bench {args.gen} "
                + " ".join(map(str, PROMPT)), 600)
            burst = parse_burst(out, args.gen, 0, args.cpus)
            guest_ttft += [q.ttft_us / 1e6 for q in burst.requests]
            guest_tps.append(CLIENTS * args.gen / (burst.span_ms / 1e3))
            print(f"round {r + 1}: HTTP TTFT p50 {pct(ttfts, 50) * 1e3:.0f} ms, {tps:.1f} "
                  f"tok/s; aistress TTFT p50 {pct(guest_ttft[-CLIENTS:], 50) * 1e3:.0f} ms, "
                  f"{guest_tps[-1]:.1f} tok/s", flush=True)
        single, kernel = [], []
        async with httpx.AsyncClient(timeout=600) as client:
            for _ in range(args.rounds * 3):
                ttft, _, timings, _ = await one(client, url, 4)
                single.append(ttft)
                kernel.append(timings["ttft_us"] / 1e6)
    finally:
        server.should_exit = True
        await serving
        engine.close()

    def row(name: str, ttfts: list[float], tps: list[float]) -> str:
        return (f"{name:<28} {pct(ttfts, 50) * 1e3:>9.0f} {pct(ttfts, 99) * 1e3:>9.0f} "
                f"{statistics.median(tps):>9.1f}")

    print(f"\n{CLIENTS} clients x {args.gen} ids, {args.cpus} hart(s), {args.rounds} round(s); "
          "TTFT in ms, aggregate tokens/s (median round)")
    print(f"{'':<28} {'TTFT p50':>9} {'TTFT p99':>9} {'tok/s':>9}")
    print(row("HTTP (pyaisvc serve)", http_ttft, http_tps))
    print(row("  the same, kernel's TTFT", http_kernel, http_tps))
    print(row(f"aistress --bench {args.gen}", guest_ttft, guest_tps))
    print(f"HTTP / in-guest: TTFT p50 x{pct(http_ttft, 50) / pct(guest_ttft, 50):.2f}, "
          f"tokens/s x{statistics.median(http_tps) / statistics.median(guest_tps):.2f}")
    diff = statistics.median(s - k for s, k in zip(single, kernel, strict=True))
    print(f"one request alone: HTTP TTFT p50 {pct(single, 50) * 1e3:.0f} ms, the kernel's "
          f"ttft_us p50 {pct(kernel, 50) * 1e3:.0f} ms: HTTP adds {diff * 1e3:.1f} ms (median)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpus", type=int, default=default_cpus())
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--gen", type=int, default=32)
    asyncio.run(main(ap.parse_args()))
