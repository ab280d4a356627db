"""The gateway channel's frames (docs/GATEWAY.md) as Python values.

The framing's facts come from the gateway's header (user/ai/gateway.h) and
the kernel's (kernel/include/aisvc.h), read with pyaisvc.cheader. Pure
functions: ``request`` checks a request and builds its S frame's words once
(a ``Request``), ``submit_line`` puts a rid before them; ``cancel``,
``hello``, ``INFO`` and ``TABLE`` make the host's other frames (bytes, one
line each); ``parse`` reads one line the gateway sent into a ``Ready``,
``Tokens``, ``LogProbs``, ``End``, ``Failed``, ``Info`` or ``Table`` value,
and raises ``FrameError`` for anything else, so a garbled line is named,
never guessed at. Words are separated by exactly one space; every number is
read at one place (``_number``): ASCII digits only (no sign, no ``_``), at
most ``NUMBER_MAX``; an L frame's log-probabilities alone may have a leading
``-`` (``_signed``). ``Ready`` needs a window of 1 or more.
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
MAX_BIAS = _kernel("AI_MAX_BIAS")
MAX_TOPLP = _kernel("AI_MAX_TOPLP")
MAX_PROMPT = _kernel("AI_MAX_PROMPT")
NSLOT = _kernel("AI_NSLOT")  # the slots of the kernel's table
LIVE_MAX = NSLOT  # requests the gateway holds at once (gateway.h: GW_LIVE_MAX is AI_NSLOT)
POLICY_LEN = _kernel("AI_POLICY_LEN")  # a policy's name with its NUL
# The slots' states, by their number (AI_FREE .. AI_FAILED).
STATES = tuple(n.removeprefix("AI_") for n in sorted(
    ("AI_FREE", "AI_QUEUED", "AI_RUNNING", "AI_DONE", "AI_FAILED"), key=_kernel))
NUMBER_MAX = 2**64 - 1  # no field of a frame is wider than 64 bits
NUMBER_DIGITS = len(str(NUMBER_MAX))
NONCE_MAX = _gateway("GW_NONCE_MAX")
INFO = b"I\n"
TABLE = b"V\n"


class FrameError(ValueError):
    """A line from the gateway that is not a frame of docs/GATEWAY.md."""


@dataclass(frozen=True)
class Options:
    """struct ai_opts: sampling in millionths, all 0 for a greedy request; the tenant
    (0: the gateway's pid) and the priority the kernel's scheduling policy reads;
    penalties and biases in millionths (signed), logprobs 0 (none) or 1 + N
    (docs/AI_SERVICE.md, section 10)."""

    temp_micro: int = 0
    top_k: int = 0
    top_p_micro: int = 0
    seed: int = 0
    tenant: int = 0
    priority: int = 0
    presence_micro: int = 0
    frequency_micro: int = 0
    logprobs: int = 0
    bias: tuple[tuple[int, int], ...] = ()  # (id, micro) pairs


@dataclass(frozen=True)
class Ready:
    vocab: int
    seq_len: int
    window: int
    nonce: int | None = None  # the hello's it answers; None: the gateway's own start


@dataclass(frozen=True)
class Tokens:
    rid: int
    ids: tuple[int, ...]


@dataclass(frozen=True)
class LogProbs:
    """One generated id's log-probability and its likeliest alternatives, in millionths
    (an L frame: it comes just before the T frame that carries the id)."""

    rid: int
    id: int
    lp: int
    top: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class End:
    rid: int
    finish: str  # "stop", "length" or "cancel"
    gen: int
    prompt_len: int
    queued_us: int
    ttft_us: int
    total_us: int
    cached: int  # prompt positions the worker took from its KV cache (docs/KVCACHE.md)


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
    # the worker's KV cache (docs/KVCACHE.md): its pool's blocks by state, the cached
    # blocks it evicted, the prompt positions it took from the cache of all it looked up
    kv_blocks: int
    kv_used: int
    kv_cached: int
    kv_free: int
    kv_evictions: int
    kv_hits: int
    kv_prompt: int


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
    cached: int  # prompt positions taken from the worker's KV cache
    tenant: int  # whom it serves: the submitter's pid unless the request named a tenant
    priority: int  # 0..AI_PRIO_MAX, higher first under policy priority
    paused: int  # 1 while RUNNING but paused by the policy (it keeps its KV cache)
    pauses: int  # times the policy paused it


@dataclass(frozen=True)
class Table:
    """The whole table at one instant (ai_table through a V frame)."""

    now_us: int
    worker_pid: int
    completed: int
    policy: str  # the scheduling policy (ai_sched), e.g. "fifo"
    chunk: int  # its step budget: positions per worker step
    prefill: int  # its prompt budget: prompt positions of a step in which a request decodes
    fifo: tuple[int, ...]  # slot numbers of the queued requests, next first
    batch: tuple[int, ...]  # slot numbers the worker runs
    slots: tuple[Slot, ...]


Frame = Ready | Tokens | LogProbs | End | Failed | Info | Table


def _table(rest: list[str], line: str) -> Table:
    """The V frame's words after the V as a Table; FrameError when the counts, slot numbers
    or states do not fit."""
    if len(rest) < 4 or not (rest[3].isascii() and rest[3].isalpha() and rest[3].islower()
                             and len(rest[3]) < POLICY_LEN):
        raise FrameError(f"a table frame without a policy's name: {line!r}")
    policy = rest[3]
    nums = _numbers(rest[:3] + rest[4:], None, line)
    try:
        now, worker, completed, chunk, prefill, nq = nums[:6]
        fifo = tuple(nums[6:6 + nq])
        nb = nums[6 + nq]
        batch = tuple(nums[7 + nq:7 + nq + nb])
        fields = nums[7 + nq + nb:]
    except (IndexError, ValueError):
        raise FrameError(f"a table frame cut short: {line!r}") from None
    width = len(Slot.__dataclass_fields__)
    if len(fifo) != nq or len(batch) != nb or len(fields) != NSLOT * width:
        raise FrameError(f"a table frame with the wrong number of fields: {line!r}")
    slots = tuple(Slot(*fields[i * width:(i + 1) * width]) for i in range(NSLOT))
    if not all(0 <= s < NSLOT for s in fifo + batch) or not all(
            0 <= s.state < len(STATES) for s in slots):
        raise FrameError(f"a table frame with a slot or state out of range: {line!r}")
    return Table(now, worker, completed, policy, chunk, prefill, fifo, batch, slots)


@dataclass(frozen=True)
class Request:
    """One request as the S frame carries it: its fields, and the frame's words after the
    rid, built and checked once (``request``); ``submit_line`` adds the rid."""

    prompt: tuple[int, ...]
    predict: int
    opts: Options
    stops: tuple[int, ...]
    words: bytes  # the S frame after "S rid", with its newline

    @property
    def tenant(self) -> int:
        return self.opts.tenant


def request(prompt: list[int], predict: int, opts: Options, stops: list[int]) -> Request:
    """The request with its S frame's words; ValueError if it breaks the framing's own
    limits (the kernel checks the rest: ids below the vocab, prompt + predict within
    seq_len), the line's length checked with the widest rid."""
    if not 0 <= len(stops) <= MAX_STOP:
        raise ValueError(f"{len(stops)} stop ids; at most {MAX_STOP}")
    if not 1 <= len(prompt) <= MAX_PROMPT:
        raise ValueError(f"{len(prompt)} prompt ids; 1..{MAX_PROMPT}")
    if len(opts.bias) > MAX_BIAS:
        raise ValueError(f"{len(opts.bias)} logit biases; at most {MAX_BIAS}")
    head = [predict, opts.temp_micro, opts.top_k, opts.top_p_micro, opts.seed,
            opts.tenant, opts.priority, len(stops), *stops]
    signed = [opts.presence_micro, opts.frequency_micro]
    tail = [opts.logprobs, len(opts.bias)]
    bias = [w for pair in opts.bias for w in pair]
    fields = [*head, *signed, *tail, *bias, len(prompt), *prompt]
    if any(not isinstance(w, int) for w in fields) or any(
            w < 0 for w in [*head, *tail, *bias[::2], len(prompt), *prompt]):
        raise ValueError("every field of a submit frame is a number, >= 0 but for the "
                         "penalties and biases")
    words = (" ".join(map(str, fields)) + "\n").encode()
    longest = len(b"S  ") + len(str(RID_MAX)) + len(words)
    if longest > LINE_MAX:
        raise ValueError(f"the submit frame is up to {longest} bytes; at most {LINE_MAX}")
    return Request(tuple(prompt), predict, opts, tuple(stops), words)


def submit_line(rid: int, req: Request) -> bytes:
    """The S frame that submits req under rid (1..RID_MAX)."""
    if not 1 <= rid <= RID_MAX:
        raise ValueError(f"rid {rid} outside 1..{RID_MAX}")
    return b"S %d %s" % (rid, req.words)


def cancel(rid: int) -> bytes:
    return f"C {rid}\n".encode()


def hello(nonce: int) -> bytes:
    """The H frame: the gateway answers it with an R frame carrying nonce."""
    if not 0 <= nonce <= NONCE_MAX:
        raise ValueError(f"nonce {nonce} outside 0..{NONCE_MAX}")
    return f"H {nonce}\n".encode()


def _number(word: str, line: str) -> int:
    """word as a number 0..NUMBER_MAX, written in ASCII digits only; FrameError naming line
    otherwise."""
    if not (word.isascii() and word.isdigit()) or len(word) > NUMBER_DIGITS:
        raise FrameError(f"a field is not a number: {line!r}")
    v = int(word)
    if v > NUMBER_MAX:
        raise FrameError(f"a field is above 2^64-1: {line!r}")
    return v


def _signed(word: str, line: str) -> int:
    """word as a number within 64 bits that may have a leading '-' (a log-probability);
    FrameError naming line otherwise."""
    v = _number(word[1:], line) if word.startswith("-") else _number(word, line)
    if v > NUMBER_MAX >> 1:
        raise FrameError(f"a signed field beyond 64 bits: {line!r}")
    return -v if word.startswith("-") else v


def _logprobs(rest: list[str], line: str) -> LogProbs:
    """The L frame's words after the L: rid id lp ntop (id lp)..., each lp signed;
    FrameError when the count does not match ntop."""
    if len(rest) < 4 or len(rest) % 2:
        raise FrameError(f"a logprob frame with the wrong number of fields: {line!r}")
    rid, tok, ntop = _number(rest[0], line), _number(rest[1], line), _number(rest[3], line)
    pairs = rest[4:]
    if ntop != len(pairs) // 2 or ntop > MAX_TOPLP:
        raise FrameError(f"a logprob frame with the wrong number of fields: {line!r}")
    top = tuple((_number(pairs[i], line), _signed(pairs[i + 1], line))
                for i in range(0, len(pairs), 2))
    return LogProbs(rid, tok, _signed(rest[2], line), top)


def _numbers(words: list[str], n: int | None, line: str) -> list[int]:
    """words as numbers (exactly n of them unless n is None); FrameError naming line
    otherwise."""
    if n is not None and len(words) != n:
        raise FrameError(f"expected {n} fields: {line!r}")
    return [_number(w, line) for w in words]


def parse(line: str) -> Frame:
    """One line from the gateway (without its newline) as a frame."""
    words = line.split(" ")  # exactly one space between words, as the gateway writes
    if not line:
        raise FrameError("an empty line")
    if "" in words:
        raise FrameError(f"an empty word (two spaces, or one at an end): {line!r}")
    kind, rest = words[0], words[1:]
    if kind == "R":
        if len(rest) not in (5, 6) or rest[0] != "gateway":
            raise FrameError(f"not a ready frame: {line!r}")
        version, vocab, seq_len, window, *nonce = _numbers(rest[1:], None, line)
        if version != PROTOCOL:
            raise FrameError(f"gateway protocol {version}; this host speaks {PROTOCOL}")
        if window < 1:
            raise FrameError(f"a ready frame with window {window}: {line!r}")
        return Ready(vocab, seq_len, window, nonce[0] if nonce else None)
    if kind == "T":
        nums = _numbers(rest, None, line)
        if len(nums) < 2:
            raise FrameError(f"a token frame without ids: {line!r}")
        return Tokens(nums[0], tuple(nums[1:]))
    if kind == "L":
        return _logprobs(rest, line)
    if kind == "E":
        if len(rest) != 8:
            raise FrameError(f"expected 8 fields: {line!r}")
        if rest[1] not in ("stop", "length", "cancel"):
            raise FrameError(f"unknown finish {rest[1]!r}: {line!r}")
        rid, gen, plen, queued, ttft, total, cached = _numbers([rest[0], *rest[2:]], 7, line)
        return End(rid, rest[1], gen, plen, queued, ttft, total, cached)
    if kind == "X":
        if len(rest) < 2:
            raise FrameError(f"an error frame without a code: {line!r}")
        rid, code = _numbers(rest[:2], 2, line)
        return Failed(rid, code, " ".join(rest[2:]))
    if kind == "I":
        return Info(*_numbers(rest, len(Info.__dataclass_fields__), line))
    if kind == "V":
        return _table(rest, line)
    raise FrameError(f"unknown frame {kind!r}: {line!r}")
