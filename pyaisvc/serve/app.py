"""The HTTP application: OpenAI's API, llama.cpp's extras and the kernel's table live.

``create_app(service)`` builds the FastAPI application over a ``Service``
(pyaisvc.serve.service: the engine, the tokenizer, the model's limits and
the metrics), which every route gets by dependency. The routes live in
``pyaisvc.serve.routes`` (one router per audience), the bodies in
``schemas``, the refusals in ``errors``, a generation's path in
``generation``. Before any route runs, ``security.Guard`` checks who asks
(Host, Origin, the API key, Content-Type: ``Access``) and
``bounds.BodyLimit`` bounds the body (413 over ``MAX_BODY`` bytes, 408 when
it does not arrive within ``BODY_SECONDS``).

The published schema (``/openapi.json``) documents every request and reply;
it lists the 400 this server gives where FastAPI would list 422, and the
served model's id as the only value of ``model``.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from pyaisvc.serve import errors
from pyaisvc.serve.bounds import BodyLimit
from pyaisvc.serve.routes import aisvc, extras, openai
from pyaisvc.serve.security import Access, Guard
from pyaisvc.serve.service import Limits, Service

__all__ = ["MAX_BODY", "Access", "BodyLimit", "Limits", "Service", "create_app"]

MAX_BODY = 1 << 20  # bytes of one request body
BODY_SECONDS = 30.0  # a request's body arrives within this, or 408
# The refusals every route may give before it runs (security.Guard, bounds.BodyLimit), as the
# published schema lists them: status -> (why, on which routes: all, with a body, with a key).
GUARD_REFUSALS = {
    "401": ("no API key, or a wrong one", "key"),
    "403": ("a browser request from another origin than --cors-origin lists", "all"),
    "408": ("the body did not arrive in time", "body"),
    "413": ("the body is over 1 MiB", "body"),
    "415": ("the body is not declared as JSON (Content-Type: application/json)", "body"),
    "421": ("the Host header does not name this server", "all"),
}


def create_app(service: Service, access: Access | None = None,
               body_seconds: float = BODY_SECONDS) -> FastAPI:
    """The application serving service to whom access lets in (default: loopback, no key;
    see the module's comment)."""
    app = FastAPI(title="aisvc", version="1",
                  description="The aisvc kernel AI service: an OpenAI-compatible API over "
                  "the guest's gateway (pyaisvc serve).")
    app.state.service = service
    app.state.access = access or Access()
    app.add_middleware(BodyLimit, limit=MAX_BODY, seconds=body_seconds)
    app.add_middleware(Guard, access=app.state.access)  # the outermost: runs first
    errors.install(app)
    for router in (openai.router, extras.router, aisvc.router):
        app.include_router(router)

    def schema() -> dict[str, Any]:
        """The published schema, made once (_openapi) and kept."""
        if app.openapi_schema is None:
            app.openapi_schema = _openapi(app, service.model, app.state.access)
        return app.openapi_schema

    app.openapi = schema  # type: ignore[method-assign]
    return app


def _openapi(app: FastAPI, model: str, access: Access) -> dict[str, Any]:
    """FastAPI's schema, with the 400 this server gives in place of its 422, the refusals
    of Guard and BodyLimit (GUARD_REFUSALS), and the served model's id as the only value
    of `model`."""
    schema = get_openapi(title=app.title, version=app.version, description=app.description,
                         routes=app.routes)
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}}
    for name, path in schema.get("paths", {}).items():
        for op in path.values():
            responses = op.setdefault("responses", {})
            responses.pop("422", None)
            for status, (why, when) in GUARD_REFUSALS.items():
                if (when != "body" or "requestBody" in op) and (
                        when != "key" or (access.key is not None and name != "/health")):
                    responses.setdefault(status, {"description": why, "content": error})
    schemas = schema.get("components", {}).get("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    for name in ("CompletionRequest", "ChatRequest"):  # the one model served
        schemas[name]["properties"]["model"]["enum"] = [model]
    return schema
