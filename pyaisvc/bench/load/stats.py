"""The statistics of a load run, from what the clients saw (pyaisvc.bench.load.client).

Per request (times in seconds): TTFT = first chunk - sent; the times between
tokens are the gaps between its chunks; its stall is its largest gap; its
TPOT is its mean gap; end-to-end = end - sent. A request meets its SLOs
(counts for goodput) when it ended well, its TTFT is at most slo_ttft and
its TPOT at most slo_tbt.

Per tenant, service is tokens processed: a request's prompt tokens count at
its first chunk (the prefill is done then), each chunk counts one generated
token when it arrives and any rest of its completion tokens at its end.
Jain's fairness index of the tenants' service x_1..x_n is
(sum x)^2 / (n * sum x^2): 1 when all got the same, 1/n when one got all.
The largest service difference between backlogged tenants is the most that
one tenant's service grew more than another's over any stretch of time in
which both had a request outstanding (sent, not ended), over all pairs.

Percentiles interpolate linearly between the two nearest ranks, as numpy's
default does: p of sorted x_0..x_{n-1} is at rank p/100 * (n-1).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable

from pyaisvc.bench.load.client import Outcome

Intervals = list[tuple[float, float]]
Events = list[tuple[float, float]]  # (time, amount), in time order


def percentile(xs: Iterable[float], p: float) -> float | None:
    """The p-th percentile of xs (linear between ranks); None for no values."""
    s = sorted(xs)
    if not s:
        return None
    rank = p / 100 * (len(s) - 1)
    lo = math.floor(rank)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (rank - lo)


def jain(xs: list[float]) -> float | None:
    """Jain's fairness index of xs; 1.0 when all are 0; None for no values."""
    if not xs:
        return None
    sq = sum(x * x for x in xs)
    return 1.0 if sq == 0 else sum(xs) ** 2 / (len(xs) * sq)


def ttft(o: Outcome) -> float | None:
    """Seconds from o's send to its first chunk; None when none came."""
    return None if o.first is None else o.first - o.sent


def gaps(o: Outcome) -> list[float]:
    """The times between o's consecutive chunks, in seconds."""
    return [b - a for a, b in zip(o.chunks, o.chunks[1:], strict=False)]


def tpot(o: Outcome) -> float | None:
    """The mean time between o's chunks; None with fewer than two."""
    return (o.chunks[-1] - o.chunks[0]) / (len(o.chunks) - 1) if len(o.chunks) > 1 else None


def e2e(o: Outcome) -> float | None:
    """Seconds from o's send to its end; None unless it ended ok."""
    return None if o.end is None or o.status != "ok" else o.end - o.sent


def meets_slo(o: Outcome, slo_ttft: float, slo_tbt: float) -> bool:
    """Whether o ended ok within both SLOs: TTFT at most slo_ttft and mean time between chunks
    at most slo_tbt (seconds)."""
    t, g = ttft(o), tpot(o)
    return o.status == "ok" and t is not None and t <= slo_ttft and (g is None or g <= slo_tbt)


def service_events(o: Outcome) -> Events:
    """The tokens o's tenant was served and when (see the module's comment)."""
    if o.first is None:
        return []
    ev = [(o.first, float(o.prompt_tokens))] + [(t, 1.0) for t in o.chunks]
    rest = o.completion_tokens - len(o.chunks)
    if rest > 0 and o.end is not None:
        ev.append((o.end, float(rest)))
    return ev


def _union(iv: Intervals) -> Intervals:
    """The union of the intervals iv, as sorted disjoint intervals."""
    out: Intervals = []
    for a, b in sorted(iv):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _intersect(x: Intervals, y: Intervals) -> Intervals:
    """The intersection of two sets of disjoint intervals."""
    out = []
    for a, b in x:
        for c, d in y:
            lo, hi = max(a, c), min(b, d)
            if lo < hi:
                out.append((lo, hi))
    return out


def cumulative(ev: Events) -> tuple[list[float], list[float]]:
    """The events in time order and the running sum of their amounts after each."""
    times, sums, total = [], [], 0.0
    for t, amount in sorted(ev):
        total += amount
        times.append(t)
        sums.append(total)
    return times, sums


def _served(cum: tuple[list[float], list[float]], t: float) -> float:
    """Service up to and including time t."""
    k = bisect.bisect_right(cum[0], t)
    return cum[1][k - 1] if k else 0.0


def service_difference(events: dict[str, Events], backlog: dict[str, Intervals]) -> float:
    """The largest |(S_i(t2) - S_i(t1)) - (S_j(t2) - S_j(t1))| over tenants i, j and times
    t1 < t2 in one stretch where both are backlogged; S is cumulative service."""
    names = sorted(backlog)
    cums = {n: cumulative(events.get(n, [])) for n in names}
    best = 0.0
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            for lo, hi in _intersect(_union(backlog[a]), _union(backlog[b])):
                points = [lo] + [t for t in cums[a][0] + cums[b][0] if lo < t <= hi]
                diff = [_served(cums[a], t) - _served(cums[b], t) for t in points]
                best = max(best, max(diff) - min(diff))
    return best


def tenant_service(outs: list[Outcome]) -> tuple[dict[str, Events], dict[str, Intervals]]:
    """Each tenant's service events and the stretches it had a request outstanding."""
    events: dict[str, Events] = {}
    backlog: dict[str, Intervals] = {}
    for o in outs:
        events.setdefault(o.tenant, []).extend(service_events(o))
        if o.end is not None:
            backlog.setdefault(o.tenant, []).append((o.sent, o.end))
    return events, backlog


def _ms(x: float | None) -> float | None:
    """Seconds as milliseconds with one decimal; None stays None."""
    return None if x is None else round(x * 1000, 1)


def class_row(outs: list[Outcome], span: float, slo_ttft: float,
              slo_tbt: float) -> dict[str, object]:
    """The statistics of some requests of one run (span: its seconds, first send to last
    end); times in ms."""
    ok = [o for o in outs if o.status == "ok"]
    ttfts = [t for o in ok if (t := ttft(o)) is not None]
    all_gaps = [g for o in ok for g in gaps(o)]
    kt = [o.kernel_ttft_us / 1000 for o in ok if o.kernel_ttft_us is not None]
    kq = [o.kernel_queued_us / 1000 for o in ok if o.kernel_queued_us is not None]
    good = sum(meets_slo(o, slo_ttft, slo_tbt) for o in outs)
    gen = sum(o.completion_tokens for o in ok)
    return {
        "requests": len(outs), "ok": len(ok),
        "rejected": sum(o.status == "rejected" for o in outs),
        "errors": sum(o.status.startswith("error") for o in outs),
        "ttft_p50_ms": _ms(percentile(ttfts, 50)), "ttft_p99_ms": _ms(percentile(ttfts, 99)),
        "tbt_p50_ms": _ms(percentile(all_gaps, 50)), "tbt_p99_ms": _ms(percentile(all_gaps, 99)),
        "stall_max_ms": _ms(max(all_gaps, default=None)),
        "e2e_p50_ms": _ms(percentile([e for o in ok if (e := e2e(o)) is not None], 50)),
        "e2e_p99_ms": _ms(percentile([e for o in ok if (e := e2e(o)) is not None], 99)),
        "kernel_ttft_p50_ms": _round(percentile(kt, 50)),
        "kernel_ttft_p99_ms": _round(percentile(kt, 99)),
        "kernel_queued_p50_ms": _round(percentile(kq, 50)),
        "generated_tokens": gen,
        "tokens_per_s": round(gen / span, 2) if span > 0 else None,
        "goodput": round(good / len(outs), 3) if outs else None,
        "goodput_per_s": round(good / span, 3) if span > 0 else None,
    }


def _round(x: float | None) -> float | None:
    """x with one decimal; None stays None."""
    return None if x is None else round(x, 1)


def span(outs: list[Outcome]) -> float:
    """Seconds from the first send to the last end of a run."""
    ends = [o.end for o in outs if o.end is not None]
    return max(ends) - min(o.sent for o in outs) if ends else 0.0


def policy_rows(policy: str, outs: list[Outcome], slo_ttft: float,
                slo_tbt: float) -> list[dict[str, object]]:
    """One row per class, then the run's "all" row with the fairness columns."""
    s = span(outs)
    classes = list(dict.fromkeys(o.cls for o in outs))
    rows = [{"policy": policy, "class": c,
             **class_row([o for o in outs if o.cls == c], s, slo_ttft, slo_tbt)}
            for c in classes]
    events, backlog = tenant_service(outs)
    served = {t: sum(a for _, a in ev) for t, ev in events.items()}
    tenants = sorted({o.tenant for o in outs})
    rows.append({"policy": policy, "class": "all", **class_row(outs, s, slo_ttft, slo_tbt),
                 "jain": _jain_of(tenants, served),
                 "service_diff_max": round(service_difference(events, backlog), 1)})
    return rows


def _jain_of(tenants: list[str], served: dict[str, float]) -> float | None:
    """Jain's index of the tokens served to each of tenants (0 for one served nothing), to 4
    places; None when it is undefined."""
    j = jain([served.get(t, 0.0) for t in tenants])
    return None if j is None else round(j, 4)


def tenant_rows(policy: str, outs: list[Outcome]) -> list[dict[str, object]]:
    """Per tenant: its requests, prompt and generated tokens served, and its service."""
    rows = []
    for t in sorted({o.tenant for o in outs}):
        mine = [o for o in outs if o.tenant == t and o.status == "ok"]
        prompt = sum(o.prompt_tokens for o in mine)
        gen = sum(o.completion_tokens for o in mine)
        rows.append({"policy": policy, "tenant": t, "priority": mine[0].priority if mine else
                     None, "requests": len(mine), "prompt_tokens": prompt,
                     "generated_tokens": gen, "service_tokens": prompt + gen})
    return rows


def tokens_over_time(outs: list[Outcome], step: float) -> tuple[list[float], list[float]]:
    """Generated tokens/s in bins of step seconds: (bin starts, rates)."""
    ev = [e for o in outs for e in service_events(o)[1:]]  # [0] is the prompt
    end = max((t for t, _ in ev), default=0.0)
    n = int(end // step) + 1
    bins = [0.0] * n
    for t, amount in ev:
        bins[int(t // step)] += amount
    return [k * step for k in range(n)], [b / step for b in bins]
