"""What the routes serve: the engine, the tokenizer, the model's limits, the metrics.

A ``Service`` is made once per server (``pyaisvc serve`` or a test) and
handed to ``create_app``; each route gets it by FastAPI dependency
(``get_service``). ``Service.plan`` checks a generation request once,
before anything reaches the guest, for what the schema cannot check: the
model's name, the prompt's ids (valid Unicode, below the vocabulary), the
prompt limit, prompt + max_tokens within seq_len; the refusal names the
field. The limits come from the kernel's header (``AI_MAX_PROMPT``,
``AI_MAX_PREDICT``) and the model's config.

Sampling: ``temperature`` 0 is greedy; above 0 the guest's sampler draws
with ``top_k`` (an extension, default 40) and ``top_p`` (default 1: off),
from ``seed`` (random when not given). The kernel carries temperature and
top_p in millionths (struct ai_opts), so they are rounded to 6 decimals;
the same seed gives the same text. ``presence_penalty``, ``frequency_penalty``
and ``logit_bias`` go to the guest's sampler in millionths too (rounded to 6
decimals), and ``logprobs`` asks the guest for each id's log-probability
(docs/AI_SERVICE.md, section 10). Which other OpenAI fields are offered is
pyaisvc.serve.fields' (docs/OPENAI.md).
"""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from fastapi import Request

from pyaisvc.guest.llmguest import max_predict
from pyaisvc.model.chattemplate import TemplateFailed, render
from pyaisvc.model.tokenizer import Tokenizer
from pyaisvc.serve import errors, fields, frames
from pyaisvc.serve.gateway import Submitted
from pyaisvc.serve.live import TableFeed, TableView
from pyaisvc.serve.metrics import Metrics
from pyaisvc.serve.schemas import ChatRequest, CompletionRequest, Sampling
from pyaisvc.serve.tenants import NO_USER, TENANTS_MAX, Tenants

DEFAULT_COMPLETION_TOKENS = 16  # OpenAI's default max_tokens for /v1/completions
DEFAULT_TOP_K = 40
MICRO = 1_000_000  # 1.0 in struct ai_opts' millionths (AI_MICRO)
STREAMS_MAX = 32  # clients of the table's stream at once
KEY_SHOWN = 24  # characters of a refused logit_bias key that its message shows


class Backend(Protocol):
    """What the routes need of the guest: pyaisvc.serve.engine.Engine, or a test's fake."""

    state: str
    why_down: str
    ended: Any  # the last E frames, each with time.monotonic() when it came

    @property
    def qemu_pid(self) -> int | None: ...

    async def table(self) -> frames.Table: ...

    async def enqueue(self, request: frames.Request) -> Submitted: ...


@dataclass(frozen=True)
class Limits:
    vocab: int  # ids below it
    seq_len: int  # prompt + generated ids at most (runtime_seq_len)
    max_prompt: int  # AI_MAX_PROMPT
    max_predict: int = field(default_factory=max_predict)  # AI_MAX_PREDICT


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
    logprobs: int | None = None  # alternatives per token in the reply; None: no logprobs
    echo: str = ""  # completions' echo: the prompt's text, which the reply's text begins with
    user: str = NO_USER  # the tenant's label in the metrics (tenants.Tenants.of)


@dataclass
class Service:
    model: str  # the id /v1/models lists
    engine: Backend
    tok: Tokenizer
    limits: Limits
    metrics: Metrics
    burst: bool = False  # /v1/aisvc/burst served without an API key (--enable-burst)
    streams_max: int = STREAMS_MAX
    table_view: TableView = field(init=False)
    table_feed: TableFeed = field(init=False)  # one poller for every stream client
    burst_lock: asyncio.Lock = field(init=False, default_factory=asyncio.Lock)
    tenants_max: int = TENANTS_MAX  # users with a tenant of their own at once
    tenants: Tenants = field(init=False)  # user -> tenant id, bounded

    def __post_init__(self) -> None:
        self.tenants = Tenants(self.tenants_max, forget=self.metrics.forget_tenant)
        self.table_view = TableView(self.engine, self.tenants, self.metrics.tenant_served)
        self.table_feed = TableFeed(self.table_view, self.streams_max)

    def plan(self, req: CompletionRequest | ChatRequest) -> Plan:
        """The checked request, ready for the guest; ApiError (400 naming the field, or 404
        for another model) for what the schema cannot check."""
        if req.model != self.model:
            raise errors.unknown_model(req.model, self.model)
        fields.refuse_unoffered(req)
        field_name, endpoint = ("messages", "chat") if isinstance(req, ChatRequest) else \
            ("prompt", "completions")
        ids = self.prompt_ids(req)
        predict = self._predict(req, len(ids), field_name, endpoint)
        stops = [req.stop] if isinstance(req.stop, str) else list(req.stop or [])
        for i, s in enumerate(stops):
            unicode_text(s, f"stop.{i}")
        echo = isinstance(req, CompletionRequest) and req.echo
        tenant, label = self.tenants.of(req.user)
        opts = replace(options(req, self.limits.vocab), tenant=tenant,
                       priority=req.priority or 0)
        return Plan(endpoint, ids, predict, opts, stops, req.stream,
                    bool(req.stream_options and req.stream_options.include_usage),
                    fields.logprobs(req),
                    self.tok.decode(ids, skip_special_tokens=True) if echo else "", label)

    def prompt_ids(self, req: CompletionRequest | ChatRequest) -> list[int]:
        """The request's prompt as ids: the chat in the model's template, the text encoded,
        or the ids given (each below the vocabulary); ApiError naming the field."""
        if isinstance(req, ChatRequest):
            messages = fields.messages(req)
            for i, m in enumerate(messages):
                unicode_text(m["content"], f"messages.{i}.content")
            try:
                return self.tok.encode(render(self.tok, messages))
            except TemplateFailed as e:
                raise errors.bad_field(f"messages: {e}", "messages") from e
        prompt = req.prompt
        if isinstance(prompt, list) and prompt and isinstance(prompt[0], str | list):
            prompt = prompt[0]  # a list of one prompt (the schema allows no more)
        if isinstance(prompt, str):
            return self.tok.encode(unicode_text(prompt, "prompt"))
        bad = next((i for i in prompt if i >= self.limits.vocab), None)
        if bad is not None:
            raise errors.bad_field(f"prompt: token id {bad} is not below the vocabulary size "
                                   f"{self.limits.vocab}", "prompt")
        return list(prompt)

    def _predict(self, req: Sampling, n: int, field_name: str, endpoint: str) -> int:
        """How many ids to generate after a prompt of n ids: max_tokens, or the endpoint's
        default within the room left; ApiError when the prompt or max_tokens does not fit."""
        lim = self.limits
        if n == 0:
            raise errors.bad_field(f"{field_name}: the prompt is empty (0 tokens)", field_name)
        if n > lim.max_prompt:
            raise errors.bad_field(f"{field_name}: the prompt is {n} tokens; the service takes "
                                   f"at most {lim.max_prompt}: shorten it", field_name)
        room = min(lim.seq_len - n, lim.max_predict)
        if room < 1:
            raise errors.bad_field(f"{field_name}: the prompt is {n} tokens and leaves no room "
                                   f"to generate in the model's seq_len {lim.seq_len}: "
                                   "shorten it", field_name)
        default = DEFAULT_COMPLETION_TOKENS if endpoint == "completions" else room
        asked, name = fields.max_tokens(req)  # type: ignore[arg-type]
        predict = asked if asked is not None else min(default, room)
        if predict > room:
            raise errors.bad_field(f"{name}: prompt {n} + {name} {predict} exceeds "
                                   f"the model's seq_len {lim.seq_len}: ask for at most "
                                   f"{room}", name)
        return predict


def get_service(request: Request) -> Service:
    """The app's Service: the dependency every route that needs it declares."""
    service = request.app.state.service
    assert isinstance(service, Service)
    return service


def unicode_text(s: str, where: str) -> str:
    """s, when it is valid Unicode (JSON can carry lone surrogates, which it is not);
    else ApiError 400 naming the field."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        raise errors.bad_field(f"{where}: not valid Unicode (a lone surrogate)",
                               where.split(".")[0]) from None
    return s


def options(req: CompletionRequest | ChatRequest, vocab: int) -> frames.Options:
    """struct ai_opts for the request (the sampler's fields all 0 when greedy); ApiError
    naming logit_bias for a key that is not a token id below vocab, or too many."""
    n = fields.logprobs(req)
    adjust = {"presence_micro": round((req.presence_penalty or 0) * MICRO),
              "frequency_micro": round((req.frequency_penalty or 0) * MICRO),
              "bias": logit_bias(req, vocab), "logprobs": 0 if n is None else 1 + n}
    temp = 1.0 if req.temperature is None else req.temperature
    temp_micro = round(temp * MICRO)
    if temp_micro == 0:
        return frames.Options(**adjust)
    top_p = 1.0 if req.top_p is None else req.top_p
    return frames.Options(
        temp_micro=temp_micro,
        top_k=DEFAULT_TOP_K if req.top_k is None else req.top_k,
        top_p_micro=max(1, round(top_p * MICRO)),
        seed=secrets.randbits(64) if req.seed is None else req.seed, **adjust)


def logit_bias(req: Sampling, vocab: int) -> tuple[tuple[int, int], ...]:
    """The request's logit_bias (at most MAX_BIAS keys: the schema's) as (id, millionths)
    pairs, ids ascending; ApiError naming the field for a key that is not a token id below
    vocab (its length checked before it is read as a number)."""
    pairs = []
    for key, bias in (req.logit_bias or {}).items():
        if not (key.isascii() and key.isdigit() and len(key) <= len(str(vocab))) or \
                int(key) >= vocab:
            shown = key if len(key) <= KEY_SHOWN else f"{key[:KEY_SHOWN]}... ({len(key)} chars)"
            raise errors.bad_field(f"logit_bias: key {shown!r} is not a token id below the "
                                   f"vocabulary size {vocab}", "logit_bias")
        pairs.append((int(key), round(bias * MICRO)))
    return tuple(sorted(pairs))
