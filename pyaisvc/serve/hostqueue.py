"""The host's queue: the requests beyond what the gateway may hold, in turns by tenant.

The gateway holds at most ``per_tenant`` live requests of one tenant (the R
frame's window: the kernel's ``AI_PERPROC``, a bound per process and tenant)
and ``total`` in all (the kernel's table, ``AI_NSLOT``). Every request the
gateway holds is in the kernel's view, where the scheduling policy orders it;
``Places`` keeps the rest here (docs/SCHEDULING.md, "Where an HTTP request
waits"):

- ``take(tenant)`` gives a place at once while the tenant and the total have
  room and none of the tenant's requests waits; else the request waits in its
  tenant's line (first come, first served within a tenant). ``QueueFull``
  (HTTP 429) when ``limit`` requests wait already.
- ``give_back(tenant)`` frees a place and hands places on: to the tenants
  whose lines are not empty, in turns (round robin: the tenant served last
  goes to the back), skipping a tenant that holds ``per_tenant`` already. So
  one tenant's backlog never holds another tenant's request out of the
  gateway.
- ``pause(seconds)``: the guest refused a request "not now" (the table full
  of the guest's own programs, docs/GATEWAY.md "Refusals"): no place is
  handed on until one is given back or the pause ends, so a refusal is not
  answered by sending the next request straight into the same refusal.
- ``fail_all(exc)``: the connection ended; every waiter gets ``exc``.

A request that waited may have been refused and come back: ``take(tenant,
front=True)`` puts it at the head of its tenant's line.
"""

from __future__ import annotations

import asyncio
import collections

from pyaisvc.errors import AisvcError


class QueueFull(AisvcError):
    """The host queue is full: retry later."""


class Places:
    """The gateway's places and the host's lines by tenant; see the module's comment."""

    def __init__(self, per_tenant: int, total: int, limit: int) -> None:
        """Places for per_tenant requests of one tenant and total in all; at most limit
        requests wait."""
        self.per_tenant, self.total, self.limit = per_tenant, total, limit
        self.held: collections.Counter[int] = collections.Counter()  # places by tenant
        self._lines: collections.OrderedDict[int, collections.deque[asyncio.Future[None]]] = \
            collections.OrderedDict()  # the tenants with waiters, in turn order
        self._paused: asyncio.TimerHandle | None = None

    @property
    def live(self) -> int:
        """Places taken (requests the gateway holds, and places handed to waiters)."""
        return sum(self.held.values())

    @property
    def waiting(self) -> int:
        """Requests waiting in the host queue."""
        return sum(len(line) for line in self._lines.values())

    def waiting_for(self, tenant: int) -> int:
        """Requests of tenant waiting in the host queue."""
        return len(self._lines.get(tenant, ()))

    def _room(self, tenant: int) -> bool:
        """Whether a request of tenant may take a place now."""
        return self.live < self.total and self.held[tenant] < self.per_tenant

    async def take(self, tenant: int, front: bool = False) -> None:
        """Takes a place for one request of tenant: at once when there is room and none of
        its requests waits (nor is the queue paused), else after waiting in its line (at
        the head with front); QueueFull when limit requests wait."""
        if self._paused is None and tenant not in self._lines and self._room(tenant):
            self.held[tenant] += 1
            return
        if self.waiting >= self.limit:
            raise QueueFull(f"{self.live} requests in the guest and {self.waiting} waiting")
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        line = self._lines.setdefault(tenant, collections.deque())
        if front:
            line.appendleft(fut)
        else:
            line.append(fut)
        try:
            await fut  # a place handed over by _hand_on
        except BaseException:
            self._leave(tenant, fut)
            raise

    def _leave(self, tenant: int, fut: asyncio.Future[None]) -> None:
        """The caller of fut left: out of its line, or, when its place had come, the place
        given back."""
        line = self._lines.get(tenant)
        if line is not None and fut in line:
            line.remove(fut)
            if not line:
                del self._lines[tenant]
        elif fut.done() and not fut.cancelled() and fut.exception() is None:
            self.give_back(tenant)

    def give_back(self, tenant: int, hand_on: bool = True) -> None:
        """Frees one place of tenant and (unless not hand_on) hands places on, in turns;
        giving a place back ends a pause."""
        if self.held[tenant] > 1:
            self.held[tenant] -= 1
        else:
            self.held.pop(tenant, None)  # no entry kept for a tenant that holds nothing
        if not hand_on:
            return
        if self._paused is not None:
            self._paused.cancel()
            self._paused = None
        self._hand_on()

    def _hand_on(self) -> None:
        """Hands the free places to the waiters: the first tenant in turn order with room
        gets one (its first waiter) and goes to the back of the turns."""
        while self._paused is None and self.live < self.total:
            tenant = next((t for t in self._lines if self._room(t)), None)
            if tenant is None:
                return
            line = self._lines.pop(tenant)
            fut = line.popleft()
            if line:
                self._lines[tenant] = line  # to the back of the turns
            if not fut.done():
                self.held[tenant] += 1
                fut.set_result(None)

    def pause(self, seconds: float) -> None:
        """Hands no place on until one is given back or seconds have passed."""
        if self._paused is not None:
            self._paused.cancel()
        self._paused = asyncio.get_running_loop().call_later(seconds, self._resume)

    def _resume(self) -> None:
        """The pause ended: the free places go to the waiters."""
        self._paused = None
        self._hand_on()

    def fail_all(self, exc: BaseException) -> None:
        """Every waiter gets exc (the connection ended)."""
        if self._paused is not None:
            self._paused.cancel()
            self._paused = None
        lines, self._lines = self._lines, collections.OrderedDict()
        for line in lines.values():
            for fut in line:
                if not fut.done():
                    fut.set_exception(exc)
