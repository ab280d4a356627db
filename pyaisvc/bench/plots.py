"""PNG plots of a benchmark, one panel per model side by side.

- ttft_vs_prompt.png: time to first token against prompt length (prefill).
- tpot_vs_gen.png: time per output token against generated length (decode),
  one line per prompt length.
- load_time.png: model loading time, one bar per model and mode.

Points are medians over the repeats (and, for TTFT, over the generated
lengths, which do not change it); the bars show the minimum and maximum.
With several harts values (`--cpus 1,2`) each (mode, harts) pair is a
series of its own. Every panel names the QEMU version, harts and RAM it
was measured with. The
figures have fixed sizes (``figure_pixels``) so their layout never depends
on the data.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from pyaisvc.bench.report import kernels_summary, machine_line, stat
from pyaisvc.bench.runner import BenchResult
from pyaisvc.bench.sample import Sample

DPI = 100
PANEL_IN = (5.5, 4.5)  # inches per model panel
MARKERS = {"cold": "o", "service": "s"}


def figure_pixels(name: str, n_models: int) -> tuple[int, int]:
    """(width, height) in pixels of plot `name` for n_models models."""
    if name == "load_time":
        return int(max(5.0, 3.0 * n_models) * DPI), int(PANEL_IN[1] * DPI)
    return int(PANEL_IN[0] * n_models * DPI), int(PANEL_IN[1] * DPI)


def set_title(ax, text: str, fontsize: float) -> None:
    """ax's title with each line wrapped to the width of ax's column of the figure: a
    machine line (QEMU, -cpu, harts, RAM, kernels) is longer than a panel is wide."""
    width_in = ax.figure.get_figwidth() / ax.get_subplotspec().get_gridspec().ncols
    chars = max(20, int(width_in * 72 / (0.62 * fontsize)))  # average glyph ~0.6 em
    ax.set_title("\n".join(textwrap.fill(line, chars) for line in text.split("\n")),
                 fontsize=fontsize)


def _machine(result: BenchResult, model: str) -> str:
    """The machine line, and which kernels and thread counts the model's runs reported."""
    cpus = result.config.cpus
    line = machine_line(result.machines[model], cpus if len(cpus) > 1 else None)
    ran = kernels_summary([s for s in result.samples if s.model == model])
    return line + (f"; ran {ran}" if ran else "")


def _series_keys(result: BenchResult) -> list[tuple[str, int, str]]:
    """(mode, harts, legend label) of every series, harts named only in a sweep."""
    cpus = result.config.cpus
    return [(mode, h, mode if len(cpus) == 1 else f"{mode}, {h} harts")
            for mode in result.config.modes for h in cpus]


def _series(samples: list[Sample], x_of: str, metric: str) -> tuple[list[int], list[float],
                                                                    list[list[float]]]:
    """x values, medians (ms) and [below, above] error lengths (ms), sorted by x."""
    xs = sorted({getattr(s, x_of) for s in samples})
    med, err_lo, err_hi = [], [], []
    for x in xs:
        st = stat([getattr(s, metric) / 1000 for s in samples if getattr(s, x_of) == x])
        med.append(st.median)
        err_lo.append(st.median - st.min)
        err_hi.append(st.max - st.median)
    return xs, med, [err_lo, err_hi]


def _figure(name: str, n: int):
    """A figure with one axes per model (one for all models for name "load_time"), sized for the
    plot name; matplotlib on the Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    w, h = figure_pixels(name, n)
    return plt.subplots(1, 1 if name == "load_time" else n, figsize=(w / DPI, h / DPI), dpi=DPI,
                        squeeze=False)


def _save(fig, path: Path) -> None:
    """Saves fig to path and closes it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def _label(ax, result: BenchResult, model: str, metric: str, xticks: list[int],
           xlabel: str, ylabel: str) -> None:
    """Title (model, metric, machine), axes, grid and legend of one line-plot panel."""
    ax.set_xticks(xticks)
    set_title(ax, f"{result.titles[model]}: {metric}\n{_machine(result, model)}", 10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def plot_ttft(result: BenchResult, path: Path) -> None:
    """PNG: TTFT (ms) against the prompt length, one panel per model, a line per mode and hart
    count (median, with the range)."""
    models = result.config.models
    fig, axes = _figure("ttft", len(models))
    for ax, model in zip(axes[0], models, strict=True):
        for mode, h, label in _series_keys(result):
            ss = [s for s in result.samples
                  if (s.model, s.mode, s.harts) == (model, mode, h)]
            xs, med, err = _series(ss, "prompt_len", "ttft_us")
            ax.errorbar(xs, med, yerr=err, marker=MARKERS[mode], capsize=3, label=label)
        _label(ax, result, model, "TTFT", result.config.prompt_lens,
               "prompt length (tokens)", "time to first token (ms)")
    _save(fig, path)


def plot_tpot(result: BenchResult, path: Path) -> None:
    """PNG: TPOT (ms) against the generated length, one panel per model, a line per mode, hart
    count and prompt length."""
    models = result.config.models
    fig, axes = _figure("tpot", len(models))
    for ax, model in zip(axes[0], models, strict=True):
        for mode, h, label in _series_keys(result):
            for p in result.config.prompt_lens:
                key = (model, mode, h, p)
                ss = [s for s in result.samples
                      if (s.model, s.mode, s.harts, s.prompt_len) == key and s.gen_len > 1]
                if not ss:
                    continue
                xs, med, err = _series(ss, "gen_len", "tpot_us")
                ax.errorbar(xs, med, yerr=err, marker=MARKERS[mode], capsize=3,
                            label=f"{label}, prompt {p}")
        _label(ax, result, model, "TPOT", result.config.gen_lens,
               "generated length (tokens)", "time per output token (ms)")
    _save(fig, path)


def plot_load(result: BenchResult, path: Path) -> None:
    """PNG: Model Loading Time (s) per model, one bar per mode and hart count (median, with the
    range)."""
    models, keys = result.config.models, _series_keys(result)
    fig, axes = _figure("load_time", len(models))
    ax = axes[0][0]
    width = 0.8 / len(keys)
    for j, (mode, h, _) in enumerate(keys):
        xs, meds, lo, hi = [], [], [], []
        for i, model in enumerate(models):
            ss = [s.load_us / 1e6 for s in result.samples
                  if (s.model, s.mode, s.harts) == (model, mode, h)]
            if not ss:
                continue
            st = stat(ss)
            xs.append(i + (j - (len(keys) - 1) / 2) * width)
            meds.append(st.median)
            lo.append(st.median - st.min)
            hi.append(st.max - st.median)
        label = "service (one load, at boot)" if mode == "service" else "cold (every run)"
        if len(result.config.cpus) > 1:
            label += f", {h} harts"
        bars = ax.bar(xs, meds, width, yerr=[lo, hi], capsize=4, label=label)
        ax.bar_label(bars, fmt="%.3f s", fontsize=8, padding=2)
    ax.set_xticks(range(len(models)), [result.titles[m] for m in models])
    ax.set_ylabel("model loading time (s)")
    machines = "\n".join(f"{result.titles[m]}: {_machine(result, m)}" for m in models)
    set_title(ax, f"Model loading time\n{machines}", 9)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    _save(fig, path)


def write_plots(out: Path, result: BenchResult) -> dict[str, Path]:
    """Writes the three PNG files into out; returns name -> path."""
    paths = {"ttft": out / "ttft_vs_prompt.png", "tpot": out / "tpot_vs_gen.png",
             "load_time": out / "load_time.png"}
    plot_ttft(result, paths["ttft"])
    plot_tpot(result, paths["tpot"])
    plot_load(result, paths["load_time"])
    return paths
