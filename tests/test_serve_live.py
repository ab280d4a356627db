"""The live view of pyaisvc serve without a guest: the V frame (docs/GATEWAY.md), the
JSON the page draws (pyaisvc.serve.live), its endpoints and the page's files.

A fake table source stands for the engine; tests/test_serve_page.py runs the page
in a real browser against the real guest.
"""

from __future__ import annotations

import asyncio
import collections
import json

import httpx
import pytest
from host.loopback import uvicorn_on_free_port

from pyaisvc.model.tokenizer import load_tokenizer
from pyaisvc.serve import frames
from pyaisvc.serve.app import Limits, Service, create_app
from pyaisvc.serve.gateway import GuestDown
from pyaisvc.serve.live import TableView
from pyaisvc.serve.metrics import Metrics

FREE = " ".join(["0"] * 15)
PLAIN = " 7 0 0 0"  # a slot's last fields: tenant 7 (its owner's pid), priority 0, not paused


def v_line(now: int, fifo: list[int], batch: list[int], slots: dict[int, str],
           policy: str = "fifo", chunk: int = 8, prefill: int = 8) -> str:
    """A V frame as the gateway writes it: slots not given are free."""
    words = [str(now), "2", "9", policy, str(chunk), str(prefill), str(len(fifo)),
             *map(str, fifo),
             str(len(batch)), *map(str, batch)]
    words += [slots.get(i, FREE) for i in range(frames.NSLOT)]
    return "V " + " ".join(words)


def test_the_table_frame_parses_and_refuses_garbage() -> None:
    line = v_line(5_000_000, [4], [3], {
        # RUNNING, ours (rid 5), 8 cached, tenant 100001 at priority 50, paused twice so far
        3: "2 7 5 12 40 10 1000000 1100000 1500000 0 8 100001 50 0 2",
        4: "1 8 0 3 9 0 4000000 0 0 0 0" + PLAIN}, policy="priority", chunk=6, prefill=2)
    t = frames.parse(line)
    assert isinstance(t, frames.Table)
    assert (t.now_us, t.worker_pid, t.completed, t.policy, t.chunk, t.prefill, t.fifo,
            t.batch) == (5_000_000, 2, 9, "priority", 6, 2, (4,), (3,))
    assert t.slots[3] == frames.Slot(2, 7, 5, 12, 40, 10, 1_000_000, 1_100_000, 1_500_000, 0, 8,
                                     100_001, 50, 0, 2)
    assert t.slots[4].state == 1 and t.slots[4].rid == 0 and t.slots[4].tenant == 7
    assert sum(s.state != 0 for s in t.slots) == 2
    head = "V 5000000 2 9 priority 6 2 1 4"
    assert line.startswith(head)
    for bad in ("V 1 2 3", "V 1 2 3 fifo", line + " 0", line.replace(head, head[:-4] + " 1 16"),
                line.replace(head, head.replace("priority", "Priority")),
                line.replace(head, head.replace("priority", "p" * frames.POLICY_LEN)),
                line.replace(head, head.replace("priority", "42")),
                line.replace(head, head.replace(" 6 ", " -1 ")),
                line.replace("2 7 5 12", "9 7 5 12"), line.replace("2 7 5", "2 x 5")):
        with pytest.raises(frames.FrameError):
            frames.parse(bad)


def test_a_slot_shows_its_tenant_priority_and_pause_and_the_tenants_served() -> None:
    """An HTTP user's tenant id is shown as the user, another tenant as the submitter's
    pid; a RUNNING slot the policy paused shows PAUSED; the ids served per user come
    from the metrics, most generated first, with their shares."""
    src = FakeSource()
    metrics = Metrics()
    for user, kind, n in (("alice", "prompt", 200), ("alice", "generated", 30),
                          ("bob", "prompt", 12), ("bob", "generated", 90)):
        metrics.tenant_tokens.labels(user, kind).inc(n)
    live = TableView(src, {"alice": 100_000, "bob": 100_001}, metrics.tenant_served)
    src.lines = [v_line(2_000_000, [5], [3], {
        3: "2 7 5 12 40 10 1000000 1100000 1500000 0 0 100001 80 0 0",
        4: "2 7 6 200 60 3 900000 950000 990000 0 0 100000 0 1 1",
        5: "1 8 0 3 9 0 1900000 0 0 0 0 8 0 0 0"}, policy="fair", chunk=4, prefill=1)]
    snap = asyncio.run(live.snapshot())
    assert (snap["policy"], snap["chunk"], snap["prefill"]) == ("fair", 4, 1)
    s3, s4, s5 = snap["slots"][3:6]
    assert (s3["tenant_name"], s3["tenant"], s3["priority"], s3["shown"]) == \
        ("bob", 100_001, 80, "RUNNING")
    assert (s4["tenant_name"], s4["paused"], s4["pauses"], s4["state"], s4["shown"]) == \
        ("alice", True, 1, "RUNNING", "PAUSED")
    assert (s5["tenant_name"], s5["shown"]) == ("pid 8", "QUEUED")
    assert snap["slots"][0]["tenant"] is None and snap["slots"][0]["tenant_name"] == ""
    assert snap["tenants"] == [
        {"user": "bob", "tenant": 100_001, "prompt": 12, "generated": 90, "share": 0.75},
        {"user": "alice", "tenant": 100_000, "prompt": 200, "generated": 30, "share": 0.25}]


class FakeSource:
    """The engine's part the live view uses: table() and the ended E frames."""

    def __init__(self) -> None:
        self.ended: collections.deque = collections.deque()
        self.lines: list[str] = []
        self.down = False

    async def table(self) -> frames.Table:
        if self.down:
            raise GuestDown("the guest is rebooting")
        t = frames.parse(self.lines.pop(0) if len(self.lines) > 1 else self.lines[0])
        assert isinstance(t, frames.Table)
        return t


def test_a_slot_shows_done_after_its_request_ended() -> None:
    """Slot 2 ran rid 7; the gateway collected it (the kernel's slot is FREE again)
    and its E frame came: the slot shows DONE, and the request is in `recent` with the
    kernel's TTFT and TPOT. Times come out in ms from the kernel's us."""
    src = FakeSource()
    live = TableView(src)
    src.lines = [v_line(3_000_000, [4], [2, 3], {
        2: "2 7 7 5 4 1 1000000 1000500 1200000 0 0" + PLAIN,
        3: "2 7 5 12 40 10 1000000 1100000 1500000 0 0" + PLAIN,
        4: "1 8 0 3 9 0 2000000 0 0 0 0" + PLAIN}),
        v_line(3_200_000, [], [3, 4], {
            3: "2 7 5 12 40 11 1000000 1100000 1500000 0 0" + PLAIN,
            4: "2 8 0 3 9 0 2000000 3100000 0 0 0" + PLAIN})]
    first = asyncio.run(live.snapshot())
    assert [s["shown"] for s in first["slots"][2:5]] == ["RUNNING", "RUNNING", "QUEUED"]
    assert (first["fifo"], first["batch"], first["used"]) == ([4], [2, 3], 3)
    s3 = first["slots"][3]
    assert (s3["age_ms"], s3["queued_ms"], s3["ttft_ms"], s3["total_ms"]) == \
        (2000.0, 100.0, 500.0, None)
    assert s3["rid"] == 5 and s3["owner"] == 7 and s3["tokens"] == 10
    assert first["slots"][4]["rid"] == 0  # another process's request
    import time
    src.ended.append((time.monotonic(), frames.End(7, "length", 4, 5, 500, 200_000, 500_000, 0)))
    second = asyncio.run(live.snapshot())
    assert second["slots"][2]["state"] == "FREE" and second["slots"][2]["shown"] == "DONE"
    assert second["slots"][2]["ended"]["rid"] == 7
    assert [s["shown"] for s in second["slots"][3:5]] == ["RUNNING", "RUNNING"]
    (r,) = second["recent"]
    assert (r["rid"], r["slot"], r["ttft_ms"], r["tpot_ms"]) == (7, 2, 200.0, 100.0)
    assert sum(s["shown"] == "FREE" for s in second["slots"]) == 13


def test_the_endpoints_and_the_page() -> None:
    """/v1/aisvc/table (503 while the guest is down), its SSE stream, / and /web/."""
    src = FakeSource()
    src.lines = [v_line(1_000_000, [], [0], {0: "2 7 1 5 8 2 900000 950000 990000 0 0" + PLAIN})]
    src.state, src.why_down, src.qemu_pid = "up", "", 42
    app = create_app(Service("smol", src, load_tokenizer("smol"), Limits(49152, 256, 255),
                             Metrics()))

    async def main() -> None:
        # a real server: httpx's ASGI transport would wait for the stream's end
        server, serving, port = await uvicorn_on_free_port(app, log_level="warning")
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            r = await client.get("/v1/aisvc/table")
            assert r.status_code == 200 and r.json()["batch"] == [0], r.text
            async with client.stream("GET", "/v1/aisvc/table/stream") as s:
                assert s.headers["content-type"].startswith("text/event-stream")
                events = []
                async for line in s.aiter_lines():
                    if line.startswith("data: "):
                        events.append(json.loads(line[6:]))
                    if len(events) == 2:
                        break
            assert [e["slots"][0]["shown"] for e in events] == ["RUNNING", "RUNNING"]
            page = await client.get("/")
            assert page.status_code == 200 and 'src="/web/app.js"' in page.text
            for name, kind in (("app.js", "text/javascript"), ("style.css", "text/css")):
                f = await client.get(f"/web/{name}")
                assert f.status_code == 200 and f.headers["content-type"].startswith(kind)
            assert (await client.get("/web/index.py")).status_code == 404
            src.down = True
            r = await client.get("/v1/aisvc/table")
            assert r.status_code == 503 and "rebooting" in r.json()["error"]["message"]
            paths = (await client.get("/openapi.json")).json()["paths"]
            assert "/v1/aisvc/table" in paths and "/v1/aisvc/table/stream" not in paths
        server.should_exit = True
        await serving

    asyncio.run(main())
