"""Who may use the server: the Host it is named by, the Origin a browser request
comes from, the API key, and the body's Content-Type.

``Access`` holds what ``pyaisvc serve`` was told (``--host``, ``--api-key``,
``--cors-origin``); ``Guard`` is the ASGI middleware that checks every HTTP
request against it, before any route runs, in this order:

1. ``Host`` must name this server: a loopback name (``localhost``,
   ``127.0.0.1``, ``[::1]``) or one of ``Access.hosts`` (``--host``'s address,
   and the machine's names and their addresses when that is not loopback). A rebinding
   page's requests carry its own name: 421.
2. A request with an ``Origin`` header (a browser's, from a page) must come
   from the server's own origin (``http://`` + its ``Host``) or one that
   ``--cors-origin`` lists; any other gets 403. A listed origin gets CORS
   headers, and its preflight (``OPTIONS`` with
   ``Access-Control-Request-Method``) is answered 204 here.
3. With a key, every path but ``/health`` and the page's own files (``/``,
   ``/web/*``: they hold no data; the page asks for the key) needs
   ``Authorization: Bearer KEY``; else 401. ``/v1/aisvc/table/stream`` also
   takes it as ``?api_key=KEY``, since a browser's EventSource cannot set
   a header.
4. A request with a body (POST, PUT, PATCH) must say ``Content-Type:
   application/json``; else 415. A form or text POST, which a page may send
   to any site without a preflight, is refused before its body is read.

Every refusal is in OpenAI's error shape (pyaisvc.serve.errors).
"""

from __future__ import annotations

import hmac
import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from pyaisvc.serve import errors

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
OPEN_PATHS = frozenset({"/health", "/"})  # and every /web/ file
OPEN_PREFIX = "/web/"
QUERY_KEY_PATH = "/v1/aisvc/table/stream"  # EventSource cannot send a header
QUERY_KEY = "api_key"
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
CORS_METHODS = "GET, POST, OPTIONS"
CORS_HEADERS = "Authorization, Content-Type"
CORS_MAX_AGE = "600"


@dataclass(frozen=True)
class Access:
    """What the server lets in: the names it answers to, the API key (None: none needed),
    the other origins browsers may call it from."""

    key: str | None = None
    hosts: frozenset[str] = LOOPBACK_NAMES
    origins: frozenset[str] = field(default_factory=frozenset)


def is_loopback(addr: str) -> bool:
    """Whether addr (an address or a name) stays on this machine."""
    if addr in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(addr).is_loopback
    except ValueError:
        return False


def server_names(bind: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """The Host names the server answers to when it listens on bind: the loopback names,
    bind itself, and for any other bind the machine's host names and their addresses;
    plus extra (lower case, without a port)."""
    names = set(LOOPBACK_NAMES) | {bind.lower()} | {e.lower() for e in extra}
    if not is_loopback(bind):
        for name in {socket.gethostname(), socket.getfqdn()}:
            names.add(name.lower())
            try:
                names.update(str(a[4][0]) for a in socket.getaddrinfo(name, None))
            except OSError:
                pass
    return frozenset(names)


def host_name(host: str) -> str:
    """A Host header's name, lower case, without its port or an IPv6 address' brackets."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _header(scope: dict, name: bytes) -> str | None:
    """The request's header name (lower case) as text, or None."""
    for k, v in scope.get("headers", ()):
        if k == name:
            return v.decode("latin-1")
    return None


def key_given(scope: dict) -> str | None:
    """The API key the request carries: its Bearer token, or on QUERY_KEY_PATH the query's
    api_key; None without one."""
    auth = _header(scope, b"authorization") or ""
    scheme, _, token = auth.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    if scope.get("path") == QUERY_KEY_PATH:
        got = parse_qs(scope.get("query_string", b"").decode("latin-1")).get(QUERY_KEY)
        return got[0] if got else None
    return None


def _is_json(content_type: str | None) -> bool:
    """Whether a Content-Type is JSON's: application/json or application/*+json."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/")
                                           and media.endswith("+json"))


class Guard:
    """ASGI middleware: every HTTP request checked against access (see the module's
    comment); a refusal is answered here, the rest go on to app."""

    def __init__(self, app: Any, access: Access) -> None:
        self.app, self.access = app, access

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        refusal, cors = self.check(scope)
        if refusal is not None:
            return await refusal.response()(scope, receive, send)
        if cors is None:
            return await self.app(scope, receive, send)
        if scope["method"] == "OPTIONS" and _header(scope, b"access-control-request-method"):
            return await _preflight(cors, send)

        async def with_cors(msg: dict) -> None:
            """The app's reply with the CORS headers of the allowed origin."""
            if msg["type"] == "http.response.start":
                msg = {**msg, "headers": [*msg.get("headers", []), *_cors_headers(cors)]}
            await send(msg)

        await self.app(scope, receive, with_cors)

    def check(self, scope: dict) -> tuple[errors.ApiError | None, str | None]:
        """(the refusal, or None; the listed foreign origin to answer with CORS, or
        None) for the request scope."""
        acc = self.access
        host = _header(scope, b"host")
        if host is None or host_name(host) not in acc.hosts:
            return errors.wrong_host(host), None
        origin = _header(scope, b"origin")
        cors = None
        if origin is not None and origin != f"{scope.get('scheme', 'http')}://{host.strip()}":
            if origin not in acc.origins:
                return errors.foreign_origin(origin), None
            cors = origin
        if scope["method"] == "OPTIONS" and cors is not None and \
                _header(scope, b"access-control-request-method"):
            return None, cors  # a preflight carries no key
        path = scope.get("path", "")
        if acc.key is not None and path not in OPEN_PATHS and not path.startswith(OPEN_PREFIX):
            given = key_given(scope)
            if given is None or not hmac.compare_digest(given.encode(), acc.key.encode()):
                return errors.unauthorized(given is not None), None
        if scope["method"] in BODY_METHODS and not _is_json(_header(scope, b"content-type")):
            return errors.not_json(_header(scope, b"content-type")), None
        return None, cors


def _cors_headers(origin: str) -> list[tuple[bytes, bytes]]:
    """The CORS headers that let origin read the reply."""
    return [(b"access-control-allow-origin", origin.encode("latin-1")),
            (b"vary", b"Origin")]


async def _preflight(origin: str, send: Any) -> None:
    """204 to a listed origin's preflight: the methods and headers it may use."""
    headers = [*_cors_headers(origin),
               (b"access-control-allow-methods", CORS_METHODS.encode()),
               (b"access-control-allow-headers", CORS_HEADERS.encode()),
               (b"access-control-max-age", CORS_MAX_AGE.encode())]
    await send({"type": "http.response.start", "status": 204, "headers": headers})
    await send({"type": "http.response.body", "body": b""})
