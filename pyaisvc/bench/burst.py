"""Bursts through the kernel AI service: AI_PERPROC requests (aisvc.h) submitted at once.

The worker (``ai_daemon``) runs up to B requests per forward pass
(docs/AI_SERVICE.md section 9). A burst is measured in the guest by
``aistress --bench G ID...``: one process submits N_BURST copies of the prompt at
once, then prints, in arrival order, one line per request with the kernel's
timestamps (from submit) and its ids, and a summary line::

    bench K: reqid R n=N queued_us=Q ttft_us=F total_us=T prefill+1_us=P: IDS
    bench: 8 requests, first submit to last finish S ms

TPOT = (total_us - ttft_us) / (G - 1). For each worker batch size B and hart
count one guest boots with the boot argument ``aibatch=B``, so that init
starts the worker as ``ai_daemon --batch B`` (B=1 serves one request at
a time). The guests stay up together and the bursts go round them, one per
guest per round, so that a change in the host's load falls on every
configuration alike; the report takes each configuration's median round.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from pyaisvc.bench.matrix import BenchError, prompt_ids
from pyaisvc.bench.plots import set_title
from pyaisvc.bench.report import machine_line
from pyaisvc.bench.runner import booted_machine, check_guests_fit, qemu_version
from pyaisvc.bench.sample import Note
from pyaisvc.bench.service import boot_worker
from pyaisvc.guest.llmguest import MODELS, max_per_process, prepare
from pyaisvc.guest.qemu import Guest, QemuConfig, default_qemu
from pyaisvc.model.tokenizer import load_tokenizer

N_BURST = max_per_process()  # aistress --bench submits as many copies as one process may own
LINE = re.compile(r"^bench (\d+): reqid (\d+) n=(-?\d+) queued_us=(\d+) ttft_us=(\d+) "
                  r"total_us=(\d+) prefill\+1_us=(\d+): ([\d ]*)\r?$", re.M)
SUMMARY = re.compile(r"^bench: (\d+) requests, first submit to last finish (\d+) ms", re.M)


@dataclass(frozen=True)
class BurstRequest:
    """One request of a burst, times in microseconds from its submit."""

    k: int  # arrival order (0 = submitted first)
    queued_us: int
    ttft_us: int
    tpot_us: int
    total_us: int
    ids: tuple[int, ...]


@dataclass(frozen=True)
class Burst:
    """One burst: the worker's batch size, the harts, every request and the span."""

    batch: int
    harts: int
    requests: list[BurstRequest]
    span_ms: int  # first submit to last finish
    machine: str = ""  # report.machine_line: QEMU version, -cpu, harts, RAM
    ran: str = ""  # the worker's "kernels/threads", e.g. "vector/2"
    round: int = 0  # which round of the measurement (0 = first)


def parse_burst(out: str, gen: int, batch: int, harts: int) -> Burst:
    """The Burst in aistress --bench's output; BenchError if a request is missing or failed."""
    reqs = []
    for m in LINE.finditer(out):
        n = int(m.group(3))
        if n < 0:
            raise BenchError(f"aistress --bench: request {m.group(1)} failed with {n}")
        ttft, total = int(m.group(5)), int(m.group(6))
        reqs.append(BurstRequest(int(m.group(1)), int(m.group(4)), ttft,
                                 (total - ttft) // (gen - 1) if gen > 1 else 0, total,
                                 tuple(int(v) for v in m.group(8).split())))
    summary = SUMMARY.search(out)
    if len(reqs) != N_BURST or summary is None:
        raise BenchError(f"aistress --bench: expected {N_BURST} request lines and the summary, "
                         f"got:\n{out[-2000:]}")
    if len({r.ids for r in reqs}) != 1 or len(reqs[0].ids) != gen:
        raise BenchError(f"aistress --bench: the {N_BURST} copies of one request did not all "
                         f"give the same {gen} ids:\n{out[-2000:]}")
    return Burst(batch, harts, reqs, int(summary.group(2)))


def run_burst(guest: Guest, prompt: list[int], gen: int, batch: int, harts: int,
              note: Note, timeout: float, machine: str = "") -> Burst:
    """One burst of N_BURST requests (prompt, gen ids each) on a guest whose worker batches
    `batch` requests; machine describes the guest (for the report)."""
    w = boot_worker(guest.transcript)
    if w is None:
        raise BenchError("--burst: no 'ai_daemon: pid N serving ..., batch B, kernels K, "
                         "threads T' line: the image needs the current ai_daemon (make all)")
    if w.batch != batch:
        raise BenchError(f"--burst: the worker runs batch {w.batch}, not {batch}: "
                         "the kernel or init does not pass the aibatch= boot argument (make all)")
    note(f"burst: {N_BURST} x ({len(prompt)} prompt + {gen} generated ids), worker batch "
         f"{batch}, {harts} harts, {w.ran}")
    # one word per id: aistress reads one id per argument (llmguest.id_args quotes
    # several ids into one word, for llmrun)
    out = guest.run(f"aistress --bench {gen} {' '.join(map(str, prompt))}", timeout=timeout)
    return replace(parse_burst(out, gen, batch, harts), ran=w.ran, machine=machine)


def run_bursts(root: Path, model: str, prompt_len: int, gen: int, batches: list[int],
               cpus: list[int], rounds: int, ram: str | None, assets: Path | None,
               note: Note) -> list[Burst]:
    """Boots one guest with `model` per (hart count, worker batch size) and keeps them all
    up; then `rounds` times, one burst on each guest in turn (hart counts and batch sizes
    smallest first). Returns every burst in the order measured."""
    spec = MODELS[model]
    note(f"{model}: building kernel, programs and image")
    p = prepare(root, spec, assets)
    prompt = prompt_ids(load_tokenizer(model).encode, prompt_len)
    timeout = 60.0 + 4.0 * N_BURST * gen * p.size_mb / 10
    version = qemu_version(default_qemu())
    check_guests_fit([ram or spec.ram] * len(set(cpus)) * len(set(batches)))
    guests: list[tuple[int, int, Guest, str]] = []  # harts, batch, guest, machine line
    bursts = []
    try:  # not `with`: a failed boot must close every QEMU started so far
        for c in sorted(set(cpus)):
            for b in sorted(set(batches)):
                # init starts ai_daemon --batch B (user/bin/init.c)
                qc = QemuConfig(kernel=p.kernel, image=p.image, ram=ram or spec.ram, cpus=c,
                                snapshot=True, append=f"aibatch={b}")
                note(f"{model}: booting the guest ({c} harts, {qc.ram}, worker batch {b})")
                guest = Guest(qc)
                guests.append((c, b, guest, ""))
                guest.boot()
                guests[-1] = (c, b, guest, machine_line(booted_machine(guest, version)))
        for r in range(rounds):
            if rounds > 1:
                note(f"round {r + 1} of {rounds}")
            for c, b, guest, machine in guests:
                one = run_burst(guest, prompt, gen, b, c, note, timeout, machine)
                bursts.append(replace(one, round=r))
    finally:
        for _, _, guest, _ in guests:
            guest.close()
    return bursts


def _configs(bursts: list[Burst]) -> list[list[Burst]]:
    """The bursts grouped by (harts, batch), fewest harts and smallest batch first; each
    group's rounds ordered by span."""
    groups: dict[tuple[int, int], list[Burst]] = {}
    for b in bursts:
        groups.setdefault((b.harts, b.batch), []).append(b)
    return [sorted(groups[k], key=lambda b: b.span_ms) for k in sorted(groups)]


def median_bursts(bursts: list[Burst]) -> list[Burst]:
    """Each configuration's median round (the lower middle one for an even count)."""
    return [g[(len(g) - 1) // 2] for g in _configs(bursts)]


def _machines(bursts: list[Burst]) -> str:
    """The distinct machines of the bursts, "; "-separated."""
    return "; ".join(sorted({b.machine for b in bursts if b.machine}))


def markdown(bursts: list[Burst], command: str) -> str:
    """The burst table: per request TTFT, TPOT and total (ms) of each configuration's median
    round, then each configuration's spans over the rounds and their ratios."""
    groups = _configs(bursts)
    medians = median_bursts(bursts)
    rounds = max(len(g) for g in groups)
    lines = [f"# Burst of {N_BURST} requests through the AI service", "", f"`{command}`", "",
             "Times in ms from each request's submit (kernel timestamps); requests in "
             "arrival order" + (f"; for each configuration its median round of {rounds} "
                                "(rounds went to every configuration in turn)"
                                if rounds > 1 else "") + ".", ""]
    if _machines(bursts):
        lines += [f"Machine: {_machines(bursts)}.", ""]
    head = "| request |" + "".join(f" B={b.batch} {b.harts}h TTFT | TPOT | total |"
                                   for b in medians)
    lines += [head, "|---|" + "---|---|---|" * len(medians)]
    for k in range(N_BURST):
        row = f"| {k + 1} |"
        for b in medians:
            r = b.requests[k]
            row += f" {r.ttft_us / 1000:.0f} | {r.tpot_us / 1000:.0f} | {r.total_us / 1000:.0f} |"
        lines.append(row)
    # With several hart counts, each span is also compared with B=1 on the fewest harts
    # (one request at a time on one hart, with --cpus 1,2). Ratios are of the
    # median spans.
    spans = {(g[0].harts, g[0].batch): statistics.median(b.span_ms for b in g) for g in groups}
    fewest = min(b.harts for b in bursts)
    several = any(b.harts != fewest for b in bursts)
    lines += ["", f"| burst | ran | all {N_BURST} done (ms) | {N_BURST}th / 1st TTFT | "
              "vs B=1 (same harts) |"
              + (f" vs B=1, {fewest} harts |" if several else ""),
              "|---|---|---|---|---|" + ("---|" if several else "")]
    for g, b in zip(groups, medians, strict=True):
        first = b.requests[0].ttft_us or 1
        span = spans[(b.harts, b.batch)]
        done = (f"{span:.0f}" if len(g) == 1
                else f"{span:.0f} ({', '.join(str(x.span_ms) for x in g)})")
        row = (f"| B={b.batch}, {b.harts} harts | {b.ran or '-'} | {done} | "
               f"{b.requests[-1].ttft_us / first:.1f}x | {_span_ratio(span, spans, b.harts)} |")
        lines.append(row + (f" {_span_ratio(span, spans, fewest)} |" if several else ""))
    return "\n".join(lines) + "\n"


def _span_ratio(span: float, spans: dict[tuple[int, int], float], harts: int) -> str:
    """span over the B=1 configuration's on `harts` harts, e.g. "0.64x"; "-" if none."""
    base = spans.get((harts, 1))
    return f"{span / base:.2f}x" if base else "-"


def to_json(bursts: list[Burst], command: str) -> dict:
    """Every burst in the order measured, with its requests' times and ids."""
    return {"command": command, "bursts": [asdict(b) for b in bursts]}


def plot_ttft(bursts: list[Burst], path: Path) -> None:
    """PNG: TTFT (ms) against arrival order, one line per configuration (its median
    round)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4.5), dpi=100)
    for b in median_bursts(bursts):
        ax.plot([r.k + 1 for r in b.requests], [r.ttft_us / 1000 for r in b.requests],
                marker="o",
                label=f"worker batch {b.batch}, {b.harts} harts" + (f", {b.ran}" if b.ran else ""))
    ax.set_xlabel("arrival order in the burst")
    ax.set_ylabel("TTFT from submit (ms)")
    set_title(ax, f"{N_BURST} requests submitted at once\n{_machines(bursts)}", 9)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
