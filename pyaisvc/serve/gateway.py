"""One connection to the guest's gateway: request ids, the window, the host queue.

``Gateway.connect(reader, writer)`` says hello (``H nonce``, again every
second until the ``R`` frame comes: a hello sent before the gateway opened
its port may be lost) and learns the window: how many live requests the
gateway holds per tenant (``frames.LIVE_MAX`` in all). The answer echoes the
nonce, so it is told from the R the gateway sends by itself when it starts
(no nonce); answers to the other hellos, which may come later, carry the
nonce too and are dropped. ``run()`` then reads frames until the connection
ends and hands each request its own; a T frame with an id outside the
vocabulary fails its request (503).

``admit(request)`` takes a place for the request (``hostqueue.Places``: at
once while its tenant and the gateway have room, else it waits in the host
queue, in turns by tenant; ``QueueFull``, HTTP 429, when ``queue_max``
wait), then picks a free rid, sends the ``S`` frame and returns a
``Submitted``, whose ``events()`` yields the request's ``Tokens`` (each id's
``LogProbs`` before it, when the request asked for them) and
finally its ``End`` (or raises ``RequestFailed`` for an ``X`` frame). An
``X`` that means "not now" (``NOT_NOW``: the tenant's window or the table is
full in the guest) does not fail the request: it goes back to the head of its
tenant's line and is sent again under a fresh rid.
``Submitted.cancel()`` sends ``C rid`` when the request has not ended: the
caller went away, or a stop string ended it on the host. A window place is
given back only when the request's ``E`` or ``X`` frame arrives, so the
host never holds more live requests than the gateway allows; or when no
frame for it came for ``lost_after`` seconds (its end frame was lost): it
then ends with ``GuestDown`` and a ``C`` frame goes to the guest.

When the connection ends (QEMU exited), every live request and every waiter
gets ``GuestDown`` (HTTP 503), and so does every later ``admit``. An ``R``
frame without a nonce means the gateway started again (init restarts it):
the requests it held get ``GuestDown``, the rest go on.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from pyaisvc import cheader
from pyaisvc.errors import AisvcError
from pyaisvc.serve import frames
from pyaisvc.serve.hostqueue import Places

log = logging.getLogger("pyaisvc.serve")
HELLO_EVERY = 1.0  # seconds between hellos until the gateway answers
LOST_AFTER = 600.0  # seconds without a frame for a live request: its end frame was lost
REAP_EVERY = 1.0  # seconds between looks for such requests
RETRY_PAUSE = 0.5  # seconds the host queue waits after a "not now" refusal (unless a place frees)
# The refusals that mean "not now" (docs/GATEWAY.md, "Refusals"): the request waits in the
# host queue again. The tenant's window in the kernel, the kernel's table, the gateway's.
NOT_NOW = frozenset((cheader.header_define("aisvc.h", "AIE_WOULDBLOCK"),
                     cheader.header_define("aisvc.h", "AIE_FULL"), frames.GW_FULL))
# Kernel codes that describe the request itself (docs/AI_SERVICE.md): a bad request,
# not a broken service. The host checks these limits first, so they are rare.
REQUEST_CODES = frozenset(cheader.header_define("aisvc.h", name) for name in (
    "AIE_COUNT", "AIE_PREDICT", "AIE_TOKEN", "AIE_TOOLONG", "AIE_BADARG"))
# The answers about the kernel's table the host can ask for, each with its question.
Answer = TypeVar("Answer", frames.Info, frames.Table)
QUESTIONS: dict[type, bytes] = {frames.Info: frames.INFO, frames.Table: frames.TABLE}


class GuestDown(AisvcError):
    """The gateway is gone (the guest died or is booting): retry later."""


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
    request: frames.Request
    events: asyncio.Queue[frames.Frame | Exception] = field(default_factory=asyncio.Queue)
    ended: bool = False  # its E or X frame arrived (or the connection ended)
    cancelled: bool = False  # C was sent
    failed: bool = False  # a garbled T frame failed it; its frames are dropped until its end
    heard: float = field(default_factory=time.monotonic)  # when its last frame came


class Submitted:
    """A request the gateway holds; iterate ``events()`` once."""

    def __init__(self, gw: Gateway, live: _Request) -> None:
        self._gw, self._live = gw, live

    @property
    def rid(self) -> int:
        return self._live.rid

    async def events(self) -> AsyncIterator[frames.Tokens | frames.LogProbs | frames.End]:
        """The request's T (and L) frames, then its E frame, as they come (iterate once);
        RequestFailed for an X frame, GuestDown when the connection ended first. A "not
        now" refusal sends the request again once it has a place (Gateway.resend)."""
        while True:
            item = await self._live.events.get()
            if isinstance(item, Exception):
                raise item
            if isinstance(item, frames.Failed) and item.code in NOT_NOW:
                await self._gw.resend(self._live)
                continue
            if isinstance(item, frames.Failed):
                raise RequestFailed(item.code, item.words)
            assert isinstance(item, frames.Tokens | frames.LogProbs | frames.End)
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


class Gateway:
    """The host's end of one gateway connection."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 ready: frames.Ready, queue_max: int, lost_after: float = LOST_AFTER) -> None:
        """The host's end of a connection whose R frame (ready) has come; run() must then
        read its frames."""
        self._reader, self._writer = reader, writer
        self.ready = ready
        self.lost_after = lost_after
        self.places = Places(ready.window, frames.LIVE_MAX, queue_max)
        self._live: dict[int, _Request] = {}
        # the futures waiting for an I or a V frame, by the frame's type, first asked first
        self._asked: dict[type, collections.deque[asyncio.Future]] = {
            kind: collections.deque() for kind in QUESTIONS}
        self._next_rid = 1
        self._out: list[bytes] = []  # frames to write at the end of this loop turn
        self.nonce: int | None = None  # the hellos' (their late answers are dropped)
        self.down: GuestDown | None = None
        self.on_end: Callable[[frames.End], None] | None = None  # for metrics

    # ------------------------------------------------------------ setup

    @classmethod
    async def connect(cls, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      queue_max: int, timeout: float, lost_after: float = LOST_AFTER
                      ) -> Gateway:
        """Says hello until the R frame answering it (its nonce) comes; GuestDown if it does
        not within timeout. Any other line before it is logged and dropped."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        nonce = secrets.randbelow(frames.NONCE_MAX) + 1
        while True:
            writer.write(frames.hello(nonce))
            await writer.drain()
            wait = min(HELLO_EVERY, deadline - loop.time())
            if wait <= 0:
                raise GuestDown(f"the gateway did not answer in {timeout:.0f} s")
            try:
                line = await asyncio.wait_for(reader.readline(), wait)
            except TimeoutError:
                continue
            except ValueError:  # a line over the reader's limit: dropped with its rest
                log.warning("gateway: before ready: a line over the reader's limit, dropped")
                continue
            if not line:
                raise GuestDown("the gateway connection closed before the gateway was ready")
            try:
                frame = frames.parse(line.decode("ascii", "replace").rstrip("\r\n"))
            except frames.FrameError as e:
                log.warning("gateway: before ready: %s", e)
                continue
            if isinstance(frame, frames.Ready) and frame.nonce == nonce:
                gw = cls(reader, writer, frame, queue_max, lost_after)
                gw.nonce = nonce
                return gw

    # ------------------------------------------------------------ the host's side

    @property
    def window(self) -> int:
        """The live requests the gateway holds per tenant (the R frame's)."""
        return self.places.per_tenant

    @property
    def live(self) -> int:
        """Requests submitted and not ended."""
        return len(self._live)

    @property
    def queued(self) -> int:
        """Requests waiting in the host queue for a place."""
        return self.places.waiting

    def send(self, frame: bytes) -> None:
        """Sends frame with the others sent in this turn of the event loop, in one write:
        requests that arrive together reach the gateway in one read, and it submits them
        together."""
        if self.down is not None:
            return
        self._out.append(frame)
        if len(self._out) == 1:
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        """Writes the frames send() collected."""
        if self.down is None and self._out:
            self._writer.write(b"".join(self._out))
        self._out.clear()

    async def admit(self, request: frames.Request) -> Submitted:
        """Takes a place for request (maybe after waiting in the host queue) and sends it;
        QueueFull or GuestDown."""
        if self.down is not None:
            raise self.down
        await self.places.take(request.tenant)
        return Submitted(self, self._send(_Request(0, request)))

    async def resend(self, live: _Request) -> None:
        """Sends live again after a "not now" refusal, once it has a place: at the head of
        its tenant's line; GuestDown when the connection is down or ends meanwhile."""
        if self.down is not None:
            raise self.down
        await self.places.take(live.request.tenant, front=True)
        live.ended = False
        live.heard = time.monotonic()
        self._send(live)

    def _send(self, live: _Request) -> _Request:
        """Sends live's S frame under a free rid, on the place it holds; GuestDown (the place
        given back) when the connection is down."""
        try:
            if self.down is not None:
                raise self.down
            live.rid = self._free_rid()
            self._live[live.rid] = live
            self.send(frames.submit_line(live.rid, live.request))
        except BaseException:
            self.places.give_back(live.request.tenant)
            raise
        return live

    async def ask(self, kind: type[Answer], timeout: float = 5.0) -> Answer:
        """The kernel's table now: at a glance (kind frames.Info: an I frame) or whole, at
        one instant (frames.Table: a V frame); GuestDown or TimeoutError."""
        if self.down is not None:
            raise self.down
        fut: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self._asked[kind].append(fut)
        self.send(QUESTIONS[kind])
        return await asyncio.wait_for(asyncio.shield(fut), timeout)

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
        reaper = asyncio.create_task(self._reap_lost())
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
        except BaseException as e:
            why = f"the host's gateway reader failed ({e!r})"
            raise
        finally:
            reaper.cancel()
            self.close(why)

    async def _reap_lost(self) -> None:
        """Ends every live request no frame came for in lost_after seconds (its E or X
        frame was lost): GuestDown for its caller, its window place freed, C to the guest
        in case it still runs there."""
        while self.down is None:
            await asyncio.sleep(min(REAP_EVERY, self.lost_after))
            now = time.monotonic()
            for live in [r for r in self._live.values() if now - r.heard > self.lost_after]:
                log.warning("gateway: no frame for rid %d in %.0f s: its end was lost",
                            live.rid, self.lost_after)
                self._end(live, GuestDown(f"the guest sent nothing for the request in "
                                          f"{self.lost_after:.0f} s; it is ended"))
                if not live.cancelled:
                    live.cancelled = True
                    self.send(frames.cancel(live.rid))

    def _end(self, live: _Request, last: frames.Frame | Exception | None) -> None:
        """Ends live: last (if any) to its caller, its place back. After a "not now"
        refusal the place is not handed on at once (the host queue pauses), so the next
        request is not sent into the same refusal."""
        live.ended = True
        if last is not None:
            live.events.put_nowait(last)
        del self._live[live.rid]
        not_now = isinstance(last, frames.Failed) and last.code in NOT_NOW
        self.places.give_back(live.request.tenant, hand_on=not not_now)
        if not_now:
            self.places.pause(RETRY_PAUSE)

    def _dispatch(self, line: str) -> None:
        """Hands one line from the gateway to whom it concerns: I and V answers to the first
        caller waiting, R (unasked) to _restarted, T/L/E/X to their live request (E and X
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
            if frame.nonce is None:
                self._restarted(frame)
            elif frame.nonce != self.nonce:
                log.warning("gateway: an answer to a hello nobody sent: %s", line)
            return  # else a late answer to one of connect's hellos
        if isinstance(frame, frames.Failed) and frame.code in (frames.GW_RID_LIVE,
                                                                frames.GW_NOT_LIVE):
            log.warning("gateway: %s", line)  # these end nothing (docs/GATEWAY.md)
            return
        live = self._live.get(frame.rid)
        if live is None:
            log.warning("gateway: a frame for rid %d, which is not live: %s", frame.rid, line)
            return
        live.heard = time.monotonic()
        if isinstance(frame, frames.Tokens | frames.LogProbs) and not live.failed and \
                any(i >= self.ready.vocab for i in _ids(frame)):
            log.warning("gateway: an id outside the vocabulary %d: %s", self.ready.vocab, line)
            live.failed = True  # its caller cancels it; its end frame frees the place
            live.events.put_nowait(RequestFailed(frames.GW_MALFORMED,
                                                 "the guest sent an id outside the vocabulary"))
        if isinstance(frame, frames.End | frames.Failed):
            self._end(live, None if live.failed else frame)
            if isinstance(frame, frames.End) and self.on_end is not None:
                self.on_end(frame)
        elif not live.failed:
            live.events.put_nowait(frame)

    def _restarted(self, ready: frames.Ready) -> None:
        """An R frame nobody asked for (hellos are answered before connect returns): the
        gateway started again, and the requests it held will get no end frame. They end
        with GuestDown; the new gateway's window holds from now on."""
        log.warning("the gateway restarted; %d live request(s) lost", len(self._live))
        lost = GuestDown("the gateway restarted; the request was lost")
        for live in list(self._live.values()):
            self._end(live, lost)
        self.ready, self.places.per_tenant = ready, ready.window

    def close(self, why: str) -> None:
        """Ends the connection: every live request and waiter gets GuestDown."""
        if self.down is not None:
            return
        self.down = GuestDown(why)
        for live in self._live.values():
            live.ended = True
            live.events.put_nowait(self.down)
        self._live.clear()
        self.places.fail_all(self.down)
        for waiting in self._asked.values():
            while waiting:
                fut = waiting.popleft()
                if not fut.done():
                    fut.set_exception(self.down)
        self._writer.close()


def _ids(frame: frames.Tokens | frames.LogProbs) -> tuple[int, ...]:
    """The token ids a T or L frame names."""
    if isinstance(frame, frames.Tokens):
        return frame.ids
    return (frame.id, *(i for i, _ in frame.top))
