"""One connection to the guest's gateway: request ids, the window, the host queue.

``Gateway.connect(reader, writer)`` says hello (``H``, again every second
until the ``R`` frame comes: a hello sent before the gateway opened its port
may be lost) and learns the window: how many requests the gateway holds live
at once. ``run()`` then reads frames until the connection ends and hands
each request its own.

``submit()`` admits a request: at once while fewer than ``window`` requests
are live, else it waits in the host queue (first come, first served), which
holds at most ``queue_max`` waiters; one more raises ``QueueFull`` (HTTP
429). It then picks a free rid, sends the ``S`` frame and returns a
``Submitted``, whose ``events()`` yields the request's ``Tokens`` and
finally its ``End`` (or raises ``RequestFailed`` for an ``X`` frame).
``Submitted.cancel()`` sends ``C rid`` when the request has not ended: the
caller went away, or a stop string ended it on the host. A window place is
given back only when the request's ``E`` or ``X`` frame arrives, so the
host never holds more live requests than the gateway allows.

When the connection ends (QEMU exited), every live request and every waiter
gets ``GuestDown`` (HTTP 503), and so does every later ``submit``. An ``R``
frame the host did not ask for means the gateway started again (init
restarts it): the requests it held get ``GuestDown``, the rest go on.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from pyaisvc import cheader
from pyaisvc.errors import AisvcError
from pyaisvc.serve import frames

log = logging.getLogger("pyaisvc.serve")
HELLO_EVERY = 1.0  # seconds between hellos until the gateway answers
SETTLE = 0.3  # seconds of quiet after the first R: the other hellos' answers came
# Kernel codes that describe the request itself (docs/AI_SERVICE.md): a bad request,
# not a broken service. The host checks these limits first, so they are rare.
REQUEST_CODES = frozenset(cheader.header_define("aisvc.h", name) for name in (
    "AIE_COUNT", "AIE_PREDICT", "AIE_TOKEN", "AIE_TOOLONG", "AIE_BADARG"))
# The answers about the kernel's table the host can ask for, each with its question.
Answer = TypeVar("Answer", frames.Info, frames.Table)
QUESTIONS: dict[type, bytes] = {frames.Info: frames.INFO, frames.Table: frames.TABLE}


class GuestDown(AisvcError):
    """The gateway is gone (the guest died or is booting): retry later."""


class QueueFull(AisvcError):
    """The host queue is full: retry later."""


class RequestFailed(AisvcError):
    """The gateway answered the request with an X frame."""

    def __init__(self, code: int, words: str) -> None:
        super().__init__(f"the AI service refused the request: code {code} ({words})")
        self.code, self.words = code, words

    @property
    def is_request_error(self) -> bool:
        return self.code in REQUEST_CODES


@dataclass
class _Request:
    """One request the host sent and the gateway has not ended, with its frames so far."""

    rid: int
    events: asyncio.Queue[frames.Frame | Exception] = field(default_factory=asyncio.Queue)
    ended: bool = False  # its E or X frame arrived (or the connection ended)
    cancelled: bool = False  # C was sent


class Submitted:
    """A request the gateway holds; iterate ``events()`` once."""

    def __init__(self, gw: Gateway, live: _Request) -> None:
        self._gw, self._live = gw, live

    @property
    def rid(self) -> int:
        return self._live.rid

    async def events(self) -> AsyncIterator[frames.Tokens | frames.End]:
        """The request's T frames, then its E frame, as they come (iterate once);
        RequestFailed for an X frame, GuestDown when the connection ended first."""
        while True:
            item = await self._live.events.get()
            if isinstance(item, Exception):
                raise item
            if isinstance(item, frames.Failed):
                raise RequestFailed(item.code, item.words)
            assert isinstance(item, frames.Tokens | frames.End)
            yield item
            if isinstance(item, frames.End):
                return

    def cancel(self) -> None:
        """Asks the gateway to end the request, unless it has ended (idempotent)."""
        live = self._live
        if live.ended or live.cancelled:
            return
        live.cancelled = True
        self._gw.send(frames.cancel(live.rid))


async def _settle(reader: asyncio.StreamReader) -> None:
    """Reads the answers to the other hellos sent while the gateway was not yet up (and
    the R it sends when it starts), until the line is quiet for SETTLE seconds; so any
    R that comes later is one the host did not ask for."""
    while True:
        try:
            line = await asyncio.wait_for(reader.readline(), SETTLE)
        except TimeoutError:
            return
        if not line:
            return  # run() finds the end too
        if not line.startswith(b"R "):
            log.warning("gateway: before ready: %r", line)


class Gateway:
    """The host's end of one gateway connection."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 ready: frames.Ready, queue_max: int) -> None:
        """The host's end of a connection whose R frame (ready) has come; run() must then
        read its frames."""
        self._reader, self._writer = reader, writer
        self.ready = ready
        self.window = ready.window
        self.queue_max = queue_max
        self._live: dict[int, _Request] = {}
        self._held = 0  # window places taken: live requests and places handed to waiters
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        # the futures waiting for an I or a V frame, by the frame's type, first asked first
        self._asked: dict[type, collections.deque[asyncio.Future]] = {
            kind: collections.deque() for kind in QUESTIONS}
        self._next_rid = 1
        self.down: GuestDown | None = None
        self.on_end: Callable[[frames.End], None] | None = None  # for metrics

    # ------------------------------------------------------------ setup

    @classmethod
    async def connect(cls, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      queue_max: int, timeout: float) -> Gateway:
        """Says hello until the R frame comes; GuestDown if it does not within timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            writer.write(frames.HELLO)
            await writer.drain()
            wait = min(HELLO_EVERY, deadline - loop.time())
            if wait <= 0:
                raise GuestDown(f"the gateway did not answer in {timeout:.0f} s")
            try:
                line = await asyncio.wait_for(reader.readline(), wait)
            except TimeoutError:
                continue
            if not line:
                raise GuestDown("the gateway connection closed before the gateway was ready")
            try:
                frame = frames.parse(line.decode("ascii", "replace"))
            except frames.FrameError as e:
                log.warning("gateway: before ready: %s", e)
                continue
            if isinstance(frame, frames.Ready):
                if frame.window < 1:
                    raise GuestDown(f"the gateway's window is {frame.window}")
                await _settle(reader)
                return cls(reader, writer, frame, queue_max)

    # ------------------------------------------------------------ the host's side

    @property
    def live(self) -> int:
        """Requests submitted and not ended."""
        return len(self._live)

    @property
    def queued(self) -> int:
        """Requests waiting in the host queue for a window place."""
        return len(self._waiters)

    def send(self, frame: bytes) -> None:
        if self.down is None:
            self._writer.write(frame)

    async def submit(self, prompt: list[int], predict: int, opts: frames.Options,
                     stops: list[int]) -> Submitted:
        """Admits (maybe after waiting in the host queue) and sends the request;
        QueueFull, GuestDown, or ValueError for a frame the framing cannot carry."""
        frames.submit(1, prompt, predict, opts, stops)  # its ValueError before any wait
        await self._admit()
        try:
            if self.down is not None:
                raise self.down
            rid = self._free_rid()
            live = self._live[rid] = _Request(rid)
            self._writer.write(frames.submit(rid, prompt, predict, opts, stops))
        except BaseException:
            self._release()
            raise
        return Submitted(self, live)

    async def ask(self, kind: type[Answer], timeout: float = 5.0) -> Answer:
        """The kernel's table now: at a glance (kind frames.Info: an I frame) or whole, at
        one instant (frames.Table: a V frame); GuestDown or TimeoutError."""
        if self.down is not None:
            raise self.down
        fut: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self._asked[kind].append(fut)
        self._writer.write(QUESTIONS[kind])
        return await asyncio.wait_for(asyncio.shield(fut), timeout)

    async def _admit(self) -> None:
        """Takes a window place for one request: at once while one is free and nobody waits,
        else after waiting in the host queue; QueueFull when the queue holds queue_max,
        GuestDown when the connection is down or ends meanwhile."""
        if self.down is not None:
            raise self.down
        if self._held < self.window and not self._waiters:
            self._held += 1
            return
        if len(self._waiters) >= self.queue_max:
            raise QueueFull(f"{self.live} requests running and {self.queued} waiting")
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut  # a place handed over by _release
        except BaseException:
            if fut in self._waiters:
                self._waiters.remove(fut)
            elif fut.done() and not fut.cancelled() and fut.exception() is None:
                self._release()  # the place came, but the caller left: pass it on
            raise

    def _release(self) -> None:
        """Gives one window place back: to the first waiter, or to the pool."""
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                return
        self._held -= 1

    def _free_rid(self) -> int:
        """The next rid (1..RID_MAX, wrapping) that no live request holds."""
        while self._next_rid in self._live:
            self._next_rid = self._next_rid % frames.RID_MAX + 1
        rid = self._next_rid
        self._next_rid = rid % frames.RID_MAX + 1
        return rid

    # ------------------------------------------------------------ the guest's side

    async def run(self) -> None:
        """Reads frames until the connection ends, then fails everything with GuestDown."""
        why = "the gateway connection ended (the guest stopped)"
        try:
            while True:
                try:
                    line = await self._reader.readline()
                except ValueError:  # a line longer than the stream's limit
                    log.warning("gateway: a line over the reader's limit, skipped")
                    continue
                if not line:
                    break
                self._dispatch(line.decode("ascii", "replace").rstrip("\r\n"))
        except (ConnectionError, OSError) as e:
            why = f"the gateway connection failed ({e})"
        finally:
            self.close(why)

    def _dispatch(self, line: str) -> None:
        """Hands one line from the gateway to whom it concerns: I and V answers to the first
        caller waiting, R (unasked) to _restarted, T/E/X to their live request (E and X
        end it and free its window place); a garbled line or a frame for no live request
        is logged and dropped."""
        try:
            frame = frames.parse(line)
        except frames.FrameError as e:
            log.warning("gateway: %s", e)
            return
        if isinstance(frame, frames.Info | frames.Table):
            waiting = self._asked[type(frame)]
            while waiting:
                fut = waiting.popleft()
                if not fut.done():
                    fut.set_result(frame)  # type: ignore[arg-type]
                    break
            return
        if isinstance(frame, frames.Ready):
            self._restarted(frame)
            return
        if isinstance(frame, frames.Failed) and frame.code in (frames.GW_RID_LIVE,
                                                                frames.GW_NOT_LIVE):
            log.warning("gateway: %s", line)  # these end nothing (docs/GATEWAY.md)
            return
        live = self._live.get(frame.rid)
        if live is None:
            log.warning("gateway: a frame for rid %d, which is not live: %s", frame.rid, line)
            return
        live.events.put_nowait(frame)
        if isinstance(frame, frames.End | frames.Failed):
            live.ended = True
            del self._live[frame.rid]
            self._release()
            if isinstance(frame, frames.End) and self.on_end is not None:
                self.on_end(frame)

    def _restarted(self, ready: frames.Ready) -> None:
        """An R frame nobody asked for (hellos are answered before connect returns): the
        gateway started again, and the requests it held will get no end frame. They end
        with GuestDown; the new gateway's window holds from now on."""
        log.warning("the gateway restarted; %d live request(s) lost", len(self._live))
        lost = GuestDown("the gateway restarted; the request was lost")
        for rid in list(self._live):
            live = self._live.pop(rid)
            live.ended = True
            live.events.put_nowait(lost)
            self._release()
        self.ready, self.window = ready, max(1, ready.window)

    def close(self, why: str) -> None:
        """Ends the connection: every live request and waiter gets GuestDown."""
        if self.down is not None:
            return
        self.down = GuestDown(why)
        for live in self._live.values():
            live.ended = True
            live.events.put_nowait(self.down)
        self._live.clear()
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_exception(self.down)
        for waiting in self._asked.values():
            while waiting:
                fut = waiting.popleft()
                if not fut.done():
                    fut.set_exception(self.down)
        self._writer.close()
