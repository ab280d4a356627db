"""What a load run writes: the table on the terminal, CSV and JSON rows, and three plots.

- ``load.md``: the tables printed at the end (per policy and class, then per
  policy the tenants' service and its fairness);
- ``load_summary.csv``: one row per policy and class (and the policy's "all");
- ``load_tenants.csv``: one row per policy and tenant;
- ``load_requests.csv``: one row per request, to plot one's own figures;
- ``load.json``: the plan, the rate, every row above and every request's
  chunk times and text;
- ``load_ttft_cdf.png``, ``load_tokens_per_s.png``, ``load_service.png``
  (docs/MEASURE.md, "Load: reading the plots").
"""

from __future__ import annotations

import csv
import json
from dataclasses import asdict
from pathlib import Path

from pyaisvc.bench.load import stats as st
from pyaisvc.bench.load.client import Outcome
from pyaisvc.bench.load.run import LoadResult, plan_record
from pyaisvc.bench.plots import set_title


def summary_rows(result: LoadResult) -> list[dict[str, object]]:
    """The summary rows of every policy of result (per class and "all"), as stats.policy_rows
    gives them under the plan's SLOs."""
    p = result.plan
    return [r for run in result.runs
            for r in st.policy_rows(run.policy, run.outcomes, p.slo_ttft, p.slo_tbt)]


def tenant_rows(result: LoadResult) -> list[dict[str, object]]:
    """The per-tenant rows of every policy of result (stats.tenant_rows)."""
    return [r for run in result.runs for r in st.tenant_rows(run.policy, run.outcomes)]


def request_row(o: Outcome, slo_ttft: float, slo_tbt: float) -> dict[str, object]:
    """One request's row of requests.csv: what it asked, its times in ms (client and kernel),
    how it ended and whether it met the SLOs."""
    def ms(x: float | None) -> float | None:
        """Seconds as milliseconds with one decimal; None stays None."""
        return None if x is None else round(x * 1000, 1)

    def us(x: int | None) -> float | None:
        """Microseconds as milliseconds with one decimal; None stays None."""
        return None if x is None else round(x / 1000, 1)

    return {"policy": o.policy, "index": o.index, "user": o.user, "class": o.cls,
            "tenant": o.tenant, "priority": o.priority, "prompt_tokens": o.prompt_tokens,
            "max_tokens": o.max_tokens, "completion_tokens": o.completion_tokens,
            "arrival_s": None if o.arrival is None else round(o.arrival, 4),
            "sent_s": round(o.sent, 4), "ttft_ms": ms(st.ttft(o)), "tpot_ms": ms(st.tpot(o)),
            "stall_ms": ms(max(st.gaps(o), default=None)), "e2e_ms": ms(st.e2e(o)),
            "kernel_queued_ms": us(o.kernel_queued_us), "kernel_ttft_ms": us(o.kernel_ttft_us),
            "kernel_total_ms": us(o.kernel_total_us), "finish": o.finish, "status": o.status,
            "slo_met": st.meets_slo(o, slo_ttft, slo_tbt)}


def _csv(path: Path, rows: list[dict[str, object]]) -> None:
    """Writes rows to path as CSV, the columns every row's keys in their first order."""
    keys = list(dict.fromkeys(k for r in rows for k in r))
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, keys)
        w.writeheader()
        w.writerows(rows)


def _cell(v: object) -> str:
    """A table cell: "-" for None, a float in %g."""
    return "-" if v is None else f"{v:g}" if isinstance(v, float) else str(v)


def _arrivals(result: LoadResult) -> str:
    """How the requests arrived (closed loop or Poisson at which rate), how many or for how
    long, and the seed, in words."""
    p = result.plan
    if p.users is not None:
        how = f"closed loop, {p.users} users"
    elif result.capacity is not None:
        how = (f"Poisson, {result.rate:.3f} requests/s = {p.load} x the capacity "
               f"{result.capacity:.3f} requests/s")
    else:
        how = f"Poisson, {result.rate:g} requests/s"
    many = f"{p.requests} requests" if p.requests is not None else f"{p.duration:g} s"
    return f"{how}; {many}; seed {p.seed}"


def markdown(result: LoadResult, command: str) -> str:
    """The load report: the plan in words, then one summary table row per policy and class, and
    the tenants' table."""
    p = result.plan
    mix = ", ".join(f"{c.name} (prompt {c.prompt[0]}-{c.prompt[1]}, new {c.new[0]}-{c.new[1]}, "
                    f"weight {c.weight:g})" for c in p.classes)
    who = ", ".join(f"{t.name} (weight {t.weight:g}, priority {t.priority})" for t in p.tenants)
    lines = ["# Load: policies under one seeded workload", "", f"`{command}`", "",
             f"Arrivals: {_arrivals(result)}. Classes: {mix}. Tenants: {who}. "
             f"SLOs: TTFT <= {p.slo_ttft * 1000:g} ms, mean time between tokens <= "
             f"{p.slo_tbt * 1000:g} ms." + (f" Prefill chunk {p.prefill_chunk}."
                                            if p.prefill_chunk else "") +
             (f" Prompt budget beside a decoder {p.prefill_budget}." if p.prefill_budget
              else ""), "",
             "Times in ms; TTFT and end-to-end from the client's send; kernel TTFT from "
             "ai_submit (the reply's timings).", ""]
    cols = [("policy", "policy"), ("class", "class"), ("requests", "n"), ("ok", "ok"),
            ("ttft_p50_ms", "TTFT p50"), ("ttft_p99_ms", "TTFT p99"),
            ("kernel_ttft_p50_ms", "kernel TTFT p50"), ("kernel_ttft_p99_ms", "kernel p99"),
            ("tbt_p50_ms", "TBT p50"), ("tbt_p99_ms", "TBT p99"), ("stall_max_ms", "stall max"),
            ("e2e_p50_ms", "e2e p50"), ("e2e_p99_ms", "e2e p99"), ("tokens_per_s", "tok/s"),
            ("goodput", "goodput")]
    lines += ["| " + " | ".join(h for _, h in cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_cell(r.get(k)) for k, _ in cols) + " |"
              for r in summary_rows(result)]
    tenants = [t.name for t in p.tenants]
    lines += ["", "Service per tenant (prompt + generated tokens served); Jain's index over "
              "them; the largest service difference between two backlogged tenants.", "",
              "| policy | " + " | ".join(tenants) + " | Jain | max diff |",
              "|---|" + "---|" * (len(tenants) + 2)]
    alls = {r["policy"]: r for r in summary_rows(result) if r["class"] == "all"}
    for run in result.runs:
        served = {r["tenant"]: r["service_tokens"] for r in st.tenant_rows(run.policy,
                                                                           run.outcomes)}
        a = alls[run.policy]
        lines.append(f"| {run.policy} | " + " | ".join(_cell(served.get(t)) for t in tenants)
                     + f" | {_cell(a['jain'])} | {_cell(a['service_diff_max'])} |")
    return "\n".join(lines) + "\n"


def to_json(result: LoadResult, command: str) -> dict:
    """The whole run as JSON data: the plan, rate and capacity, the summary and tenant rows, and
    every policy's requests."""
    return {"command": command, "plan": plan_record(result.plan), "rate": result.rate,
            "capacity": result.capacity, "summary": summary_rows(result),
            "tenants": tenant_rows(result),
            "runs": [{"policy": r.policy, "server": r.server, "started": r.started,
                      "host": r.host, "requests": [asdict(o) for o in r.outcomes]}
                     for r in result.runs]}


def write_all(out: Path, result: LoadResult, command: str) -> dict[str, Path]:
    """Writes the tables and rows (not the plots) into out; their paths by name."""
    p = result.plan
    paths = {n: out / n for n in ("load.md", "load_summary.csv", "load_tenants.csv",
                                  "load_requests.csv", "load.json")}
    paths["load.md"].write_text(markdown(result, command))
    _csv(paths["load_summary.csv"], summary_rows(result))
    _csv(paths["load_tenants.csv"], tenant_rows(result))
    _csv(paths["load_requests.csv"], [request_row(o, p.slo_ttft, p.slo_tbt)
                                      for r in result.runs for o in r.outcomes])
    paths["load.json"].write_text(json.dumps(to_json(result, command), indent=1))
    return paths


def _pyplot():
    """matplotlib's pyplot on the Agg backend (imported only when a plot is drawn)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def write_plots(out: Path, result: LoadResult) -> dict[str, Path]:
    """The three PNGs; their paths by name."""
    plt = _pyplot()
    paths = {n: out / n for n in ("load_ttft_cdf.png", "load_tokens_per_s.png",
                                  "load_service.png")}
    fig, ax = plt.subplots(figsize=(6, 4.5), dpi=100)
    for run in result.runs:
        xs = sorted(t * 1000 for o in run.outcomes if (t := st.ttft(o)) is not None)
        if xs:  # from 0 at the first TTFT to 1 at the last
            ax.step([xs[0], *xs], [0.0, *((k + 1) / len(xs) for k in range(len(xs)))],
                    where="post", label=run.policy)
    ax.axvline(result.plan.slo_ttft * 1000, color="grey", linestyle="--", label="TTFT SLO")
    ax.set_xlabel("TTFT (ms, from the client's send)")
    ax.set_ylabel("share of requests")
    set_title(ax, f"TTFT per policy: {_arrivals(result)}", 9)
    _finish(fig, ax, paths["load_ttft_cdf.png"], plt)
    fig, ax = plt.subplots(figsize=(6, 4.5), dpi=100)
    step = max(1.0, max(st.span(r.outcomes) for r in result.runs) / 60)
    for run in result.runs:
        xs, ys = st.tokens_over_time(run.outcomes, step)
        ax.step(xs, ys, where="post", label=run.policy)
    ax.set_xlabel("time from the run's start (s)")
    ax.set_ylabel(f"generated tokens/s (bins of {step:.3g} s)")
    set_title(ax, "Throughput over time", 9)
    _finish(fig, ax, paths["load_tokens_per_s.png"], plt)
    _plot_service(result, paths["load_service.png"], plt)
    return paths


def _finish(fig, ax, path: Path, plt) -> None:
    """Grid and legend on ax, then fig saved to path and closed."""
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _plot_service(result: LoadResult, path: Path, plt) -> None:
    """One panel per policy: each tenant's cumulative service over time."""
    n = len(result.runs)
    fig, axes = plt.subplots(1, n, figsize=(4.5 * n, 4), dpi=100, sharey=True, squeeze=False)
    for ax, run in zip(axes[0], result.runs, strict=True):
        events, _ = st.tenant_service(run.outcomes)
        for tenant in sorted(events):
            times, sums = st.cumulative(events[tenant])
            ax.step([0.0, *times], [0.0, *sums], where="post", label=tenant)
        ax.set_title(run.policy, fontsize=10)
        ax.set_xlabel("time (s)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel("tokens served (prompt + generated)")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
