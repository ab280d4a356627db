"""The two generation endpoints' reply shapes (OpenAI's), whole and as stream chunks.

``COMPLETION`` (``/v1/completions``: ``text_completion``, each choice a
``text``) and ``CHAT`` (``/v1/chat/completions``: ``chat.completion``, the
whole reply a ``message``, a stream's chunks a ``delta`` after an opening
chunk with the role) make the same five things: a fresh id, the opening
chunk (or None), a chunk of text (with its finish_reason on the last),
the usage chunk and the whole reply. The whole replies are what
pyaisvc.serve.schemas' CompletionResponse and ChatResponse declare.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Protocol

Json = dict[str, Any]


class Shape(Protocol):
    def ident(self) -> str: ...
    def opening(self, ident: str, created: int, model: str) -> Json | None: ...
    def chunk(self, ident: str, created: int, model: str, piece: str,
              finish: str | None) -> Json: ...
    def usage_chunk(self, ident: str, created: int, model: str, usage: Json) -> Json: ...
    def whole(self, model: str, text: str, finish: str, usage: Json) -> Json: ...


class _Completion:
    def ident(self) -> str:
        return f"cmpl-{uuid.uuid4().hex}"

    def opening(self, ident: str, created: int, model: str) -> Json | None:
        return None

    def chunk(self, ident: str, created: int, model: str, piece: str,
              finish: str | None) -> Json:
        """One SSE chunk of text (finish set on the last)."""
        return {"id": ident, "object": "text_completion", "created": created, "model": model,
                "choices": [{"index": 0, "text": piece, "logprobs": None,
                             "finish_reason": finish}]}

    def usage_chunk(self, ident: str, created: int, model: str, usage: Json) -> Json:
        return {"id": ident, "object": "text_completion", "created": created, "model": model,
                "choices": [], "usage": usage}

    def whole(self, model: str, text: str, finish: str, usage: Json) -> Json:
        """The whole reply, as CompletionResponse declares it (without timings)."""
        return {"id": self.ident(), "object": "text_completion", "created": int(time.time()),
                "model": model, "usage": usage,
                "choices": [{"index": 0, "text": text, "logprobs": None,
                             "finish_reason": finish}]}


class _Chat:
    def ident(self) -> str:
        return f"chatcmpl-{uuid.uuid4().hex}"

    def opening(self, ident: str, created: int, model: str) -> Json | None:
        return self._chunk(ident, created, model, {"role": "assistant", "content": ""}, None)

    def chunk(self, ident: str, created: int, model: str, piece: str,
              finish: str | None) -> Json:
        return self._chunk(ident, created, model, {"content": piece} if piece else {}, finish)

    def _chunk(self, ident: str, created: int, model: str, delta: Json,
               finish: str | None) -> Json:
        """One chat.completion.chunk carrying delta."""
        return {"id": ident, "object": "chat.completion.chunk", "created": created,
                "model": model, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                             "finish_reason": finish}]}

    def usage_chunk(self, ident: str, created: int, model: str, usage: Json) -> Json:
        return {"id": ident, "object": "chat.completion.chunk", "created": created,
                "model": model, "choices": [], "usage": usage}

    def whole(self, model: str, text: str, finish: str, usage: Json) -> Json:
        """The whole reply, as ChatResponse declares it (without timings)."""
        return {"id": self.ident(), "object": "chat.completion", "created": int(time.time()),
                "model": model, "usage": usage,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                             "logprobs": None, "finish_reason": finish}]}


COMPLETION: Shape = _Completion()
CHAT: Shape = _Chat()
