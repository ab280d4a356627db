"""The kernel's table as the page at ``/`` shows it: JSON made from a V frame.

``TableView.snapshot()`` asks the gateway for the whole table (ai_table in the guest,
docs/AI_SERVICE.md rule 14) and returns it as plain JSON values: every slot
with its kernel state, owner pid, the host's rid when the request is one of
ours, prompt length, progress and the times in ms; the FIFO and the batch
(slot numbers); the worker and the requests completed; the scheduling policy
and its budgets; each slot's tenant (the HTTP ``user`` whose tenant id it
is, or the submitter's pid), priority and whether the policy paused it; and
the ids served per tenant (the ``aisvc_tenant_tokens`` metric). A request's DONE state
lasts in the kernel only until the gateway collects it (microseconds), so each
slot also says which request last ended in it and how long ago, from the
gateway's E frames (``Engine.ended``): the page shows such a slot as DONE (or
CANCELLED) for a moment. ``recent`` lists the last requests that ended, with
the kernel's TTFT and TPOT, for the page's chart.

``TableFeed`` serves the SSE endpoint: one poller, running while any client
follows, takes a snapshot every ``PERIOD`` seconds (while the guest is down,
``{"down": why}`` once a second), encodes it as JSON once and hands the
latest to every client; so the guest answers 5 table frames a second, and
the host encodes 5 snapshots, however many pages watch. It takes at most
``limit`` clients.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping
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


def tenant_name(tenant: int, users: Mapping[int, str]) -> str:
    """How the page names a kernel tenant id: the HTTP user it stands for, else the
    submitting process (a request that named no tenant has its submitter's pid)."""
    return users.get(tenant, f"pid {tenant}")


class TableView:
    """Snapshots of the table for the page; remembers which slot each rid had.
    ``tenants`` maps each HTTP user to its kernel tenant id (Service.tenants, kept
    up to date by the service); ``served`` gives the ids served so far per user
    (Metrics.tenant_served)."""

    def __init__(self, source: TableSource, tenants: Mapping[str, int] | None = None,
                 served: Callable[[], dict[str, dict[str, int]]] | None = None) -> None:
        self.source = source
        self.tenants: Mapping[str, int] = tenants if tenants is not None else {}
        self.served = served or dict
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
                           "prompt": end.prompt_len, "cached": end.cached,
                           "queued_ms": round(end.queued_us / 1000, 1),
                           "ttft_ms": round(end.ttft_us / 1000, 1) if end.ttft_us else None,
                           "tpot_ms": _tpot_ms(end), "ago_s": round(now - at, 2)})
        live_rids = {s.rid for s in table.slots if s.rid}
        self._slot_of_rid = {r: i for r, i in self._slot_of_rid.items()
                             if r in live_rids or any(e.rid == r for _, e in ended)}
        users = {t: u for u, t in self.tenants.items()}
        slots = [self._slot(i, s, table.now_us, last_in_slot.get(i), now, users)
                 for i, s in enumerate(table.slots)]
        return {"time_s": round(table.now_us / 1e6, 2), "worker_pid": table.worker_pid,
                "completed": table.completed, "policy": table.policy, "chunk": table.chunk,
                "prefill": table.prefill,
                "nslot": len(slots), "used": sum(s.state != 0 for s in table.slots),
                "fifo": list(table.fifo), "batch": list(table.batch), "slots": slots,
                "tenants": self._tenants(), "recent": recent[-RECENT:]}

    def _tenants(self) -> list[dict[str, Any]]:
        """The ids served per HTTP user ("-": requests without one), most generated first,
        with each user's share of the generated ids and its kernel tenant id (None for
        "-": the gateway's pid)."""
        served = self.served()
        total = sum(c.get("generated", 0) for c in served.values())
        rows = [{"user": user, "tenant": self.tenants.get(user),
                 "prompt": c.get("prompt", 0), "generated": c.get("generated", 0),
                 "share": round(c.get("generated", 0) / total, 3) if total else 0.0}
                for user, c in served.items()]
        return sorted(rows, key=lambda r: (-r["generated"], r["user"]))

    @staticmethod
    def _slot(i: int, s: frames.Slot, now_us: int, last: tuple[float, frames.End] | None,
              now: float, users: Mapping[int, str]) -> dict[str, Any]:
        """Slot i of the table as JSON values: its state, how the page shows it (DONE or
        CANCELLED for SHOW_ENDED seconds after a request ended in it; PAUSED while the
        policy holds a RUNNING request back), its request, whom it serves and its times
        in ms."""
        state = frames.STATES[s.state]
        shown = state
        ended = None
        if last is not None and now - last[0] <= SHOW_ENDED:
            at, end = last
            ended = {"rid": end.rid, "finish": end.finish, "gen": end.gen,
                     "ago_s": round(now - at, 2)}
            if state == "FREE":
                shown = "CANCELLED" if end.finish == "cancel" else "DONE"
        if state == "RUNNING" and s.paused:
            shown = "PAUSED"
        free = state == "FREE"
        return {"slot": i, "state": state, "shown": shown, "owner": s.owner, "rid": s.rid,
                "tenant": None if free else s.tenant,
                "tenant_name": "" if free else tenant_name(s.tenant, users),
                "priority": s.priority, "paused": bool(s.paused), "pauses": s.pauses,
                "prompt": s.prompt_len, "cached": s.cached, "predict": s.predict,
                "tokens": s.tokens,
                "age_ms": _ms(s.submit_us, s.finish_us or now_us),
                "queued_ms": _ms(s.submit_us, s.start_us),
                "ttft_ms": _ms(s.submit_us, s.first_us),
                "total_ms": _ms(s.submit_us, s.finish_us), "ended": ended}


class TableFeed:
    """The table's snapshots for every stream client, from one poller (see the module's
    comment)."""

    def __init__(self, view: TableView, limit: int) -> None:
        self.view, self.limit = view, limit
        self._clients: set[asyncio.Queue[str]] = set()
        self._poller: asyncio.Task[None] | None = None

    @property
    def clients(self) -> int:
        return len(self._clients)

    def join(self) -> asyncio.Queue[str] | None:
        """A new client's queue of snapshots as JSON text (it holds the latest only); None
        when the feed has limit clients. The client must leave() when it goes."""
        if len(self._clients) >= self.limit:
            return None
        q: asyncio.Queue[str] = asyncio.Queue(maxsize=1)
        self._clients.add(q)
        if self._poller is None or self._poller.done():
            self._poller = asyncio.create_task(self._poll())
        return q

    def leave(self, q: asyncio.Queue[str]) -> None:
        """The client of q is gone; the poller stops once no client is left."""
        self._clients.discard(q)

    async def _poll(self) -> None:
        """Takes a snapshot every PERIOD seconds (DOWN_PERIOD while the guest is down) and
        gives it to every client, until none is left."""
        while self._clients:
            try:
                snap, wait = await self.view.snapshot(), PERIOD
            except (GuestDown, TimeoutError) as e:
                snap, wait = {"down": str(e) or "the gateway did not answer"}, DOWN_PERIOD
            text = json.dumps(snap, ensure_ascii=False)
            for q in list(self._clients):
                if q.full():
                    q.get_nowait()  # a slow client sees the latest, not a backlog
                q.put_nowait(text)
            await asyncio.sleep(wait)
