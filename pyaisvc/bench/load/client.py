"""Replaying a workload over HTTP: streaming clients of an OpenAI-compatible server.

Each request is one streaming POST /v1/completions whose prompt is the
request's token ids (so its length in tokens is exact), greedy
(temperature 0), ``max_tokens`` its drawn output length, ``user`` its
tenant and, when the server's schema has the field, ``priority``. The
client notes the time it sends, the time of every streamed chunk that
carries text, the end, the usage (completion tokens) and the kernel's own
times (``timings``: queued, TTFT and total in microseconds from ai_submit).
A chunk is one token, or several when their text only decodes whole
together; the time between chunks is the time between tokens as a user
sees it.

Open loop: every request is sent at its arrival time, however many are
outstanding. Closed loop: each user sends its next request when its
previous reply has ended. Times are seconds from the run's start
(time.monotonic).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from pyaisvc.bench.load.workload import LoadPlan, Request, user_requests
from pyaisvc.bench.matrix import BenchError

TIMEOUT = httpx.Timeout(connect=30.0, read=1800.0, write=30.0, pool=None)  # a long queue


@dataclass
class Outcome:
    """What the client saw of one request; times in seconds from the run's start."""

    policy: str
    index: int
    cls: str
    tenant: str
    priority: int
    prompt_tokens: int
    max_tokens: int
    user: int | None
    arrival: float | None
    sent: float = 0.0
    first: float | None = None  # the first chunk with text
    end: float | None = None
    chunks: list[float] = field(default_factory=list)  # each chunk with text
    completion_tokens: int = 0
    text: str = ""
    finish: str = ""
    status: str = "ok"  # ok, rejected (429), or error: MESSAGE
    kernel_queued_us: int | None = None
    kernel_ttft_us: int | None = None
    kernel_total_us: int | None = None


Done = Callable[[Outcome], None]  # called as each request ends


def _body(req: Request, model: str, priority: bool) -> dict[str, object]:
    """The streaming completion request's body for req (its priority only for the priority
    policy)."""
    body: dict[str, object] = {"model": model, "prompt": list(req.prompt),
                               "max_tokens": req.max_tokens, "temperature": 0, "stream": True,
                               "stream_options": {"include_usage": True}, "user": req.tenant}
    if priority:
        body["priority"] = req.priority
    return body


def _take(out: Outcome, chunk: dict, now: float) -> None:
    """Notes one SSE chunk of a streamed completion."""
    if "error" in chunk:
        out.status = f"error: {chunk['error'].get('message', chunk['error'])}"
        return
    for choice in chunk.get("choices") or []:
        if choice.get("text"):
            out.text += choice["text"]
            out.chunks.append(now)
            if out.first is None:
                out.first = now
        if choice.get("finish_reason"):
            out.finish = choice["finish_reason"]
    if (usage := chunk.get("usage")) is not None:
        out.completion_tokens = usage["completion_tokens"]
    if (t := chunk.get("timings")) is not None:
        out.kernel_queued_us, out.kernel_ttft_us = t["queued_us"], t["ttft_us"]
        out.kernel_total_us = t["total_us"]


async def send(client: httpx.AsyncClient, req: Request, out: Outcome, model: str,
               priority: bool, t0: float) -> None:
    """Sends req and fills out as its stream comes."""
    out.sent = time.monotonic() - t0
    try:
        async with client.stream("POST", "/v1/completions",
                                 json=_body(req, model, priority)) as r:
            if r.status_code != 200:
                text = (await r.aread()).decode(errors="replace")
                out.status = "rejected" if r.status_code == 429 else \
                    f"error: HTTP {r.status_code}: {text[:200]}"
                return
            async for line in r.aiter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    _take(out, json.loads(line[6:]), time.monotonic() - t0)
    except httpx.HTTPError as e:
        out.status = f"error: {type(e).__name__}: {e}"
    finally:
        out.end = time.monotonic() - t0


def _outcome(policy: str, req: Request) -> Outcome:
    """An empty Outcome for req under policy, filled in as it is sent and answered."""
    return Outcome(policy, req.index, req.cls, req.tenant, req.priority, len(req.prompt),
                   req.max_tokens, req.user, req.arrival)


async def run_open(url: str, model: str, policy: str, requests: list[Request],
                   priority: bool, done: Done) -> list[Outcome]:
    """Sends every request at its arrival time; their outcomes in the requests' order."""
    outs = [_outcome(policy, r) for r in requests]
    async with httpx.AsyncClient(base_url=url, timeout=TIMEOUT,
                                 limits=httpx.Limits(max_connections=None)) as client:
        t0 = time.monotonic()

        async def one(req: Request, out: Outcome) -> None:
            """Sends req at its arrival time and reports its outcome to done."""
            await asyncio.sleep(max(0.0, t0 + (req.arrival or 0.0) - time.monotonic()))
            await send(client, req, out, model, priority, t0)
            done(out)

        await asyncio.gather(*(one(r, o) for r, o in zip(requests, outs, strict=True)))
    return outs


async def run_closed(url: str, model: str, policy: str, plan: LoadPlan, text: list[int],
                     seq_len: int, priority: bool, done: Done) -> list[Outcome]:
    """plan.users users, each sending its next request when its reply ends, until
    plan.requests requests were sent in all or plan.duration seconds passed; the
    outcomes by user, then in each user's order."""
    users = plan.users or 1
    outs: list[Outcome] = []
    sent = 0
    async with httpx.AsyncClient(base_url=url, timeout=TIMEOUT,
                                 limits=httpx.Limits(max_connections=None)) as client:
        t0 = time.monotonic()

        async def user(u: int) -> None:
            """User u's loop: sends its next request when the last is answered, until the plan's
            count or duration is reached."""
            nonlocal sent
            for req in user_requests(plan, u, text, seq_len):
                if plan.requests is not None and sent >= plan.requests:
                    return
                if plan.duration is not None and time.monotonic() - t0 >= plan.duration:
                    return
                sent += 1
                out = _outcome(policy, req)
                outs.append(out)
                await send(client, req, out, model, priority, t0)
                done(out)

        await asyncio.gather(*(user(u) for u in range(users)))
    return sorted(outs, key=lambda o: (o.user, o.index))


def server_model(url: str) -> tuple[str, bool]:
    """The model a running server serves and whether its completions take `priority`;
    BenchError when it does not answer as an OpenAI-compatible server."""
    try:
        models = httpx.get(url + "/v1/models", timeout=30).json()["data"]
        schema = httpx.get(url + "/openapi.json", timeout=30).json()
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as e:
        raise BenchError(f"{url} does not answer as an OpenAI-compatible server ({e}); start "
                         "`pyaisvc serve` there or leave out --url") from e
    bodies = [s.get("properties", {}) for s in
              schema.get("components", {}).get("schemas", {}).values()]
    completion = [p for p in bodies if "prompt" in p and "max_tokens" in p]
    return models[0]["id"], any("priority" in p for p in completion)
