"""The HTTP API's bodies: every request and every reply as a pydantic model.

The request models are strict (0 is not false, "5" is not 5) and forbid
unknown fields, as the published schema says; ``Service.plan`` checks the
rest (pyaisvc.serve.service). The reply models are declared on the routes
(``response_model``), so ``/openapi.json`` documents every reply, and
FastAPI checks each reply against its model before it leaves. The limits
come from the kernel's header (``AI_MAX_PREDICT``, ``AI_MAX_STOP`` in
kernel/include/aisvc.h, through pyaisvc.guest.llmguest).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pyaisvc import cheader
from pyaisvc.guest.llmguest import max_predict, max_priority, max_stop
from pyaisvc.model.sampling import BIAS_MAX, MAX_TOP_LOGPROBS, PENALTY_MAX
from pyaisvc.serve.frames import MAX_BIAS

MAX_TEXT = 32768  # characters of one prompt or message (the token limit is checked after)
MAX_MESSAGES = 64
MAX_STOP_STRINGS = max_stop()  # as many stop strings as the kernel takes stop ids
MAX_STOP_CHARS = 64
MAX_PREDICT = max_predict()
MAX_BURST = cheader.header_define("aisvc.h", "AI_PERPROC")  # one burst: the gateway's window
SEED_MAX = 2**64 - 1
MAX_METADATA = 16  # key-value pairs of a chat's metadata (OpenAI's limit)
UINT32_MAX = 2**32 - 1

Text = Annotated[str, Field(max_length=MAX_TEXT)]
TokenId = Annotated[int, Field(ge=0, le=UINT32_MAX)]
StopText = Annotated[str, Field(min_length=1, max_length=MAX_STOP_CHARS)]
Short = Annotated[str, Field(max_length=256)]
Penalty = Annotated[float, Field(ge=-PENALTY_MAX, le=PENALTY_MAX)]

# ---------------------------------------------------------------- requests


class _Body(BaseModel):
    # strict: 0 is not false and "5" is not 5, as the published schema says
    model_config = ConfigDict(extra="forbid", strict=True)


class StreamOptions(_Body):
    include_usage: bool = False


class ResponseFormat(_Body):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: dict[str, Any] | None = None


class Sampling(_Body):
    """The fields both generation requests share (docs/OPENAI.md: what each does here)."""

    model: str = Field(max_length=256, description="the model's id, as /v1/models lists it")
    max_tokens: int | None = Field(None, ge=1, le=MAX_PREDICT, description="ids to generate "
                                   "at most; prompt + max_tokens must fit the model's seq_len")
    temperature: float | None = Field(None, ge=0, le=2, description="0: greedy; default 1; "
                                      "rounded to 6 decimals")
    top_p: float | None = Field(None, gt=0, le=1, description="default 1 (off); rounded to "
                                "6 decimals")
    top_k: int | None = Field(None, ge=0, le=UINT32_MAX, description="an extension: sample "
                              "among the k most likely ids (0: all; default 40)")
    seed: int | None = Field(None, ge=0, le=SEED_MAX, description="the sampler's seed: the "
                             "same seed gives the same text (default: random)")
    stop: StopText | Annotated[list[StopText], Field(max_length=MAX_STOP_STRINGS)] | None = \
        Field(None, description=f"up to {MAX_STOP_STRINGS} strings; the reply ends before "
              "the first of them")
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int = Field(1, ge=1, le=1, description="only 1: one choice per request")
    user: str | None = Field(None, max_length=256, description="who asks: the kernel's "
                             "tenant (policy fair shares the worker between tenants); "
                             "default: one tenant for every request without it")
    priority: int | None = Field(None, ge=0, le=max_priority(), description="an extension "
                                 "(vLLM's): higher runs first under the kernel's policy "
                                 "priority, with aging; default 0")
    presence_penalty: Penalty | None = Field(None, description="subtracted from the logit "
                                             "of every id generated so far (default 0)")
    frequency_penalty: Penalty | None = Field(None, description="subtracted from an id's "
                                              "logit per time it was generated (default 0)")
    logit_bias: Annotated[dict[str, Annotated[float, Field(ge=-BIAS_MAX, le=BIAS_MAX)]],
                          Field(max_length=MAX_BIAS)] | None = Field(
        None, description="token id (as a string) -> bias added to its logit; at most "
        f"{MAX_BIAS} ids")


class CompletionRequest(Sampling):
    prompt: Text | Annotated[list[TokenId], Field(min_length=1, max_length=4096)] | \
        Annotated[list[Text], Field(min_length=1, max_length=1)] | \
        Annotated[list[Annotated[list[TokenId], Field(min_length=1, max_length=4096)]],
                  Field(min_length=1, max_length=1)] = Field(
        description="text, or the prompt's token ids (a list of one of them: one prompt)")
    logprobs: int | None = Field(None, ge=0, le=MAX_TOP_LOGPROBS, description="each "
                                 "token's log-probability and its N likeliest alternatives")
    echo: bool = Field(False, description="the reply's text begins with the prompt")
    best_of: int | None = Field(None, ge=1, description="only 1")
    suffix: str | None = Field(None, max_length=MAX_TEXT, description="not offered")


class ContentPart(_Body):
    """One part of a message's content; only text parts are offered."""

    type: Literal["text", "image_url", "input_audio", "file", "refusal"]
    text: Text | None = None
    refusal: Text | None = None
    image_url: dict[str, Any] | None = None
    input_audio: dict[str, Any] | None = None
    file: dict[str, Any] | None = None


class Message(_Body):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: Text | Annotated[list[ContentPart], Field(max_length=MAX_MESSAGES)] | None = None
    name: Short | None = Field(None, description="accepted, not used")
    refusal: Text | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: Short | None = None
    function_call: dict[str, Any] | None = None
    audio: dict[str, Any] | None = None


class ChatRequest(Sampling):
    messages: list[Message] = Field(min_length=1, max_length=MAX_MESSAGES)
    max_completion_tokens: int | None = Field(None, ge=1, le=MAX_PREDICT, description="the "
                                              "current name of max_tokens")
    logprobs: bool | None = Field(None, description="each token's log-probability")
    top_logprobs: int | None = Field(None, ge=0, le=20, description=f"0..{MAX_TOP_LOGPROBS} "
                                     "likeliest alternatives per token (with logprobs)")
    response_format: ResponseFormat | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    functions: list[dict[str, Any]] | None = None
    function_call: str | dict[str, Any] | None = None
    modalities: list[str] | None = None
    audio: dict[str, Any] | None = None
    prediction: dict[str, Any] | None = None
    web_search_options: dict[str, Any] | None = None
    metadata: Annotated[dict[Short, Short], Field(max_length=MAX_METADATA)] | None = None
    store: bool | None = None
    service_tier: Short | None = None
    reasoning_effort: Short | None = None
    verbosity: Short | None = None
    prompt_cache_key: Short | None = None
    safety_identifier: Short | None = None


class TokenizeRequest(_Body):
    content: Text
    add_special: bool = Field(False, description="accepted; this tokenizer adds no BOS")
    with_pieces: bool = False


class DetokenizeRequest(_Body):
    tokens: list[TokenId] = Field(max_length=4096)


class BurstRequest(_Body):
    n: int = Field(MAX_BURST, ge=1, le=MAX_BURST, description="requests fired at once")
    prompt: Text = "Once upon a time"
    max_tokens: int = Field(16, ge=1, le=MAX_PREDICT)


# ---------------------------------------------------------------- replies

Finish = Literal["stop", "length"]


class PromptTokensDetails(BaseModel):
    cached_tokens: int = Field(description="prompt ids the worker took from its KV cache "
                               "rather than computing them (docs/KVCACHE.md)")


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails | None = None


class Timings(BaseModel):
    """The kernel's times for the request, microseconds from ai_submit (an extension)."""

    queued_us: int
    ttft_us: int
    total_us: int


class TopLogprob(BaseModel):
    token: str
    logprob: float
    bytes: list[int] | None


class TokenLogprob(TopLogprob):
    top_logprobs: list[TopLogprob]


class ChatLogprobs(BaseModel):
    """A chat choice's log-probabilities: one entry per token of its content."""

    content: list[TokenLogprob] | None
    refusal: list[TokenLogprob] | None = None


class CompletionLogprobs(BaseModel):
    """A completion choice's log-probabilities (the legacy shape)."""

    tokens: list[str]
    token_logprobs: list[float | None]
    top_logprobs: list[dict[str, float]] | None
    text_offset: list[int]


class CompletionChoice(BaseModel):
    index: int
    text: str
    logprobs: CompletionLogprobs | None = None
    finish_reason: Finish


class CompletionResponse(BaseModel):
    id: str
    object: Literal["text_completion"]
    created: int
    model: str
    usage: Usage
    choices: list[CompletionChoice]
    timings: Timings | None = None


class ChatMessage(BaseModel):
    role: Literal["assistant"]
    content: str


class ChatChoice(BaseModel):
    index: int
    message: ChatMessage
    logprobs: ChatLogprobs | None = None
    finish_reason: Finish


class ChatResponse(BaseModel):
    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    usage: Usage
    choices: list[ChatChoice]
    timings: Timings | None = None


class ModelCard(BaseModel):
    id: str
    object: Literal["model"]
    created: int
    owned_by: str


class ModelList(BaseModel):
    object: Literal["list"]
    data: list[ModelCard]


class Health(BaseModel):
    status: str = Field(description="ok, or the guest's state: starting, down, stopped")
    guest: str
    qemu_pid: int | None
    model: str
    detail: str | None = Field(None, description="why the guest is not up (only then)")


class TokenPiece(BaseModel):
    id: int
    piece: str


class TokenizeResponse(BaseModel):
    tokens: list[int] | list[TokenPiece]


class DetokenizeResponse(BaseModel):
    content: str


class ServiceLimits(BaseModel):
    """The limits one request meets (the kernel's header and the model's config)."""

    vocab: int
    seq_len: int
    max_prompt: int
    max_predict: int
    max_burst: int


class SlotEnded(BaseModel):
    rid: int
    finish: str
    gen: int
    ago_s: float


class SlotView(BaseModel):
    slot: int
    state: str
    shown: str = Field(description="state, or DONE/CANCELLED for a moment after a request "
                       "ended in the slot, PAUSED while the policy holds a RUNNING one back")
    owner: int
    rid: int
    tenant: int | None = Field(description="the kernel's tenant id (None when free)")
    tenant_name: str = Field(description="the HTTP user the tenant stands for, else "
                             "\"pid N\": the submitting process")
    priority: int
    paused: bool = Field(description="RUNNING but paused by the policy (keeps its KV cache)")
    pauses: int = Field(description="times the policy paused it")
    prompt: int
    cached: int = Field(description="prompt positions taken from the worker's KV cache")
    predict: int
    tokens: int
    age_ms: float | None
    queued_ms: float | None
    ttft_ms: float | None
    total_ms: float | None
    ended: SlotEnded | None


class RecentEnd(BaseModel):
    rid: int
    slot: int | None
    finish: str
    gen: int
    prompt: int
    cached: int
    queued_ms: float
    ttft_ms: float | None
    tpot_ms: float | None
    ago_s: float


class TenantServed(BaseModel):
    user: str = Field(description="the requests' user field; \"-\" for those without one")
    tenant: int | None = Field(description="its kernel tenant id; None for \"-\" (the "
                               "gateway's pid)")
    prompt: int = Field(description="prompt ids submitted")
    generated: int = Field(description="ids generated")
    share: float = Field(description="its share of all generated ids, 0..1")


class TableSnapshot(BaseModel):
    time_s: float
    worker_pid: int
    completed: int
    policy: str = Field(description="the kernel's scheduling policy (docs/SCHEDULING.md)")
    chunk: int = Field(description="the policy's step budget: positions per worker step")
    prefill: int = Field(description="the prompt budget: prompt positions of a step in "
                         "which a request decodes (chunk or more: no bound but chunk's)")
    nslot: int
    used: int
    fifo: list[int]
    batch: list[int]
    slots: list[SlotView]
    tenants: list[TenantServed] = Field(description="ids served per HTTP user, most first")
    recent: list[RecentEnd]


class BurstResponse(BaseModel):
    n: int
    done: int
    failed: int
    errors: list[str]
    texts: list[str]


class ErrorBody(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(BaseModel):
    error: ErrorBody


def _err(description: str) -> dict[str, Any]:
    return {"model": ErrorResponse, "description": description}


# The replies besides 200 that the routes declare (responses=...).
GENERATION_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "the reply; with stream: true, Server-Sent Events (data: {chunk}, "
          "then data: [DONE])", "content": {"text/event-stream": {}}},
    400: _err("a bad field, named by error.param"),
    404: _err("unknown model"),
    413: _err("the body is over 1 MiB"),
    429: _err("the host queue is full; see Retry-After"),
    503: _err("the guest is down or rebooting; see Retry-After"),
}
SMALL_RESPONSES = {k: GENERATION_RESPONSES[k] for k in (400, 413)}
DOWN_RESPONSES = {503: GENERATION_RESPONSES[503]}
