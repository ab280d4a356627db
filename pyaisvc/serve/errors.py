"""Every refusal the HTTP API gives, in OpenAI's error shape, built in one place each.

A refusal is an ``ApiError``: ``{"error": {"message", "type", "param",
"code"}}`` with its status, ``param`` naming the field. Each kind of
refusal has one builder below (``guest_down``, ``queue_full``, ...), so a
message and its code are written once. ``install(app)`` makes FastAPI
answer with them: an ``ApiError`` raised anywhere, pydantic's validation
errors (as 400 naming the field, never FastAPI's 422) and Starlette's own
HTTP errors (404 for an unknown path, 405, ...).

Status codes: 400 a bad field (and malformed JSON), 401 no or a wrong API
key, 403 a page of another origin, 404 an unknown model or path, 408 a body
not sent in time, 413 a body over the limit, 415 a body that is not JSON,
421 a Host that does not name this server, 429 the host queue is full (or
too many table streams), 503 the guest is down or rebooting (both with
``Retry-After``).
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

LOC_SHOWN = 24  # characters of a path's part (a map's key) a refusal's message shows
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


def unauthorized(wrong: bool) -> ApiError:
    """401: no API key, or a wrong one (wrong)."""
    said = "the API key is wrong" if wrong else "this server needs an API key"
    return ApiError(401, f"{said}: send the header 'Authorization: Bearer KEY' with the key "
                    "the server was started with (--api-key)", None, code="invalid_api_key")


def foreign_origin(origin: str) -> ApiError:
    """403: a browser request from a page of another origin, which --cors-origin does not
    list."""
    return ApiError(403, f"requests from the origin {origin!r} are not allowed here; the "
                    "server's owner may allow it with --cors-origin", None,
                    code="origin_not_allowed")


def wrong_host(host: str | None) -> ApiError:
    """421: a Host header that does not name this server (a DNS rebinding page's, or
    none)."""
    return ApiError(421, f"the Host header {host!r} does not name this server; use the "
                    "address it listens on (or localhost)", None, code="host_not_allowed")


def not_json(content_type: str | None) -> ApiError:
    """415: a request body that is not declared as JSON."""
    said = "has no Content-Type" if content_type is None else f"is {content_type!r}"
    return ApiError(415, f"the body {said}; send it as JSON with the header 'Content-Type: "
                    "application/json'", None, code="unsupported_media_type")


def body_too_slow(seconds: float) -> ApiError:
    """408: a request body not received within its deadline."""
    return ApiError(408, f"the request body did not arrive within {seconds:g} s; send it "
                    "at once", None, code="request_timeout")


def too_many_streams(limit: int) -> ApiError:
    """429: the table's stream already has limit clients."""
    return ApiError(429, f"the table stream already has {limit} clients; retry later or "
                    "poll /v1/aisvc/table", None, "rate_limit_error", "too_many_streams")


def burst_refused() -> ApiError:
    """403: /v1/aisvc/burst on a server with neither an API key nor --enable-burst."""
    return ApiError(403, "the burst is off on this server: start it with --api-key or "
                    "--enable-burst", None, code="burst_disabled")


def burst_busy() -> ApiError:
    """429: a burst while another runs."""
    return ApiError(429, "a burst is running; one at a time: retry when it ends", None,
                    "rate_limit_error", "burst_busy")


def queue_full(why: object) -> ApiError:
    """429: the host queue is full."""
    return ApiError(429, f"the server is busy: {why}; retry later", None, "rate_limit_error",
                    "queue_full")


def number_too_long(digits: int, most: int) -> ApiError:
    """400: a JSON body with a number wider than any field takes."""
    return ApiError(400, f"the body has a number of {digits} digits; no field takes more "
                    f"than {most}: send a smaller number", None, code="number_too_long")


def guest_down(why: object) -> ApiError:
    """503: the guest is down or rebooting, before the request reached it."""
    return ApiError(503, f"the guest is not serving: {why}; retry later", None, "server_error",
                    "guest_down")


def guest_failed(why: object) -> ApiError:
    """503: the guest failed a request it had taken (it died, or the service failed)."""
    return ApiError(503, f"the guest failed the request: {why}; retry later", None,
                    "server_error", "guest_down")


def _shown(part: str) -> str:
    """A part of a field's path as a message shows it: a long one (a map's key) cut."""
    return part if len(part) <= LOC_SHOWN else f"{part[:LOC_SHOWN]}..."


def frame_refused(why: object) -> ApiError:
    """500: the gateway refused the S frame this server built (a bug of the server's)."""
    return ApiError(500, f"the guest's gateway refused the frame this server built: {why}; "
                    "this is a bug in pyaisvc serve: report it with the server's log", None,
                    "server_error", "frame_refused")


def validation_error(exc: RequestValidationError) -> ApiError:
    """The first problem pydantic found, as a 400 naming the field."""
    err = exc.errors()[0]
    loc = [_shown(str(x)) for x in err.get("loc", ()) if x != "body"]
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
    if param == "n" and err.get("ctx", {}).get("le") == 1:
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
