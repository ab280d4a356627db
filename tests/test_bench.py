"""`pyaisvc bench` end to end: real SmolLM2 and the tiny synthetic Qwen3.5 in the guest.

One run of the CLI (both models, cold and through the AI service, prompt
4,8 x gen 2,4, one repeat) must write results.csv, results.json, results.md
and three PNGs; every cell must have positive times, the ids of both modes
must be the numpy reference's greedy continuation of the bench prompt, and
each PNG must be a valid image of the
size pyaisvc.bench.plots promises. The pure functions are tested on the
host without QEMU.
"""

from __future__ import annotations

import csv
import json
import re
import struct
import subprocess
import sys
import zlib
from dataclasses import replace
from pathlib import Path

import pytest
from host import llmcases as lc

from pyaisvc.bench import report
from pyaisvc.bench.matrix import TEXT, BenchError, check_lengths, parse_lengths, prompt_ids
from pyaisvc.bench.plots import PANEL_IN, figure_pixels, set_title
from pyaisvc.bench.runner import parse_profile
from pyaisvc.bench.sample import Sample
from pyaisvc.bench.service import Worker, boot_worker
from pyaisvc.guest.llmguest import LlmGuestError, id_args, kernels_ran, parse_output
from pyaisvc.guest.qemu import VECTOR_QEMU, default_qemu, qemu_version
from pyaisvc.model.tokenizer import load_tokenizer

ROOT = Path(__file__).resolve().parent.parent
PROMPTS, GENS = [4, 8], [2, 4]
PNGS = {"ttft_vs_prompt.png": "ttft", "tpot_vs_gen.png": "tpot", "load_time.png": "load_time"}


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) of a PNG, after checking its signature, every chunk's CRC and that
    the image data inflates to one filter byte plus at least one byte per pixel per row."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path}: not a PNG signature"
    pos, chunks = 8, []
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        assert zlib.crc32(kind + body) == crc, f"{path}: bad CRC in chunk {kind!r}"
        chunks.append((kind, body))
        pos += 12 + length
    kinds = [k for k, _ in chunks]
    assert kinds[0] == b"IHDR" and kinds[-1] == b"IEND" and b"IDAT" in kinds, kinds
    w, h = struct.unpack(">II", chunks[0][1][:8])
    pixels = zlib.decompress(b"".join(body for k, body in chunks if k == b"IDAT"))
    assert len(pixels) >= h * (1 + w), f"{path}: image data too short"
    return w, h


# ---------------------------------------------------------------- host only

def test_parse_lengths_and_limits():
    assert parse_lengths("32,8,16,8", "--prompt-lens") == [8, 16, 32]
    for bad in ("", "8,x", "0,4", "-3"):
        with pytest.raises(BenchError, match="positive whole numbers"):
            parse_lengths(bad, "--gen-lens")
    check_lengths([8, 255], [1], 256, "smol")
    with pytest.raises(BenchError, match="limit of 255"):
        check_lengths([256], [1], 1024, "smol")
    with pytest.raises(BenchError, match="runtime_seq_len 256"):
        check_lengths([200], [57], 256, "smol")


def test_prompt_is_the_text_cut_to_length():
    words = TEXT.split()
    ids = prompt_ids(lambda t: list(range(len(t.split()))), 12)
    assert ids == list(range(12)) and len(words) > 255
    with pytest.raises(BenchError, match="cannot be cut"):
        prompt_ids(lambda t: [1, 2], 3)


def test_id_args_fit_the_shell_and_exec_limits():
    ids = list(range(100000, 100255))
    args = id_args(ids)
    words = args.split('" "')
    assert all(len(w.strip('"')) < 1024 for w in words) and len(words) > 1
    assert [int(v) for v in args.replace('"', " ").split()] == ids
    assert len(f"llmrun_qwen --predict 1 {args}") < 4096  # sh.c MAXLINE


def test_parse_output():
    out = ("7042 30\nllmrun_smol: timing load_us=10 init_us=12 ttft_us=30 tpot_us=7 "
           "prompt=5 gen=2\n")
    fields, ids = parse_output(out, "llmrun_smol", 2)
    assert ids == (7042, 30) and fields["ttft_us"] == 30 and fields["init_us"] == 12
    with pytest.raises(LlmGuestError, match="asked for 3 ids"):
        parse_output(out, "llmrun_smol", 3)
    with pytest.raises(LlmGuestError, match="no ids and timing"):
        parse_output("llmrun_smol: CFG.BIN: cannot open\n", "llmrun_smol", 2)


def test_kernels_ran_and_their_summary():
    out = ("llmrun_smol: timing load_us=1 init_us=2 ttft_us=3 tpot_us=4 prompt=5 gen=2 "
           "kernels=vector threads=2\n"
           "llmrun_qwen: timing load_us=1 init_us=2 ttft_us=3 tpot_us=4 prompt=5 gen=2 "
           "kernels=scalar threads=1\n"
           "llmrun_smol: timing load_us=1 init_us=2 ttft_us=3 tpot_us=4 prompt=5 gen=2\n")
    assert kernels_ran(out, "llmrun_smol") == ["vector/2"]  # the older line says nothing
    assert kernels_ran(out) == ["vector/2", "scalar/1"]

    def s(r: int, ran: str) -> Sample:
        return Sample("smol", "cold", 8, 4, r, 100, 110, 300, 50, 1.0, (1, 2, 3, 4), ran=ran)

    (cell,) = report.summarize([s(0, "vector/2"), s(1, "scalar/1"), s(2, "vector/2"), s(3, "")])
    assert cell.ran == "scalar/1, vector/2"  # a run that fell back shows


def test_parse_profile():
    out = ("llmrun_qwen: profile phase=prefill matmul_us=90 attn_us=5 other_us=5 tokens=8\n"
           "llmrun_qwen: profile phase=prefill threads=1 steps=0 busy_us=0 wait_us=0 sleeps=0 "
           "serial_us=0\n"
           "llmrun_qwen: profile phase=decode matmul_us=80 attn_us=15 other_us=5 tokens=3\n"
           "llmrun_qwen: profile phase=decode threads=2 steps=9 busy_us=50,40 wait_us=1,9 "
           "sleeps=0,1 serial_us=7\n")
    prof = parse_profile(out, "llmrun_qwen")
    assert prof["prefill_matmul_us"] == 90 and prof["decode_attn_us"] == 15
    # one thread has no serial part to report; two threads do
    assert "prefill_serial_us" not in prof and prof["decode_serial_us"] == 7 and len(prof) == 7
    assert parse_profile(out, "llmrun_smol") == {}
    s = Sample("qwen", "cold", 8, 4, 0, 1, 1, 1, 1, 1.0, (1, 2, 3, 4), prof)
    assert report.profile_table([s])[-2] == "| 8 | 4 | 90% | 5% | 5% | - | 80% | 15% | 5% | 7% |"


def test_summary_median_and_spread():
    def s(ttft: int, r: int) -> Sample:
        return Sample("smol", "cold", 8, 4, r, 100, 110, ttft, 50, 1.0, (1, 2, 3, 4))

    (cell,) = report.summarize([s(300, 0), s(100, 1), s(200, 2)])
    st = cell.stats["ttft_us"]
    assert (st.median, st.min, st.max, st.n) == (200, 100, 300, 3)
    assert report._ms(st) == "0.2 (0.1-0.3)"


def test_harts_sweep_summary_and_speedup():
    def s(harts: int, ttft: int, tpot: int) -> Sample:
        return Sample("smol", "cold", 32, 8, 0, 100, 110, ttft, tpot, 1.0, (1,) * 8,
                      harts=harts)

    cells = report.summarize([s(2, 600, 70), s(1, 1200, 130), s(4, 610, 72)])
    assert [c.harts for c in cells] == [1, 2, 4]
    lines = report.speedup_table(cells, [1, 2, 4])
    assert lines[-3:] == ["| 32 | 8 | cold | 2 | 0.50 | 0.54 |",
                          "| 32 | 8 | cold | 4 | 0.51 | 0.55 |", ""]
    assert report.machine_line(report.Machine("QEMU 9", 1, 512, 1.0), [1, 2]) == (
        "QEMU 9, 1 and 2 harts, 512 MiB RAM")


# ---------------------------------------------------------------- in the guest

@pytest.fixture(scope="module")
def bench_out(build, tmp_path_factory) -> Path:
    lc.smol_or_skip()
    qwen = lc.qwen_tiny_dir("v3")
    out = tmp_path_factory.mktemp("bench")
    cmd = [sys.executable, "-m", "pyaisvc", "bench", "--model", "both", "--mode", "both",
           "--no-progress", "--profile", "--cpus", "1",
           "--prompt-lens", ",".join(map(str, PROMPTS)), "--gen-lens", ",".join(map(str, GENS)),
           "--repeat", "1", "--assets-qwen", str(qwen), "--out", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout == (out / "results.md").read_text()
    return out


@pytest.mark.guest
def test_bench_writes_every_file_with_numbers(bench_out: Path):
    version = qemu_version(default_qemu())
    # one hart: one thread; vector kernels exactly when the QEMU offers V
    ran = "vector/1" if version is not None and version >= VECTOR_QEMU else "scalar/1"
    rows = list(csv.DictReader((bench_out / "results.csv").open()))
    cells = {(r["model"], r["mode"], int(r["prompt_len"]), int(r["gen_len"])) for r in rows}
    assert cells == {(m, mode, p, g) for m in ("smol", "qwen") for mode in ("cold", "service")
                     for p in PROMPTS for g in GENS}
    assert len(rows) == len(cells)
    for r in rows:
        for k in ("load_us", "init_us", "ttft_us", "tpot_us"):
            assert int(r[k]) > 0, (k, r)
        assert int(r["init_us"]) >= int(r["load_us"])
        assert len(r["ids"].split()) == int(r["gen_len"])
    # --profile splits each cold run's phases into parts that do not overlap: they add up to
    # the phase's time (other_us is the rest, so parts counted twice would overflow it)
    cold = [r for r in rows if r["mode"] == "cold"]
    for r in cold:
        assert r["ran"] == ran, r
        for phase in ("prefill", "decode"):
            assert all(int(r[f"{phase}_{k}_us"]) > 0 for k in ("matmul", "attn")), r
        parts = {ph: sum(int(r[f"{ph}_{k}_us"]) for k in ("matmul", "attn", "other"))
                 for ph in ("prefill", "decode")}
        assert parts["prefill"] == int(r["ttft_us"]), r
        steps = int(r["gen_len"]) - 1  # tpot is the decode time over its steps, rounded down
        assert 0 <= parts["decode"] - int(r["tpot_us"]) * steps < steps, r
    data = json.loads((bench_out / "results.json").read_text())
    assert len(data["cells"]) == len(cells)
    for c in data["cells"]:
        for k in ("load_us", "ttft_us", "tpot_us"):
            assert c[k]["n"] == 1 and c[k]["min"] <= c[k]["median"] <= c[k]["max"]
    for m in ("smol", "qwen"):
        mach = data["machines"][m]
        assert mach["qemu"].startswith("QEMU ") and mach["harts"] == 1 and mach["ram_mib"] > 0
    md = (bench_out / "results.md").read_text()
    assert "SmolLM2-135M-Instruct: QEMU" in md and "Qwen3.5 synthetic (tiny): QEMU" in md
    table_rows = [line for line in md.splitlines() if line.startswith(("| cold |", "| service |"))]
    assert len(table_rows) == len(cells)
    assert all("| 0.0 |" not in line for line in table_rows)
    assert all(f"| {ran} |" in line for line in table_rows if line.startswith("| cold |"))
    assert md.count("Where the time goes") == 2


@pytest.mark.guest
def test_bench_ids_match_the_reference(bench_out: Path):
    data = json.loads((bench_out / "results.json").read_text())
    dirs = {"smol": lc.smol_dir("v3"), "qwen": lc.qwen_tiny_dir("v3")}
    for model, assets in dirs.items():
        prompts = [data["prompts"][model][str(p)] for p in PROMPTS]
        text_ids = load_tokenizer(model).encode(TEXT)
        assert prompts == [text_ids[:p] for p in PROMPTS]
        want = lc.reference_ids(assets, prompts, max(GENS))
        for s in (s for s in data["samples"] if s["model"] == model):
            expect = want[PROMPTS.index(s["prompt_len"])][:s["gen_len"]]
            assert s["ids"] == expect, (model, s["prompt_len"], s["gen_len"])


@pytest.mark.guest
def test_bench_plots_are_pngs_of_the_promised_size(bench_out: Path):
    for name, kind in PNGS.items():
        assert png_size(bench_out / name) == figure_pixels(kind, 2), name


def _burst_output(ttfts: list[int], gen: int, fail: int | None = None,
                  odd: int | None = None) -> str:
    ids = " ".join(str(i) for i in range(gen))
    lines = [f"bench {k}: reqid {k + 3} n={-112 if k == fail else 11} queued_us={t // 2} "
             f"ttft_us={t} total_us={t + (gen - 1) * 1000} prefill+1_us=7: "
             + (ids + " 9" if k == odd else ids)
             for k, t in enumerate(ttfts)]
    return "\n".join(lines) + f"\nbench: 8 requests, first submit to last finish {max(ttfts)} ms\n"


@pytest.mark.parametrize("panels", [1, 2])
def test_plot_titles_fit_their_panel(panels: int):
    """A title's machine line is longer than a panel is wide; set_title wraps it so that
    every title stays inside the figure (a plain title lost both ends of the line)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    machine = ("QEMU 10.0.2, -cpu rv64,v=true,vlen=256, 1 harts, 512 MiB RAM; QEMU 10.0.2, "
               "-cpu rv64,v=true,vlen=256, 2 harts, 512 MiB RAM; ran vector/1, vector/2")
    fig, axes = plt.subplots(1, panels, figsize=(PANEL_IN[0] * panels, PANEL_IN[1]),
                             squeeze=False)
    for ax in axes[0]:
        set_title(ax, f"SmolLM2-135M-Instruct: TPOT\n{machine}", 10)
        assert ax.get_title().split() == f"SmolLM2-135M-Instruct: TPOT {machine}".split()
    fig.tight_layout()
    fig.canvas.draw()
    width = fig.bbox.width
    boxes = [ax.title.get_window_extent() for ax in axes[0]]
    plt.close(fig)
    for box in boxes:
        assert 0 <= box.x0 and box.x1 <= width, (box, width)
    for left, right in zip(boxes, boxes[1:], strict=False):
        assert left.x1 <= right.x0  # neighbouring panels' titles do not overlap


def test_worker_line():
    line = ("ai_daemon: pid 7 serving /AI/SMOL (vocab 49152, runtime_seq_len 512), load 130 ms, "
            "batch 8, kernels vector, threads 2\r\n")
    assert boot_worker("init: starting\n" + line) == Worker(7, "/AI/SMOL", 130, 8, "vector/2")
    assert boot_worker("ai_daemon: not serving; fix the assets, then kill pid 7\n") is None
    # the count it reported last, after measuring its pool again, and only its own
    resized = "ai_daemon: threads 2 -> 1 (measured again while idle)\r\n"
    assert boot_worker(line + resized).ran == "vector/1"
    assert boot_worker(resized + line).ran == "vector/2"


def test_burst_parse_table_and_plot(tmp_path: Path):
    """aistress --bench's lines become per-request TTFT, TPOT and total; the table compares
    each burst's span with B=1's on the same harts; the plot is written."""
    from pyaisvc.bench import burst

    one = burst.parse_burst(_burst_output([1000 * (k + 1) for k in range(8)], 5), 5, 1, 1)
    eight = replace(burst.parse_burst(_burst_output([2000] * 8, 5), 5, 8, 1),
                    machine="QEMU 10.0.2, -cpu rv64,v=true,vlen=256, 512 MiB RAM", ran="vector/1")
    assert [r.ttft_us for r in one.requests] == [1000 * (k + 1) for k in range(8)]
    assert one.requests[0].tpot_us == 1000 and one.requests[0].ids == (0, 1, 2, 3, 4)
    assert (one.span_ms, eight.span_ms) == (8000, 2000)
    text = burst.markdown([one, eight], "pyaisvc bench --burst")
    assert "| B=8, 1 harts | vector/1 | 2000 | 1.0x | 0.25x |" in text
    assert "| B=1, 1 harts | - | 8000 | 8.0x | 1.00x |" in text
    assert "Machine: QEMU 10.0.2, -cpu rv64,v=true,vlen=256, 512 MiB RAM." in text
    # With several hart counts, a column compares every span with B=1 on the fewest.
    eight2 = burst.parse_burst(_burst_output([1000] * 8, 5), 5, 8, 2)
    text = burst.markdown([one, eight, eight2], "pyaisvc bench --burst --cpus 1,2")
    assert "| burst | ran | all 8 done (ms) | 8th / 1st TTFT | vs B=1 (same harts) | " \
           "vs B=1, 1 harts |" in text
    assert "| B=8, 2 harts | - | 1000 | 1.0x | - | 0.12x |" in text
    assert "| B=8, 1 harts | vector/1 | 2000 | 1.0x | 0.25x | 0.25x |" in text
    burst.plot_ttft([one, eight], tmp_path / "b.png")
    assert (tmp_path / "b.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(BenchError, match="failed with -112"):
        burst.parse_burst(_burst_output([1000] * 8, 5, fail=3), 5, 8, 1)
    with pytest.raises(BenchError, match="expected 8 request lines"):
        burst.parse_burst(_burst_output([1000] * 7, 5), 5, 8, 1)
    with pytest.raises(BenchError, match="did not all give the same 5 ids"):
        burst.parse_burst(_burst_output([1000] * 8, 5, odd=2), 5, 8, 1)


def test_burst_rounds_report_the_median_round():
    """With several rounds, the per-request table shows each configuration's median round
    and the ratios compare median spans, whatever order the rounds came in."""
    from pyaisvc.bench import burst

    def one(batch: int, ttft: list[int], rnd: int) -> burst.Burst:
        return replace(burst.parse_burst(_burst_output(ttft, 5), 5, batch, 1), round=rnd)

    b1 = [one(1, [s * (k + 1) for k in range(8)], r) for r, s in enumerate((1500, 1000, 1200))]
    b8 = [one(8, [s] * 8, r) for r, s in enumerate((3000, 5000, 4000))]
    bursts = [x for pair in zip(b1, b8, strict=True) for x in pair]  # as measured
    assert [b.span_ms for b in burst.median_bursts(bursts)] == [9600, 4000]
    text = burst.markdown(bursts, "pyaisvc bench --burst --repeat 3")
    assert "its median round of 3" in text
    assert "| B=1, 1 harts | - | 9600 (8000, 9600, 12000) | 8.0x | 1.00x |" in text
    assert "| B=8, 1 harts | - | 4000 (3000, 4000, 5000) | 1.0x | 0.42x |" in text
    # request 8 of each median round (ttft_us 9600 and 4000, plus 4 decode steps of 1 ms)
    assert "| 8 | 10 | 1 | 14 | 4 | 1 | 8 |" in text


def _bench(out: Path, *flags: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pyaisvc", "bench", "--model", "smol", "--no-progress",
           "--prompt-lens", "4", "--cpus", "1", "--out", str(out), *flags]  # flags win
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.mark.guest
def test_harts_sweep_alternates_between_its_guests(build, tmp_path: Path):
    """--cpus 1,2: both guests stay up and each run goes to one, then the other, so the
    samples alternate harts within every repeat; the ids are the reference's."""
    lc.smol_or_skip()
    proc = _bench(tmp_path, "--cpus", "1,2", "--repeat", "2", "--gen-lens", "2,3")
    data = json.loads((tmp_path / "results.json").read_text())
    order = [(s["repeat"], s["gen_len"], s["harts"]) for s in data["samples"]]
    assert order == [(r, g, h) for r in (0, 1) for g in (2, 3) for h in (1, 2)]
    want = lc.reference_ids(lc.smol_dir("v3"), [data["prompts"]["smol"]["4"]], 3)[0]
    assert all(s["ids"] == want[:s["gen_len"]] for s in data["samples"])
    assert "Speed-up (median with N harts / median with 1" in proc.stdout


@pytest.mark.guest
def test_burst_rounds_go_round_every_worker(build, tmp_path: Path):
    """--burst --repeat 2 with two batch sizes: both guests stay up, each gets a burst per
    round, and the report shows every span and the median round's requests, whose ids
    are the reference's."""
    lc.smol_or_skip()
    proc = _bench(tmp_path, "--mode", "service", "--burst", "--batch", "1,8", "--repeat", "2",
                  "--gen-lens", "3")
    text = (tmp_path / "burst.md").read_text()
    assert proc.stdout == text and "its median round of 2" in text
    assert proc.stderr.count("booting the guest") == 2
    assert proc.stderr.count("burst: 8 x (4 prompt + 3 generated ids)") == 4
    rows = [line for line in text.splitlines() if line.startswith("| B=")]
    assert [r.split(" |")[0] for r in rows] == ["| B=1, 1 harts", "| B=8, 1 harts"]
    for r in rows:  # "median (round, round)"
        done = r.split(" | ")[2]
        assert re.fullmatch(r"\d+ \(\d+, \d+\)", done), r
    table = [line for line in text.splitlines() if re.match(r"\| [1-8] \|", line)]
    assert len(table) == 8
    assert (tmp_path / "burst_ttft.png").read_bytes()[:4] == b"\x89PNG"
    data = json.loads((tmp_path / "burst.json").read_text())
    assert [(b["round"], b["batch"]) for b in data["bursts"]] == [(0, 1), (0, 8), (1, 1), (1, 8)]
    prompt = load_tokenizer("smol").encode(TEXT)[:4]
    want = lc.reference_ids(lc.smol_dir("v3"), [prompt], 3)[0]
    for b in data["bursts"]:
        assert [r["ids"] for r in b["requests"]] == [want] * 8, (b["round"], b["batch"])


def test_guests_up_together_must_fit_the_host():
    """A sweep's guests stay up at once: their RAM must fit what the host has free, or
    the benchmark stops before booting any, saying what to pass instead."""
    from pyaisvc.bench.runner import check_guests_fit, ram_mib

    assert (ram_mib("512M"), ram_mib("3G"), ram_mib("2048")) == (512, 3072, 2048)
    with pytest.raises(BenchError, match="give MiB or GiB"):
        ram_mib("3T")
    check_guests_fit(["3G", "3G"], avail=6144)
    check_guests_fit(["3G"], avail=1000)  # one guest: QEMU itself says if it cannot
    with pytest.raises(BenchError, match="2 guests up together need 6144 MiB of RAM and "
                                         "the host has 6000 MiB available: pass fewer"):
        check_guests_fit(["3G", "3G"], avail=6000)


def test_coldstart_table_takes_each_ways_medians(tmp_path: Path):
    from pyaisvc.bench import coldstart as cs

    starts = [cs.Start("cold boot", {"qemu": q, "model load": 600.0, "first token": 200.0})
              for q in (100.0, 300.0, 200.0)]
    starts += [cs.Start("clone from the pool", {"restore": r, "gateway": 10.0})
               for r in (20.0, 40.0, 30.0)]
    med = cs.median_phases(starts)
    assert med == {"cold boot": {"qemu": 200.0, "model load": 600.0, "first token": 200.0},
                   "clone from the pool": {"restore": 30.0, "gateway": 10.0}}
    mem = [{"rss": 3, "pss": 2, "private": 1, "shared": 2}]
    text = cs.markdown(starts, mem, "2 hart(s)")
    rows = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines()
            if line.startswith("| ")}
    # phases in PHASES' order, empty where a way has none; the total's median and range
    assert rows["cold boot"] == "| cold boot | 200 |  | 600 |  |  |  | 200 | 1000 | 900-1100 |"
    assert rows["clone from the pool"] == \
        "| clone from the pool |  |  |  |  | 30 | 10 |  | 40 | 30-50 |"
    assert "| 1 | 3 | 2 | 1 | 2 |" in text
    cs.plot(starts, tmp_path / "c.png")
    assert (tmp_path / "c.png").stat().st_size > 1000
