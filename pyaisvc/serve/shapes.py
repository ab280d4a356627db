"""The two generation endpoints' reply shapes (OpenAI's), whole and as stream chunks.

``COMPLETION`` (``/v1/completions``: ``text_completion``, each choice a
``text``) and ``CHAT`` (``/v1/chat/completions``: ``chat.completion``, the
whole reply a ``message``, a stream's chunks a ``delta`` after an opening
chunk with the role) make the same five things: a fresh id, the opening
chunk (or None), a chunk of text (with its finish_reason on the last),
the usage chunk and the whole reply. The whole replies are what
pyaisvc.serve.schemas' CompletionResponse and ChatResponse declare.

Log-probabilities (``logprobs``: the tokens a chunk or the reply carries, each
a ``Token``) take each endpoint's own shape: chat's ``{"content": [{token,
logprob, bytes, top_logprobs}]}``, completions' ``{tokens, token_logprobs,
top_logprobs, text_offset}``; None when the request asked for none.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any, Protocol

Json = dict[str, Any]


@dataclass(frozen=True)
class Token:
    """One generated token's log-probability, its alternatives, and where its text starts
    in the choice's text (completions' text_offset)."""

    text: str
    logprob: float
    top: tuple[tuple[str, float], ...]
    offset: int


Logprobs = list[Token] | None  # None: the request asked for none


class Shape(Protocol):
    def ident(self) -> str: ...
    def opening(self, ident: str, created: int, model: str) -> Json | None: ...
    def chunk(self, ident: str, created: int, model: str, piece: str,
              finish: str | None, logprobs: Logprobs = None) -> Json: ...
    def usage_chunk(self, ident: str, created: int, model: str, usage: Json) -> Json: ...
    def whole(self, model: str, text: str, finish: str, usage: Json,
              logprobs: Logprobs = None) -> Json: ...


def _bytes(text: str) -> list[int]:
    return list(text.encode("utf-8"))


def chat_logprobs(tokens: Logprobs) -> Json | None:
    """Chat's logprobs object for tokens."""
    if tokens is None:
        return None
    return {"content": [{"token": t.text, "logprob": t.logprob, "bytes": _bytes(t.text),
                         "top_logprobs": [{"token": s, "logprob": v, "bytes": _bytes(s)}
                                          for s, v in t.top]} for t in tokens],
            "refusal": None}


def completion_logprobs(tokens: Logprobs) -> Json | None:
    """Completions' logprobs object for tokens."""
    if tokens is None:
        return None
    return {"tokens": [t.text for t in tokens], "token_logprobs": [t.logprob for t in tokens],
            "top_logprobs": [dict(t.top) for t in tokens],
            "text_offset": [t.offset for t in tokens]}


class _Completion:
    def ident(self) -> str:
        return f"cmpl-{uuid.uuid4().hex}"

    def opening(self, ident: str, created: int, model: str) -> Json | None:
        return None

    def chunk(self, ident: str, created: int, model: str, piece: str,
              finish: str | None, logprobs: Logprobs = None) -> Json:
        """One SSE chunk of text (finish set on the last), with its tokens' logprobs."""
        return {"id": ident, "object": "text_completion", "created": created, "model": model,
                "choices": [{"index": 0, "text": piece,
                             "logprobs": completion_logprobs(logprobs),
                             "finish_reason": finish}]}

    def usage_chunk(self, ident: str, created: int, model: str, usage: Json) -> Json:
        return {"id": ident, "object": "text_completion", "created": created, "model": model,
                "choices": [], "usage": usage}

    def whole(self, model: str, text: str, finish: str, usage: Json,
              logprobs: Logprobs = None) -> Json:
        """The whole reply, as CompletionResponse declares it (without timings)."""
        return {"id": self.ident(), "object": "text_completion", "created": int(time.time()),
                "model": model, "usage": usage,
                "choices": [{"index": 0, "text": text,
                             "logprobs": completion_logprobs(logprobs),
                             "finish_reason": finish}]}


class _Chat:
    def ident(self) -> str:
        return f"chatcmpl-{uuid.uuid4().hex}"

    def opening(self, ident: str, created: int, model: str) -> Json | None:
        return self._chunk(ident, created, model, {"role": "assistant", "content": ""}, None)

    def chunk(self, ident: str, created: int, model: str, piece: str,
              finish: str | None, logprobs: Logprobs = None) -> Json:
        """One SSE chunk of the reply's content (finish set on the last), with logprobs."""
        return self._chunk(ident, created, model, {"content": piece} if piece else {}, finish,
                           logprobs)

    def _chunk(self, ident: str, created: int, model: str, delta: Json,
               finish: str | None, logprobs: Logprobs = None) -> Json:
        """One chat.completion.chunk carrying delta and its tokens' logprobs."""
        return {"id": ident, "object": "chat.completion.chunk", "created": created,
                "model": model, "choices": [{"index": 0, "delta": delta,
                                             "logprobs": chat_logprobs(logprobs),
                                             "finish_reason": finish}]}

    def usage_chunk(self, ident: str, created: int, model: str, usage: Json) -> Json:
        return {"id": ident, "object": "chat.completion.chunk", "created": created,
                "model": model, "choices": [], "usage": usage}

    def whole(self, model: str, text: str, finish: str, usage: Json,
              logprobs: Logprobs = None) -> Json:
        """The whole reply, as ChatResponse declares it (without timings)."""
        return {"id": self.ident(), "object": "chat.completion", "created": int(time.time()),
                "model": model, "usage": usage,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                             "logprobs": chat_logprobs(logprobs), "finish_reason": finish}]}


COMPLETION: Shape = _Completion()
CHAT: Shape = _Chat()
