"""The HTTP users as tenants, bounded: random ``user`` values cannot grow the server.

``tenants.Tenants`` alone (least recently used out once idle, else one
overflow tenant), then the server over tests/test_serve_host.py's fake
gateway: 60 distinct users against a map of 8 leave at most 9 tenants, 9
metric labels and 9 rows of the page's table of users, and the users
beyond share one tenant in the S frames.
"""

from __future__ import annotations

import asyncio
import re

import httpx
from test_serve_host import PARIS, SEQ, VOCAB, FakeEngine, FakeGateway, connect

from pyaisvc.model.tokenizer import load_tokenizer
from pyaisvc.serve.app import Limits, Service, create_app
from pyaisvc.serve.metrics import Metrics
from pyaisvc.serve.tenants import OVERFLOW, OVERFLOW_TENANT, TENANT_BASE, Tenants


def test_known_users_keep_their_tenant_and_the_overflow_shares_one() -> None:
    forgotten: list[str] = []
    t = Tenants(capacity=2, idle=3600, forget=forgotten.append)
    a, b = t.of("alice"), t.of("bob")
    assert a[1] == "alice" and b[1] == "bob" and (a[0], b[0]) == (TENANT_BASE, TENANT_BASE + 1)
    assert t.of("carol") == t.of("dave") == (OVERFLOW_TENANT, OVERFLOW)
    assert t.of("alice") == a and t.of(None) == (0, "-") and t.of("") == (0, "-")
    assert dict(t) == {"alice": a[0], "bob": b[0], OVERFLOW: OVERFLOW_TENANT}
    assert forgotten == []


def test_the_least_recently_used_idle_user_gives_its_place() -> None:
    forgotten: list[str] = []
    t = Tenants(capacity=2, idle=0, forget=forgotten.append)
    a, b = t.of("alice"), t.of("bob")
    t.of("alice")  # bob is now the least recently used
    c = t.of("carol")
    assert forgotten == ["bob"] and c[1] == "carol" and c[0] not in (a[0], b[0])
    assert set(t) == {"alice", "carol"} and len(t) == 2


def test_random_users_leave_the_metrics_and_the_page_bounded() -> None:
    async def main():
        fake = FakeGateway(window=8, script=PARIS, delay=0.001)
        gw, run, _ = await connect(fake, queue_max=64)
        service = Service("smol", FakeEngine(gw), load_tokenizer("smol"),
                          Limits(VOCAB, SEQ, 255), Metrics(), tenants_max=8)
        app = create_app(service)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://localhost") as client:
            for i in range(60):
                r = await client.post("/v1/completions", json={
                    "model": "smol", "prompt": "x", "max_tokens": 1, "user": f"u{i:03d}"})
                assert r.status_code == 200, r.text
            metrics = (await client.get("/metrics")).text
        labels = set(re.findall(r'aisvc_tenant_tokens_total\{kind="\w+",tenant="([^"]*)"',
                                metrics))
        assert labels == {f"u{i:03d}" for i in range(8)} | {OVERFLOW}, labels
        assert len(service.tenants) == 9
        rows = service.table_view._tenants()
        assert len(rows) == 9 and {r["user"] for r in rows} == labels
        tenants = [int(line.split()[7]) for line in fake.seen if line.startswith("S ")]
        assert len(set(tenants[8:])) == 1 and tenants[8] == OVERFLOW_TENANT
        assert len(set(tenants[:8])) == 8
        run.cancel()

    asyncio.run(main())
