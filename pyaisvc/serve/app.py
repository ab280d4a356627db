"""The HTTP application: OpenAI's API, llama.cpp's extras and the kernel's table live.

``create_app(service)`` builds the FastAPI application over a ``Service``
(pyaisvc.serve.service: the engine, the tokenizer, the model's limits and
the metrics), which every route gets by dependency. The routes live in
``pyaisvc.serve.routes`` (one router per audience), the bodies in
``schemas``, the refusals in ``errors``, a generation's path in
``generation``. A request body over ``MAX_BODY`` bytes gets 413
(``BodyLimit``), before any route runs.

The published schema (``/openapi.json``) documents every request and reply;
it lists the 400 this server gives where FastAPI would list 422, and the
served model's id as the only value of ``model``.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from pyaisvc.serve import errors
from pyaisvc.serve.routes import aisvc, extras, openai
from pyaisvc.serve.service import Limits, Service

__all__ = ["MAX_BODY", "BodyLimit", "Limits", "Service", "create_app"]

MAX_BODY = 1 << 20  # bytes of one request body


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
            return await errors.body_too_large(size, self.limit).response()(scope, receive, send)
        replayed = False

        async def replay() -> dict:
            """The body read so far as one message, once; then the client's own messages."""
            nonlocal replayed
            if replayed:
                return await receive()  # e.g. http.disconnect while a reply streams
            replayed = True
            return {"type": "http.request", "body": b"".join(chunks), "more_body": False}

        await self.app(scope, replay, send)


def create_app(service: Service) -> FastAPI:
    """The application serving service (see the module's comment)."""
    app = FastAPI(title="aisvc", version="1", strict_content_type=False,
                  description="The aisvc kernel AI service: an OpenAI-compatible API over "
                  "the guest's gateway (pyaisvc serve).")
    app.state.service = service
    app.add_middleware(BodyLimit, limit=MAX_BODY)
    errors.install(app)
    for router in (openai.router, extras.router, aisvc.router):
        app.include_router(router)

    def schema() -> dict[str, Any]:
        """The published schema, made once (_openapi) and kept."""
        if app.openapi_schema is None:
            app.openapi_schema = _openapi(app, service.model)
        return app.openapi_schema

    app.openapi = schema  # type: ignore[method-assign]
    return app


def _openapi(app: FastAPI, model: str) -> dict[str, Any]:
    """FastAPI's schema, with the 400 this server gives in place of its 422 and the served
    model's id as the only value of `model`."""
    schema = get_openapi(title=app.title, version=app.version, description=app.description,
                         routes=app.routes)
    for path in schema.get("paths", {}).values():
        for op in path.values():
            op.get("responses", {}).pop("422", None)
    schemas = schema.get("components", {}).get("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    for name in ("CompletionRequest", "ChatRequest"):  # the one model served
        schemas[name]["properties"]["model"]["enum"] = [model]
    return schema
