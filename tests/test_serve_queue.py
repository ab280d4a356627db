"""The host queue without a guest: places per tenant, turns by tenant, "not now" refusals.

``hostqueue.Places`` alone (the order places are handed on), then the
gateway over tests/test_serve_host.py's fake: one user's backlog beyond its
window does not keep another user's request from reaching the gateway, and
a refusal that means "not now" sends the request again instead of failing it.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest
from test_serve_host import PARIS, SEQ, VOCAB, FakeEngine, FakeGateway, connect, drain

from pyaisvc.model.tokenizer import load_tokenizer
from pyaisvc.serve import frames
from pyaisvc.serve.app import Limits, Service, create_app
from pyaisvc.serve.hostqueue import Places, QueueFull
from pyaisvc.serve.metrics import Metrics

A, B, C = 100_000, 100_001, 100_002  # tenants as pyaisvc serve numbers its users


async def _take_all(places: Places, tenants: list[int]) -> list[asyncio.Task[None]]:
    """One task taking a place per entry of tenants, each started in this order."""
    tasks = []
    for t in tenants:
        tasks.append(asyncio.create_task(places.take(t)))
        await asyncio.sleep(0)  # each reaches its line before the next
    return tasks


def test_places_go_round_robin_over_tenants_and_fifo_within_one() -> None:
    """One place: A queues three, then B and C one each; the places go A, B, C, A, A (in
    arrival order, fifo, they would go A, A, A, B, C)."""
    async def main():
        places = Places(per_tenant=8, total=1, limit=10)
        await places.take(A)  # the one place
        order = [A, A, A, B, C]
        tasks = await _take_all(places, order)
        served: list[int] = []  # indices into order, as their places came
        for _ in order:
            places.give_back(A if not served else order[served[-1]])
            await asyncio.sleep(0)
            done = [i for i, t in enumerate(tasks) if t.done() and i not in served]
            assert len(done) == 1, done  # one place given back: one handed on
            served.append(done[0])
        assert [order[i] for i in served] == [A, B, C, A, A]
        assert served == [0, 3, 4, 1, 2]  # fifo within A
        assert places.live == 1 and places.waiting == 0

    asyncio.run(main())


def test_a_tenant_at_its_window_waits_while_others_take_places() -> None:
    """Window 2 per tenant, 4 in all: A's third request waits although places are free,
    B's first goes in at once; a place A gives back goes to A's waiter."""
    async def main():
        places = Places(per_tenant=2, total=4, limit=10)
        await places.take(A)
        await places.take(A)
        a3 = asyncio.create_task(places.take(A))
        await asyncio.sleep(0)
        assert not a3.done() and places.waiting_for(A) == 1
        await asyncio.wait_for(places.take(B), 1)  # a place at once
        assert places.held[A] == 2 and places.held[B] == 1
        places.give_back(A)
        await asyncio.wait_for(a3, 1)
        assert places.held[A] == 2 and places.waiting == 0

    asyncio.run(main())


def test_the_queue_limit_answers_queue_full_and_a_leaver_gives_its_turn_on() -> None:
    """limit 2 waiters: the third gets QueueFull; a waiter that leaves is out of its line,
    and the next one gets the place."""
    async def main():
        places = Places(per_tenant=1, total=1, limit=2)
        await places.take(A)
        left, stays = await _take_all(places, [B, C])
        with pytest.raises(QueueFull):
            await places.take(A)
        left.cancel()
        await asyncio.sleep(0)
        assert places.waiting == 1
        places.give_back(A)
        await asyncio.wait_for(stays, 1)
        assert places.held == {C: 1}

    asyncio.run(main())


def test_a_pause_holds_places_until_one_is_given_back_or_it_ends() -> None:
    """After pause(), a free place is not handed on until the pause ends."""
    async def main():
        places = Places(per_tenant=8, total=2, limit=10)
        await places.take(A)
        await places.take(A)
        waiter = asyncio.create_task(places.take(B))
        await asyncio.sleep(0)
        places.give_back(A, hand_on=False)
        places.pause(0.3)
        await asyncio.sleep(0.1)
        assert not waiter.done()
        await asyncio.wait_for(waiter, 2)  # the pause ended
        assert places.held == {A: 1, B: 1}

    asyncio.run(main())


def _req(tenant: int, predict: int) -> frames.Request:
    return frames.request([1], predict, frames.Options(tenant=tenant), [])


def test_user_b_reaches_the_gateway_while_a_has_its_window_live_and_more_queued() -> None:
    """Window 8: A sends 8 long requests and 4 more (they wait in the host queue), then B
    sends one; B's S frame goes to the gateway at once, and A's backlog still waits."""
    async def main():
        fake = FakeGateway(window=8, script=[5], delay=0.05)
        gw, run, _ = await connect(fake, queue_max=16)
        fake.window = frames.LIVE_MAX  # it announced 8 per tenant; it holds 16 in all
        subs = [await gw.admit(_req(A, 200)) for _ in range(8)]
        backlog = [asyncio.create_task(gw.admit(_req(A, 200))) for _ in range(4)]
        await asyncio.sleep(0.05)
        assert gw.live == 8 and gw.queued == 4
        b = await asyncio.wait_for(gw.admit(_req(B, 2)), 1)
        await asyncio.sleep(0.05)
        sent = [line for line in fake.seen if line.startswith("S ")]
        assert len(sent) == 9 and sent[-1].split()[7] == str(B), sent
        assert [type(e) for e in await asyncio.wait_for(drain(b), 5)] == [
            frames.Tokens, frames.Tokens, frames.End]
        assert gw.queued == 4  # A's backlog waits for one of A's own
        for s in subs:
            s.cancel()
        await asyncio.wait_for(asyncio.gather(*backlog), 5)
        run.cancel()

    asyncio.run(main())


class RefusingGateway(FakeGateway):
    """FakeGateway that answers the first `refusals` S frames with X rid `code`."""

    def __init__(self, code: int, refusals: int, **kw) -> None:
        super().__init__(**kw)
        self.code, self.refusals = code, refusals

    async def serve(self, reader, writer):
        async def filtered():
            while line := await reader.readline():
                if line.startswith(b"S ") and self.refusals > 0:
                    self.refusals -= 1
                    self.seen.append(line.decode().strip())
                    writer.write(f"X {line.split()[1].decode()} {self.code} not now\n"
                                 .encode())
                    continue
                yield line

        class Lines:
            def __init__(self, it):
                self.it = it

            async def readline(self):
                return await anext(self.it, b"")

        await super().serve(Lines(filtered()), writer)


@pytest.mark.parametrize("name", ["AIE_FULL", "AIE_WOULDBLOCK", "GW_FULL"])
def test_a_not_now_refusal_sends_the_request_again(name) -> None:
    """The guest refuses a request twice with a "not now" code (the table full of its own
    programs, the tenant's window, the gateway's 16): the host sends it again, and it
    ends as it would have, with its ids."""
    code = frames.GW_FULL if name == "GW_FULL" else frames._kernel(name)

    async def main():
        fake = RefusingGateway(code, 2, window=8, script=[7, 8], delay=0.01)
        gw, run, _ = await connect(fake, queue_max=4)
        sub = await gw.admit(_req(A, 2))
        evs = await asyncio.wait_for(drain(sub), 10)
        assert evs[:2] == [frames.Tokens(evs[0].rid, (7,)), frames.Tokens(evs[0].rid, (8,))]
        assert isinstance(evs[2], frames.End) and evs[2].finish == "length"
        assert len([s for s in fake.seen if s.startswith("S ")]) == 3
        assert gw.live == 0 and gw.places.live == 0
        run.cancel()

    asyncio.run(main())


def test_a_frame_the_gateway_refuses_as_malformed_fails_its_request_at_once() -> None:
    """The gateway answers an S frame it refuses with X rid 200 (protocol 5 names the rid
    of every S frame it can read): the client gets 500 (the server built the frame
    wrongly) at once, not a 503 or a hang, and the next request is served."""
    async def main():
        fake = RefusingGateway(frames.GW_MALFORMED, 1, window=8, script=PARIS, delay=0.01)
        gw, run, _ = await connect(fake, queue_max=4)
        service = Service("smol", FakeEngine(gw), load_tokenizer("smol"),
                          Limits(VOCAB, SEQ, 255), Metrics())
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(service)),
                                     base_url="http://localhost") as client:
            req = {"model": "smol", "prompt": "x", "max_tokens": 2}
            r = await asyncio.wait_for(client.post("/v1/completions", json=req), 10)
            assert r.status_code == 500, r.text
            assert r.json()["error"]["code"] == "frame_refused"
            r = await asyncio.wait_for(client.post("/v1/completions", json=req), 10)
            assert r.status_code == 200 and r.json()["choices"][0]["text"] == " Paris."
        run.cancel()

    asyncio.run(main())
