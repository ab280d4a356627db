"""Write a benchmark's results: results.csv, results.json and results.md.

- results.csv: one row per run (every repeat), times in microseconds.
- results.json: the machine and set-up (QEMU version, harts, RAM, assets,
  prompts), every sample, and per cell the median, minimum and maximum.
- results.md: one Markdown table per model, each cell "median (min-max)"
  in milliseconds, with the kernels and thread counts the runs reported
  ("ran": "vector/2"; a run that fell back to one thread or to scalar
  kernels shows), headed by the machine it was measured on; with several
  harts values (--cpus 1,2), each cell once per harts, then the speed-up:
  TTFT and TPOT medians as ratios to the first harts value's, measured in
  the same run.

Every row names the host that measured it and its CPU model. Samples of
different hosts never share a cell's statistics nor a speed-up ratio: with
rows from several hosts (a sweep on a Dask cluster, pyaisvc.bench.cluster)
the tables get a host column and say that each line is one host's.
"""

from __future__ import annotations

import csv
import json
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path

from pyaisvc.bench.runner import BenchResult, Machine
from pyaisvc.bench.sample import PROFILE_FIELDS, PROFILE_PARTS, Sample

METRICS = ("load_us", "init_us", "ttft_us", "tpot_us")
CSV_FIELDS = ("model", "mode", "prompt_len", "gen_len", "harts", "repeat", *METRICS, "wall_s",
              "ran", "host", "cpu", "ids", *PROFILE_FIELDS)


@dataclass(frozen=True)
class Stat:
    median: float
    min: float
    max: float
    n: int


@dataclass(frozen=True)
class CellSummary:
    model: str
    mode: str
    prompt_len: int
    gen_len: int
    stats: dict[str, Stat]  # metric -> statistics over the repeats
    harts: int = 1
    ran: str = ""  # the distinct "kernels/threads" of the repeats, e.g. "vector/2"
    host: str = ""  # the one host whose samples these are


def stat(values: list[float]) -> Stat:
    """Median, min, max and count of values."""
    return Stat(float(statistics.median(values)), float(min(values)), float(max(values)),
                len(values))


def kernels_summary(samples: list[Sample]) -> str:
    """The distinct "kernels/threads" the samples reported, sorted: "scalar/1, vector/2"."""
    return ", ".join(sorted({r for s in samples for r in s.ran.split(",") if r}))


def summarize(samples: list[Sample]) -> list[CellSummary]:
    """Per cell (model, mode, prompt, gen), harts and host, sorted."""
    cells: dict[tuple[str, str, int, int, int, str], list[Sample]] = {}
    for s in samples:
        key = (s.model, s.mode, s.prompt_len, s.gen_len, s.harts, s.host)
        cells.setdefault(key, []).append(s)
    out = []
    for (model, mode, p, g, harts, host), group in cells.items():
        stats = {m: stat([float(getattr(s, m)) for s in group]) for m in METRICS}
        out.append(CellSummary(model, mode, p, g, stats, harts, kernels_summary(group), host))
    return sorted(out, key=lambda c: (c.model, c.mode, c.prompt_len, c.gen_len, c.host,
                                      c.harts))


def machine_line(m: Machine, harts: list[int] | None = None) -> str:
    """E.g. "QEMU 7.2.22, 1 hart, 512 MiB RAM"; harts (a sweep) replaces m.harts."""
    hs = harts or [m.harts]
    text = " and ".join(map(str, hs)) + " hart" + ("s" if hs != [1] else "")
    return f"{m.qemu}, {text}, {m.ram_mib} MiB RAM"


def write_csv(path: Path, samples: list[Sample]) -> None:
    """Writes samples to path as CSV (CSV_FIELDS; ids space-separated, profile fields blank
    where not profiled)."""
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_FIELDS)
        for s in samples:
            row = asdict(s)
            row["ids"] = " ".join(str(i) for i in s.ids)
            row["wall_s"] = f"{s.wall_s:.3f}"
            row.update({k: s.profile.get(k, "") for k in PROFILE_FIELDS})
            w.writerow([row[k] for k in CSV_FIELDS])


def to_json(result: BenchResult) -> dict:
    """The whole result as JSON data: when and where it ran, the matrix, machines, assets,
    prompts, every sample and each cell's statistics."""
    cfg = result.config
    return {
        "started": result.started,
        "seconds": round(result.seconds, 1),
        "host": result.host,
        "matrix": {"models": cfg.models, "modes": cfg.modes, "prompt_lens": cfg.prompt_lens,
                   "gen_lens": cfg.gen_lens, "repeat": cfg.repeat, "cpus": cfg.cpus},
        "machines": {k: asdict(v) for k, v in result.machines.items()},
        "assets": result.assets,
        "titles": result.titles,
        "prompts": {m: {str(n): ids for n, ids in p.items()} for m, p in result.prompts.items()},
        "samples": [asdict(s) for s in result.samples],
        "cells": [{"model": c.model, "mode": c.mode, "prompt_len": c.prompt_len,
                   "gen_len": c.gen_len, "harts": c.harts, "ran": c.ran, "host": c.host,
                   **{k: asdict(v) for k, v in c.stats.items()}}
                  for c in summarize(result.samples)],
    }


def _ms(s: Stat) -> str:
    """Median (min-max) in milliseconds; the median alone for one run."""
    def f(us: float) -> str:
        """Microseconds as milliseconds with one decimal."""
        return f"{us / 1000:.1f}"

    return f(s.median) if s.n == 1 or s.min == s.max else f"{f(s.median)} ({f(s.min)}-{f(s.max)})"


def markdown(result: BenchResult, command: str = "") -> str:
    """The results as Markdown: a heading with the machine, then one table per model."""
    lines = ["# aisvc benchmark", ""]
    if command:
        lines += [f"Command: `{command}`", ""]
    cfg = result.config
    lines += [f"Started {result.started}, {result.seconds:.0f} s in all; {cfg.repeat} "
              f"repeat(s) per cell; times in ms, each cell median (min-max) over the repeats. "
              "TPOT is the mean of the tokens after the first (0 when gen = 1).", ""]
    h = result.host
    if h.get("cluster"):
        lines += [f"Measured on the Dask cluster at {h['cluster']}, each cell by one worker: "
                  + "; ".join(f"{name} ({cpu})" for name, cpu in sorted(h["workers"].items()))
                  + ". Each table line and each speed-up ratio holds one host's runs only.", ""]
    elif h:
        who = f"{h['name']} ({h.get('cpu')}), " if h.get("name") else ""
        lines += [f"Host: {who}{h.get('cpus')} CPUs, 1-minute load average "
                  f"{h.get('loadavg_start')} "
                  f"at the start and {h.get('loadavg_end')} at the end (other work on the host "
                  "slows QEMU down; compare numbers measured under similar load).", ""]
    cells = summarize(result.samples)
    sweep = cfg.cpus if len(cfg.cpus) > 1 else None
    hosts = len({c.host for c in cells}) > 1  # then a host column
    for model in cfg.models:
        lines += [f"## {result.titles[model]}: {machine_line(result.machines[model], sweep)}",
                  "", f"Assets: `{result.assets[model]}`", "",
                  "| mode | prompt | gen | harts | " + ("host | " if hosts else "")
                  + "ran | runs | load (ms) | init (ms) | TTFT (ms) | TPOT (ms) |",
                  "|---|---:|---:|---:|" + ("---|" if hosts else "")
                  + "---|---:|---:|---:|---:|---:|"]
        for c in (c for c in cells if c.model == model):
            st = c.stats
            lines.append(f"| {c.mode} | {c.prompt_len} | {c.gen_len} | {c.harts} | "
                         + (f"{c.host} | " if hosts else "")
                         + f"{c.ran or '-'} | {st['ttft_us'].n} | {_ms(st['load_us'])} | "
                         f"{_ms(st['init_us'])} | {_ms(st['ttft_us'])} | {_ms(st['tpot_us'])} |")
        lines.append("")
        if sweep:
            lines += speedup_table([c for c in cells if c.model == model], sweep)
        lines += profile_table([s for s in result.samples if s.model == model and s.profile])
    return "\n".join(lines)


def _ratio(c: CellSummary, ref: CellSummary, metric: str) -> str:
    """c's median of metric over ref's, two decimals ("-" when ref's is 0)."""
    den = ref.stats[metric].median
    return f"{c.stats[metric].median / den:.2f}" if den > 0 else "-"


def speedup_table(cells: list[CellSummary], harts: list[int]) -> list[str]:
    """Markdown lines: per cell, TTFT and TPOT medians with h harts over those with harts[0]
    measured on the same host (a cell whose base was measured elsewhere has no ratio)."""
    base = harts[0]
    hosts = len({c.host for c in cells}) > 1
    lines = [f"Speed-up (median with N harts / median with {base}"
             + (" on the same host" if hosts else "") + "; below 1 is faster):", "",
             "| prompt | gen | mode | harts | " + ("host | " if hosts else "")
             + "TTFT ratio | TPOT ratio |",
             "|---:|---:|---|---:|" + ("---|" if hosts else "") + "---:|---:|"]
    by_key = {(c.mode, c.prompt_len, c.gen_len, c.harts, c.host): c for c in cells}
    for c in cells:
        ref = by_key.get((c.mode, c.prompt_len, c.gen_len, base, c.host))
        if c.harts == base or ref is None:
            continue
        lines.append(f"| {c.prompt_len} | {c.gen_len} | {c.mode} | {c.harts} | "
                     + (f"{c.host} | " if hosts else "")
                     + f"{_ratio(c, ref, 'ttft_us')} | {_ratio(c, ref, 'tpot_us')} |")
    return [*lines, ""]


def profile_table(samples: list[Sample]) -> list[str]:
    """Markdown lines: per cell, the median share of matmul / attention / other time,
    and of the serial time (thread 0 alone between parallel steps; "-" for one thread)."""
    if not samples:
        return []
    sweep = len({s.harts for s in samples}) > 1  # then a harts column
    lines = ["Where the time goes (`--profile`; median share of the phase's time; serial: "
             "thread 0 alone between parallel steps, which more harts cannot shorten):", "",
             "| prompt | gen | " + ("harts | " if sweep else "") + "prefill matmul | attention "
             "| other | serial | decode matmul | attention | other | serial |",
             "|---:|---:|" + ("---:|" if sweep else "") + "---:|" * 8]
    cells = sorted({(s.prompt_len, s.gen_len, s.harts) for s in samples})
    for p, g, h in cells:
        group = [s for s in samples if (s.prompt_len, s.gen_len, s.harts) == (p, g, h)]
        shares = []
        for phase in ("prefill", "decode"):
            parts = [f"{phase}_{x}_us" for x in PROFILE_PARTS]
            for k in [*parts, f"{phase}_serial_us"]:
                ratios = [s.profile[k] / max(1, sum(s.profile[q] for q in parts))
                          for s in group if k in s.profile]
                shares.append(f"{100 * statistics.median(ratios):.0f}%" if ratios else "-")
        lines.append(f"| {p} | {g} | " + (f"{h} | " if sweep else "") + " | ".join(shares)
                     + " |")
    return [*lines, ""]


def write_all(out: Path, result: BenchResult, command: str = "") -> dict[str, Path]:
    """Writes the three files into out; returns name -> path."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {"csv": out / "results.csv", "json": out / "results.json", "md": out / "results.md"}
    write_csv(paths["csv"], result.samples)
    data = to_json(result)
    data["command"] = command
    paths["json"].write_text(json.dumps(data, indent=1) + "\n")
    paths["md"].write_text(markdown(result, command))
    return paths
