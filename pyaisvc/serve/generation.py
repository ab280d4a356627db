"""One generation request from the checked body to the reply: whole or streamed.

``generate(service, req, request)`` plans the request (``start``:
``Service.plan``, in a worker thread, since tokenizing a long prompt must
not hold up the event loop), hands it to the engine's host queue
(``hand_over``: its S frame built once, ``frames.request``) and answers:
the whole reply as JSON, or with ``stream: true`` Server-Sent Events (``data: {chunk}`` ... ``data:
[DONE]``), each in OpenAI's shape for its endpoint (``COMPLETION`` or
``CHAT``). Every outcome is counted in the metrics by endpoint.

Stop strings are looked for on the host in the decoded text; the first one
ends the reply (the guest's request is cancelled) and is not part of the
text. The model's end-of-text and end-of-turn ids end every reply too
(``finish_reason`` ``stop``). A client that goes away cancels its request
in the guest, streamed or not.

Log-probabilities (``logprobs``) come from the guest with each id (an L frame
before its T frame, in millionths); each text piece carries the tokens whose
text it completes (``Run.take_logprobs``), so a stream's logprobs stay in step
with its text. End-of-text and end-of-turn ids are not text and get none.
``echo`` (completions) puts the prompt's text before the reply's.
"""

from __future__ import annotations

import asyncio
import collections
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
from fastapi import Request
from fastapi.responses import JSONResponse, StreamingResponse

from pyaisvc.model.chattemplate import stop_ids
from pyaisvc.serve import errors, frames
from pyaisvc.serve.errors import ApiError
from pyaisvc.serve.gateway import GuestDown, RequestFailed, Submitted
from pyaisvc.serve.hostqueue import QueueFull
from pyaisvc.serve.metrics import Metrics
from pyaisvc.serve.schemas import ChatRequest, CompletionRequest
from pyaisvc.serve.service import MICRO, Plan, Service
from pyaisvc.serve.shapes import CHAT, COMPLETION, Logprobs, Shape, Token
from pyaisvc.serve.text import TextStream

DISCONNECT_POLL = 0.25  # seconds between looks at a waiting non-streaming client
CLIENT_GONE = 499  # the status of a reply nobody reads


def end_ids(service: Service) -> list[int]:
    """The ids that end every request: end of text and end of turn."""
    return sorted(stop_ids(service.tok))


class Run:
    """One request's generation: its text pieces, then finish_reason and usage."""

    def __init__(self, service: Service, plan: Plan, sub: Submitted, t0: float) -> None:
        self.s, self.plan, self.sub, self.t0 = service, plan, sub, t0
        self.text = TextStream(service.tok, plan.stops, end_ids(service))
        self.finish = "length"
        self.first: float | None = None
        self.end: frames.End | None = None  # the guest's E frame, with the kernel's times
        self._stops = set(end_ids(service))
        self._records: collections.deque[frames.LogProbs] = collections.deque()
        self._pending: list[Token] = []  # tokens whose text no piece has carried yet
        self.tokens: Logprobs = None if plan.logprobs is None else []  # all of them
        self._offset = len(plan.echo)  # where the next token's text starts

    def take_logprobs(self) -> Logprobs:
        """The tokens whose text the pieces so far completed and no earlier call returned
        (None when the request asked for no log-probabilities)."""
        if self.tokens is None:
            return None
        out, self._pending = self._pending, []
        return out

    def _note(self, ids: tuple[int, ...]) -> None:
        """The log-probability records of ids (they came before them) as Tokens."""
        if self.tokens is None:
            return
        for i in ids:
            rec = self._records.popleft() if self._records else None
            if i in self._stops or rec is None or rec.id != i:
                continue
            text = self.s.tok.decode([i])
            top = tuple((self.s.tok.decode([t]), v / MICRO) for t, v in rec.top)
            tok = Token(text, rec.lp / MICRO, top, self._offset)
            self._offset += len(text)
            self._pending.append(tok)
            self.tokens.append(tok)

    @property
    def timings(self) -> dict[str, int] | None:
        """The kernel's times for the request (microseconds from ai_submit), as an extension
        field beside usage (llama.cpp's server has one too); None when it did not end."""
        e = self.end
        if e is None:
            return None
        return {"queued_us": e.queued_us, "ttft_us": e.ttft_us, "total_us": e.total_us}

    @property
    def usage(self) -> dict[str, object]:
        """OpenAI's usage: the prompt's ids and every id generated (stop ids included), and
        how many of the prompt's ids came from the worker's KV cache."""
        n, gen = len(self.plan.prompt), self.text.generated
        cached = self.end.cached if self.end else 0
        return {"prompt_tokens": n, "completion_tokens": gen, "total_tokens": n + gen,
                "prompt_tokens_details": {"cached_tokens": cached}}

    async def pieces(self) -> AsyncIterator[str]:
        """The reply's text as it comes; cancels the guest's request when the caller
        stops early (a stop string, a client gone) or anything fails."""
        m = self.s.metrics
        try:
            async for ev in self.sub.events():
                if isinstance(ev, frames.LogProbs):
                    self._records.append(ev)
                    continue
                if isinstance(ev, frames.End):
                    self.end = ev
                    if (rest := self.text.close()):
                        yield rest
                    if ev.finish == "stop":
                        self.finish = "stop"
                    break  # the guest ended the request (finish stop: at a stop id)
                if self.first is None:
                    self.first = time.monotonic()
                    m.ttft.observe(self.first - self.t0)
                    m.tenant_ttft.labels(self.plan.user).observe(self.first - self.t0)
                m.tokens.inc(len(ev.ids))
                self._note(ev.ids)
                m.tenant_tokens.labels(self.plan.user, "generated").inc(len(ev.ids))
                if (piece := self.text.push(ev.ids)):
                    yield piece
                if self.text.stopped_by == "string":
                    self.finish = "stop"
                    break  # the guest's request is cancelled below
        finally:
            self.sub.cancel()
        if self.first is not None and self.text.generated > 1:
            m.tpot.observe((time.monotonic() - self.first) / (self.text.generated - 1))


async def start(service: Service, req: CompletionRequest | ChatRequest) -> Run:
    """The request planned and submitted to the engine; ApiError (400/404, 429 when the
    host queue is full, 503 while the guest is down), counted in the metrics."""
    endpoint = "chat" if isinstance(req, ChatRequest) else "completions"
    t0 = time.monotonic()
    try:
        plan = await anyio.to_thread.run_sync(service.plan, req)
    except ApiError:
        service.metrics.requests.labels(endpoint, "bad_request").inc()
        raise
    return await hand_over(service, plan, t0)


async def hand_over(service: Service, plan: Plan, t0: float) -> Run:
    """The planned request handed to the engine (its host queue, then the guest); ApiError
    (429 when the host queue is full, 503 while the guest is down), counted in the
    metrics."""
    m, endpoint = service.metrics, plan.endpoint
    request = frames.request(plan.prompt, plan.predict, plan.opts, end_ids(service))
    try:
        sub = await service.engine.enqueue(request)
        m.prompt_tokens.inc(len(plan.prompt))
        m.tenant_tokens.labels(plan.user, "prompt").inc(len(plan.prompt))
    except QueueFull as e:
        m.requests.labels(endpoint, "rejected").inc()
        raise errors.queue_full(e) from e
    except GuestDown as e:
        m.requests.labels(endpoint, "guest_down").inc()
        raise errors.guest_down(e) from e
    return Run(service, plan, sub, t0)


async def generate(service: Service, req: CompletionRequest | ChatRequest,
                   request: Request) -> dict[str, Any] | StreamingResponse | JSONResponse:
    """The reply to one generation request: its whole body (a dict in the endpoint's
    shape), or the SSE stream; ApiError as ``start`` and when the guest fails it."""
    return await reply(await start(service, req), req.model, request)


async def reply(run: Run, model: str, request: Request) -> dict[str, Any] | StreamingResponse \
        | JSONResponse:
    """The reply to the submitted request run: as ``generate``."""
    endpoint, service = run.plan.endpoint, run.s
    shape = CHAT if endpoint == "chat" else COMPLETION
    if run.plan.stream:
        return StreamingResponse(_stream(run, shape, model), media_type="text/event-stream")
    m = service.metrics
    try:
        text = await _whole(run, request)
    except (GuestDown, RequestFailed) as e:
        raise _failure(m, endpoint, e) from e
    finally:
        run.sub.cancel()  # the client went away (no-op when the request ended)
    if text is None:
        m.requests.labels(endpoint, "cancelled").inc()
        return JSONResponse({}, status_code=CLIENT_GONE)
    m.requests.labels(endpoint, "ok").inc()
    return shape.whole(model, run.plan.echo + text, run.finish, run.usage,
                       run.tokens) | {"timings": run.timings}


async def _whole(run: Run, request: Request) -> str | None:
    """The reply's whole text; None when the client went away first (then the guest's
    request is cancelled by the caller, as a stream's is)."""
    async def collect() -> str:
        return "".join([p async for p in run.pieces()])

    task = asyncio.ensure_future(collect())
    try:
        while not (await asyncio.wait({task}, timeout=DISCONNECT_POLL))[0]:
            if await request.is_disconnected():
                return None
        return task.result()
    finally:
        task.cancel()


def sse(obj: Any) -> bytes:
    """One Server-Sent Event carrying obj as JSON."""
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n".encode()


async def _stream(run: Run, shape: Shape, model: str) -> AsyncIterator[bytes]:
    """The reply as SSE chunks: the opening (chat), a chunk per piece, the finish with the
    timings, usage if asked, [DONE]; an error event if the guest fails the request."""
    ident, created, endpoint = shape.ident(), int(time.time()), run.plan.endpoint
    m = run.s.metrics
    outcome = "cancelled"
    try:
        if (first := shape.opening(ident, created, model)) is not None:
            yield sse(first)
        if run.plan.echo:
            yield sse(shape.chunk(ident, created, model, run.plan.echo, None))
        async for piece in run.pieces():
            yield sse(shape.chunk(ident, created, model, piece, None, run.take_logprobs()))
        yield sse(shape.chunk(ident, created, model, "", run.finish, run.take_logprobs()) |
                  {"timings": run.timings})
        if run.plan.include_usage:
            yield sse(shape.usage_chunk(ident, created, model, run.usage))
        yield b"data: [DONE]\n\n"
        outcome = "ok"
    except (GuestDown, RequestFailed) as e:
        outcome = ""
        yield sse(_failure(m, endpoint, e).body())
    finally:
        run.sub.cancel()  # the client went away (no-op when the request ended)
        if outcome:
            m.requests.labels(endpoint, outcome).inc()


def _failure(m: Metrics, endpoint: str, e: GuestDown | RequestFailed) -> ApiError:
    """The refusal for a request the guest failed after taking it, counted: 400 when the
    kernel named the request itself as bad, 500 when the gateway refused the frame as
    malformed (the server built it wrongly), else 503."""
    if isinstance(e, RequestFailed) and e.is_request_error:
        m.requests.labels(endpoint, "bad_request").inc()
        return errors.bad_field(str(e), None)
    if isinstance(e, RequestFailed) and e.code == frames.GW_MALFORMED:
        m.requests.labels(endpoint, "failed").inc()
        return errors.frame_refused(e)
    m.requests.labels(endpoint, "guest_down" if isinstance(e, GuestDown) else "failed").inc()
    return errors.guest_failed(e)
