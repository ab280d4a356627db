"""OpenAI's request fields that the schema accepts but this server does not offer, or
offers in a narrower form: each refused with a 400 that names the field and says what is
offered, or read into what the guest runs (docs/OPENAI.md holds the table).

``refuse_unoffered(req)`` checks a request once, before anything else of ``Service.plan``;
``messages(req)`` gives a chat's messages as the chat template takes them (text parts
joined, ``developer`` as ``system``); ``logprobs(req)`` the number of alternatives asked
(None: no log-probabilities); ``max_tokens(req)`` the limit asked and the field it came
from.
"""

from __future__ import annotations

from typing import Any

from pyaisvc.model.sampling import MAX_TOP_LOGPROBS
from pyaisvc.serve import errors
from pyaisvc.serve.schemas import ChatRequest, CompletionRequest

TEXT_ONLY = "this server offers text only"
# Chat fields that ask for something not offered when set (None or absent: fine).
_CHAT_REFUSED = {
    "tools": "tools (function calling) are not offered: the model has no tool format here",
    "functions": "functions (function calling) are not offered",
    "function_call": "function calling is not offered",
    "audio": f"audio output is not offered: {TEXT_ONLY}",
    "prediction": "predicted outputs are not offered",
    "web_search_options": "web search is not offered",
}
_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}


def refuse_unoffered(req: CompletionRequest | ChatRequest) -> None:
    """ApiError 400 naming the first field whose value asks for something not offered."""
    if isinstance(req, ChatRequest):
        _refuse_chat(req)
        return
    if req.best_of not in (None, 1):
        raise errors.bad_field("best_of: this server returns one choice per request; "
                               "best_of must be 1", "best_of")
    if req.suffix:
        raise errors.bad_field("suffix: inserting text (fill in the middle) is not offered; "
                               "omit suffix", "suffix")
    if req.echo and req.logprobs is not None:
        raise errors.bad_field("echo: with logprobs it would need the prompt's "
                               "log-probabilities, which are not offered; drop one", "echo")


def _refuse_chat(req: ChatRequest) -> None:
    """refuse_unoffered for a chat request."""
    for name, why in _CHAT_REFUSED.items():
        if getattr(req, name) not in (None, []):
            raise errors.bad_field(f"{name}: {why}", name)
    if req.tool_choice not in (None, "none"):
        raise errors.bad_field("tool_choice: only 'none' is offered (no tools)", "tool_choice")
    if req.modalities not in (None, ["text"]):
        raise errors.bad_field(f"modalities: only ['text'] is offered: {TEXT_ONLY}",
                               "modalities")
    if req.response_format is not None and req.response_format.type != "text":
        raise errors.bad_field(f"response_format: type {req.response_format.type!r} is not "
                               "offered (no constrained decoding); only 'text'",
                               "response_format")
    if req.top_logprobs is not None and not req.logprobs:
        raise errors.bad_field("top_logprobs: needs logprobs: true", "top_logprobs")
    if req.top_logprobs is not None and req.top_logprobs > MAX_TOP_LOGPROBS:
        raise errors.bad_field(f"top_logprobs: {req.top_logprobs}; this server gives at "
                               f"most {MAX_TOP_LOGPROBS} alternatives", "top_logprobs")
    if (req.max_tokens is not None and req.max_completion_tokens is not None and
            req.max_tokens != req.max_completion_tokens):
        raise errors.bad_field("max_completion_tokens: differs from max_tokens; give one",
                               "max_completion_tokens")


def messages(req: ChatRequest) -> list[dict[str, Any]]:
    """The messages as the chat template takes them: role (developer as system) and text
    (the text parts joined); ApiError naming the message and part that is not text."""
    out = []
    for i, m in enumerate(req.messages):
        where = f"messages.{i}"
        if m.role not in _ROLES:
            raise errors.bad_field(f"{where}.role: {m.role!r} messages belong to function "
                                   "calling, which is not offered", "messages")
        for name in ("tool_calls", "function_call", "tool_call_id", "audio"):
            if getattr(m, name) is not None:
                raise errors.bad_field(f"{where}.{name}: not offered ({TEXT_ONLY}, no "
                                       "function calling)", "messages")
        out.append({"role": _ROLES[m.role], "content": _text(m.content, where)})
    return out


def _text(content: Any, where: str) -> str:
    """A message's content as one text: a string, or its text parts joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts = []
    for j, part in enumerate(content):
        if part.type not in ("text", "refusal"):
            raise errors.bad_field(f"{where}.content.{j}.type: {part.type!r} parts are not "
                                   f"offered: {TEXT_ONLY} ('text' parts)", "messages")
        texts.append((part.text if part.type == "text" else part.refusal) or "")
    return "".join(texts)


def logprobs(req: CompletionRequest | ChatRequest) -> int | None:
    """How many alternatives per token the reply lists; None: no log-probabilities."""
    if isinstance(req, ChatRequest):
        return (req.top_logprobs or 0) if req.logprobs else None
    return req.logprobs


def max_tokens(req: CompletionRequest | ChatRequest) -> tuple[int | None, str]:
    """The most ids the request asks for (None: the endpoint's default) and its field."""
    if isinstance(req, ChatRequest) and req.max_completion_tokens is not None:
        return req.max_completion_tokens, "max_completion_tokens"
    return req.max_tokens, "max_tokens"
