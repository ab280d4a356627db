"""What one HTTP client may hold of the server: its body, its time, its file descriptors.

- ``BodyLimit`` (ASGI middleware): a request body over the limit gets 413 as
  soon as it is known to be over (its Content-Length, or the bytes read so
  far, chunked too), without reading the rest; a body not received within
  ``body_seconds`` gets 408. Both replies close the connection. A JSON body
  with an integer of more than ``NUMBER_DIGITS`` digits gets 400 before any
  route parses it (``long_number``): no field of the API is wider than 64
  bits, and Python's ``int`` refuses more than 4,300 digits with an error
  no route expects. (A float has no such limit: ``float`` reads any
  length.)
- ``header_deadline(seconds)``: uvicorn's HTTP/1.1 protocol (h11) with a
  deadline for a request's headers: a connection that has not sent a whole
  request head within it, from its start or from the end of its last reply,
  is closed. Uvicorn's ``timeout_keep_alive`` only closes a connection that
  sent nothing after a reply; this also closes one that never sends, or
  sends its head a byte at a time.
- ``raise_open_files(n)``: the process' open-file limit raised to hold n
  connections (each is a descriptor), up to the hard limit.
"""

from __future__ import annotations

import asyncio
import json
import resource
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from pyaisvc.serve import errors

SPARE_FILES = 256  # descriptors beyond the connections: QEMU's sockets, the model, logs
NUMBER_DIGITS = len(str(2**64 - 1))  # the widest number a field takes (a seed: 20 digits)
CLOSE = [(b"connection", b"close")]


async def _refuse(err: errors.ApiError, scope: dict, receive: Any, send: Any) -> None:
    """err as the reply, and the connection closed after it (its body is left unread)."""
    reply = err.response()
    reply.headers["connection"] = "close"
    await reply(scope, receive, send)


class BodyLimit:
    """ASGI middleware: a request body over `limit` bytes gets 413, one not received within
    `seconds` gets 408 (see the module's comment); a body within both is handed on as one
    message."""

    def __init__(self, app: Any, limit: int, seconds: float) -> None:
        self.app, self.limit, self.seconds = app, limit, seconds

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers", ())).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.limit:
            return await _refuse(errors.body_too_large(int(declared), self.limit), scope,
                                 receive, send)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.seconds
        chunks: list[bytes] = []
        size, more = 0, True
        while more:
            try:
                msg = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
            except TimeoutError:
                return await _refuse(errors.body_too_slow(self.seconds), scope, receive, send)
            if msg["type"] != "http.request":
                return  # the client left
            chunk = msg.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                return await _refuse(errors.body_too_large(size, self.limit), scope, receive,
                                     send)
            chunks.append(chunk)
            more = msg.get("more_body", False)
        if (digits := long_number(b"".join(chunks))) is not None:
            return await errors.number_too_long(digits, NUMBER_DIGITS).response()(
                scope, receive, send)
        replayed = False

        async def replay() -> dict:
            """The body read so far as one message, once; then the client's own messages."""
            nonlocal replayed
            if replayed:
                return await receive()  # e.g. http.disconnect while a reply streams
            replayed = True
            return {"type": "http.request", "body": b"".join(chunks), "more_body": False}

        await self.app(scope, replay, send)


class _LongNumber(Exception):
    """An integer in a JSON body over NUMBER_DIGITS digits (its digits in args[0])."""


def _bounded(text: str) -> str:
    """text (a JSON integer's) when it has at most NUMBER_DIGITS digits; else _LongNumber."""
    digits = len(text.lstrip("-"))
    if digits > NUMBER_DIGITS:
        raise _LongNumber(digits)
    return text


def long_number(body: bytes) -> int | None:
    """How many digits the first integer of body over NUMBER_DIGITS digits has; None when
    every integer fits, or body is not JSON (the route then says what is wrong with it)."""
    try:
        json.loads(body, parse_int=_bounded)
    except _LongNumber as e:
        return int(e.args[0])
    except (ValueError, RecursionError):
        return None
    return None


def header_deadline(seconds: float) -> type[H11Protocol]:
    """Uvicorn's h11 protocol, closing a connection whose request head has not come within
    seconds of its start or of its last reply's end."""

    class HeaderDeadline(H11Protocol):
        _timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def _arm(self) -> None:
            self._disarm()
            self._timer = self.loop.call_later(seconds, self._expire, self.cycle)

        def _disarm(self) -> None:
            """Cancels the deadline's timer, if one is set."""
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

        def _expire(self, cycle: Any) -> None:
            """The deadline passed: close unless a new request's head came meanwhile."""
            if self.cycle is cycle and not self.transport.is_closing():
                self.transport.close()

        def handle_events(self) -> None:
            """h11's events, as uvicorn handles them; the deadline ends once a request's
            head came."""
            before = self.cycle
            super().handle_events()
            if self.cycle is not before:
                self._disarm()  # a request's head came

        def on_response_complete(self) -> None:
            """A reply ended: the deadline starts again unless a request is pipelined."""
            super().on_response_complete()
            idle = self.cycle is None or self.cycle.response_complete  # none pipelined
            if idle and not self.transport.is_closing():
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return HeaderDeadline


def raise_open_files(connections: int) -> tuple[int, int]:
    """Raises the soft open-file limit to fit connections (plus SPARE_FILES), up to the hard
    limit; returns (the soft limit now, the connections it fits)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = connections + SPARE_FILES
    if soft != resource.RLIM_INFINITY and soft < want:
        new = want if hard == resource.RLIM_INFINITY else min(want, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
            soft = new
        except (ValueError, OSError):
            pass
    fits = connections if soft == resource.RLIM_INFINITY else max(0, soft - SPARE_FILES)
    return soft, min(connections, fits)
