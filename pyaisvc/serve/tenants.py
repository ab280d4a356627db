"""The HTTP users as the kernel's tenants: a bounded map, least recently used first out.

A request's ``user`` becomes a tenant of its own (the kernel's fair share
and the host queue's turns go by tenant, docs/SCHEDULING.md), with a label
of its own in the ``aisvc_tenant_*`` metrics and a row on the page. A user
is any string a client sends, so the map is bounded: ``Tenants.of(user)``
gives a known user its tenant id (and makes it the most recently used); a
new one gets a fresh id while fewer than ``capacity`` users are known, or
the place of the least recently used user once that one has sent nothing
for ``idle`` seconds (its metric series are dropped: ``forget``); else the
new user is folded into one tenant, ``OVERFLOW``, with one label. So random
``user`` values cannot grow memory, ``/metrics`` or the page without bound,
and a busy classroom's users keep their own tenants.

A request without a user is the gateway's tenant (id 0), labelled ``-``.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Iterator, Mapping

TENANT_BASE = 100_000  # the first user's tenant id (above the guest's pids), then counting up
OVERFLOW_TENANT = TENANT_BASE - 1  # the tenant id of the users beyond the map
TENANTS_MAX = 64  # users with a tenant of their own at once
TENANT_IDLE = 300.0  # seconds without a request before a user's place may go to another
OVERFLOW = "(others)"  # the label of the users beyond the map
NO_USER = "-"  # the label of the requests without a user


class Tenants(Mapping[str, int]):
    """user -> tenant id for the users the map holds (and OVERFLOW once used); see the
    module's comment."""

    def __init__(self, capacity: int = TENANTS_MAX, idle: float = TENANT_IDLE,
                 forget: Callable[[str], None] = lambda user: None) -> None:
        """An empty map of at most capacity users; forget(user) is called for a user
        whose place goes to another."""
        self.capacity, self.idle, self.forget = capacity, idle, forget
        self._ids: collections.OrderedDict[str, int] = collections.OrderedDict()
        self._used: dict[str, float] = {}  # time.monotonic() of each user's last request
        self._next = TENANT_BASE
        self._overflowed = False

    def of(self, user: str | None) -> tuple[int, str]:
        """The kernel's tenant id and the metric label for a request of user (see the
        module's comment)."""
        if not user:
            return 0, NO_USER
        if user == OVERFLOW:  # a user of that name shares the overflow's label and tenant
            self._overflowed = True
            return OVERFLOW_TENANT, OVERFLOW
        now = time.monotonic()
        if user not in self._ids and not self._make_room(now):
            self._overflowed = True
            return OVERFLOW_TENANT, OVERFLOW
        if user not in self._ids:
            self._ids[user], self._next = self._next, self._next + 1
        self._ids.move_to_end(user)
        self._used[user] = now
        return self._ids[user], user

    def _make_room(self, now: float) -> bool:
        """Whether a new user can have a place: one is free, or the least recently used
        user has been idle long enough (then it is forgotten)."""
        if len(self._ids) < self.capacity:
            return True
        oldest = next(iter(self._ids), None)
        if oldest is None or now - self._used[oldest] < self.idle:
            return False
        del self._ids[oldest], self._used[oldest]
        self.forget(oldest)
        return True

    def __getitem__(self, user: str) -> int:
        if user == OVERFLOW and self._overflowed:
            return OVERFLOW_TENANT
        return self._ids[user]

    def __iter__(self) -> Iterator[str]:
        yield from self._ids
        if self._overflowed:
            yield OVERFLOW

    def __len__(self) -> int:
        return len(self._ids) + self._overflowed
