"""The gateway channel's frames (docs/GATEWAY.md) as Python values.

The framing's facts come from the gateway's header (user/ai/gateway.h) and
the kernel's (kernel/include/aisvc.h), read with pyaisvc.cheader. Pure
functions: ``submit``, ``cancel``, ``INFO``, ``TABLE`` and ``HELLO`` make the
host's frames (bytes, one line each); ``parse`` reads one line the gateway sent
into a ``Ready``, ``Tokens``, ``End``, ``Failed``, ``Info`` or ``Table`` value, and
raises ``FrameError`` for anything else, so a garbled line is named, never guessed at.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pyaisvc import cheader

GATEWAY_DIR = Path(__file__).resolve().parents[2] / "user" / "ai"  # gateway.h


def _gateway(name: str) -> int:
    """A #define of user/ai/gateway.h, the gateway's framing."""
    return cheader.header_define("gateway.h", name, GATEWAY_DIR)


def _kernel(name: str) -> int:
    """A #define of kernel/include/aisvc.h, the AI service's limits."""
    return cheader.header_define("aisvc.h", name)


LINE_MAX = _gateway("GW_LINE_MAX")  # one frame with its newline
RID_MAX = _gateway("GW_RID_MAX")
PROTOCOL = _gateway("GW_VERSION")
# The gateway's own codes (the others are the kernel's AIE_* codes).
GW_MALFORMED, GW_RID_LIVE, GW_FULL, GW_NOT_LIVE = (
    _gateway(n) for n in ("GW_MALFORMED", "GW_RID_LIVE", "GW_FULL", "GW_NOT_LIVE"))
MAX_STOP = _kernel("AI_MAX_STOP")
MAX_PROMPT = _kernel("AI_MAX_PROMPT")
NSLOT = _kernel("AI_NSLOT")  # the slots of the kernel's table
# The slots' states, by their number (AI_FREE .. AI_FAILED).
STATES = tuple(n.removeprefix("AI_") for n in sorted(
    ("AI_FREE", "AI_QUEUED", "AI_RUNNING", "AI_DONE", "AI_FAILED"), key=_kernel))
HELLO = b"H\n"
INFO = b"I\n"
TABLE = b"V\n"


class FrameError(ValueError):
    """A line from the gateway that is not a frame of docs/GATEWAY.md."""


@dataclass(frozen=True)
class Options:
    """struct ai_opts: sampling in millionths, all 0 for a greedy request; the tenant
    (0: the gateway's pid) and the priority the kernel's scheduling policy reads."""

    temp_micro: int = 0
    top_k: int = 0
    top_p_micro: int = 0
    seed: int = 0
    tenant: int = 0
    priority: int = 0


@dataclass(frozen=True)
class Ready:
    vocab: int
    seq_len: int
    window: int


@dataclass(frozen=True)
class Tokens:
    rid: int
    ids: tuple[int, ...]


@dataclass(frozen=True)
class End:
    rid: int
    finish: str  # "stop", "length" or "cancel"
    gen: int
    prompt_len: int
    queued_us: int
    ttft_us: int
    total_us: int


@dataclass(frozen=True)
class Failed:
    rid: int  # 0: the refused frame had no readable rid
    code: int
    words: str


@dataclass(frozen=True)
class Info:
    used: int
    queued: int
    running: int
    done: int
    failed: int
    completed: int
    worker_pid: int


@dataclass(frozen=True)
class Slot:
    """One slot of the kernel's table (struct ai_slot_view); times in us since boot,
    0 until the event."""

    state: int  # index into STATES
    owner: int  # the submitter's pid; 0 when free or orphaned
    rid: int  # the host's rid when the gateway owns the request, else 0
    prompt_len: int
    predict: int
    tokens: int  # ids generated so far
    submit_us: int
    start_us: int
    first_us: int
    finish_us: int


@dataclass(frozen=True)
class Table:
    """The whole table at one instant (ai_table through a V frame)."""

    now_us: int
    worker_pid: int
    completed: int
    fifo: tuple[int, ...]  # slot numbers of the queued requests, next first
    batch: tuple[int, ...]  # slot numbers the worker runs
    slots: tuple[Slot, ...]


Frame = Ready | Tokens | End | Failed | Info | Table


def _table(rest: list[str], line: str) -> Table:
    """The V frame's words after the V as a Table; FrameError when the counts, slot numbers
    or states do not fit."""
    nums = _numbers(rest, None, line)
    try:
        now, worker, completed, nq = nums[:4]
        fifo = tuple(nums[4:4 + nq])
        nb = nums[4 + nq]
        batch = tuple(nums[5 + nq:5 + nq + nb])
        fields = nums[5 + nq + nb:]
    except (IndexError, ValueError):
        raise FrameError(f"a table frame cut short: {line!r}") from None
    width = len(Slot.__dataclass_fields__)
    if len(fifo) != nq or len(batch) != nb or len(fields) != NSLOT * width:
        raise FrameError(f"a table frame with the wrong number of fields: {line!r}")
    slots = tuple(Slot(*fields[i * width:(i + 1) * width]) for i in range(NSLOT))
    if not all(0 <= s < NSLOT for s in fifo + batch) or not all(
            0 <= s.state < len(STATES) for s in slots):
        raise FrameError(f"a table frame with a slot or state out of range: {line!r}")
    return Table(now, worker, completed, fifo, batch, slots)


def submit(rid: int, prompt: list[int], predict: int, opts: Options,
           stops: list[int]) -> bytes:
    """The S frame; ValueError if it breaks the framing's own limits (the kernel checks
    the rest: ids below the vocab, prompt + predict within seq_len)."""
    if not 1 <= rid <= RID_MAX:
        raise ValueError(f"rid {rid} outside 1..{RID_MAX}")
    if not 0 <= len(stops) <= MAX_STOP:
        raise ValueError(f"{len(stops)} stop ids; at most {MAX_STOP}")
    if not 1 <= len(prompt) <= MAX_PROMPT:
        raise ValueError(f"{len(prompt)} prompt ids; 1..{MAX_PROMPT}")
    words = [rid, predict, opts.temp_micro, opts.top_k, opts.top_p_micro, opts.seed,
             opts.tenant, opts.priority, len(stops), *stops, len(prompt), *prompt]
    if any(not isinstance(w, int) or w < 0 for w in words):
        raise ValueError("every field of a submit frame is a number >= 0")
    line = ("S " + " ".join(map(str, words)) + "\n").encode()
    if len(line) > LINE_MAX:
        raise ValueError(f"the submit frame is {len(line)} bytes; at most {LINE_MAX}")
    return line


def cancel(rid: int) -> bytes:
    return f"C {rid}\n".encode()


def _numbers(words: list[str], n: int | None, line: str) -> list[int]:
    """words as integers (exactly n of them unless n is None); FrameError naming line
    otherwise."""
    if n is not None and len(words) != n:
        raise FrameError(f"expected {n} fields: {line!r}")
    try:
        return [int(w) for w in words]
    except ValueError:
        raise FrameError(f"a field is not a number: {line!r}") from None


def parse(line: str) -> Frame:
    """One line from the gateway (without its newline) as a frame."""
    words = line.split()
    if not words:
        raise FrameError("an empty line")
    kind, rest = words[0], words[1:]
    if kind == "R":
        if len(rest) != 5 or rest[0] != "gateway":
            raise FrameError(f"not a ready frame: {line!r}")
        version, vocab, seq_len, window = _numbers(rest[1:], 4, line)
        if version != PROTOCOL:
            raise FrameError(f"gateway protocol {version}; this host speaks {PROTOCOL}")
        return Ready(vocab, seq_len, window)
    if kind == "T":
        nums = _numbers(rest, None, line)
        if len(nums) < 2:
            raise FrameError(f"a token frame without ids: {line!r}")
        return Tokens(nums[0], tuple(nums[1:]))
    if kind == "E":
        if len(rest) != 7:
            raise FrameError(f"expected 7 fields: {line!r}")
        if rest[1] not in ("stop", "length", "cancel"):
            raise FrameError(f"unknown finish {rest[1]!r}: {line!r}")
        rid, gen, plen, queued, ttft, total = _numbers([rest[0], *rest[2:]], 6, line)
        return End(rid, rest[1], gen, plen, queued, ttft, total)
    if kind == "X":
        if len(rest) < 2:
            raise FrameError(f"an error frame without a code: {line!r}")
        rid, code = _numbers(rest[:2], 2, line)
        return Failed(rid, code, " ".join(rest[2:]))
    if kind == "I":
        return Info(*_numbers(rest, 7, line))
    if kind == "V":
        return _table(rest, line)
    raise FrameError(f"unknown frame {kind!r}: {line!r}")
