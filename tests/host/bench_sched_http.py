"""The scheduling cases of docs/SCHEDULING.md through `pyaisvc serve`: users as tenants.

    .venv/bin/python tests/host/bench_sched_http.py [--cpus 2] [--chunk 8]
        [--policies fifo,priority,shortest,fair]

tests/host/bench_sched.py measures the policies in the guest (aibench's
processes as tenants); this measures them for HTTP users: one `pyaisvc serve
--sched NAME` per policy (SmolLM2, greedy, streaming clients; times from the
client's send to the first streamed chunk). Prints, per policy:

- alone: a short request (5 prompt ids, 8 new) alone, its TTFT;
- second user: user A sends 12 requests of 48 new ids (8 reach the kernel, 4
  wait on the host); once A's 8 are in the kernel's table, user B sends the
  short request: its TTFT over alone;
- behind long: a 200-id prompt (8 new), then once it runs, one short request
  (and, again, three at once): the short ones' TTFT over alone;
- priority 9: A's 12 requests, then A's short request at priority 9: its TTFT
  over alone;
- decode gap: a request streaming 64 ids while a 200-id prompt arrives: its
  largest gap between two chunks over their median.

One run of each; figures, not a test (the host's load moves them 2-5x).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pyaisvc.bench.load.server import Server, serve_options  # noqa: E402

SHORT = [504, 3575, 282, 4649, 314]  # "The capital of France is"
LONG = [(i * 37) % 40000 + 100 for i in range(200)]  # 200 prompt ids


async def stream(client: httpx.AsyncClient, prompt: list[int], n: int, user: str = "",
                 priority: int = 0) -> list[float]:
    """Sends one streamed completion; the times (s from its send) its chunks came."""
    body = {"model": "smol", "prompt": prompt, "max_tokens": n, "temperature": 0,
            "stream": True, "priority": priority}
    if user:
        body["user"] = user
    t0, times = time.monotonic(), []
    async with client.stream("POST", "/v1/completions", json=body) as r:
        if r.status_code != 200:
            raise SystemExit(f"bench_sched_http: {r.status_code} {await r.aread()!r}")
        async for line in r.aiter_lines():
            if line.startswith("data: {") and '"text":""' not in line.replace(" ", ""):
                times.append(time.monotonic() - t0)
    return times


async def until(client: httpx.AsyncClient, cond) -> None:
    """Polls the kernel's table (/v1/aisvc/table) until cond(snapshot) holds."""
    while not cond((await client.get("/v1/aisvc/table")).json()):
        await asyncio.sleep(0.05)


def holding(user: str, n: int):
    """A condition on a table snapshot: user holds n slots, queued or running."""
    return lambda s: sum(x["tenant_name"] == user and x["state"] in ("QUEUED", "RUNNING")
                         for x in s["slots"]) >= n


def running_long(s: dict) -> bool:
    return any(x["state"] == "RUNNING" and x["prompt"] == len(LONG) for x in s["slots"])


async def behind_backlog(client: httpx.AsyncClient, user: str, priority: int) -> float:
    """A's 12 requests of 48 ids; once 8 are in the table, the short one (user, priority):
    its TTFT."""
    backlog = [asyncio.create_task(stream(client, SHORT, 48, "A")) for _ in range(12)]
    await until(client, holding("A", 8))
    ttft = (await stream(client, SHORT, 8, user, priority))[0]
    await asyncio.gather(*backlog)
    return ttft


async def behind_long(client: httpx.AsyncClient, k: int) -> float:
    """The 200-id prompt, then once it runs k short requests at once: their mean TTFT."""
    long = asyncio.create_task(stream(client, LONG, 8, "L"))
    await until(client, running_long)
    got = await asyncio.gather(*(stream(client, SHORT, 8, f"S{i}") for i in range(k)))
    await long
    return statistics.mean(t[0] for t in got)


async def decode_gap(client: httpx.AsyncClient) -> float:
    """A request streaming 64 ids; a 200-id prompt arrives after its 8th: the largest gap
    between its chunks over their median."""
    decode = asyncio.create_task(stream(client, SHORT, 64, "D"))
    await until(client, lambda s: any(x["tokens"] >= 8 for x in s["slots"]))
    await stream(client, LONG, 8, "L")
    times = await decode
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    return max(gaps) / statistics.median(gaps)


async def cases(url: str) -> dict[str, float]:
    """Every case against the server at url, in turn."""
    async with httpx.AsyncClient(base_url=url, timeout=1800) as client:
        await stream(client, SHORT, 8, "W")  # a warm-up: the worker measures its threads
        alone = (await stream(client, SHORT, 8, "B"))[0]
        return {"alone": alone, "tenant": await behind_backlog(client, "B", 0),
                "behind1": await behind_long(client, 1), "behind3": await behind_long(client, 3),
                "priority": await behind_backlog(client, "A", 9),
                "gap": await decode_gap(client)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--chunk", type=int, default=8)
    ap.add_argument("--policies", default="fifo,priority,shortest,fair")
    args = ap.parse_args()
    print(f"bench_sched_http: smol, {args.cpus} harts, chunk {args.chunk}, through HTTP")
    print(f"{'policy':10} {'alone ms':>9} {'B x alone':>10} {'behind x1':>10} "
          f"{'behind x3':>10} {'prio9 x':>8} {'gap max/med':>12}")
    for policy in args.policies.split(","):
        log = Path(tempfile.mkdtemp(prefix="bench-sched-http-")) / "serve.log"
        with Server(ROOT, serve_options(ROOT, policy, args.chunk), args.cpus, None, log) as s:
            s.wait_healthy()
            r = asyncio.run(cases(s.url))
        a = r["alone"]
        print(f"{policy:10} {a * 1000:9.0f} {r['tenant'] / a:10.1f} {r['behind1'] / a:10.1f} "
              f"{r['behind3'] / a:10.1f} {r['priority'] / a:8.1f} {r['gap']:12.2f}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
