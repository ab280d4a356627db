"""Schemathesis hooks for tests/test_serve.py (loaded through SCHEMATHESIS_HOOKS).

Generation in the guest takes a good part of a second per token, so the
fuzzer's requests ask for few tokens: max_tokens above MAX_TOKENS is lowered
to it, and a generation request without max_tokens (or null: chat's default is all
that fits) gets MAX_TOKENS. Everything else the fuzzer sends goes through
unchanged.
"""

from __future__ import annotations

from typing import Any

import schemathesis

MAX_TOKENS = 3


@schemathesis.hook
def before_call(context: Any, case: Any, **kwargs: Any) -> None:
    body = getattr(case, "body", None)
    if not isinstance(body, dict) or not ("prompt" in body or "messages" in body):
        return
    n = body.get("max_tokens")
    if n is None or (isinstance(n, int) and not isinstance(n, bool) and n > MAX_TOKENS):
        body["max_tokens"] = MAX_TOKENS
