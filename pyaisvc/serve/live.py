"""The kernel's table as the page at ``/`` shows it: JSON made from a V frame.

``TableView.snapshot()`` asks the gateway for the whole table (ai_table in the guest,
docs/AI_SERVICE.md rule 14) and returns it as plain JSON values: every slot
with its kernel state, owner pid, the host's rid when the request is one of
ours, prompt length, progress and the times in ms; the FIFO and the batch
(slot numbers); the worker and the requests completed. A request's DONE state
lasts in the kernel only until the gateway collects it (microseconds), so each
slot also says which request last ended in it and how long ago, from the
gateway's E frames (``Engine.ended``): the page shows such a slot as DONE (or
CANCELLED) for a moment. ``recent`` lists the last requests that ended, with
the kernel's TTFT and TPOT, for the page's chart.

``TableView.stream()`` yields a snapshot every ``PERIOD`` seconds (the SSE endpoint);
while the guest is down it yields ``{"down": why}`` once a second instead.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any, Protocol

from pyaisvc.serve import frames
from pyaisvc.serve.gateway import GuestDown

PERIOD = 0.2  # seconds between snapshots of a stream: 5 a second
DOWN_PERIOD = 1.0  # seconds between tries while the guest is down
SHOW_ENDED = 2.0  # seconds a slot shows the request that ended in it
RECENT = 24  # ended requests listed for the chart


class TableSource(Protocol):
    ended: Any  # deque of (time.monotonic(), frames.End)

    async def table(self) -> frames.Table: ...


def _ms(start_us: int, end_us: int) -> float | None:
    """end - start in ms; None while either event has not happened."""
    if start_us == 0 or end_us == 0 or end_us < start_us:
        return None
    return round((end_us - start_us) / 1000, 1)


def _tpot_ms(end: frames.End) -> float | None:
    """The kernel's mean time per id after the first, in ms, from an E frame; None for fewer
    than 2 ids."""
    if end.gen < 2 or end.ttft_us == 0 or end.total_us < end.ttft_us:
        return None
    return round((end.total_us - end.ttft_us) / 1000 / (end.gen - 1), 1)


class TableView:
    """Snapshots of the table for the page; remembers which slot each rid had."""

    def __init__(self, source: TableSource) -> None:
        self.source = source
        self._slot_of_rid: dict[int, int] = {}

    async def snapshot(self) -> dict[str, Any]:
        """The table now, as JSON values; GuestDown while the guest is not up."""
        table = await self.source.table()
        for i, s in enumerate(table.slots):
            if s.rid:
                self._slot_of_rid[s.rid] = i
        now = time.monotonic()
        ended = list(self.source.ended)
        last_in_slot: dict[int, tuple[float, frames.End]] = {}
        recent = []
        for at, end in ended:
            slot = self._slot_of_rid.get(end.rid)
            if slot is not None:
                last_in_slot[slot] = (at, end)
            recent.append({"rid": end.rid, "slot": slot, "finish": end.finish, "gen": end.gen,
                           "prompt": end.prompt_len, "queued_ms": round(end.queued_us / 1000, 1),
                           "ttft_ms": round(end.ttft_us / 1000, 1) if end.ttft_us else None,
                           "tpot_ms": _tpot_ms(end), "ago_s": round(now - at, 2)})
        live_rids = {s.rid for s in table.slots if s.rid}
        self._slot_of_rid = {r: i for r, i in self._slot_of_rid.items()
                             if r in live_rids or any(e.rid == r for _, e in ended)}
        slots = [self._slot(i, s, table.now_us, last_in_slot.get(i), now)
                 for i, s in enumerate(table.slots)]
        return {"time_s": round(table.now_us / 1e6, 2), "worker_pid": table.worker_pid,
                "completed": table.completed, "nslot": len(slots),
                "used": sum(s.state != 0 for s in table.slots), "fifo": list(table.fifo),
                "batch": list(table.batch), "slots": slots, "recent": recent[-RECENT:]}

    @staticmethod
    def _slot(i: int, s: frames.Slot, now_us: int, last: tuple[float, frames.End] | None,
              now: float) -> dict[str, Any]:
        """Slot i of the table as JSON values: its state, how the page shows it (DONE or
        CANCELLED for SHOW_ENDED seconds after a request ended in it), its request and
        its times in ms."""
        state = frames.STATES[s.state]
        shown = state
        ended = None
        if last is not None and now - last[0] <= SHOW_ENDED:
            at, end = last
            ended = {"rid": end.rid, "finish": end.finish, "gen": end.gen,
                     "ago_s": round(now - at, 2)}
            if state == "FREE":
                shown = "CANCELLED" if end.finish == "cancel" else "DONE"
        return {"slot": i, "state": state, "shown": shown, "owner": s.owner, "rid": s.rid,
                "prompt": s.prompt_len, "predict": s.predict, "tokens": s.tokens,
                "age_ms": _ms(s.submit_us, s.finish_us or now_us),
                "queued_ms": _ms(s.submit_us, s.start_us),
                "ttft_ms": _ms(s.submit_us, s.first_us),
                "total_ms": _ms(s.submit_us, s.finish_us), "ended": ended}

    async def stream(self) -> AsyncIterator[dict[str, Any]]:
        """A snapshot every PERIOD seconds, forever (the caller stops reading)."""
        while True:
            try:
                snap = await self.snapshot()
            except (GuestDown, TimeoutError) as e:
                yield {"down": str(e) or "the gateway did not answer"}
                await asyncio.sleep(DOWN_PERIOD)
                continue
            yield snap
            await asyncio.sleep(PERIOD)
