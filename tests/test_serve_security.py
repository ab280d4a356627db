"""pyaisvc serve's door, without a guest: the Host, the Origin, the API key, Content-Type,
the body's bounds, the table's one poller and the burst's limits.

The application runs over the fake gateway of tests/test_serve_host.py (in
this process, through httpx's ASGI transport), and for the connection
deadlines under uvicorn on a loopback port; tests/test_serve.py runs the
same checks against the real guest.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time

import httpx
import pytest
import uvicorn
from host.loopback import busy_port, uvicorn_on_free_port
from test_serve_host import PARIS, FakeGateway, api_test, connect

from pyaisvc.model.tokenizer import load_tokenizer
from pyaisvc.serve import frames, live
from pyaisvc.serve.app import Access, Limits, Service, create_app
from pyaisvc.serve.bounds import header_deadline
from pyaisvc.serve.metrics import Metrics
from pyaisvc.serve.security import LOOPBACK_NAMES, host_name

JSON = {"content-type": "application/json"}
COMPLETION = {"model": "smol", "prompt": "The capital of France is", "max_tokens": 2,
              "temperature": 0}
KEY = "room-key-123"


def test_a_cross_site_post_without_json_content_type_is_refused() -> None:
    async def body(client, engine, fake):
        for headers in ({}, {"content-type": "text/plain"},
                        {"content-type": "application/x-www-form-urlencoded"}):
            r = await client.post("/v1/completions", content=json.dumps(COMPLETION),
                                  headers=headers)
            assert r.status_code == 415, (headers, r.text)
            assert "Content-Type: application/json" in r.json()["error"]["message"]
        r = await client.post("/v1/completions", content=json.dumps(COMPLETION),
                              headers={"content-type": "application/json; charset=utf-8"})
        assert r.status_code == 200, r.text
        assert not any(s.startswith("S") for s in fake.seen[:-1])  # only the last one ran

    api_test(PARIS, window=2, queue_max=2, body=body)


def test_a_foreign_host_or_origin_is_refused() -> None:
    async def body(client, engine, fake):
        for host in ("evil.example", "evil.example:8080", "127.0.0.2", ""):
            r = await client.get("/v1/models", headers={"host": host})
            assert r.status_code == 421, (host, r.text)
            assert r.json()["error"]["code"] == "host_not_allowed"
        for host in ("localhost:8080", "127.0.0.1", "[::1]:9"):
            assert (await client.get("/v1/models", headers={"host": host})).status_code == 200
        r = await client.post("/v1/completions", json=COMPLETION,
                              headers={"origin": "http://evil.example"})
        assert r.status_code == 403 and r.json()["error"]["code"] == "origin_not_allowed"
        r = await client.post("/v1/completions", json=COMPLETION,
                              headers={"origin": "http://localhost"})  # the page's own
        assert r.status_code == 200, r.text
        assert "access-control-allow-origin" not in r.headers
        assert not any(s.startswith("S") for s in fake.seen[:-1])

    api_test(PARIS, window=2, queue_max=2, body=body)


def test_an_allowed_origin_gets_cors_headers_and_its_preflight() -> None:
    lab = "http://lab.example:3000"
    access = Access(key=KEY, origins=frozenset({lab}))

    async def body(client, engine, fake):
        r = await client.options("/v1/completions", headers={
            "origin": lab, "access-control-request-method": "POST",
            "access-control-request-headers": "authorization, content-type"})
        assert r.status_code == 204, r.text
        assert r.headers["access-control-allow-origin"] == lab
        assert "authorization" in r.headers["access-control-allow-headers"].lower()
        assert "POST" in r.headers["access-control-allow-methods"]
        r = await client.post("/v1/completions", json=COMPLETION, headers={
            "origin": lab, "authorization": f"Bearer {KEY}"})
        assert r.status_code == 200 and r.headers["access-control-allow-origin"] == lab
        r = await client.options("/v1/completions", headers={
            "origin": "http://other.example", "access-control-request-method": "POST"})
        assert r.status_code == 403

    api_test(PARIS, window=2, queue_max=2, body=body, access=access)


def routes_with_bodies() -> list[tuple[str, str, dict | None]]:
    """Every route the key guards, with a request each that succeeds given the key."""
    return [("GET", "/v1/models", None), ("GET", "/metrics", None),
            ("GET", "/v1/aisvc/limits", None), ("GET", "/openapi.json", None),
            ("GET", "/docs", None),
            ("POST", "/v1/completions", COMPLETION),
            ("POST", "/v1/chat/completions", {"model": "smol", "max_tokens": 2, "messages": [
                {"role": "user", "content": "Hi"}]}),
            ("POST", "/tokenize", {"content": "Hello"}),
            ("POST", "/detokenize", {"tokens": [7042]}),
            ("POST", "/v1/aisvc/burst", {"n": 2, "max_tokens": 2})]


def test_with_a_key_every_route_but_health_and_the_page_needs_it() -> None:
    async def body(client, engine, fake):
        assert (await client.get("/health")).status_code == 200
        for path in ("/", "/web/app.js"):  # the page's files: it asks for the key
            assert (await client.get(path)).status_code == 200
        for method, path, req in routes_with_bodies():
            for auth in ({}, {"authorization": "Bearer wrong"}, {"authorization": KEY}):
                r = await client.request(method, path, json=req, headers=auth)
                assert r.status_code == 401, (path, auth, r.text)
                assert r.json()["error"]["code"] == "invalid_api_key"
            r = await client.request(method, path, json=req,
                                     headers={"authorization": f"Bearer {KEY}"})
            assert r.status_code == 200, (path, r.text)
        schema = (await client.get("/openapi.json", headers={"authorization": f"Bearer {KEY}"}))
        published = set(schema.json()["paths"])  # every published route is checked here
        assert published <= {p for _, p, _ in routes_with_bodies()} | {"/health",
                                                                       "/v1/aisvc/table"}
        for path in ("/v1/aisvc/table", "/v1/aisvc/table/stream", "/redoc"):
            assert (await client.get(path)).status_code == 401, path
        # The stream takes the key in its query too (a browser's EventSource).
        r = await client.get("/v1/aisvc/table/stream?api_key=wrong")
        assert r.status_code == 401

    api_test(PARIS, window=2, queue_max=2, body=body, access=Access(key=KEY))


def test_the_host_header_is_read_as_a_name() -> None:
    assert host_name("LocalHost:8080") == "localhost"
    assert host_name("[::1]:80") == "::1" and host_name("::1") == "::1"
    assert host_name("10.0.0.5") == "10.0.0.5"
    assert "localhost" in LOOPBACK_NAMES


def test_a_body_is_cut_at_the_limit_and_a_slow_one_gets_408() -> None:
    sent = []

    async def endless():
        for i in range(64):  # 64 MiB if it were all read
            sent.append(i)
            yield b" " * (1 << 20)

    async def trickle():
        yield b'{"model": "smol", '
        await asyncio.sleep(3)
        yield b'"prompt": "x"}'

    async def body(client, engine, fake):
        r = await client.post("/v1/completions", content=endless(), headers=JSON)
        assert r.status_code == 413 and r.headers["connection"] == "close"
        assert len(sent) <= 3, len(sent)  # chunked: stopped once over 1 MiB
        r = await client.post("/v1/completions", content=b"x" * 10, headers={
            **JSON, "content-length": str(2 << 20)})
        assert r.status_code == 413  # the declared length, before reading
        t0 = time.monotonic()
        r = await client.post("/v1/completions", content=trickle(), headers=JSON)
        assert r.status_code == 408 and time.monotonic() - t0 < 2.5, r.text
        r = await client.post("/v1/completions", json=COMPLETION)
        assert r.status_code == 200

    api_test(PARIS, window=2, queue_max=2, body=body, body_seconds=0.5)


def test_the_burst_is_off_without_a_key_capped_and_one_at_a_time() -> None:
    async def off(client, engine, fake):
        r = await client.post("/v1/aisvc/burst", json={"n": 2})
        assert r.status_code == 403 and "--enable-burst" in r.json()["error"]["message"]

    api_test(PARIS, window=8, queue_max=8, body=off)

    async def on(client, engine, fake):
        fake.delay = 0.05
        r = await client.post("/v1/aisvc/burst", json={"n": 9})
        assert r.status_code == 400 and r.json()["error"]["param"] == "n"
        first = asyncio.create_task(client.post("/v1/aisvc/burst",
                                                json={"n": 8, "max_tokens": 4}))
        await asyncio.sleep(0.1)
        r = await client.post("/v1/aisvc/burst", json={"n": 1, "max_tokens": 4})
        assert r.status_code == 429 and r.json()["error"]["code"] == "burst_busy"
        got = (await first).json()
        assert got["done"] == 8 and got["failed"] == 0
        assert sum(s.startswith("S") for s in fake.seen) == 8

    api_test(PARIS, window=8, queue_max=8, body=on, burst=True)


class CountingSource:
    """A table source that counts the V frames it answers."""

    def __init__(self, table) -> None:
        self.asked, self.ended, self._table = 0, [], table

    async def table(self):
        self.asked += 1
        return self._table


def test_stream_clients_share_one_poller_and_are_bounded() -> None:
    from test_serve_live import v_line

    async def main():
        src = CountingSource(frames.parse(v_line(1000, [], [], {})))
        feed = live.TableFeed(live.TableView(src), limit=20)
        queues = [feed.join() for _ in range(20)]
        assert all(q is not None for q in queues) and feed.join() is None
        got = [json.loads(g) for g in await asyncio.gather(*(q.get() for q in queues))]
        assert all(g["nslot"] == frames.NSLOT for g in got)
        await asyncio.sleep(1.0)
        # one poller: about 5 tables a second whatever the clients (not 20 x 5)
        assert src.asked <= 10, src.asked
        for q in queues:
            feed.leave(q)
        await asyncio.sleep(live.PERIOD * 2)
        asked = src.asked
        await asyncio.sleep(live.PERIOD * 3)
        assert src.asked == asked  # no client: no polling

    asyncio.run(main())


# ---------------------------------------------------------------- the connections


async def _uvicorn(app, idle: float, limit: int) -> tuple[uvicorn.Server, asyncio.Task, int]:
    """app served by uvicorn on a free loopback port, as pyaisvc serve configures it."""
    return await uvicorn_on_free_port(app, log_level="error", http=header_deadline(idle),
                                      timeout_keep_alive=max(1, round(idle)),
                                      limit_concurrency=limit, backlog=4096)


def test_idle_and_slow_connections_do_not_stop_serving_and_are_closed() -> None:
    from pyaisvc.serve.bounds import raise_open_files

    _, fits = raise_open_files(2200)
    if fits < 2100:
        pytest.skip(f"the open-file limit fits only {fits} connections")

    async def main():
        fake = FakeGateway(2, PARIS, delay=0.005)
        gw, run, _ = await connect(fake, 2)
        service = Service("smol", _Engine(gw), load_tokenizer("smol"),
                          Limits(49152, 256, 255), Metrics())
        app = create_app(service, body_seconds=3.0)
        server, task, port = await _uvicorn(app, idle=3.0, limit=2100)
        idle = []
        for _ in range(2000):
            idle.append(await asyncio.open_connection("127.0.0.1", port))
        slow_r, slow_w = await asyncio.open_connection("127.0.0.1", port)
        slow_w.write(b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 500\r\n\r\n{")
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            t0 = time.monotonic()
            r = await client.get("/health")
            took = time.monotonic() - t0
            assert r.status_code == 200 and took < 1.0, took
            r = await client.post("/v1/completions", json=COMPLETION, timeout=30)
            assert r.status_code == 200, r.text
            assert r.json()["choices"][0]["text"] == " Paris.", r.text
        slow_reply = await asyncio.wait_for(slow_r.read(), 10)
        assert b" 408 " in slow_reply.split(b"\r\n")[0], slow_reply[:100]
        closed = await asyncio.gather(*(asyncio.wait_for(r.read(), 10) for r, _ in idle))
        assert all(c == b"" for c in closed)  # every idle one closed by the deadline
        for _, w in idle:
            w.close()
        server.should_exit = True
        await task
        run.cancel()

    asyncio.run(main())


class _Engine:
    def __init__(self, gw) -> None:
        self.gw, self.state, self.why_down, self.qemu_pid, self.ended = gw, "up", "", 42, []

    async def enqueue(self, request):
        return await self.gw.admit(request)


def test_serve_on_another_address_without_a_key_is_refused_at_start() -> None:
    r = subprocess.run([sys.executable, "-m", "pyaisvc", "serve", "--host", "0.0.0.0"],
                       capture_output=True, text=True, timeout=120,
                       env={**_env(), "AISVC_API_KEY": ""})
    assert r.returncode == 1
    assert r.stderr.strip() == ("pyaisvc serve: --host 0.0.0.0 opens the server to other "
                                "machines; give it a key: --api-key KEY (or "
                                "$AISVC_API_KEY=KEY)"), r.stderr
    with busy_port() as port:
        r = subprocess.run([sys.executable, "-m", "pyaisvc", "serve", "--host", "0.0.0.0",
                            "--port", str(port), "--api-key", KEY], capture_output=True,
                           text=True, timeout=120)
    assert "cannot listen on 0.0.0.0:" in r.stderr, r.stderr  # past the key's check


def _env() -> dict[str, str]:
    import os

    return dict(os.environ)
