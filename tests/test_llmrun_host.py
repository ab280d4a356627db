"""The guest's LLM runtime built for the host (make llm-host) against pyaisvc.model.reference.

The same C files as the guest's llmrun_smol / llmrun_qwen, compiled natively
with tests/host/hostcompat.h standing in for user.h: the generated ids must
equal the numpy reference's exactly, on the real SmolLM2 (our format and the
course's) and on the tiny synthetic Qwen3.5 (both formats), and every limit and
malformed asset must be refused with its message. No QEMU needed.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from host import llmcases as lc
from host.buildlock import build_lock

from pyaisvc.guest.llmguest import timings
from pyaisvc.model.sampling import SamplingOptions, lp_micro

ROOT = lc.ROOT
GEN = 8


@pytest.fixture(scope="module")
def progs() -> dict[str, Path]:
    with build_lock():
        proc = subprocess.run(["make", "-s", "llm-host"], cwd=ROOT, capture_output=True,
                              text=True)
    if proc.returncode != 0:
        pytest.fail(f"make llm-host failed:\n{proc.stdout}{proc.stderr}", pytrace=False)
    return {m: ROOT / f"build/host/llmrun_{m}" for m in ("smol", "qwen")}


def run(prog: Path, args: list[str], stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(prog), *args], input=stdin, capture_output=True, text=True,
                          timeout=900)


def ids_lines(out: str) -> list[list[int]]:
    return [[int(v) for v in line.split()] for line in out.splitlines() if line.strip()]


def model_case(model: str, fmt: str) -> tuple[Path, list[list[int]]]:
    """The asset directory of model in format fmt (skips without models/SMOL) and its prompts."""
    if model == "smol":
        return lc.smol_or_skip(fmt), lc.smol_prompts()
    return lc.qwen_tiny_dir(fmt), lc.qwen_prompts()


@pytest.mark.parametrize(("model", "fmt", "quiet"), [
    pytest.param("smol", "v3", False, marks=pytest.mark.slow, id="smol-v3"),
    pytest.param("smol", "course", False, marks=pytest.mark.slow, id="smol-course"),
    pytest.param("qwen", "v3", True, id="qwen-v3"),
    pytest.param("qwen", "course", True, id="qwen-course")])
def test_matches_reference(progs: dict[str, Path], model: str, fmt: str, quiet: bool) -> None:
    """--stdin serves every prompt with the reference's ids: one timing line per request
    (its prompt and generated counts) until `quit`, or with --quiet nothing on stderr
    until the end of input."""
    assets, prompts = model_case(model, fmt)
    want = lc.reference_ids(assets, prompts, GEN)
    lines = lc.request_lines(prompts, GEN) + ("" if quiet else "quit\n")
    p = run(progs[model], ["--asset-dir", str(assets), *(["--quiet"] if quiet else []),
                           "--stdin"], lines)
    assert p.returncode == 0, p.stderr
    assert ids_lines(p.stdout) == want
    if quiet:
        assert p.stderr == ""
    else:
        assert [(t["prompt"], t["gen"]) for t in timings(p.stderr)] == \
            [(len(q), GEN) for q in prompts]


def batch_case(assets: Path, prompts: list[list[int]]) -> tuple[str, list]:
    """Request lines with predicts of different lengths (requests finish at different steps,
    so later ones join a running batch) and each one's reference ids."""
    predicts = [(GEN, 3, 5, 2, GEN + 3, 4)[i % 6] for i in range(len(prompts))]
    want = [lc.reference_ids(assets, [q], n)[0] for q, n in zip(prompts, predicts, strict=True)]
    lines = "".join(f"{n} {' '.join(map(str, q))}\n" for q, n in zip(prompts, predicts,
                                                                   strict=True))
    return lines, want


@pytest.mark.slow
@pytest.mark.parametrize("batch", [4, 8])
def test_smol_batch_matches_reference(progs: dict[str, Path], batch: int) -> None:
    """--batch runs several requests per forward pass (ai_daemon's llm_batch_step): each
    request's ids equal the reference's for its own prompt, whatever else is in the batch."""
    assets = lc.smol_or_skip("v3")
    lines, want = batch_case(assets, lc.smol_prompts())
    p = run(progs["smol"], ["--asset-dir", str(assets), "--stdin", "--batch", str(batch)],
            lines)
    assert p.returncode == 0, p.stderr
    assert ids_lines(p.stdout) == want
    assert [(t["prompt"], t["gen"]) for t in timings(p.stderr)] == \
        [(len(q), len(w)) for q, w in zip(lc.smol_prompts(), want, strict=True)]


@pytest.mark.parametrize("batch", [2, 3, 8])
def test_qwen_tiny_batch_matches_reference(progs: dict[str, Path], batch: int) -> None:
    """The same for the hybrid model: each request's DeltaNet state and KV cache are its own."""
    assets = lc.qwen_tiny_dir("v3")
    prompts = lc.qwen_prompts() + lc.qwen_prompts()[::-1]
    lines, want = batch_case(assets, prompts)
    p = run(progs["qwen"], ["--asset-dir", str(assets), "--quiet", "--stdin", "--batch",
                            str(batch)], lines)
    assert p.returncode == 0, p.stderr
    assert ids_lines(p.stdout) == want


def test_batch_profile(progs: dict[str, Path]) -> None:
    """--profile with --batch: the ids stay the reference's, and one pair of phase=batch
    lines splits the batch's time; tokens= counts the positions run: every prompt id and
    every generated id but each request's last (never fed back)."""
    assets = lc.qwen_tiny_dir("v3")
    prompts = lc.qwen_prompts()
    lines, want = batch_case(assets, prompts)
    p = run(progs["qwen"], ["--asset-dir", str(assets), "--quiet", "--profile", "--stdin",
                            "--batch", "3", "--threads", "2"], lines)
    assert p.returncode == 0, p.stderr
    assert ids_lines(p.stdout) == want
    parts = re.findall(r"^llmrun_qwen: profile phase=batch matmul_us=(\d+) attn_us=(\d+) "
                       r"other_us=(\d+) tokens=(\d+)$", p.stderr, re.M)
    threads = re.findall(r"^llmrun_qwen: profile phase=batch threads=2 steps=(\d+) "
                         r"busy_us=\d+,\d+ wait_us=\d+,\d+ sleeps=\d+,\d+ serial_us=\d+$",
                         p.stderr, re.M)
    assert len(parts) == 1 and len(threads) == 1, p.stderr
    positions = sum(len(q) + len(w) - 1 for q, w in zip(prompts, want, strict=True))
    assert int(parts[0][3]) == positions
    assert int(parts[0][0]) > 0 and int(threads[0]) > 0, p.stderr
    assert "profile phase=prefill" not in p.stderr and "timing" not in p.stderr


def test_batch_option_refused(progs: dict[str, Path]) -> None:
    assets = lc.qwen_tiny_dir("v3")
    for args, msg in ((["--batch", "9", "--stdin"], "not a number from 1 to 8"),
                      (["--batch", "2", "1", "2"], "--batch serves --stdin only")):
        p = run(progs["qwen"], ["--asset-dir", str(assets), *args], "")
        assert p.returncode != 0
        assert msg in p.stderr


def test_argv_and_prompt_file(progs: dict[str, Path], tmp_path: Path) -> None:
    """The ids from the command line and from --prompt-file give the same result."""
    assets = lc.qwen_tiny_dir("v3")
    prompt = lc.qwen_prompts()[2]
    want = lc.reference_ids(assets, [prompt], 5)[0]
    a = run(progs["qwen"], ["--asset-dir", str(assets), "--predict", "5", *map(str, prompt)])
    assert a.returncode == 0, a.stderr
    assert ids_lines(a.stdout) == [want]
    assert len(timings(a.stderr)) == 1
    f = tmp_path / "prompt.txt"
    f.write_text("\n".join(map(str, prompt)) + "\n")
    b = run(progs["qwen"], ["--asset-dir", str(assets), "--predict", "5", "--prompt-file",
                            str(f), "--profile"])
    assert ids_lines(b.stdout) == [want]
    assert "profile phase=prefill matmul_us=" in b.stderr
    assert "profile phase=decode matmul_us=" in b.stderr


def test_stdin_limits_and_bad_lines(progs: dict[str, Path]) -> None:
    """Each bad line gets its message; the good ones around them are served; quit ends it."""
    assets = lc.qwen_tiny_dir("v3")
    good = lc.FRANCE["qwen"]
    want = lc.reference_ids(assets, [good], 3)[0]
    cases = lc.limit_cases(248320, 256)
    lines = [f"3 {' '.join(map(str, good))}", *[c for c, _ in cases], "",
             f"3 {' '.join(map(str, good))}", "quit", "3 1 2 3"]
    p = run(progs["qwen"], ["--asset-dir", str(assets), "--quiet"], "\n".join(lines) + "\n")
    assert p.returncode == 0
    assert ids_lines(p.stdout) == [want, want]
    for _, msg in cases:
        assert msg in p.stderr
    assert all(line.startswith("llmrun_qwen: ") for line in p.stderr.splitlines())


def test_argv_limit_fails(progs: dict[str, Path]) -> None:
    assets = lc.qwen_tiny_dir("v3")
    p = run(progs["qwen"], ["--asset-dir", str(assets), "--predict", "300", "1", "2"])
    assert p.returncode == 1
    assert "exceeds runtime_seq_len 256" in p.stderr
    assert p.stdout == ""


@pytest.mark.parametrize("version", [2, 3])
@pytest.mark.parametrize("case", range(len(lc.malformed_cases(3))))
def test_malformed_assets(progs: dict[str, Path], tmp_path: Path, version: int,
                          case: int) -> None:
    name, mutate, msg = lc.malformed_cases(version)[case]
    good = lc.qwen_tiny_dir("v3" if version == 3 else "course")
    bad = lc.make_malformed(good, tmp_path / name, mutate)
    p = run(progs["qwen"], ["--asset-dir", str(bad), "1", "2"])
    assert p.returncode == 1
    assert msg in p.stderr, p.stderr
    assert p.stderr.startswith("llmrun_qwen: ")


def test_model_too_large_for_memory_says_what_to_do(progs: dict[str, Path]) -> None:
    """With 100 MB of address space the 144 MB SmolLM2 cannot load: one line naming the
    file that did not fit and the remedy, exit status 1."""
    import resource

    assets = lc.smol_or_skip("v3")

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (100 << 20, 100 << 20))

    p = subprocess.run([str(progs["smol"]), "--asset-dir", str(assets), "--predict", "1", "1"],
                       capture_output=True, text=True, timeout=300, preexec_fn=limit)
    assert p.returncode == 1
    assert p.stderr.startswith("llmrun_smol: L"), p.stderr
    assert p.stderr.endswith(".BIN: out of memory; boot the guest with more RAM "
                             "(e.g. make qemu-smol RAM=1G)\n"), p.stderr


def test_wrong_program_and_dir(progs: dict[str, Path], tmp_path: Path) -> None:
    p = run(progs["smol"], ["--asset-dir", str(lc.qwen_tiny_dir("v3")), "1"])
    assert p.returncode == 1
    assert "CFG.BIN: field model_kind: 1 (qwen), but llmrun_smol runs model_kind 0" in p.stderr
    p = run(progs["smol"], ["--asset-dir", str(tmp_path / "nowhere"), "1"])
    assert p.returncode == 1
    assert "cannot enter the asset directory" in p.stderr


def test_math_matches_refmath(progs: dict[str, Path]) -> None:
    """llm_exp / llm_log / llm_sigmoid / llm_softplus / llm_silu_mul / llm_softmax_exps
    equal pyaisvc.model.refmath bit for bit, and llm_order_key orders as the values do."""
    import numpy as np

    from pyaisvc.model import refmath

    rng = np.random.default_rng(5)
    x = np.concatenate([
        rng.uniform(-750.0, 750.0, 20000), rng.normal(0.0, 3.0, 20000),
        rng.uniform(-30.0, 30.0, 20000), 10.0 ** rng.uniform(-300, 300, 20000),
        np.array([0.0, -0.0, 1.0, -708.0, -708.5, 709.0, 710.0, 20.0, 20.0000001, 5e-324,
                  16.0, -16.0, np.nextafter(16.0, 0.0), -np.nextafter(16.0, 0.0), 32.0, -32.0,
                  1.0 / 256.0, 2.0 ** -40, -(2.0 ** -39), 2.0 ** -39 + 2.0 ** -60]),
    ])
    text = "".join(f"{v:016x}\n" for v in x.view(np.uint64))
    p = subprocess.run([str(ROOT / "build/host/llm_mathcheck")], input=text,
                       capture_output=True, text=True, check=True)
    got = np.array([[int(w, 16) for w in line.split()] for line in p.stdout.splitlines()],
                   dtype=np.uint64)
    pos = np.where(x > 0, x, 1.0)
    want = [refmath.exp(x), np.where(x > 0, refmath.log(pos), 0.0), refmath.sigmoid(x),
            refmath.softplus(x), refmath.silu(x),
            np.where(x <= 0, refmath.softmax_exp(np.minimum(x, 0.0)), 0.0)]
    for i, name in enumerate(["exp", "log", "sigmoid", "softplus", "silu", "softmax_exp"]):
        w = np.asarray(want[i], dtype=np.float64).view(np.uint64)
        bad = np.nonzero(got[:, i] != w)[0]
        assert bad.size == 0, f"{name} differs at x = {x[bad[:5]]}"
    # llm_order_key orders as the doubles do: sorted by value, the keys never fall, and two
    # neighbours share a key exactly when they are equal (0.0 and -0.0 are).
    order = np.argsort(x, kind="stable")
    keys = got[order, 6].view(np.int64)
    xs = x[order]
    assert np.all(np.diff(keys) >= 0)
    assert np.array_equal(np.diff(keys) == 0, np.diff(xs) == 0)


def test_batched_matmul_equals_the_integer_sums(progs: dict[str, Path]) -> None:
    """llm_matmul_rows for 1-8 positions (the batched kernel takes two rows at a time and
    packs three positions in a word) and row ranges of odd length give the sums written out
    plainly in tests/host/mathcheck.c, for random values and for the largest group sums an
    int8 file can give (weights of -128 and 127, activations of +-127); and the activations
    quantised in two pieces of groups, as the thread pool splits them, are the same bytes as
    in one pass."""
    p = subprocess.run([str(ROOT / "build/host/llm_mathcheck"), "matmul"], capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    # extreme, v3, count, range, row
    assert p.stdout == f"matmul: {2 * 2 * sum(range(1, 9)) * 5 * 37} ok\n"


@pytest.mark.parametrize("threads", [1, 3])
def test_head_takes_the_first_of_tied_maxima(progs: dict[str, Path], tmp_path: Path,
                                             threads: int) -> None:
    """Rows 0 and 7 of the tiny Qwen's EMB (also its output head) copied from the winning
    row: three logits tie at the maximum, and llmrun_qwen picks id 0, as the reference does,
    whichever thread's chunks are merged first."""
    import dataclasses
    import shutil

    from pyaisvc.model.assets import load_assets, write_header_files
    from pyaisvc.model.reference import Reference

    good = lc.qwen_tiny_dir("v3")
    prompt = [1, 2, 3, 4]
    a = load_assets(good)
    win = Reference(a).generate(prompt, 1)[0]
    assert win not in (0, 7)
    emb = dataclasses.replace(a.emb, scales=a.emb.scales.copy(), mult=a.emb.mult.copy(),
                              q=a.emb.q.copy())
    for r in (0, 7):
        emb.scales[r], emb.mult[r], emb.q[r] = emb.scales[win], emb.mult[win], emb.q[win]
    tied = tmp_path / "QWEN"
    shutil.copytree(good, tied)
    write_header_files(tied, dataclasses.replace(a, emb=emb), write_lty=True)
    assert Reference(load_assets(tied)).generate(prompt, 1) == [0]
    p = run(progs["qwen"], ["--asset-dir", str(tied), "--threads", str(threads),
                            "--predict", "1", *map(str, prompt)])
    assert p.returncode == 0, p.stderr
    assert ids_lines(p.stdout) == [[0]]


def test_hot_kernels_share_a_page() -> None:
    """make llm-check-hot: each hot section of the guest programs (and vprobe's) lies in one
    4 KiB page."""
    with build_lock():
        p = subprocess.run(["make", "-s", "llm-check-hot"], cwd=ROOT, capture_output=True,
                           text=True)
    if "no RISC-V cross compiler" in p.stdout + p.stderr:
        pytest.skip("no RISC-V cross compiler")
    assert p.returncode == 0, p.stdout + p.stderr
    for prog in ("_llmrun_smol", "_llmrun_qwen"):
        for sec in (".text.hot", ".text.hot.attn", ".text.hot.batch", ".text.hot.rvv",
                    ".text.hot.rvv4", ".text.hot.vec"):
            assert f"{prog}: {sec}: " in p.stdout, p.stdout
    assert "_vprobe: .text.hot: " in p.stdout, p.stdout


@pytest.mark.parametrize("args, first", [
    (["--bogus", "1", "2"], "llmrun_smol: unknown option --bogus"),
    (["--predict"], "llmrun_smol: missing the value of --predict"),
    (["--asset-dir"], "llmrun_smol: missing the value of --asset-dir"),
])
def test_bad_option_is_named(progs: dict[str, Path], args: list[str], first: str) -> None:
    p = run(progs["smol"], args)
    assert p.returncode == 2
    lines = p.stderr.splitlines()
    assert lines[0] == first
    assert lines[1].startswith("usage: llmrun_smol [--asset-dir DIR]")
    assert p.stdout == ""


def test_help_lists_every_option(progs: dict[str, Path]) -> None:
    """--help, as llama-cli's: the usage line and a line per option on stdout, exit 0,
    before any model is loaded (the asset directory need not exist); every option of
    the usage line is explained."""
    p = run(progs["qwen"], ["--asset-dir", "/nonexistent", "--help", "1", "2"])
    assert p.returncode == 0 and p.stderr == "", p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith("usage: llmrun_qwen [--asset-dir DIR]")
    options = set(re.findall(r"--[a-z-]+", lines[0]))
    explained = set(re.findall(r"--[a-z-]+", "\n".join(lines[1:])))
    assert options and options <= explained, options - explained
    assert "(default /AI/QWEN)" in p.stdout


SAMPLING = lc.SAMPLING_CASES


@pytest.mark.slow
def test_sampled_ids_match_reference(progs: dict[str, Path]) -> None:
    assets = lc.smol_or_skip("v3")
    prompt = lc.FRANCE["smol"]
    for case in SAMPLING:
        want = lc.sampled_reference(assets, prompt, GEN, case)
        p = run(progs["smol"], ["--asset-dir", str(assets), "--predict", str(GEN),
                                *lc.sampling_args(case), *map(str, prompt)])
        assert p.returncode == 0, p.stderr
        assert ids_lines(p.stdout) == [want], case
    # Different seeds give different continuations; greedy is unchanged.
    outs = {tuple(lc.sampled_reference(assets, prompt, GEN, ("1", 0, "1", s))) for s in range(4)}
    assert len(outs) > 1
    greedy = run(progs["smol"], ["--asset-dir", str(assets), "--predict", str(GEN),
                                 *map(str, prompt)])
    assert ids_lines(greedy.stdout) == lc.reference_ids(assets, [prompt], GEN)


def test_stop_id_ends_the_request(progs: dict[str, Path]) -> None:
    assets = lc.qwen_tiny_dir("v3")
    prompt = lc.qwen_prompts()[0]
    want = lc.reference_ids(assets, [prompt], GEN)[0]
    stop = want[2]
    cut = want[:want.index(stop) + 1]
    for extra in ([], ["--stream"]):
        p = run(progs["qwen"], ["--asset-dir", str(assets), "--predict", str(GEN),
                                "--stop", "1", "--stop", str(stop), *extra, *map(str, prompt)])
        assert p.returncode == 0, p.stderr
        assert p.stdout == " ".join(map(str, cut)) + "\n"
        assert [t["gen"] for t in timings(p.stderr)] == [len(cut)]
    p = run(progs["qwen"], ["--asset-dir", str(assets), "--stop", "999999999", "1"])
    assert p.returncode == 1
    assert "--stop: id 999999999 is not below vocab_size" in p.stderr


@pytest.mark.parametrize("args, message", [
    (["--temp", "1e-3"], "--temp: '1e-3' is not a decimal such as 0.8"),
    (["--temp", "0.1234567890123456"], "--temp: '0.1234567890123456' is not a decimal"),
    (["--top-p", "0"], "--top-p: '0' is not a decimal above 0 and at most 1"),
    (["--top-p", "1.5"], "--top-p: '1.5' is not a decimal above 0 and at most 1"),
    (["--seed", "18446744073709551616"], "--seed: '18446744073709551616' is not a number"),
    (["--top-k", "-1"], "--top-k: '-1' is not a number"),
])
def test_bad_sampling_values(progs: dict[str, Path], args: list[str], message: str) -> None:
    p = run(progs["smol"], [*args, "1"])
    assert p.returncode == 2
    assert p.stderr.startswith(f"llmrun_smol: {message}")


def test_sampler_parse_decimal_matches_guest_rule() -> None:
    from pyaisvc.model.sampling import SamplingError, parse_decimal

    assert parse_decimal("0.8", "t") == 0.8
    assert parse_decimal("007.50", "t") == 7.5
    for bad in ("1e-3", ".5", "5.", "-1", "0.1234567890123456", ""):
        with pytest.raises(SamplingError):
            parse_decimal(bad, "t")


@pytest.mark.parametrize("threads", [2, 3, 8])
def test_thread_pool_runs_every_item_once(threads: int) -> None:
    # More threads than host cores, so the host stops them at any instruction;
    # steps of 1-64 items alternate. Before the claim word carried the chunk
    # count, a thread could claim a chunk of a step that did not exist yet: an
    # item ran twice or never, or the step never ended (2 threads: 4 runs in 6).
    with build_lock():
        proc = subprocess.run(["make", "-s", "build/host/llm_poolstress"], cwd=ROOT,
                              capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    p = subprocess.run([str(ROOT / "build/host/llm_poolstress"), str(threads), "300000"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == f"ok 300000 steps, {threads} threads"


# Penalty and bias cases as llmrun takes them (presence, frequency, logit-bias pairs,
# temp or None for greedy): each changes the ids of the France prompt.
ADJUST_CASES = [
    ("0.5", "1.5", ((198, "-100"),), None),          # greedy: no newline, no repeats
    ("0", "0", ((260, "3.25"), (30, "-0.000001")), None),  # greedy, biases only
    ("-0.8", "0.3", ((4528, "2"),), "0.9"),          # sampled, negative presence
    ("1", "-2", (), "1.2"),
]

LOGPROB_LINE = re.compile(r"^llmrun_smol: logprob i=(\d+) id=(\d+) lp=(-?\d+\.\d{6}) top=(.*)$")


def adjust_options(case: tuple) -> SamplingOptions:
    pres, freq, bias, temp = case
    return SamplingOptions(temp, 40, "0.95", 5, pres, freq, bias)


@pytest.mark.slow
def test_penalties_and_bias_match_reference(progs: dict[str, Path]) -> None:
    assets = lc.smol_or_skip("v3")
    prompt = lc.FRANCE["smol"]
    ref = lc.reference_model(assets)
    greedy = lc.reference_ids(assets, [prompt], GEN)[0]
    seen = set()
    for case in ADJUST_CASES:
        opts = adjust_options(case)
        want = ref.generate(prompt, GEN, sampler=opts.sampler())
        p = run(progs["smol"], ["--asset-dir", str(assets), "--predict", str(GEN),
                                *opts.guest_args(), *map(str, prompt)])
        assert p.returncode == 0, p.stderr
        assert ids_lines(p.stdout) == [want], case
        seen.add(tuple(want))
    assert tuple(greedy) not in seen and len(seen) == len(ADJUST_CASES)
    assert 198 not in ids_lines(run(progs["smol"], [
        "--asset-dir", str(assets), "--predict", str(GEN), *adjust_options(
            ADJUST_CASES[0]).guest_args(), *map(str, prompt)]).stdout)[0]


def logprob_lines(err: str) -> list[tuple[int, int, int, list[tuple[int, int]]]]:
    """(i, id, lp in millionths, [(id, lp), ...]) of each --logprobs line."""
    out = []
    for line in err.splitlines():
        m = LOGPROB_LINE.match(line)
        if m:
            top = [(int(a), round(float(b) * 1e6)) for a, b in
                   (pair.split(":") for pair in m.group(4).split(",") if pair)]
            out.append((int(m.group(1)), int(m.group(2)), round(float(m.group(3)) * 1e6), top))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("n, temp", [(5, None), (0, "0.8"), (3, None)])
def test_logprobs_match_reference(progs: dict[str, Path], n: int, temp: str | None) -> None:
    import numpy as np

    assets = lc.smol_or_skip("v3")
    prompt = lc.FRANCE["smol"]
    opts = SamplingOptions(temp, 40, "0.95", 3, "0.4" if n == 3 else "0", "0",
                           ((198, "-5"),) if n == 3 else (), n)
    sampler = opts.sampler()
    ref = lc.reference_model(assets)
    want = ref.generate(prompt, GEN, sampler=sampler)
    p = run(progs["smol"], ["--asset-dir", str(assets), "--predict", str(GEN),
                            *opts.guest_args(), *map(str, prompt)])
    assert p.returncode == 0, p.stderr
    assert ids_lines(p.stdout) == [want]
    got = logprob_lines(p.stderr)
    assert [g[:2] for g in got] == list(enumerate(want))
    # The numpy sampler's records: the same millionths, exactly.
    assert [(g[2], g[3]) for g in got] == [
        (lp_micro(r.lp), [(t, lp_micro(v)) for t, v in r.top]) for r in sampler.records]
    # An independent float64 log-softmax (numpy's exp and log) of the teacher-forced logits:
    # within 1e-6 (the printed millionth, plus the two exps' and logs' differences).
    logits = ref.logits_all(prompt + want)[len(prompt) - 1:-1]
    for (_, tok, lp, top), row in zip(got, logits, strict=True):
        ls = row - row.max() - np.log(np.exp(row - row.max()).sum())
        assert abs(lp / 1e6 - ls[tok]) <= 1e-6
        assert [t for t, _ in top] == list(np.argsort(-ls, kind="stable")[:n])
        assert all(abs(v / 1e6 - ls[t]) <= 1e-6 for t, v in top)
        assert all(v == lp for t, v in top if t == tok)  # the chosen id's entry is its value
        assert all(a[1] >= b[1] for a, b in zip(top, top[1:], strict=False))


@pytest.mark.parametrize("args, message", [
    (["--presence-penalty", "2.5"], "--presence-penalty: '2.5' is not a decimal from -2 to 2"),
    (["--frequency-penalty", "0.1234567"], "--frequency-penalty: '0.1234567' is not a decimal"),
    (["--logit-bias", "5:101"], "--logit-bias: '5:101' is not ID:BIAS"),
    (["--logit-bias", "5"], "--logit-bias: '5' is not ID:BIAS"),
    (["--logprobs", "6"], "--logprobs: '6' is not a number from 0 to 5"),
])
def test_bad_adjust_values(progs: dict[str, Path], args: list[str], message: str) -> None:
    p = run(progs["smol"], [*args, "1"])
    assert p.returncode == 2
    assert p.stderr.startswith(f"llmrun_smol: {message}")


def test_bias_id_checked_and_logprobs_not_batched(progs: dict[str, Path]) -> None:
    assets = lc.qwen_tiny_dir("v3")
    p = run(progs["qwen"], ["--asset-dir", str(assets), "--logit-bias", "999999:1", "1"])
    assert p.returncode == 1
    assert "--logit-bias: id 999999 is not below vocab_size" in p.stderr
    p = run(progs["qwen"], ["--asset-dir", str(assets), "--stdin", "--batch", "2",
                            "--logprobs", "1"], "2 1\n")
    assert p.returncode == 2 and "without --stream or --logprobs" in p.stderr
