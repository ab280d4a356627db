"""Every refusal the HTTP API gives, in OpenAI's error shape, built in one place each.

A refusal is an ``ApiError``: ``{"error": {"message", "type", "param",
"code"}}`` with its status, ``param`` naming the field. Each kind of
refusal has one builder below (``guest_down``, ``queue_full``, ...), so a
message and its code are written once. ``install(app)`` makes FastAPI
answer with them: an ``ApiError`` raised anywhere, pydantic's validation
errors (as 400 naming the field, never FastAPI's 422) and Starlette's own
HTTP errors (404 for an unknown path, 405, ...).

Status codes: 400 a bad field (and malformed JSON), 404 an unknown model or
path, 413 a body over the limit, 429 the host queue is full, 503 the guest
is down or rebooting (both with ``Retry-After``).
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

RETRY_AFTER = "1"  # seconds: a slot frees within a request's time; a reboot takes longer


class ApiError(Exception):
    """A refusal in OpenAI's shape."""

    def __init__(self, status: int, message: str, param: str | None = None,
                 kind: str = "invalid_request_error", code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.kind, self.code = (status, message, param,
                                                                        kind, code)

    def body(self) -> dict[str, dict[str, str | None]]:
        """The error object, as a reply body or an SSE event carries it."""
        return {"error": {"message": self.message, "type": self.kind, "param": self.param,
                          "code": self.code}}

    def response(self) -> JSONResponse:
        """The error as a reply: its status, Retry-After with 429 and 503."""
        headers = {"Retry-After": RETRY_AFTER} if self.status in (429, 503) else None
        return JSONResponse(self.body(), status_code=self.status, headers=headers)


# ---------------------------------------------------------------- one builder per refusal


def bad_field(message: str, param: str | None) -> ApiError:
    """400: a field the server cannot take; message starts with the field's name."""
    return ApiError(400, message, param)


def unknown_model(asked: str, served: str) -> ApiError:
    """404: a model this server does not serve."""
    return ApiError(404, f"model: '{asked}' is not served here; /v1/models lists "
                    f"'{served}'", "model", code="model_not_found")


def not_found(message: str) -> ApiError:
    """404: a path or file that is not here."""
    return ApiError(404, message, None)


def body_too_large(size: int, limit: int) -> ApiError:
    """413: a request body over limit bytes."""
    return ApiError(413, f"the body is {size} bytes; at most {limit}", None,
                    code="body_too_large")


def queue_full(why: object) -> ApiError:
    """429: the host queue is full."""
    return ApiError(429, f"the server is busy: {why}; retry later", None, "rate_limit_error",
                    "queue_full")


def guest_down(why: object) -> ApiError:
    """503: the guest is down or rebooting, before the request reached it."""
    return ApiError(503, f"the guest is not serving: {why}; retry later", None, "server_error",
                    "guest_down")


def guest_failed(why: object) -> ApiError:
    """503: the guest failed a request it had taken (it died, or the service failed)."""
    return ApiError(503, f"the guest failed the request: {why}; retry later", None,
                    "server_error", "guest_down")


def validation_error(exc: RequestValidationError) -> ApiError:
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


def install(app: FastAPI) -> None:
    """Makes app answer every refusal in OpenAI's shape (see the module's comment)."""

    async def api_error(_: Request, exc: Exception) -> JSONResponse:
        """An ApiError raised by a route, as its reply."""
        assert isinstance(exc, ApiError)
        return exc.response()

    async def invalid(_: Request, exc: Exception) -> JSONResponse:
        """A body the schema refused, as a 400 naming the field."""
        assert isinstance(exc, RequestValidationError)
        return validation_error(exc).response()

    async def http(_: Request, exc: Exception) -> JSONResponse:
        """Starlette's own HTTP errors (unknown path, method) in OpenAI's shape."""
        assert isinstance(exc, StarletteHTTPException)
        kind = "invalid_request_error" if exc.status_code < 500 else "server_error"
        return ApiError(exc.status_code, str(exc.detail), None, kind).response()

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(StarletteHTTPException, http)
