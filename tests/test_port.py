"""The gateway's channel: the virtio console port (/port) and the gateway program.

- The driver (kernel/drivers/virtio_console.c), at 1 and 2 harts: 16 MiB from
  the host into the guest and 16 MiB back, each checked with Adler-32 on both
  sides (tests/progs/portecho.c); a reader blocked on /port and killed from
  the shell leaves the system and the port working; /port is open in one
  process at a time (another's open gets EBUSY), until its last reference
  is closed.
- The gateway (user/ai/gateway.c, docs/GATEWAY.md) over the real SmolLM2: a
  greedy request's ids equal the numpy reference's, 8 requests at once are
  all right, a cancel ends its request and frees its slot, and malformed
  frames each get an X while the gateway goes on serving; no other process
  can open /port while the gateway has it.
"""

from __future__ import annotations

import random
import shutil
import socket
import tempfile
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import host.llmcases as lc
import numpy as np
import pytest

import pyaisvc.guest.qemu
from pyaisvc.guest.llmguest import MODELS
from pyaisvc.guest.qemu import Guest, QemuConfig
from pyaisvc.image import fsimg
from pyaisvc.model.sampling import SamplingOptions, lp_micro
from pyaisvc.serve import frames

TRANSFER = 16 << 20  # bytes each way
SEED = 7

# The port as a virtserialport (port 1): QEMU holds the guest back while the host's
# socket is full. A virtconsole (port 0) drops those bytes instead, so 16 MiB from
# the guest arrive short whenever the host reads a little late (docs/GATEWAY.md).
VIRTCONSOLE = "virtconsole,chardev=gw0"
SERIALPORT = "virtserialport,chardev=gw0"


def _argv_with_serialport(cfg: QemuConfig) -> list[str]:
    return [SERIALPORT if a == VIRTCONSOLE else a for a in _qemu_argv(cfg)]


_qemu_argv = pyaisvc.guest.qemu.qemu_argv


def _pattern(n: int, seed: int) -> bytes:
    """portecho's send pattern: byte i is (i * 131 + seed + (i >> 12)) & 0xff."""
    i = np.arange(n, dtype=np.uint64)
    return ((i * 131 + seed + (i >> 12)) & 0xFF).astype(np.uint8).tobytes()


class PortGuest:
    """A booted guest with a port, and the host's end of it connected."""

    def __init__(self, kernel: Path, image: Path, cpus: int, ram: str, timeout: float) -> None:
        # A short directory: a Unix socket's path is limited to about 100 bytes.
        self.dir = Path(tempfile.mkdtemp(prefix="aisvc-port-", dir="/tmp"))
        cfg = QemuConfig(kernel=kernel, image=image, ram=ram, cpus=cpus, snapshot=True,
                         port_socket=self.dir / "port.sock")
        self.guest = Guest(cfg)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.pending = b""
        try:
            with pytest.MonkeyPatch.context() as mp:  # until pyaisvc.guest.qemu boots one itself
                mp.setattr(pyaisvc.guest.qemu, "qemu_argv", _argv_with_serialport)
                self.guest.boot(timeout=timeout)
            self.sock.connect(str(cfg.port_socket))
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        self.sock.close()
        self.guest.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def recv_exactly(self, n: int, timeout: float) -> bytes:
        """n bytes from the port, or pytest.fail saying how many came."""
        got = bytearray(self.pending[:n])
        self.pending = self.pending[n:]
        deadline = time.monotonic() + timeout
        while len(got) < n:
            self.sock.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                chunk = self.sock.recv(min(1 << 20, n - len(got)))
            except TimeoutError:
                pytest.fail(f"the port gave {len(got)} of {n} bytes in {timeout:.0f} s")
            if not chunk:
                pytest.fail(f"the port closed after {len(got)} of {n} bytes")
            got += chunk
        return bytes(got)

    def send_frame(self, line: str) -> None:
        self.sock.sendall(line.encode("latin-1") + b"\n")

    def frame(self, timeout: float = 120.0) -> list[str]:
        """The next frame line from the gateway, as words."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.pending:
            self.sock.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                chunk = self.sock.recv(65536)
            except TimeoutError:
                pytest.fail(f"no frame from the gateway in {timeout:.0f} s "
                            f"(partial: {self.pending!r})")
            if not chunk:
                pytest.fail("the port closed")
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return line.decode("ascii").split(" ")

    def start(self, cmd: str) -> None:
        """Starts cmd in the background at the shell and waits until portecho says ready."""
        self.guest.send_line(f"{cmd} &")
        self.guest.expect(["portecho: ready"], time.monotonic() + 60, f"{cmd} to open /port")


# ---------------------------------------------------------------- the driver

@pytest.fixture(scope="module")
def port_image(build, tmp_path_factory) -> Path:
    tree = build.program_tree(testprogs=("portecho",))
    image = tmp_path_factory.mktemp("port") / "port.img"
    fsimg.build_image(image, tree)
    return image


@pytest.fixture(scope="module", params=[1, 2], ids=["1hart", "2harts"])
def port_guest(request, build, port_image) -> Iterator[PortGuest]:
    g = PortGuest(build.kernel, port_image, cpus=request.param, ram="256M", timeout=120)
    yield g
    g.close()


@pytest.mark.guest
def test_port_host_to_guest(port_guest: PortGuest) -> None:
    data = _pattern(TRANSFER, 3)
    port_guest.start(f"portecho recv {TRANSFER}")
    port_guest.sock.settimeout(600)
    port_guest.sock.sendall(data)
    g = port_guest.guest
    g.expect([r"recv (\d+) ([0-9a-f]+)\r?\n"], time.monotonic() + 600, "portecho's checksum")
    assert int(g.match.group(1)) == TRANSFER
    assert int(g.match.group(2), 16) == zlib.adler32(data)


@pytest.mark.guest
def test_port_guest_to_host(port_guest: PortGuest) -> None:
    port_guest.start(f"portecho send {TRANSFER} {SEED}")
    got = port_guest.recv_exactly(TRANSFER, timeout=600)
    assert zlib.adler32(got) == zlib.adler32(_pattern(TRANSFER, SEED))
    assert got == _pattern(TRANSFER, SEED)
    port_guest.guest.expect([f"sent {TRANSFER}"], time.monotonic() + 60, "portecho's end")


@pytest.mark.guest
def test_port_killed_reader(port_guest: PortGuest) -> None:
    """A reader blocked on /port is killed from the shell; the shell, the port and a
    new reader all work afterwards (the kill took no byte meant for the next one)."""
    g = port_guest.guest
    g.send_line("portecho read &")
    # The shell's "[pid]" and portecho's line come in either order.
    g.expect([r"\[(\d+)\][\s\S]*?portecho: ready", r"portecho: ready[\s\S]*?\[(\d+)\]"],
             time.monotonic() + 30, "the background job's pid and portecho read's start")
    pid = int(g.match.group(1))
    time.sleep(0.5)  # let it reach the read and sleep there
    g.run(f"kill {pid}")
    assert g.last_status == 0
    assert g.run("echo still here") == "still here\n"
    port_guest.start("portecho recv 11")
    port_guest.sock.sendall(b"hello port\n")
    g.expect([r"recv 11 ([0-9a-f]+)\r?\n"], time.monotonic() + 60, "the new reader's checksum")
    assert int(g.match.group(1), 16) == zlib.adler32(b"hello port\n"), g.transcript[-600:]


@pytest.mark.guest
def test_port_is_open_in_one_process_at_a_time(port_guest: PortGuest) -> None:
    """/port has one open file at a time: while it is held (here by a child that
    inherited it from a parent that has exited), another process's open fails with
    EBUSY; the holder still gets the host's bytes, and once its last reference is
    closed, a new open works."""
    g = port_guest.guest
    port_guest.start("portecho forkread")
    out = g.run("portecho read")
    assert "portecho: cannot open /port: resource busy" in out, out
    assert g.last_status == 1
    port_guest.sock.sendall(b"ping\n")
    g.expect([r"child read returned 5\r?\n"], time.monotonic() + 60, "the child's read")
    port_guest.start("portecho recv 11")
    port_guest.sock.sendall(b"hello port\n")
    g.expect([r"recv 11 ([0-9a-f]+)\r?\n"], time.monotonic() + 60, "the new reader's checksum")
    assert int(g.match.group(1), 16) == zlib.adler32(b"hello port\n"), g.transcript[-600:]


# ---------------------------------------------------------------- the gateway

GEN = 8


@pytest.fixture(scope="module")
def smol_assets() -> Path:
    return lc.smol_or_skip()


@pytest.fixture(scope="module")
def gateway(build, smol_assets, tmp_path_factory) -> Iterator[PortGuest]:
    tree = build.program_tree(testprogs=("portecho",))
    tree.add_dir("AI/SMOL", smol_assets)
    image = tmp_path_factory.mktemp("gw") / "gw.img"
    fsimg.build_image(image, tree)
    g = PortGuest(build.kernel, image, cpus=2, ram=MODELS["smol"].ram, timeout=300)
    # The gateway's own R (sent when it starts) may come as well as the answer to H,
    # in either order. It answers frames in the order read, so once the answer to
    # the I sent after H has come, every R has come and none is left for the tests.
    g.send_frame("H")
    g.send_frame("I")
    ready = []
    while (words := g.frame())[0] != "I":
        ready.append(words)
    want = ["R", "gateway", str(frames.PROTOCOL), "49152", "256", "8"]
    assert ready and all(w == want for w in ready), ready
    yield g
    g.close()


def _submit(rid: int, prompt: list[int], predict: int, logprobs: int = 0, tenant: int = 0,
            priority: int = 0) -> str:
    return (f"S {rid} {predict} 0 0 0 0 {tenant} {priority} 0 0 0 {logprobs} 0 {len(prompt)} "
            f"{' '.join(map(str, prompt))}")


Ended = dict[int, tuple[list[int], list[str]]]


def _collect(g: PortGuest, rids: set[int], timeout: float = 600) -> Ended:
    """Reads frames until every rid has ended: rid -> (its ids, its end frame)."""
    ids: dict[int, list[int]] = {r: [] for r in rids}
    ends: dict[int, list[str]] = {}
    deadline = time.monotonic() + timeout
    while len(ends) < len(rids):
        words = g.frame(timeout=max(1.0, deadline - time.monotonic()))
        rid = int(words[1])
        assert rid in rids and rid not in ends, words
        if words[0] == "T":
            ids[rid] += [int(w) for w in words[2:]]
        else:
            assert words[0] in ("E", "X"), words
            ends[rid] = words
    return {r: (ids[r], ends[r]) for r in rids}


@pytest.mark.guest
def test_gateway_greedy_matches_reference(gateway: PortGuest, smol_assets: Path) -> None:
    prompt = lc.FRANCE["smol"]
    want = lc.reference_ids(smol_assets, [prompt], GEN)[0]
    gateway.send_frame(_submit(1, prompt, GEN))
    ids, end = _collect(gateway, {1})[1]
    assert ids == want
    assert end[:5] == ["E", "1", "length", str(GEN), str(len(prompt))], end
    queued, ttft, total, cached = map(int, end[5:])
    assert 0 < ttft <= total and queued <= ttft and 0 <= cached < len(prompt)


@pytest.mark.guest
def test_gateway_eight_at_once(gateway: PortGuest, smol_assets: Path) -> None:
    prompts = lc.smol_prompts()[:4] * 2
    want = lc.reference_ids(smol_assets, prompts[:4], GEN) * 2
    for rid, p in enumerate(prompts, start=10):
        gateway.send_frame(_submit(rid, p, GEN))
    got = _collect(gateway, set(range(10, 18)))
    for rid, w in enumerate(want, start=10):
        ids, end = got[rid]
        assert ids == w, (rid, ids, w)
        assert end[:4] == ["E", str(rid), "length", str(GEN)], end
    # Batched: no request waited in the queue as long as any request took in all
    # (one at a time, the last would have queued through the 7 before it).
    queued = [int(got[r][1][5]) for r in got]
    total = [int(got[r][1][7]) for r in got]
    assert max(queued) < min(total), (queued, total)


@pytest.mark.guest
def test_gateway_logprob_frames(gateway: PortGuest, smol_assets: Path) -> None:
    """logprobs 1 + 2: an L frame before each id's T frame, the reference's millionths."""
    prompt = lc.FRANCE["smol"]
    sampler = SamplingOptions(logprobs=2).sampler()
    want = lc.reference_model(smol_assets).generate(prompt, 4, sampler=sampler)
    gateway.send_frame(_submit(20, prompt, 4, logprobs=3))
    records, ids = [], []
    while (words := gateway.frame())[0] != "E":
        if words[0] == "L":
            records.append(words[2:])
        else:  # a T frame: the records of its ids came just before it
            assert words[0] == "T" and len(records) == len(ids) + len(words) - 2, words
            ids += [int(w) for w in words[2:]]
            assert [int(r[0]) for r in records[-(len(words) - 2):]] == ids[-(len(words) - 2):]
    assert ids == want
    assert records == [[str(r.id), str(lp_micro(r.lp)), "2",
                        *(str(w) for t, v in r.top for w in (t, lp_micro(v)))]
                       for r in sampler.records]


def _info(g: PortGuest) -> dict[str, int]:
    g.send_frame("I")
    words = g.frame()
    names = ("used", "queued", "running", "done", "failed", "completed", "worker_pid",
             "kv_blocks", "kv_used", "kv_cached", "kv_free", "kv_evictions", "kv_hits", "kv_prompt")
    assert words[0] == "I" and len(words) == 1 + len(names), words
    return dict(zip(names, map(int, words[1:]), strict=True))


@pytest.mark.guest
def test_gateway_cancel_frees_the_request(gateway: PortGuest) -> None:
    gateway.send_frame(_submit(30, lc.FRANCE["smol"], 200))
    words = gateway.frame()
    assert words[:2] == ["T", "30"], words  # it runs
    gateway.send_frame("C 30")
    ids, end = _collect(gateway, {30})[30]
    assert end[:3] == ["E", "30", "cancel"], end
    assert int(end[3]) == len(ids) + len(words) - 2 < 200
    deadline = time.monotonic() + 10
    while (info := _info(gateway))["used"] != 0:
        assert time.monotonic() < deadline, f"the cancelled request still holds a slot: {info}"
        time.sleep(0.2)
    gateway.send_frame("C 30")  # no longer live
    assert gateway.frame()[:3] == ["X", "30", "203"]


@pytest.mark.guest
def test_gateway_table_frame_shows_the_policy_and_each_requests_tenant(
        gateway: PortGuest) -> None:
    """V while two requests run: the policy and its step budget, each slot with the
    host's rid, its prompt, and the tenant and priority its S frame gave (tenant 0: the
    gateway's pid, the submitter)."""
    prompt = lc.FRANCE["smol"]
    gateway.send_frame(_submit(40, prompt, 200, tenant=100_007, priority=9))
    gateway.send_frame(_submit(41, prompt[:5], 200))
    seen: set[str] = set()
    while seen != {"40", "41"}:  # both run
        words = gateway.frame()
        assert words[0] == "T", words
        seen.add(words[1])
    gateway.send_frame("V")
    while (words := gateway.frame())[0] == "T":
        pass
    table = frames.parse(" ".join(words))
    assert isinstance(table, frames.Table), words
    assert table.policy == "fifo" and table.chunk == table.prefill > 0, table  # boot's
    by_rid = {s.rid: (i, s) for i, s in enumerate(table.slots) if s.rid}
    assert set(by_rid) == {40, 41}, table.slots
    (i40, s40), (i41, s41) = by_rid[40], by_rid[41]
    assert frames.STATES[s40.state] == "RUNNING" and s40.prompt_len == len(prompt)
    assert (s40.tenant, s40.priority, s40.paused) == (100_007, 9, 0)
    assert (s41.tenant, s41.priority, s41.prompt_len) == (s41.owner, 0, 5) and s41.owner > 0
    assert {i40, i41} <= set(table.batch), table.batch
    gateway.send_frame("C 40")
    gateway.send_frame("C 41")
    got = _collect(gateway, {40, 41})
    assert all(end[2] == "cancel" for _, end in got.values()), got


@pytest.mark.guest
def test_gateway_holds_the_port_alone(gateway: PortGuest) -> None:
    """No other process opens /port while the gateway has it open (it would read the
    host's prompts or forge frames); the gateway goes on serving."""
    out = gateway.guest.run("portecho read")
    assert "portecho: cannot open /port: resource busy" in out, out
    assert _info(gateway)["worker_pid"] > 0


MALFORMED = [
    ("bogus", 0, 200),
    ("S", 0, 200),
    ("S 0 8 0 0 0 0 0 0 0 0 0 0 0 1 5", 0, 200),  # rid 0
    ("S 99999999999999999999 8 0 0 0 0 0 0 0 0 0 0 0 1 5", 0, 200),  # rid beyond 2^31-1
    ("S 40 8 0 0 0 0 0 0 0 0 0 0 0 5 504", 40, 200),  # fewer prompt ids than nprompt
    ("S 41 8 0 0 0 0 0 0 0 0 0 0 0 1 504 3575", 41, 200),  # more
    ("S 42 8 0 0 0 0 0 0 9 0 0 0 0 1 5", 42, 200),  # nstop above 4
    ("S 43 -8 0 0 0 0 0 0 0 0 0 0 0 1 5", 43, 200),  # a sign
    ("S 44 8 0 0 0 99999999999999999999999 0 0 0 0 0 0 0 1 5", 44, 200),  # seed beyond 2^64-1
    ("S 45 999 0 0 0 0 0 0 0 0 0 0 0 1 5", 45, 101),  # the kernel's predict limit
    ("S 46 8 0 0 0 0 0 0 0 0 0 0 0 1 4294967295", 46, 102),  # an id beyond the vocab
    ("S 47 8 0 0 0 0 0 0 0 0 0 0 0 0", 47, 100),  # no prompt
    ("S 48 8 0 0 0 0 0 0 0 0 0 0 0 300 5", 48, 100),  # nprompt above 255
    ("S  49 8 0 0 0 0 0 0 0 0 0 0 0 1 5", 0, 200),  # two spaces
    ("S 50 8 0 0 0 0 0 0 0 0 0 0 0 1 5 ", 50, 200),  # a trailing space (its rid is read)
    ("S 60 8 0 0 0 0 2147483648 0 0 0 0 0 0 1 5", 60, 200),  # a tenant beyond 2^31-1
    ("S 61 8 0 0 0 0 0 101 0 0 0 0 0 1 5", 61, 120),  # the kernel's priority limit
    ("C", 0, 200),
    ("C 51", 51, 203),
    ("I 1", 0, 200),
    ("\x00\x01\x7f\xff binary", 0, 200),
    ("S 52 8 0 0 0 0 0 0 0 0 0 0 0 1 5\r", 52, 200),  # a byte that is not printable
    ("S 53 " + "1 " * 3000, 53, 200),  # over GW_LINE_MAX
    ("S 54 8 0 0 0 0 0 0 0 x 0 0 0 1 5", 54, 200),  # a penalty that is not a number
    ("S 55 8 0 0 0 0 0 0 0 0 0 0 9 1 5", 55, 200),  # nbias above 8
    ("S 56 8 0 0 0 0 0 0 0 0 0 0 2 7 1", 56, 200),  # a bias pair missing
    ("S 57 8 0 0 0 0 0 0 0 -2000001 0 0 0 1 5", 57, 115),  # the kernel's penalty range
    ("S 58 8 0 0 0 0 0 0 0 0 0 7 0 1 5", 58, 115),  # logprobs above 1 + 5
    ("S 59 8 0 0 0 0 0 0 0 0 0 0 1 49152 1 1 5", 59, 102),  # a bias id beyond the vocab
    ("", 0, 200),
]


@pytest.mark.guest
def test_gateway_refuses_malformed_frames(gateway: PortGuest, smol_assets: Path) -> None:
    for line, rid, code in MALFORMED:
        gateway.send_frame(line)
        words = gateway.frame()
        assert words[:3] == ["X", str(rid), str(code)], (line[:60], words)
    # A request after all of them is served right.
    want = lc.reference_ids(smol_assets, [lc.FRANCE["smol"]], GEN)[0]
    gateway.send_frame(_submit(60, lc.FRANCE["smol"], GEN))
    ids, end = _collect(gateway, {60})[60]
    assert ids == want and end[:3] == ["E", "60", "length"], (ids, end)
    assert _info(gateway)["used"] == 0


def _longest_submit(rid: int, prompt: list[int], extra: str = "") -> str:
    """The longest legal S frame (user/ai/gateway.h, GW_S_WORDS_MAX words): one id to
    generate, a tenant and a priority, 4 stop ids, both penalties 0, 8 biases of 0
    (the ids unchanged), 255 prompt ids; extra words after them make it longer."""
    stops = " ".join(str(1 + k) for k in range(frames.MAX_STOP))
    biases = " ".join(f"{100 + k} 0" for k in range(frames.MAX_BIAS))
    return (f"S {rid} 1 0 0 0 0 100007 9 {frames.MAX_STOP} {stops} 0 0 0 {frames.MAX_BIAS} "
            f"{biases} {len(prompt)} {' '.join(map(str, prompt))}{extra}")


@pytest.mark.guest
def test_gateway_takes_the_longest_legal_submit(gateway: PortGuest, smol_assets: Path) -> None:
    """An S frame with every list at its longest (290 words) is served, its id the
    reference's; one word more is refused with X naming its rid, so the host fails that
    request at once."""
    prompt = lc.heldout_ids("smol", frames.MAX_PROMPT)
    line = _longest_submit(70, prompt)
    words = 1 + 8 + 1 + frames.MAX_STOP + 4 + 2 * frames.MAX_BIAS + 1 + frames.MAX_PROMPT
    assert len(line.split(" ")) == words == 290 and len(line) < frames.LINE_MAX
    want = lc.reference_ids(smol_assets, [prompt], 1)[0]
    gateway.send_frame(line)
    ids, end = _collect(gateway, {70})[70]
    assert end[:4] == ["E", "70", "stop" if 1 <= want[0] <= frames.MAX_STOP else "length", "1"], end
    assert ids == want, (ids, want)
    gateway.send_frame(_longest_submit(71, prompt, " 5"))
    assert gateway.frame()[:3] == ["X", "71", "200"]
    assert _info(gateway)["used"] == 0


# The S frame's number fields: (index of the word after "S", its largest value).
S_FIELDS = [(0, 2**31 - 1), (1, 2**31 - 1), (2, 2**32 - 1), (3, 2**32 - 1), (4, 2**32 - 1),
            (5, 2**64 - 1), (6, 2**31 - 1), (7, 2**31 - 1)]
PAST = ["{max1}", str(2**64), str(2**64 + 7), "9" * 25, "+1", "-0", "1_0", "0x1", "1e3"]


def _fields(rid: int, nstop: int = 0, stops: list[str] | None = None) -> list[str]:
    """A greedy S frame's words after "S": predict 2, tenant and priority 0, no penalty,
    bias or logprobs, the prompt one id."""
    return [str(rid), "2", "0", "0", "0", "0", "0", "0", str(nstop), *(stops or []), "0", "0",
            "0", "0", "1", "5"]


def _answer_ends(g: PortGuest, rid: int) -> list[str]:
    """The gateway's answer to rid's frame: its X, or its E after its T frames."""
    while (words := g.frame())[0] == "T":
        assert words[1] == str(rid), words
    assert words[0] in ("X", "E") and words[1] == str(rid), words
    return words


@pytest.mark.guest
def test_gateway_numbers_at_and_past_their_bounds(gateway: PortGuest,
                                                  smol_assets: Path) -> None:
    rid = 100
    for i, most in S_FIELDS:
        for value in [*PAST, str(most)]:
            rid += 1
            words = _fields(rid)
            words[i] = value.format(max1=most + 1)
            gateway.send_frame("S " + " ".join(words))
            in_range = value == str(most)
            said = rid if i else most if in_range else 0  # the rid the answer names
            got = _answer_ends(gateway, said)
            if in_range:  # the kernel's answer, or the request served: never malformed
                assert got[2] != "200", (i, value, got)
            else:
                assert got[:3] == ["X", str(said), "200"], (i, value, got)
    for nstop in range(5, 10):  # beyond AI_MAX_STOP: refused, nothing written past stop[]
        rid += 1
        gateway.send_frame("S " + " ".join(_fields(rid, nstop, ["7"] * nstop)))
        assert gateway.frame()[:3] == ["X", str(rid), "200"]
    for stop in [str(2**32 - 1), str(2**32), "-1"]:
        rid += 1
        gateway.send_frame("S " + " ".join(_fields(rid, 1, [stop])))
        got = _answer_ends(gateway, rid)
        assert (got[2] == "200") == (stop != str(2**32 - 1)), (stop, got)
    for line in ["C " + str(2**31), "C " + str(2**64 + 3), "C -1", "C +5"]:
        gateway.send_frame(line)
        assert gateway.frame()[:3] == ["X", "0", "200"], line
    # It still serves right, and holds nothing.
    want = lc.reference_ids(smol_assets, [lc.FRANCE["smol"]], GEN)[0]
    gateway.send_frame(_submit(61, lc.FRANCE["smol"], GEN))
    ids, end = _collect(gateway, {61})[61]
    assert ids == want and end[:3] == ["E", "61", "length"], (ids, end)
    assert _info(gateway)["used"] == 0


@pytest.mark.guest
def test_gateway_survives_random_bytes_and_long_lines(gateway: PortGuest,
                                                      smol_assets: Path) -> None:
    rng = random.Random(43)
    for n in (1, 100, 4095, 4096, 5000, 20000):
        junk = b"\x01" + bytes(rng.randrange(256) for _ in range(n)).replace(b"\n", b"")
        gateway.sock.sendall(junk + b"\n")
        words = gateway.frame()
        assert words[:3] == ["X", "0", "200"], (n, words)
    want = lc.reference_ids(smol_assets, [lc.FRANCE["smol"]], GEN)[0]
    gateway.send_frame(_submit(62, lc.FRANCE["smol"], GEN))
    ids, end = _collect(gateway, {62})[62]
    assert ids == want and end[:3] == ["E", "62", "length"], (ids, end)
