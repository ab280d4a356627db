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
import uvicorn

from pyaisvc.serve import frames
from pyaisvc.serve.app import Limits, Service, create_app
from pyaisvc.serve.gateway import GuestDown
from pyaisvc.serve.live import TableView
from pyaisvc.serve.metrics import Metrics
from pyaisvc.tokenizer import load_tokenizer

FREE = "0 0 0 0 0 0 0 0 0 0"


def v_line(now: int, fifo: list[int], batch: list[int], slots: dict[int, str]) -> str:
    """A V frame as the gateway writes it: slots not given are free."""
    words = [str(now), "2", "9", str(len(fifo)), *map(str, fifo), str(len(batch)),
             *map(str, batch)]
    words += [slots.get(i, FREE) for i in range(frames.NSLOT)]
    return "V " + " ".join(words)


def test_the_table_frame_parses_and_refuses_garbage() -> None:
    line = v_line(5_000_000, [4], [3], {
        3: "2 7 5 12 40 10 1000000 1100000 1500000 0",  # RUNNING, ours (rid 5)
        4: "1 8 0 3 9 0 4000000 0 0 0"})  # QUEUED, another process's
    t = frames.parse(line)
    assert isinstance(t, frames.Table)
    assert (t.now_us, t.worker_pid, t.completed, t.fifo, t.batch) == (5_000_000, 2, 9, (4,), (3,))
    assert t.slots[3] == frames.Slot(2, 7, 5, 12, 40, 10, 1_000_000, 1_100_000, 1_500_000, 0)
    assert t.slots[4].state == 1 and t.slots[4].rid == 0
    assert sum(s.state != 0 for s in t.slots) == 2
    for bad in ("V 1 2 3", line + " 0", line.replace("V 5000000 2 9 1 4", "V 5000000 2 9 1 16"),
                line.replace("2 7 5 12", "9 7 5 12"), line.replace("2 7 5", "2 x 5")):
        with pytest.raises(frames.FrameError):
            frames.parse(bad)


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
        2: "2 7 7 5 4 1 1000000 1000500 1200000 0",
        3: "2 7 5 12 40 10 1000000 1100000 1500000 0",
        4: "1 8 0 3 9 0 2000000 0 0 0"}),
        v_line(3_200_000, [], [3, 4], {
            3: "2 7 5 12 40 11 1000000 1100000 1500000 0",
            4: "2 8 0 3 9 0 2000000 3100000 0 0"})]
    first = asyncio.run(live.snapshot())
    assert [s["shown"] for s in first["slots"][2:5]] == ["RUNNING", "RUNNING", "QUEUED"]
    assert (first["fifo"], first["batch"], first["used"]) == ([4], [2, 3], 3)
    s3 = first["slots"][3]
    assert (s3["age_ms"], s3["queued_ms"], s3["ttft_ms"], s3["total_ms"]) == \
        (2000.0, 100.0, 500.0, None)
    assert s3["rid"] == 5 and s3["owner"] == 7 and s3["tokens"] == 10
    assert first["slots"][4]["rid"] == 0  # another process's request
    import time
    src.ended.append((time.monotonic(), frames.End(7, "length", 4, 5, 500, 200_000, 500_000)))
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
    src.lines = [v_line(1_000_000, [], [0], {0: "2 7 1 5 8 2 900000 950000 990000 0"})]
    src.state, src.why_down, src.qemu_pid = "up", "", 42
    app = create_app(Service("smol", src, load_tokenizer("smol"), Limits(49152, 256, 255),
                             Metrics()))

    async def main() -> None:
        # a real server: httpx's ASGI transport would wait for the stream's end
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0,
                                               log_level="warning", lifespan="off"))
        serving = asyncio.create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.02)
        port = server.servers[0].sockets[0].getsockname()[1]
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
