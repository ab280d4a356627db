"""The host's end of the gateway channel fed what a broken or hostile guest could send:
the frame parser fuzzed with hypothesis, random bytes and over-long lines on the
connection, a T frame with an id outside the vocabulary, a lost E frame, late answers
to the hellos. Nothing raises but FrameError, and serving goes on.
"""

from __future__ import annotations

import asyncio
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_serve_host import VOCAB, FakeGateway, connect, drain

from pyaisvc.serve import frames
from pyaisvc.serve.gateway import Gateway, GuestDown, RequestFailed

U64 = st.integers(0, 2**64 - 1)
WORD = st.text(alphabet=st.characters(codec="utf-8"), max_size=12)


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.one_of(st.sampled_from("RTLEXIVS"), WORD, U64.map(str),
                          st.integers(-2**70, 2**70).map(str)), max_size=12))
def test_any_line_parses_to_a_frame_or_a_frame_error(words: list[str]) -> None:
    line = " ".join(words)
    try:
        frame = frames.parse(line)
    except frames.FrameError:
        return
    assert isinstance(frame, frames.Ready | frames.Tokens | frames.LogProbs | frames.End |
                      frames.Failed | frames.Info | frames.Table)
    unsigned, signed = _numbers_of(frame, words)
    for w in unsigned:  # plain numbers within 64 bits, as the line wrote them
        assert w.isascii() and w.isdigit() and int(w) < 2**64, (w, line)
    for w in signed:  # a log-probability: a leading '-' at most, within 64 bits signed
        digits = w.removeprefix("-")
        assert digits.isascii() and digits.isdigit() and int(digits) < 2**63, (w, line)


def _numbers_of(frame: frames.Frame, words: list[str]) -> tuple[list[str], list[str]]:
    """The words of a parsed line that are its unsigned and its signed numbers, by the
    frame's kind (docs/GATEWAY.md): an L frame's log-probabilities are signed, an X
    frame's words after its code are free text, the names (gateway, the finish, the
    policy) are not numbers."""
    if isinstance(frame, frames.LogProbs):  # L rid id lp ntop (id lp)...
        assert len(frame.top) <= frames.MAX_TOPLP
        return [words[1], words[2], words[4], *words[5::2]], [words[3], *words[6::2]]
    if isinstance(frame, frames.Failed):
        return words[1:3], []
    names = {"gateway", "stop", "length", "cancel"}
    if isinstance(frame, frames.Table):
        names.add(frame.policy)
    return [w for w in words[1:] if w not in names], []


@settings(max_examples=500, deadline=None)
@given(st.integers(1, 2**31 - 1), st.integers(0, 2**32 - 1), st.integers(-2**63 + 1, 0),
       st.lists(st.tuples(st.integers(0, 2**32 - 1), st.integers(-2**63 + 1, 0)),
                max_size=frames.MAX_TOPLP))
def test_l_frames_with_their_real_ranges_parse_to_their_values(rid, tok, lp, top) -> None:
    """Log-probabilities are 0 or negative (millionths of a natural log, down to the
    least 64-bit value a record can hold), with 0..MAX_TOPLP alternatives."""
    line = f"L {rid} {tok} {lp} {len(top)}" + "".join(f" {i} {v}" for i, v in top)
    assert frames.parse(line) == frames.LogProbs(rid, tok, lp, tuple(top))


def test_the_longest_legal_s_frame_fits_a_line() -> None:
    """4 stops, 8 biases, 255 prompt ids, every number at its widest: 290 words (the
    gateway's GW_S_WORDS_MAX), within GW_LINE_MAX with the widest rid."""
    widest = 2**32 - 1
    opts = frames.Options(temp_micro=widest, top_k=widest, top_p_micro=widest,
                          seed=2**64 - 1, tenant=2**31 - 1, priority=2**31 - 1,
                          presence_micro=-(2**31), frequency_micro=-(2**31),
                          logprobs=1 + frames.MAX_TOPLP,
                          bias=tuple((widest - i, -(2**31)) for i in range(frames.MAX_BIAS)))
    req = frames.request([widest] * frames.MAX_PROMPT, 2**31 - 1, opts,
                         [widest] * frames.MAX_STOP)
    line = frames.submit_line(frames.RID_MAX, req)
    assert len(line.split()) == 290 and len(line) <= frames.LINE_MAX, len(line)


@settings(max_examples=500, deadline=None)
@given(st.integers(0, 2**31 - 1), st.lists(U64, min_size=1, max_size=20),
       st.sampled_from(["stop", "length", "cancel"]), st.lists(U64, min_size=6, max_size=6))
def test_well_formed_frames_parse_to_their_values(rid, ids, finish, nums) -> None:
    assert frames.parse(f"T {rid} " + " ".join(map(str, ids))) == frames.Tokens(rid, tuple(ids))
    end = frames.parse(f"E {rid} {finish} " + " ".join(map(str, nums)))
    assert end == frames.End(rid, finish, *nums)


@pytest.mark.parametrize("bad", ["+5", "-5", "1_000", "\u0665", "\u00b2", "0x10", " 5",
                                 str(2**64), "9" * 30, "5.0", "1e3"])
def test_a_number_is_ascii_digits_within_64_bits(bad: str) -> None:
    with pytest.raises(frames.FrameError):
        frames.parse(f"T 3 {bad}")
    with pytest.raises(frames.FrameError):
        frames.parse(f"E {bad} stop 1 2 3 4 5 6")


def test_a_ready_frame_needs_a_window() -> None:
    with pytest.raises(frames.FrameError):
        frames.parse(f"R gateway {frames.PROTOCOL} 49152 256 0")
    assert frames.parse(f"R gateway {frames.PROTOCOL} 49152 256 8 77").nonce == 77
    assert frames.parse(f"R gateway {frames.PROTOCOL} 49152 256 8").nonce is None


class JunkGateway(FakeGateway):
    """A fake gateway that writes junk between its frames: random bytes, lines over the
    reader's limit, frames for no request, late answers to a hello."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.rng = random.Random(43)

    async def _run(self, writer, rid, predict, stops, ntop) -> None:
        for n in (1, 300, 70000, 5):
            junk = bytes(self.rng.randrange(256) for _ in range(n)).replace(b"\n", b"")
            writer.write(junk + b"\n")
        # an answer to a hello nobody sent
        writer.write(f"R gateway {frames.PROTOCOL} 49152 256 2 12345\n".encode())
        writer.write(b"T 999999 5\nE 77 stop 1 1 1 1 1\nX 5 -1 nope\n")
        await super()._run(writer, rid, predict, stops, ntop)


def test_random_bytes_and_long_lines_from_the_guest_are_dropped() -> None:
    async def main() -> None:
        fake = JunkGateway(window=2, script=[7042, 30], delay=0.01)
        gw, run, _ = await connect(fake, queue_max=4)
        for _ in range(3):
            evs = await drain(await gw.admit(frames.request([1], 2, frames.Options(), [])))
            assert [e.ids for e in evs[:-1]] == [(7042,), (30,)]
            assert isinstance(evs[-1], frames.End) and evs[-1].finish == "length"
        assert gw.live == 0 and gw.window == 2 and gw.down is None
        run.cancel()

    asyncio.run(main())


class LosingGateway(FakeGateway):
    """A fake gateway that loses request 1's E frame and sends an id outside the
    vocabulary for request 2."""

    async def _run(self, writer, rid, predict, stops, ntop) -> None:
        if rid == 2:
            writer.write(f"T 2 {VOCAB}\n".encode())
        if rid == 1:
            writer.write(b"T 1 5\n")
            del self.live[rid]
            return  # no E: lost
        await super()._run(writer, rid, predict, stops, ntop)


def test_a_lost_end_frame_ends_its_request_and_a_bad_id_fails_its_own() -> None:
    async def main() -> None:
        fake = LosingGateway(window=1, script=[5], delay=0.01)
        gw, run, _ = await connect(fake, queue_max=4, lost_after=0.5)
        lost = await gw.admit(frames.request([1], 3, frames.Options(), []))
        with pytest.raises(GuestDown, match="sent nothing"):
            await asyncio.wait_for(drain(lost), 5)
        await asyncio.sleep(0.1)
        assert "C 1" in fake.seen  # the guest is told too
        bad = await gw.admit(frames.request([1], 3, frames.Options(), []))  # its place came back
        with pytest.raises(RequestFailed, match="vocabulary"):
            await asyncio.wait_for(drain(bad), 5)
        bad.cancel()
        good = await asyncio.wait_for(gw.admit(frames.request([1], 2, frames.Options(), [])), 5)
        evs = await drain(good)
        assert isinstance(evs[-1], frames.End) and gw.live == 0
        run.cancel()

    asyncio.run(main())


def test_connect_waits_for_the_answer_to_its_own_hello() -> None:
    async def main() -> None:
        host, guest = await _pair()
        g_reader, g_writer = guest
        # the gateway's own start line, an over-long line and another host's answer first
        ready = f"R gateway {frames.PROTOCOL} 49152 256".encode()
        g_writer.write(ready + b" 8\n" + b"x" * 100000 + b"\n" + ready + b" 8 1\n")
        task = asyncio.create_task(Gateway.connect(*host, queue_max=1, timeout=10))
        hello = (await g_reader.readline()).split()
        assert hello[0] == b"H" and len(hello) == 2
        g_writer.write(ready + b" 3 " + hello[1] + b"\n")
        gw = await asyncio.wait_for(task, 5)
        assert gw.window == 3
        run = asyncio.create_task(gw.run())
        g_writer.write(ready + b" 3 " + hello[1] + b"\n")  # a late answer
        await asyncio.sleep(0.1)
        assert gw.down is None and gw.window == 3
        run.cancel()

    asyncio.run(main())


async def _pair():
    import socket

    a, b = socket.socketpair()
    return (await asyncio.open_connection(sock=a)), (await asyncio.open_connection(sock=b))


def test_rid_limit_is_the_kernels_reqid_limit() -> None:
    """gateway.h defines the host's highest rid as the kernel's highest reqid (read
    through its #include of aisvc.h): both 2^31-1, as docs/GATEWAY.md says."""
    from pyaisvc import cheader
    assert frames.RID_MAX == cheader.header_define("aisvc.h", "AI_REQID_MAX") == 2**31 - 1
