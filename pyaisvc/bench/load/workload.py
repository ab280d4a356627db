"""The workload of `pyaisvc bench --mode load`: a seeded sequence of mixed requests.

A workload is what a service sees: requests of several classes (each a
range of prompt lengths and a range of output lengths, in tokens) from
several tenants (the OpenAI ``user`` field, each with a share of the
arrivals and a priority), arriving over time:

- open loop: Poisson arrivals at ``rate`` requests/s (exponential gaps),
  whatever the server does; for ``duration`` seconds or ``requests`` requests;
- closed loop: ``users`` users, each sending its next request the moment its
  previous reply ends (user u is tenant u mod the number of tenants).

Everything is drawn from numpy's PCG64 seeded with ``seed``, in a fixed order
per request (gap, class, tenant, prompt length, output length, prompt
offset), so the same plan and seed give the same requests on every machine
and for every policy. A prompt is a window of exactly its length into the
benchmark text's token ids (pyaisvc.bench.matrix.TEXT under the model's
tokenizer), starting at a drawn offset, so two prompts rarely share a prefix.
An output length is drawn up to the class's maximum or what the model's
context leaves after the prompt, whichever is less.

The plan's defaults live in ``DEFAULT_CLASSES``, ``DEFAULT_TENANTS`` and
``LoadPlan``'s fields; pyaisvc.bench.load.plan reads a TOML plan over them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from pyaisvc.bench.matrix import BenchError
from pyaisvc.guest.llmguest import POLICIES, max_chunk  # the kernel's, as `serve` takes them


@dataclass(frozen=True)
class RequestClass:
    """A kind of request: prompt and output lengths drawn uniformly from [lo, hi]."""

    name: str
    prompt: tuple[int, int]
    new: tuple[int, int]
    weight: float = 1.0  # its share of the arrivals, relative to the other classes'


@dataclass(frozen=True)
class Tenant:
    """A user of the service (the request's `user` field) and its requests' priority."""

    name: str
    weight: float = 1.0  # its share of the arrivals (open loop)
    priority: int = 0  # larger runs first under the priority policy


DEFAULT_CLASSES = (RequestClass("mice", (5, 32), (8, 16), 0.8),
                   RequestClass("elephants", (150, 220), (32, 64), 0.2))
DEFAULT_TENANTS = (Tenant("alice", 1.0, 0), Tenant("bob", 1.0, 0), Tenant("carol", 1.0, 1))
DEFAULT_LOAD = 0.8  # when none of rate, load and users is given
DEFAULT_REQUESTS = 40  # when neither duration nor requests is given


@dataclass(frozen=True)
class LoadPlan:
    """One load experiment; exactly one of rate, load and users says how requests
    arrive, and exactly one of duration and requests how many."""

    classes: tuple[RequestClass, ...] = DEFAULT_CLASSES
    tenants: tuple[Tenant, ...] = DEFAULT_TENANTS
    policies: tuple[str, ...] = ("fifo",)
    seed: int = 1
    rate: float | None = None  # open loop: requests per second
    load: float | None = None  # open loop: a fraction of the capacity measured first
    users: int | None = None  # closed loop: this many users
    duration: float | None = None  # seconds of arrivals
    requests: int | None = None  # requests in all
    slo_ttft: float = 2.0  # seconds
    slo_tbt: float = 0.2  # seconds between tokens (a request's mean)
    prefill_chunk: int | None = None  # `serve --chunk N`: positions per step
    prefill_budget: int | None = None  # `serve --prefill N`: prompt positions beside a decoder
    extra: dict[str, object] = field(default_factory=dict)  # cpus, ram, out, url, cluster

    @property
    def open_loop(self) -> bool:
        """Whether requests arrive by the clock (Poisson), not from a fixed number of users."""
        return self.users is None


@dataclass(frozen=True)
class Request:
    """One request of a workload; arrival in seconds from the run's start (None in a
    closed loop: when its user's previous reply ends)."""

    index: int
    arrival: float | None
    cls: str
    tenant: str
    priority: int
    prompt: tuple[int, ...]
    max_tokens: int
    user: int | None = None


def check_plan(plan: LoadPlan, seq_len: int, max_prompt: int, text_len: int) -> None:
    """BenchError (one line, what to change) unless plan can be run on a model of seq_len
    positions, max_prompt prompt ids and a benchmark text of text_len ids."""
    if not plan.classes:
        raise BenchError("the plan has no request classes: give at least one")
    if not plan.tenants:
        raise BenchError("the plan has no tenants: give at least one")
    for c in plan.classes:
        _check_class(c, min(max_prompt, text_len), seq_len)
    for t in plan.tenants:
        if not t.weight > 0:
            raise BenchError(f"tenant {t.name}: weight must be above 0, not {t.weight}")
        if t.priority < 0:
            raise BenchError(f"tenant {t.name}: priority must be 0 or more (0 is the lowest), "
                             f"not {t.priority}")
    arrivals = [k for k in ("rate", "load", "users") if getattr(plan, k) is not None]
    if len(arrivals) != 1:
        raise BenchError("give exactly one of --rate R (requests/s), --load F (a fraction of "
                         "the capacity) or --users N (closed loop), not "
                         f"{' and '.join(arrivals) or 'none'}")
    if plan.rate is not None and not plan.rate > 0:
        raise BenchError(f"--rate must be above 0 requests/s, not {plan.rate}")
    if plan.load is not None and not 0 < plan.load <= 4:
        raise BenchError(f"--load is a fraction of the capacity, above 0 (e.g. 0.8), not "
                         f"{plan.load}")
    if plan.users is not None and plan.users < 1:
        raise BenchError(f"--users must be at least 1, not {plan.users}")
    if (plan.duration is None) == (plan.requests is None):
        raise BenchError("give exactly one of --duration S and --requests N")
    if plan.duration is not None and not plan.duration > 0:
        raise BenchError(f"--duration must be above 0 seconds, not {plan.duration}")
    if plan.requests is not None and plan.requests < 1:
        raise BenchError(f"--requests must be at least 1, not {plan.requests}")
    if not (plan.slo_ttft > 0 and plan.slo_tbt > 0):
        raise BenchError("--slo-ttft and --slo-tbt must be above 0")
    for flag, n in (("--prefill-chunk", plan.prefill_chunk),
                    ("--prefill-budget", plan.prefill_budget)):
        if n is not None and not 1 <= n <= max_chunk():
            raise BenchError(f"{flag} must be 1..{max_chunk()} (AI_CHUNK_MAX), not {n}")
    if not plan.policies:
        raise BenchError(f"give at least one policy, e.g. --policies {','.join(POLICIES)}")
    for p in plan.policies:
        if p not in POLICIES:
            raise BenchError(f"unknown policy {p!r}: the policies are {', '.join(POLICIES)}")
    if len(set(plan.policies)) != len(plan.policies):
        raise BenchError(f"--policies names one twice: {','.join(plan.policies)}")


def _check_class(c: RequestClass, most_prompt: int, seq_len: int) -> None:
    """BenchError when class c's ranges are not 1 <= lo <= hi, its prompts exceed most_prompt,
    its longest prompt leaves no room for its fewest new ids in seq_len positions, or its
    weight is not above 0."""
    for what, (lo, hi) in (("prompt", c.prompt), ("new", c.new)):
        if not 1 <= lo <= hi:
            raise BenchError(f"class {c.name}: {what} = [{lo}, {hi}] must be two whole "
                             "numbers with 1 <= lo <= hi")
    if c.prompt[1] > most_prompt:
        raise BenchError(f"class {c.name}: prompts of up to {c.prompt[1]} ids; the service "
                         f"takes at most {most_prompt}: lower prompt's upper bound")
    if c.prompt[1] + c.new[0] > seq_len:
        raise BenchError(f"class {c.name}: a {c.prompt[1]}-id prompt leaves no room for "
                         f"{c.new[0]} new ids in the model's {seq_len} positions: lower "
                         "prompt's or new's lower bound")
    if not c.weight > 0:
        raise BenchError(f"class {c.name}: weight must be above 0, not {c.weight}")


def _draw(rng: np.random.Generator, plan: LoadPlan, text: list[int], seq_len: int,
          tenant: int | None) -> tuple[float, int, int, tuple[int, ...], int]:
    """(gap, class index, tenant index, prompt, max_tokens), drawn in a fixed order."""
    cw = np.array([c.weight for c in plan.classes], dtype=float)
    tw = np.array([t.weight for t in plan.tenants], dtype=float)
    gap = float(rng.exponential(1.0 / plan.rate)) if plan.rate else 0.0
    ci = int(rng.choice(len(cw), p=cw / cw.sum()))
    ti = int(rng.choice(len(tw), p=tw / tw.sum()))
    c = plan.classes[ci]
    n = int(rng.integers(c.prompt[0], c.prompt[1] + 1))
    new = int(rng.integers(c.new[0], min(c.new[1], seq_len - n) + 1))
    at = int(rng.integers(0, len(text) - n + 1))
    return gap, ci, ti if tenant is None else tenant, tuple(text[at:at + n]), new


def open_loop(plan: LoadPlan, text: list[int], seq_len: int) -> list[Request]:
    """Every request of an open-loop plan (plan.rate set), in arrival order."""
    if plan.rate is None:
        raise BenchError("an open-loop workload needs a rate (measure the capacity first)")
    rng = np.random.Generator(np.random.PCG64(plan.seed))
    out: list[Request] = []
    t = 0.0
    while plan.requests is None or len(out) < plan.requests:
        gap, ci, ti, prompt, new = _draw(rng, plan, text, seq_len, None)
        t += gap
        if plan.duration is not None and t >= plan.duration:
            break
        tenant = plan.tenants[ti]
        out.append(Request(len(out), t, plan.classes[ci].name, tenant.name, tenant.priority,
                           prompt, new))
    return out


def user_requests(plan: LoadPlan, user: int, text: list[int],
                  seq_len: int) -> Iterator[Request]:
    """Closed loop: user's requests in the order it sends them (endless; index counts
    within the user). Each user draws from its own stream, seeded by (seed, user)."""
    rng = np.random.Generator(np.random.PCG64([plan.seed, user]))
    ti = user % len(plan.tenants)
    tenant = plan.tenants[ti]
    k = 0
    while True:
        _, ci, _, prompt, new = _draw(rng, plan, text, seq_len, ti)
        yield Request(k, None, plan.classes[ci].name, tenant.name, tenant.priority, prompt,
                      new, user)
        k += 1
