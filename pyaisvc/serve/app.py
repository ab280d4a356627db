"""The HTTP API: OpenAI's completions and chat completions, llama.cpp's tokenize,
and the kernel's table live (``/v1/aisvc/table``, its SSE stream, and the page at ``/``).

``create_app(service)`` builds the FastAPI application over a ``Service``:
the engine (the guest, pyaisvc.serve.engine), the tokenizer, the model's
limits and the metrics. Every request is checked once, in ``Service.plan``,
before anything reaches the guest: the body's shape by the pydantic models
below (which are also the published OpenAPI schema), then what needs the
tokenizer and the model (the model's name, the prompt's ids, the prompt
limit, prompt + max_tokens within seq_len). Every refusal has OpenAI's error
shape, ``{"error": {"message", "type", "param", "code"}}``, ``param``
naming the field.

Status codes: 400 a bad field (and malformed JSON), 404 an unknown model or
path, 413 a body over ``MAX_BODY`` bytes (``BodyLimit``), 429 the host queue is full, 503
the guest is down or rebooting (both with ``Retry-After``).

Sampling: ``temperature`` 0 is greedy; above 0 the guest's sampler draws
with ``top_k`` (an extension, default 40) and ``top_p`` (default 1: off),
from ``seed`` (random when not given). The kernel carries temperature and
top_p in millionths (struct ai_opts), so they are rounded to 6 decimals;
the same seed gives the same text. Stop strings are looked for on the host
in the decoded text; the first one ends the reply (the guest's request is
cancelled) and is not part of the text. The model's end-of-text and
end-of-turn ids end every reply too (``finish_reason`` ``stop``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from importlib import resources
from typing import Annotated, Any, Literal, Protocol

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    Response,
    StreamingResponse,
)
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from pyaisvc.serve import frames
from pyaisvc.serve.gateway import GuestDown, QueueFull, RequestFailed, Submitted
from pyaisvc.serve.live import Live
from pyaisvc.serve.metrics import Metrics
from pyaisvc.serve.text import TemplateFailed, TextStream, chat_prompt, end_ids
from pyaisvc.tokenizer import Tokenizer

log = logging.getLogger("pyaisvc.serve")
MAX_BODY = 1 << 20  # bytes of one request body
MAX_TEXT = 32768  # characters of one prompt or message (the token limit is checked after)
MAX_MESSAGES = 64
MAX_STOP_STRINGS = 4
MAX_STOP_CHARS = 64
DEFAULT_COMPLETION_TOKENS = 16  # OpenAI's default max_tokens for /v1/completions
DEFAULT_TOP_K = 40
DISCONNECT_POLL = 0.25  # seconds between looks at a waiting non-streaming client
RETRY_AFTER = "1"  # seconds: a slot frees within a request's time; a reboot takes longer
MICRO = 1_000_000
SEED_MAX = 2**64 - 1
# The page's files (pyaisvc/serve/web/), each with its media type.
WEB_FILES = {"app.js": "text/javascript", "style.css": "text/css"}

# ---------------------------------------------------------------- the request bodies

Text = Annotated[str, Field(max_length=MAX_TEXT)]
TokenId = Annotated[int, Field(ge=0, le=2**32 - 1)]
StopText = Annotated[str, Field(min_length=1, max_length=MAX_STOP_CHARS)]


class _Body(BaseModel):
    # strict: 0 is not false and "5" is not 5, as the published schema says
    model_config = ConfigDict(extra="forbid", strict=True)


class StreamOptions(_Body):
    include_usage: bool = False


class _Sampling(_Body):
    model: str = Field(max_length=256, description="the model's id, as /v1/models lists it")
    max_tokens: int | None = Field(None, ge=1, le=255, description="ids to generate at "
                                   "most; prompt + max_tokens must fit the model's seq_len")
    temperature: float | None = Field(None, ge=0, le=2, description="0: greedy; default 1; "
                                      "rounded to 6 decimals")
    top_p: float | None = Field(None, gt=0, le=1, description="default 1 (off); rounded to "
                                "6 decimals")
    top_k: int | None = Field(None, ge=0, le=2**32 - 1, description="an extension: sample "
                              "among the k most likely ids (0: all; default 40)")
    seed: int | None = Field(None, ge=0, le=SEED_MAX, description="the sampler's seed: the "
                             "same seed gives the same text (default: random)")
    stop: StopText | Annotated[list[StopText], Field(max_length=MAX_STOP_STRINGS)] | None = \
        Field(None, description="up to 4 strings; the reply ends before the first of them")
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int = Field(1, ge=1, le=1, description="only 1: one choice per request")
    user: str | None = Field(None, max_length=256, description="accepted, not used")


class CompletionRequest(_Sampling):
    prompt: Text | Annotated[list[TokenId], Field(min_length=1, max_length=4096)] = Field(
        description="text, or the prompt's token ids")


class Message(_Body):
    role: Literal["system", "user", "assistant"]
    content: Text


class ChatRequest(_Sampling):
    messages: list[Message] = Field(min_length=1, max_length=MAX_MESSAGES)


class TokenizeRequest(_Body):
    content: Text
    add_special: bool = Field(False, description="accepted; this tokenizer adds no BOS")
    with_pieces: bool = False


class DetokenizeRequest(_Body):
    tokens: list[TokenId] = Field(max_length=4096)


class BurstRequest(_Body):
    n: int = Field(8, ge=1, le=64, description="requests fired at once")
    prompt: Text = "Once upon a time"
    max_tokens: int = Field(16, ge=1, le=255)


class ErrorBody(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(BaseModel):
    error: ErrorBody


ERRORS: dict[int | str, dict[str, Any]] = {
    200: {"description": "the reply; with stream: true, Server-Sent Events (data: {chunk}, "
          "then data: [DONE])", "content": {"text/event-stream": {}}},
    400: {"model": ErrorResponse, "description": "a bad field, named by error.param"},
    404: {"model": ErrorResponse, "description": "unknown model"},
    413: {"model": ErrorResponse, "description": "the body is over 1 MiB"},
    429: {"model": ErrorResponse, "description": "the host queue is full; see Retry-After"},
    503: {"model": ErrorResponse, "description": "the guest is down or rebooting; see "
          "Retry-After"},
}

# ---------------------------------------------------------------- errors


class ApiError(Exception):
    """A refusal in OpenAI's shape."""

    def __init__(self, status: int, message: str, param: str | None = None,
                 kind: str = "invalid_request_error", code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.kind, self.code = (status, message, param,
                                                                        kind, code)

    def response(self) -> JSONResponse:
        body = {"error": {"message": self.message, "type": self.kind, "param": self.param,
                          "code": self.code}}
        headers = {"Retry-After": RETRY_AFTER} if self.status in (429, 503) else None
        return JSONResponse(body, status_code=self.status, headers=headers)


def _validation_error(exc: RequestValidationError) -> ApiError:
    """The first problem pydantic found, as a 400 naming the field."""
    err = exc.errors()[0]
    loc = [str(x) for x in err.get("loc", ()) if x != "body"]
    if err.get("type") == "json_invalid":
        why = (err.get("ctx") or {}).get("error", "")
        return ApiError(400, f"the body is not valid JSON ({why})", None, code="json_invalid")
    if not loc:
        return ApiError(400, "the body must be a JSON object (Content-Type: "
                        f"application/json): {err.get('msg')}")
    param = loc[0]
    where = ".".join(x for x in loc if x not in ("str", "list[int]") and
                     not x.startswith(("list[", "function-")))
    if err.get("type") == "extra_forbidden":
        return ApiError(400, f"{where}: this server does not support this field", param)
    if param == "n":
        return ApiError(400, "n: this server returns one choice per request; n must be 1",
                        param)
    return ApiError(400, f"{where}: {err.get('msg')}", param)


class BodyLimit:
    """ASGI middleware: a request body over `limit` bytes gets 413 in OpenAI's shape. The
    body is read to its end first (and dropped), so a client still sending gets the
    answer, not a reset connection; a body within the limit is handed on as it was."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        chunks: list[bytes] = []
        size, more = 0, True
        while more:
            msg = await receive()
            if msg["type"] != "http.request":
                return  # the client left
            chunk = msg.get("body", b"")
            size += len(chunk)
            if size <= self.limit:
                chunks.append(chunk)
            more = msg.get("more_body", False)
        if size > self.limit:
            err = ApiError(413, f"the body is {size} bytes; at most {self.limit}", None,
                           code="body_too_large")
            return await err.response()(scope, receive, send)
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if replayed:
                return await receive()  # e.g. http.disconnect while a reply streams
            replayed = True
            return {"type": "http.request", "body": b"".join(chunks), "more_body": False}

        await self.app(scope, replay, send)


# ---------------------------------------------------------------- the service


class Engine(Protocol):
    state: str
    why_down: str
    ended: Any  # the last E frames, each with time.monotonic() when it came

    @property
    def qemu_pid(self) -> int | None: ...

    async def table(self) -> frames.Table: ...

    async def submit(self, prompt: list[int], predict: int, opts: frames.Options,
                     stops: list[int]) -> Submitted: ...


@dataclass(frozen=True)
class Limits:
    vocab: int  # ids below it
    seq_len: int  # prompt + generated ids at most (runtime_seq_len)
    max_prompt: int  # AI_MAX_PROMPT
    max_predict: int = 255  # AI_MAX_PREDICT


@dataclass
class Plan:
    """One checked request, ready for the guest."""

    endpoint: str  # "completions" or "chat"
    prompt: list[int]
    predict: int
    opts: frames.Options
    stops: list[str]
    stream: bool
    include_usage: bool


@dataclass
class Service:
    model: str  # the id /v1/models lists
    engine: Engine
    tok: Tokenizer
    limits: Limits
    metrics: Metrics

    def plan(self, req: CompletionRequest | ChatRequest) -> Plan:
        """Checks what the schema cannot; ApiError naming the field."""
        if req.model != self.model:
            raise ApiError(404, f"model: '{req.model}' is not served here; /v1/models lists "
                           f"'{self.model}'", "model", code="model_not_found")
        if isinstance(req, ChatRequest):
            messages = [{"role": m.role, "content": _text(m.content, f"messages.{i}.content")}
                        for i, m in enumerate(req.messages)]
            try:
                ids = self.tok.encode(chat_prompt(self.tok, messages))
            except TemplateFailed as e:
                raise ApiError(400, f"messages: {e}", "messages") from e
            field, endpoint = "messages", "chat"
        else:
            field, endpoint = "prompt", "completions"
            if isinstance(req.prompt, str):
                ids = self.tok.encode(_text(req.prompt, "prompt"))
            else:
                ids = list(req.prompt)
                bad = next((i for i in ids if i >= self.limits.vocab), None)
                if bad is not None:
                    raise ApiError(400, f"prompt: token id {bad} is not below the vocabulary "
                                   f"size {self.limits.vocab}", "prompt")
        lim = self.limits
        if not ids:
            raise ApiError(400, f"{field}: the prompt is empty (0 tokens)", field)
        if len(ids) > lim.max_prompt:
            raise ApiError(400, f"{field}: the prompt is {len(ids)} tokens; the service takes "
                           f"at most {lim.max_prompt}: shorten it", field)
        room = min(lim.seq_len - len(ids), lim.max_predict)
        if room < 1:
            raise ApiError(400, f"{field}: the prompt is {len(ids)} tokens and leaves no room "
                           f"to generate in the model's seq_len {lim.seq_len}: shorten it",
                           field)
        default = DEFAULT_COMPLETION_TOKENS if endpoint == "completions" else room
        predict = req.max_tokens if req.max_tokens is not None else min(default, room)
        if predict > room:
            raise ApiError(400, f"max_tokens: prompt {len(ids)} + max_tokens {predict} exceeds "
                           f"the model's seq_len {lim.seq_len}: ask for at most {room}",
                           "max_tokens")
        stops = [req.stop] if isinstance(req.stop, str) else list(req.stop or [])
        for i, s in enumerate(stops):
            _text(s, f"stop.{i}")
        return Plan(endpoint, ids, predict, _options(req), stops, req.stream,
                    bool(req.stream_options and req.stream_options.include_usage))


def _text(s: str, where: str) -> str:
    """s, when it is valid Unicode (JSON can carry lone surrogates, which it is not)."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        raise ApiError(400, f"{where}: not valid Unicode (a lone surrogate)",
                       where.split(".")[0]) from None
    return s


def _options(req: _Sampling) -> frames.Options:
    """struct ai_opts for the request: all 0 when greedy."""
    temp = 1.0 if req.temperature is None else req.temperature
    temp_micro = round(temp * MICRO)
    if temp_micro == 0:
        return frames.Options()
    top_p = 1.0 if req.top_p is None else req.top_p
    return frames.Options(
        temp_micro=temp_micro,
        top_k=DEFAULT_TOP_K if req.top_k is None else req.top_k,
        top_p_micro=max(1, round(top_p * MICRO)),
        seed=secrets.randbits(64) if req.seed is None else req.seed)


# ---------------------------------------------------------------- generation


class Run:
    """One request's generation: its text pieces, then finish_reason and usage."""

    def __init__(self, service: Service, plan: Plan, sub: Submitted, t0: float) -> None:
        self.s, self.plan, self.sub, self.t0 = service, plan, sub, t0
        self.text = TextStream(service.tok, plan.stops, end_ids(service.tok))
        self.finish = "length"
        self.first: float | None = None
        self.end: frames.End | None = None  # the guest's E frame, with the kernel's times

    @property
    def timings(self) -> dict[str, int] | None:
        """The kernel's times for the request (microseconds from ai_submit), as an extension
        field beside usage (llama.cpp's server has one too); None when it did not end."""
        e = self.end
        if e is None:
            return None
        return {"queued_us": e.queued_us, "ttft_us": e.ttft_us, "total_us": e.total_us}

    @property
    def usage(self) -> dict[str, int]:
        n, gen = len(self.plan.prompt), self.text.generated
        return {"prompt_tokens": n, "completion_tokens": gen, "total_tokens": n + gen}

    async def pieces(self) -> AsyncIterator[str]:
        """The reply's text as it comes; cancels the guest's request when the caller
        stops early (a stop string, a client gone) or anything fails."""
        m = self.s.metrics
        try:
            async for ev in self.sub.events():
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
                m.tokens.inc(len(ev.ids))
                if (piece := self.text.push(ev.ids)):
                    yield piece
                if self.text.stopped_by == "string":
                    self.finish = "stop"
                    break  # the guest's request is cancelled below
        finally:
            self.sub.cancel()
        if self.first is not None and self.text.generated > 1:
            m.tpot.observe((time.monotonic() - self.first) / (self.text.generated - 1))


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


def _sse(obj: Any) -> bytes:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n".encode()


def create_app(service: Service) -> FastAPI:
    app = FastAPI(title="aisvc", version="1", strict_content_type=False,
                  description="The aisvc kernel AI service: an OpenAI-compatible API over "
                  "the guest's gateway (pyaisvc serve).")
    app.add_middleware(BodyLimit, limit=MAX_BODY)
    m = service.metrics

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        return exc.response()

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return _validation_error(exc).response()

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = "invalid_request_error" if exc.status_code < 500 else "server_error"
        return ApiError(exc.status_code, str(exc.detail), None, kind).response()

    async def generate(req: CompletionRequest | ChatRequest, request: Request):
        endpoint = "chat" if isinstance(req, ChatRequest) else "completions"
        t0 = time.monotonic()
        try:
            plan = service.plan(req)
            sub = await service.engine.submit(plan.prompt, plan.predict, plan.opts,
                                              end_ids(service.tok))
            m.prompt_tokens.inc(len(plan.prompt))
        except ApiError:
            m.requests.labels(endpoint, "bad_request").inc()
            raise
        except QueueFull as e:
            m.requests.labels(endpoint, "rejected").inc()
            raise ApiError(429, f"the server is busy: {e}; retry later", None,
                           "rate_limit_error", "queue_full") from e
        except GuestDown as e:
            m.requests.labels(endpoint, "guest_down").inc()
            raise ApiError(503, f"the guest is not serving: {e}; retry later", None,
                           "server_error", "guest_down") from e
        run = Run(service, plan, sub, t0)
        shape = _ChatShape() if endpoint == "chat" else _CompletionShape()
        if plan.stream:
            return StreamingResponse(_stream(run, shape, req.model, endpoint),
                                     media_type="text/event-stream")
        try:
            text = await _whole(run, request)
        except (GuestDown, RequestFailed) as e:
            raise _failure(m, endpoint, e) from e
        finally:
            sub.cancel()  # the client went away (no-op when the request ended)
        if text is None:
            m.requests.labels(endpoint, "cancelled").inc()
            return JSONResponse({}, status_code=499)  # nobody reads it
        m.requests.labels(endpoint, "ok").inc()
        return shape.whole(req.model, text, run.finish, run.usage) | {"timings": run.timings}

    async def _stream(run: Run, shape: _Shape, model: str, endpoint: str):
        ident, created = shape.ident(), int(time.time())
        outcome = "cancelled"
        try:
            if (first := shape.opening(ident, created, model)) is not None:
                yield _sse(first)
            async for piece in run.pieces():
                yield _sse(shape.chunk(ident, created, model, piece, None))
            yield _sse(shape.chunk(ident, created, model, "", run.finish) |
                       {"timings": run.timings})
            if run.plan.include_usage:
                yield _sse(shape.usage_chunk(ident, created, model, run.usage))
            yield b"data: [DONE]\n\n"
            outcome = "ok"
        except (GuestDown, RequestFailed) as e:
            err = _failure(m, endpoint, e)
            outcome = ""
            yield _sse({"error": {"message": err.message, "type": err.kind, "param": None,
                                  "code": err.code}})
        finally:
            run.sub.cancel()  # the client went away (no-op when the request ended)
            if outcome:
                m.requests.labels(endpoint, outcome).inc()

    @app.post("/v1/completions", responses=ERRORS, summary="a completion of the prompt (text "
              "or ids); SSE chunks with stream: true")
    async def completions(req: CompletionRequest, request: Request):
        return await generate(req, request)

    @app.post("/v1/chat/completions", responses=ERRORS, summary="the assistant's reply in "
              "the model's chat template; SSE chunks with stream: true")
    async def chat_completions(req: ChatRequest, request: Request):
        return await generate(req, request)

    @app.get("/v1/models", summary="the one model served")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": service.model, "object": "model",
                                            "created": 0, "owned_by": "aisvc"}]}

    @app.get("/health", summary="200 while the guest serves, 503 while it is down or booting",
             responses={503: {"description": "the guest is down or booting"}})
    async def health() -> JSONResponse:
        e = service.engine
        body = {"status": "ok" if e.state == "up" else e.state, "guest": e.state,
                "qemu_pid": e.qemu_pid, "model": service.model}
        if e.state != "up":
            body["detail"] = e.why_down
        return JSONResponse(body, status_code=200 if e.state == "up" else 503)

    @app.get("/metrics", summary="Prometheus metrics", response_class=PlainTextResponse)
    async def metrics() -> PlainTextResponse:
        return PlainTextResponse(generate_latest(m.registry), media_type=CONTENT_TYPE_LATEST)

    live = Live(service.engine)
    down = {503: ERRORS[503]}

    @app.get("/v1/aisvc/table", responses=down, summary="the kernel's request table now: "
             "every slot (state, owner pid, progress, times), the FIFO, the batch, the "
             "requests that ended last (an extension)")
    async def table() -> dict[str, Any]:
        try:
            return await live.snapshot()
        except (GuestDown, TimeoutError) as e:
            raise ApiError(503, f"the guest is not serving: {e}; retry later", None,
                           "server_error", "guest_down") from e

    @app.get("/v1/aisvc/table/stream", include_in_schema=False)
    async def table_stream() -> StreamingResponse:
        async def events():
            async for snap in live.stream():
                yield _sse(snap)

        return StreamingResponse(events(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})

    # The page's burst control: n greedy completions submitted at once by the server
    # itself, since a browser opens at most 6 connections to one server and would hold
    # the rest back. Left out of the published schema: the API fuzzer would fire bursts.
    @app.post("/v1/aisvc/burst", include_in_schema=False)
    async def burst(req: BurstRequest, request: Request) -> dict[str, Any]:
        one = CompletionRequest(model=service.model, prompt=req.prompt,
                                max_tokens=req.max_tokens, temperature=0.0)
        got = await asyncio.gather(*(generate(one, request) for _ in range(req.n)),
                                   return_exceptions=True)
        errors = [g.message if isinstance(g, ApiError) else str(g) for g in got
                  if isinstance(g, BaseException)]
        texts = [g["choices"][0]["text"] for g in got if isinstance(g, dict)]
        return {"n": req.n, "done": len(texts), "failed": len(errors), "errors": errors[:4],
                "texts": texts}

    @app.get("/", include_in_schema=False)
    async def page() -> HTMLResponse:
        return HTMLResponse(_web_file("index.html"))

    @app.get("/web/{name}", include_in_schema=False)
    async def web(name: str) -> Response:
        if name not in WEB_FILES:
            raise ApiError(404, f"no file {name!r} here", None)
        return Response(_web_file(name), media_type=WEB_FILES[name],
                        headers={"Cache-Control": "no-cache"})

    small = {400: ERRORS[400], 413: ERRORS[413]}

    @app.post("/tokenize", responses=small, summary="text -> ids (llama.cpp)")
    async def tokenize(req: TokenizeRequest) -> dict[str, Any]:
        ids = service.tok.encode(_text(req.content, "content"))
        if not req.with_pieces:
            return {"tokens": ids}
        return {"tokens": [{"id": i, "piece": service.tok.decode([i])} for i in ids]}

    @app.post("/detokenize", responses=small, summary="ids -> text (llama.cpp)")
    async def detokenize(req: DetokenizeRequest) -> dict[str, str]:
        bad = next((i for i in req.tokens if i >= service.limits.vocab), None)
        if bad is not None:
            raise ApiError(400, f"tokens: id {bad} is not below the vocabulary size "
                           f"{service.limits.vocab}", "tokens")
        return {"content": service.tok.decode(req.tokens)}

    def openapi() -> dict[str, Any]:
        """FastAPI's schema, with the 400 this server gives in place of its 422 and the
        served model's id as the only value of `model`."""
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version,
                                 description=app.description, routes=app.routes)
            for path in schema.get("paths", {}).values():
                for op in path.values():
                    op.get("responses", {}).pop("422", None)
            schemas = schema.get("components", {}).get("schemas", {})
            for name in ("HTTPValidationError", "ValidationError"):
                schemas.pop(name, None)
            for name in ("CompletionRequest", "ChatRequest"):  # the one model served
                schemas[name]["properties"]["model"]["enum"] = [service.model]
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


def _web_file(name: str) -> str:
    """One of the page's files, from the package."""
    return resources.files("pyaisvc.serve").joinpath("web", name).read_text(encoding="utf-8")


def _failure(m: Metrics, endpoint: str, e: GuestDown | RequestFailed) -> ApiError:
    if isinstance(e, RequestFailed) and e.is_request_error:
        m.requests.labels(endpoint, "bad_request").inc()
        return ApiError(400, str(e))
    m.requests.labels(endpoint, "guest_down" if isinstance(e, GuestDown) else "failed").inc()
    return ApiError(503, f"the guest failed the request: {e}; retry later", None,
                    "server_error", "guest_down")


# ---------------------------------------------------------------- response shapes


class _Shape(Protocol):
    def ident(self) -> str: ...
    def opening(self, ident: str, created: int, model: str) -> dict | None: ...
    def chunk(self, ident: str, created: int, model: str, piece: str,
              finish: str | None) -> dict: ...
    def usage_chunk(self, ident: str, created: int, model: str, usage: dict) -> dict: ...
    def whole(self, model: str, text: str, finish: str, usage: dict) -> dict: ...


class _CompletionShape:
    def ident(self) -> str:
        return f"cmpl-{uuid.uuid4().hex}"

    def opening(self, ident: str, created: int, model: str) -> dict | None:
        return None

    def chunk(self, ident, created, model, piece, finish) -> dict:
        return {"id": ident, "object": "text_completion", "created": created, "model": model,
                "choices": [{"index": 0, "text": piece, "logprobs": None,
                             "finish_reason": finish}]}

    def usage_chunk(self, ident, created, model, usage) -> dict:
        return {"id": ident, "object": "text_completion", "created": created, "model": model,
                "choices": [], "usage": usage}

    def whole(self, model, text, finish, usage) -> dict:
        return {"id": self.ident(), "object": "text_completion", "created": int(time.time()),
                "model": model, "usage": usage,
                "choices": [{"index": 0, "text": text, "logprobs": None,
                             "finish_reason": finish}]}


class _ChatShape:
    def ident(self) -> str:
        return f"chatcmpl-{uuid.uuid4().hex}"

    def opening(self, ident: str, created: int, model: str) -> dict | None:
        return self._chunk(ident, created, model, {"role": "assistant", "content": ""}, None)

    def chunk(self, ident, created, model, piece, finish) -> dict:
        return self._chunk(ident, created, model, {"content": piece} if piece else {}, finish)

    def _chunk(self, ident, created, model, delta, finish) -> dict:
        return {"id": ident, "object": "chat.completion.chunk", "created": created,
                "model": model, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                             "finish_reason": finish}]}

    def usage_chunk(self, ident, created, model, usage) -> dict:
        return {"id": ident, "object": "chat.completion.chunk", "created": created,
                "model": model, "choices": [], "usage": usage}

    def whole(self, model, text, finish, usage) -> dict:
        return {"id": self.ident(), "object": "chat.completion", "created": int(time.time()),
                "model": model, "usage": usage,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                             "logprobs": None, "finish_reason": finish}]}
