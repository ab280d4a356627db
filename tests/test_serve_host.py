"""pyaisvc serve without a guest: the frames, the host queue, cancels, text, the HTTP layer.

The gateway here is a fake in this process (FakeGateway) that speaks
docs/GATEWAY.md's frames over a socket pair; tests/test_serve.py runs the
same server against the real guest. Only the host's logic is tested here:
the window and the bounded queue (429), cancels freeing a place, a dead
connection failing requests with GuestDown, streamed text that never splits
a UTF-8 character, stop strings, and the API's refusals.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket

import httpx
import pytest
from host import llmcases as lc
from host.loopback import busy_port

from pyaisvc.model.chattemplate import render
from pyaisvc.model.tokenizer import load_tokenizer
from pyaisvc.serve import frames
from pyaisvc.serve.app import Access, Limits, Service, create_app
from pyaisvc.serve.gateway import Gateway, GuestDown
from pyaisvc.serve.hostqueue import QueueFull
from pyaisvc.serve.metrics import Metrics
from pyaisvc.serve.text import TextStream

VOCAB, SEQ = 49152, 256
PARIS = [7042, 30]  # " Paris."


class FakeGateway:
    """Answers frames like the guest's gateway: each request generates `script` (then
    repeats its last id), one id per `delay` seconds, ending at a stop id or predict; with
    logprobs 1 + N, each id's L frame first: log-probability -(index + 1) / 10, and N
    alternatives, the id itself first, then id + 1, ... each 0.5 lower."""

    def __init__(self, window: int, script: list[int], delay: float = 0.01) -> None:
        self.window, self.script, self.delay = window, script, delay
        self.live: dict[int, asyncio.Task[None]] = {}
        self.cancelled: set[int] = set()
        self.seen: list[str] = []

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while line := (await reader.readline()).decode():
            self.seen.append(line.strip())
            w = line.split()
            if w[0] == "H":
                nonce = "".join(" " + x for x in w[1:2])
                writer.write(f"R gateway {frames.PROTOCOL} {VOCAB} {SEQ} {self.window}{nonce}\n"
                             .encode())
            elif w[0] == "I":
                writer.write(f"I {len(self.live)} 0 {len(self.live)} 0 0 0 3 "
                             "32 2 6 24 1 48 100\n".encode())
            elif w[0] == "C":
                rid = int(w[1])
                if rid in self.live:
                    self.cancelled.add(rid)
                else:
                    writer.write(f"X {rid} 203 not live\n".encode())
            elif w[0] == "S":
                rid, predict = int(w[1]), int(w[2])
                nstop = int(w[9])  # after the options and tenant, priority
                stops = {int(x) for x in w[10:10 + nstop]}
                ntop = int(w[12 + nstop]) - 1
                if len(self.live) >= self.window:
                    writer.write(f"X {rid} 202 window full\n".encode())
                else:
                    self.live[rid] = asyncio.create_task(
                        self._run(writer, rid, predict, stops, ntop))

    async def _run(self, writer, rid: int, predict: int, stops: set[int], ntop: int) -> None:
        finish, n = "length", 0
        for n in range(1, predict + 1):
            await asyncio.sleep(self.delay)
            if rid in self.cancelled:
                finish, n = "cancel", n - 1
                break
            tok = self.script[min(n - 1, len(self.script) - 1)]
            if ntop >= 0:
                lp = -100000 * n
                top = "".join(f" {tok + k} {lp - 500000 * k}" for k in range(ntop))
                writer.write(f"L {rid} {tok} {lp} {ntop}{top}\n".encode())
            writer.write(f"T {rid} {tok}\n".encode())
            if tok in stops:
                finish = "stop"
                break
        del self.live[rid]
        writer.write(f"E {rid} {finish} {n} 5 10 1000 2000 3\n".encode())


async def connect(fake: FakeGateway, queue_max: int, **kw) -> tuple[
        Gateway, asyncio.Task[None], asyncio.StreamWriter]:
    host_sock, guest_sock = socket.socketpair()
    g_reader, g_writer = await asyncio.open_connection(sock=guest_sock)
    fake.task = asyncio.create_task(fake.serve(g_reader, g_writer))  # held: not collected
    reader, writer = await asyncio.open_connection(sock=host_sock)
    gw = await Gateway.connect(reader, writer, queue_max, timeout=5, **kw)
    return gw, asyncio.create_task(gw.run()), g_writer


async def drain(sub) -> list[frames.Frame]:
    return [ev async for ev in sub.events()]


# ---------------------------------------------------------------- frames

def test_frames_round_trip_and_refusals() -> None:
    line = frames.submit_line(7, frames.request(
        [504, 3575], 8, frames.Options(800000, 40, 950000, 3, 100001, 7), [0, 2]))
    assert line == b"S 7 8 800000 40 950000 3 100001 7 2 0 2 0 0 0 0 2 504 3575\n"
    opts = frames.Options(presence_micro=-500000, frequency_micro=1250000, logprobs=4,
                          bias=((198, -100000000), (7, 2500000)))
    assert frames.submit_line(7, frames.request([504], 8, opts, [])) == \
        b"S 7 8 0 0 0 0 0 0 0 -500000 1250000 4 2 198 -100000000 7 2500000 1 504\n"
    assert frames.parse(f"R gateway {frames.PROTOCOL} 49152 256 8") == frames.Ready(
        49152, 256, 8)
    assert frames.parse("T 7 1 2 3") == frames.Tokens(7, (1, 2, 3))
    assert frames.parse("L 7 30 -398607 2 30 -398607 28 -1593547") == frames.LogProbs(
        7, 30, -398607, ((30, -398607), (28, -1593547)))
    assert frames.parse("L 7 30 -5 0") == frames.LogProbs(7, 30, -5, ())
    for bad in ("L 7 30 -5", "L 7 30 -5 1", "L 7 30 -5 1 2", "L 7 30 -5 6 " + "1 1 " * 6):
        with pytest.raises(frames.FrameError):
            frames.parse(bad)
    assert frames.parse("E 7 stop 3 2 10 20 30 2") == frames.End(7, "stop", 3, 2, 10, 20, 30, 2)
    assert frames.parse("X 0 200 bad frame") == frames.Failed(0, 200, "bad frame")
    for bad in ("", "Q 1", "T 7", "E 7 maybe 1 2 3 4 5", "I 1 2", "R gateway 1 1 1 1",
                "T x 1"):
        with pytest.raises(frames.FrameError):
            frames.parse(bad)
    for args in ((0, [1], 1, [], ), (1, [], 1, []), (1, [1], 1, [1, 2, 3, 4, 5]),
                 (1, [1] * 256, 1, [])):
        with pytest.raises(ValueError):
            frames.submit_line(args[0], frames.request(args[1], args[2], frames.Options(),
                                                       args[3]))


# ---------------------------------------------------------------- the queue

def test_window_queue_429_and_cancel_frees_a_place() -> None:
    async def main() -> None:
        fake = FakeGateway(window=2, script=[5], delay=0.02)
        gw, run, _ = await connect(fake, queue_max=1)
        a = await gw.admit(frames.request([1], 200, frames.Options(), []))
        b = await gw.admit(frames.request([1], 3, frames.Options(), []))
        assert gw.live == 2
        waiting = asyncio.create_task(gw.admit(frames.request([1], 2, frames.Options(), [])))
        await asyncio.sleep(0.05)
        assert gw.queued == 1 and not waiting.done()
        with pytest.raises(QueueFull):
            await gw.admit(frames.request([1], 1, frames.Options(), []))
        assert [e.ids for e in (await drain(b))[:-1]] == [(5,)] * 3
        c = await asyncio.wait_for(waiting, 5)  # b's place went to the waiter
        a.cancel()
        end_a = (await drain(a))[-1]
        assert isinstance(end_a, frames.End) and end_a.finish == "cancel"
        assert f"C {a.rid}" in fake.seen
        await drain(c)
        assert gw.live == 0 and gw.queued == 0 and not fake.live
        info = await gw.ask(frames.Info)
        assert info.worker_pid == 3
        run.cancel()

    asyncio.run(main())


def test_a_waiter_that_leaves_gives_its_place_on() -> None:
    async def main() -> None:
        fake = FakeGateway(window=1, script=[5], delay=0.01)
        gw, run, _ = await connect(fake, queue_max=4)
        a = await gw.admit(frames.request([1], 5, frames.Options(), []))
        left = asyncio.create_task(gw.admit(frames.request([1], 1, frames.Options(), [])))
        stays = asyncio.create_task(gw.admit(frames.request([1], 1, frames.Options(), [])))
        await asyncio.sleep(0.02)
        left.cancel()
        await drain(a)
        await drain(await asyncio.wait_for(stays, 5))
        assert gw.live == 0 and gw.queued == 0
        run.cancel()

    asyncio.run(main())


def test_a_dead_connection_fails_live_and_waiting_requests() -> None:
    async def main() -> None:
        fake = FakeGateway(window=1, script=[5], delay=0.05)
        gw, run, guest_end = await connect(fake, queue_max=4)
        live = await gw.admit(frames.request([1], 100, frames.Options(), []))
        waiting = asyncio.create_task(gw.admit(frames.request([1], 1, frames.Options(), [])))
        await asyncio.sleep(0.1)
        guest_end.transport.abort()  # QEMU killed: the socket ends
        with pytest.raises(GuestDown):
            await drain(live)
        with pytest.raises(GuestDown):
            await waiting
        with pytest.raises(GuestDown):
            await gw.admit(frames.request([1], 1, frames.Options(), []))
        await run
        for t in fake.live.values():
            t.cancel()

    asyncio.run(main())


def test_an_unasked_ready_means_the_gateway_restarted() -> None:
    async def main() -> None:
        fake = FakeGateway(window=1, script=[5], delay=0.05)
        gw, run, guest_end = await connect(fake, queue_max=4)
        lost = await gw.admit(frames.request([1], 100, frames.Options(), []))
        waiting = asyncio.create_task(gw.admit(frames.request([1], 2, frames.Options(), [])))
        await asyncio.sleep(0.1)
        guest_end.write(f"X {lost.rid} 203 not live\n".encode())  # ends nothing
        await asyncio.sleep(0.1)
        assert gw.live == 1
        for t in fake.live.values():
            t.cancel()  # the old gateway is gone with its requests
        fake.live.clear()
        guest_end.write(f"R gateway {frames.PROTOCOL} 49152 256 2\n".encode())
        with pytest.raises(GuestDown, match="restarted"):
            await drain(lost)
        end = (await drain(await asyncio.wait_for(waiting, 5)))[-1]
        assert isinstance(end, frames.End) and end.finish == "length"
        assert gw.window == 2 and gw.live == 0
        run.cancel()

    asyncio.run(main())


# ---------------------------------------------------------------- text

@pytest.fixture(scope="module")
def tok():
    return load_tokenizer("smol")


def test_streamed_text_never_splits_a_character(tok) -> None:
    ids = tok.encode("é😀 Paris")
    assert len(ids) > 3  # the emoji takes several byte tokens
    s = TextStream(tok, (), [0, 2])
    pieces = [s.push([i]) for i in ids] + [s.close()]
    assert all("\ufffd" not in p for p in pieces)
    assert "".join(pieces) == "é😀 Paris" == tok.decode(ids)


def test_stop_strings_cut_the_text_even_across_tokens(tok) -> None:
    ids = tok.encode(" Paris. The answer is:")
    s = TextStream(tok, ["answer"], [0, 2])
    pieces = [s.push([i]) for i in ids]
    assert "".join(pieces) == " Paris. The " and s.stopped_by == "string"
    s = TextStream(tok, ["xyz"], [0, 2])
    out = "".join(s.push([i]) for i in [*PARIS, 2, 7042]) + s.close()
    assert out == " Paris." and s.stopped_by == "id" and s.generated == 3


def test_the_chat_template_is_the_models_own(tok) -> None:
    msgs = [{"role": "user", "content": "What is the capital of France?"}]
    assert render(tok, msgs) == lc.smol_chat_text(msgs[0]["content"])
    with_system = render(tok, [{"role": "system", "content": "Be brief."}, *msgs])
    assert with_system.startswith("<|im_start|>system\nBe brief.<|im_end|>\n")
    assert "SmolLM" not in with_system


def test_chat_and_serve_render_one_conversation_to_the_same_ids(tok) -> None:
    """`pyaisvc chat` (ChatSession.prompt_for, no guest booted) and `pyaisvc serve`
    (Service.plan of a chat request) make the same ids of one conversation, and for one
    message those are the ids of SmolLM2's template written out by hand."""
    from pathlib import Path

    from pyaisvc.guest.chat import ChatConfig, ChatSession
    from pyaisvc.serve.schemas import ChatRequest

    service = Service("smol", None, tok, Limits(VOCAB, SEQ, 255), Metrics())
    session = ChatSession(ChatConfig("smol", Path("kernel"), Path("image"), "512M",
                                     max_new_tokens=16), tok)
    turns = [("Hi!", "Hello! How can I help?"), ("What is 2+2?", "4.")]
    for kept in (turns[:0], turns):
        session.turns = list(kept)
        messages = [m for q, a in kept for m in ({"role": "user", "content": q},
                                                 {"role": "assistant", "content": a})]
        req = ChatRequest(model="smol", messages=[*messages, {"role": "user",
                                                              "content": "And 3+3?"}])
        chat_ids, dropped = session.prompt_for("And 3+3?")
        assert dropped == 0 and service.plan(req).prompt == chat_ids
    session.turns = []
    assert session.prompt_for("And 3+3?")[0] == tok.encode(lc.smol_chat_text("And 3+3?"))


# ---------------------------------------------------------------- the API


class FakeEngine:
    def __init__(self, gw: Gateway) -> None:
        self.gw, self.state, self.why_down, self.qemu_pid = gw, "up", "", 42

    async def enqueue(self, request):
        self.last = (list(request.prompt), request.predict, request.opts, list(request.stops))
        return await self.gw.admit(request)


def api_test(script: list[int], window: int, queue_max: int, body, access: Access | None = None,
             burst: bool = False, body_seconds: float = 30.0):
    """Runs body(client, engine, fake) against the app over a fake gateway."""
    async def main():
        fake = FakeGateway(window, script, delay=0.005)
        gw, run, _ = await connect(fake, queue_max)
        engine = FakeEngine(gw)
        limits = Limits(VOCAB, SEQ, 255)
        service = Service("smol", engine, load_tokenizer("smol"), limits, Metrics(), burst=burst)
        app = create_app(service, access, body_seconds)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            await body(client, engine, fake)
        run.cancel()

    asyncio.run(main())


def test_completion_stream_and_usage_over_a_fake_gateway() -> None:
    async def body(client, engine, fake):
        r = await client.post("/v1/completions", json={
            "model": "smol", "prompt": "The capital of France is", "max_tokens": 8,
            "temperature": 0})
        assert r.status_code == 200, r.text
        out = r.json()
        assert out["choices"][0]["text"] == " Paris."
        assert out["choices"][0]["finish_reason"] == "stop"
        assert out["usage"] == {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8,
                                "prompt_tokens_details": {"cached_tokens": 3}}
        assert out["timings"] == {"queued_us": 10, "ttft_us": 1000, "total_us": 2000}
        assert engine.last[0] == [504, 3575, 282, 4649, 314]
        assert engine.last[2] == frames.Options()  # greedy
        assert engine.last[3] == [0, 2]
        r = await client.post("/v1/completions", json={
            "model": "smol", "prompt": [504, 3575], "max_tokens": 8, "stream": True,
            "temperature": 0.8, "seed": 9, "top_p": 0.95})
        events = [ln[6:] for ln in r.text.splitlines() if ln.startswith("data: ")]
        assert events[-1] == "[DONE]"
        chunks = [json.loads(e) for e in events[:-1]]
        assert "".join(c["choices"][0]["text"] for c in chunks) == " Paris."
        assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
        assert engine.last[2] == frames.Options(800000, 40, 950000, 9)

    api_test([*PARIS, 2], window=4, queue_max=4, body=body)


def test_the_kv_cache_counters_reach_the_metrics() -> None:
    """The I frame's KV pool fields (docs/GATEWAY.md) become the aisvc_kv_* gauges."""
    from prometheus_client import generate_latest

    from pyaisvc.serve.metrics import Metrics

    info = frames.parse("I 1 0 1 0 0 4 3 32 2 6 24 1 48 100")
    assert isinstance(info, frames.Info)
    assert (info.kv_blocks, info.kv_used, info.kv_cached, info.kv_free) == (32, 2, 6, 24)
    m = Metrics()
    m.saw_kv(info)
    text = generate_latest(m.registry).decode()
    assert 'aisvc_kv_blocks{state="cached"} 6.0' in text
    assert 'aisvc_kv_blocks{state="free"} 24.0' in text
    assert "aisvc_kv_evictions 1.0" in text and "aisvc_kv_hit_ratio 0.48" in text


def test_user_is_the_tenant_and_priority_reaches_the_kernel() -> None:
    """The request's user becomes a tenant id of its own (the same user the same id; none:
    0, the gateway's pid), and its priority goes with it, in the S frame; /metrics counts
    TTFT and ids by user."""
    async def body(client, engine, fake):
        sent = []
        for user, priority in (("alice", 5), ("bob", None), ("alice", 0), (None, 100)):
            req = {"model": "smol", "prompt": [504, 3575], "max_tokens": 4, "temperature": 0}
            req |= {"user": user} if user else {}
            req |= {"priority": priority} if priority is not None else {}
            r = await client.post("/v1/completions", json=req)
            assert r.status_code == 200, r.text
            sent.append((engine.last[2].tenant, engine.last[2].priority))
            words = [s for s in fake.seen if s.startswith("S ")][-1].split()
            assert (int(words[7]), int(words[8])) == sent[-1], words
        assert sent == [(100000, 5), (100001, 0), (100000, 0), (0, 100)]
        metrics = (await client.get("/metrics")).text
        assert 'aisvc_tenant_tokens_total{kind="prompt",tenant="alice"} 4.0' in metrics, metrics
        assert 'aisvc_tenant_tokens_total{kind="prompt",tenant="-"} 2.0' in metrics, metrics
        assert 'aisvc_tenant_ttft_seconds_count{tenant="bob"} 1.0' in metrics, metrics

    api_test([*PARIS, 2], window=4, queue_max=4, body=body)


def test_a_stop_string_cancels_the_guests_request() -> None:
    async def body(client, engine, fake):
        r = await client.post("/v1/chat/completions", json={
            "model": "smol", "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 50, "temperature": 0, "stop": "."})
        assert r.status_code == 200, r.text
        out = r.json()["choices"][0]
        assert out["message"]["content"] == " Paris" and out["finish_reason"] == "stop"
        await asyncio.sleep(0.1)
        assert any(s.startswith("C ") for s in fake.seen) and not fake.live

    api_test([*PARIS, 7042], window=4, queue_max=4, body=body)


def test_bad_requests_are_400s_naming_the_field() -> None:
    cases = [
        ({"model": "smol", "prompt": "x", "n": 2}, 400, "n"),
        ({"model": "smol", "prompt": "x", "max_tokens": 0}, 400, "max_tokens"),
        ({"model": "smol", "prompt": "x", "max_tokens": -3}, 400, "max_tokens"),
        ({"model": "smol", "prompt": "x", "max_tokens": 10**9}, 400, "max_tokens"),
        ({"model": "smol", "prompt": "word " * 300}, 400, "prompt"),
        ({"model": "smol", "prompt": "word " * 200, "max_tokens": 100}, 400, "max_tokens"),
        ({"model": "smol", "prompt": ""}, 400, "prompt"),
        ({"model": "smol", "prompt": [VOCAB]}, 400, "prompt"),
        ({"model": "smol", "prompt": 5}, 400, "prompt"),
        ({"model": "gpt-4", "prompt": "x"}, 404, "model"),
        ({"model": "smol", "prompt": "x", "logprobs": 6}, 400, "logprobs"),
        ({"model": "smol", "prompt": "x", "best_of": 2}, 400, "best_of"),
        ({"model": "smol", "prompt": "x", "suffix": "y"}, 400, "suffix"),
        ({"model": "smol", "prompt": "x", "echo": True, "logprobs": 1}, 400, "echo"),
        ({"model": "smol", "prompt": ["x", "y"]}, 400, "prompt"),
        ({"model": "smol", "prompt": "x", "logit_bias": {"a": 1}}, 400, "logit_bias"),
        ({"model": "smol", "prompt": "x", "logit_bias": {str(VOCAB): 1}}, 400, "logit_bias"),
        ({"model": "smol", "prompt": "x", "logit_bias": {"1": 101}}, 400, "logit_bias"),
        ({"model": "smol", "prompt": "x", "logit_bias": {str(i): 1 for i in range(9)}}, 400,
         "logit_bias"),
        ({"model": "smol", "prompt": "x", "presence_penalty": 2.5}, 400, "presence_penalty"),
        ({"model": "smol", "prompt": "x", "frequency_penalty": -3}, 400, "frequency_penalty"),
        ({"model": "smol", "prompt": "x", "temperature": "hot"}, 400, "temperature"),
        ({"model": "smol", "prompt": "\ud800"}, 400, "prompt"),
        ({"model": "smol", "prompt": "x", "priority": -1}, 400, "priority"),
        ({"model": "smol", "prompt": "x", "priority": 101}, 400, "priority"),
        ({"model": "smol", "prompt": "x", "user": 7}, 400, "user"),
    ]

    async def body(client, engine, fake):
        for req, status, param in cases:
            r = await client.post("/v1/completions", content=json.dumps(req),
                                  headers={"content-type": "application/json"})
            assert r.status_code == status, (req, r.text)
            err = r.json()["error"]
            assert err["param"] == param and param in err["message"], (req, err)
        r = await client.post("/v1/completions", content=b"{not json",
                              headers={"content-type": "application/json"})
        assert r.status_code == 400 and "JSON" in r.json()["error"]["message"]
        r = await client.post("/v1/completions", content=b"x" * (10 << 20),
                              headers={"content-type": "application/json"})
        assert r.status_code == 413 and r.json()["error"]["message"]
        r = await client.get("/v1/models")
        assert r.json()["data"][0]["id"] == "smol"
        assert not fake.seen or all(not s.startswith("S") for s in fake.seen)

    api_test(PARIS, window=4, queue_max=4, body=body)


def test_numbers_and_maps_beyond_any_field_are_400s_in_openais_shape() -> None:
    """Integers wider than 64 bits anywhere in the body (beyond Python's 4,300-digit limit
    too), a logit_bias key of 5,000 digits, and maps beyond their sizes: 400 in OpenAI's
    error shape, each message short, nothing sent to the guest; then the server serves."""
    big = "9" * 5000
    many = ", ".join(f'"{i}": 1' for i in range(10000))
    head = '{"model": "smol", "prompt": '
    cases = [
        (head + '"x", "logit_bias": {"' + big + '": 1}}', "logit_bias"),
        (head + '"x", "logit_bias": {"' + big + '": 500}}', "logit_bias"),
        (head + '"x", "max_tokens": ' + big + "}", None),
        (head + '"x", "seed": ' + "1" * 21 + "}", None),
        (head + "[" + big + "]}", None),
        (head + '"x", "temperature": -' + big + "}", None),
        (head + '"x", "logit_bias": {' + many + "}}", "logit_bias"),
    ]
    chat = {"model": "smol", "messages": [{"role": "user", "content": "hi"}],
            "metadata": {str(i): "v" for i in range(17)}}

    async def body(client, engine, fake):
        for text, param in cases:
            r = await client.post("/v1/completions", content=text,
                                  headers={"content-type": "application/json"})
            assert r.status_code == 400, (text[:80], r.text[:200])
            err = r.json()["error"]
            assert err["param"] == param and len(err["message"]) < 200, err
        r = await client.post("/v1/chat/completions", json=chat)
        assert r.status_code == 400 and r.json()["error"]["param"] == "metadata", r.text
        assert not any(s.startswith("S") for s in fake.seen)
        r = await client.post("/v1/completions", json={
            "model": "smol", "prompt": "x", "max_tokens": 2, "seed": 2**64 - 1,
            "logit_bias": {"49151": 1}})
        assert r.status_code == 200, r.text

    api_test(PARIS, window=4, queue_max=4, body=body)


def test_a_full_queue_is_429_with_retry_after() -> None:
    async def body(client, engine, fake):
        fake.delay = 0.05
        req = {"model": "smol", "prompt": "x", "max_tokens": 20, "temperature": 0}
        first = asyncio.create_task(client.post("/v1/completions", json=req))
        await asyncio.sleep(0.05)
        r = await client.post("/v1/completions", json=req)
        assert r.status_code == 429 and r.headers["retry-after"]
        assert (await first).status_code == 200
        metrics = (await client.get("/metrics")).text
        assert 'aisvc_requests_total{endpoint="completions",outcome="rejected"} 1.0' in metrics

    api_test([5], window=1, queue_max=0, body=body)


def test_openapi_documents_every_reply() -> None:
    """Every reply of every published route is declared with a model of its own (not
    FastAPI's default empty schema or a bare object); /v1/aisvc/limits gives the kernel's
    limits."""
    async def body(client, engine, fake):
        paths = (await client.get("/openapi.json")).json()["paths"]
        assert {"/v1/completions", "/v1/chat/completions", "/v1/models", "/health",
                "/metrics", "/tokenize", "/detokenize", "/v1/aisvc/table"} <= set(paths)
        for path, ops in paths.items():
            for method, op in ops.items():
                for status, reply in op["responses"].items():
                    schemas = [c.get("schema") or {} for c in reply.get("content", {}).values()]
                    # a model of its own, or the text of /metrics
                    assert any("$ref" in s or s.get("type") == "string" for s in schemas), \
                        f"{method} {path} {status}: no reply schema: {reply}"
        limits = (await client.get("/v1/aisvc/limits")).json()
        assert limits == {"vocab": VOCAB, "seq_len": SEQ, "max_prompt": 255,
                          "max_predict": 255, "max_burst": 8}

    api_test([5], window=1, queue_max=0, body=body)


# ---------------------------------------------------------------- the CLI

def test_serve_refuses_a_bad_or_busy_port_before_booting() -> None:
    import subprocess
    import sys

    def serve(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pyaisvc", "serve", *args],
                              capture_output=True, text=True, timeout=120)

    r = serve("--port", "70000")
    assert r.returncode == 1
    assert r.stderr.strip() == "pyaisvc serve: --port 70000 must be 0..65535"
    from pyaisvc.commands.serve import boot_arguments
    flags = argparse.Namespace(batch=3, sched="fair", chunk=4, prefill=None, prefix_cache="on")
    assert boot_arguments(flags) == "aibatch=3 aisched=fair aichunk=4"
    flags.prefix_cache, flags.prefill = "off", 1
    assert boot_arguments(flags) == "aibatch=3 aisched=fair aichunk=4 aiprefill=1 aicache=0"
    for flag, value in (("--chunk", "9"), ("--prefill", "0")):
        r = serve(flag, value)
        assert r.returncode == 1
        assert r.stderr.strip() == f"pyaisvc serve: {flag} {value} must be 1..8 (AI_CHUNK_MAX)"
    r = serve("--sched", "lottery")
    assert r.returncode == 2 and "invalid choice: 'lottery'" in r.stderr, r.stderr
    with busy_port() as port:
        r = serve("--port", str(port))
    assert r.returncode == 1
    assert "cannot listen on 127.0.0.1:" in r.stderr and "choose another --port" in r.stderr
    assert "booting" not in r.stderr
