"""`pyaisvc bench --mode load`: the workload generator, the plan, the statistics, a real run.

The generator must give the same requests for the same seed, arrivals at the
rate asked and the class and tenant mix asked, within statistical bounds
computed here (a Poisson count's bound, a Kolmogorov-Smirnov distance, a
chi-square of the mix); bad plans must be refused with one line. The
statistics are checked against cases worked out by hand in the comments.
The guest test runs a short load (a few small requests; fifo, and fair too
when this checkout's serve has --sched) against the real guest through
`pyaisvc serve`: every column and plot is written, every reply is the
reference's greedy text, and a resumed run measures nothing again.
"""

from __future__ import annotations

import csv
import dataclasses
import importlib.util
import json
import math
from pathlib import Path

import pytest
from host import llmcases as lc
from host.buildlock import build_lock
from host.loopcluster import loopback_cluster

from pyaisvc.bench.load import stats as st
from pyaisvc.bench.load.client import Outcome
from pyaisvc.bench.load.plan import load_plan_file, seconds
from pyaisvc.bench.load.run import PolicyRun, journal_policy, open_journal
from pyaisvc.bench.load.server import serve_help
from pyaisvc.bench.load.workload import (
    DEFAULT_CLASSES,
    LoadPlan,
    RequestClass,
    Tenant,
    check_plan,
    open_loop,
    user_requests,
)
from pyaisvc.bench.matrix import TEXT as TEXT_OF_BENCH
from pyaisvc.bench.matrix import BenchError
from pyaisvc.cli import main
from pyaisvc.guest.llmguest import MODELS, prepare
from pyaisvc.model.tokenizer import load_tokenizer

P_FALSE = 1e-4  # a bound below fails by chance with this probability at most


def chi_square_p(seen: list[int], expected: list[float]) -> float:
    """Pearson's chi-square test's p-value for 1 or 2 degrees of freedom (closed forms:
    erfc(sqrt(x / 2)) and exp(-x / 2))."""
    x = sum((s - e) ** 2 / e for s, e in zip(seen, expected, strict=True))
    return {1: math.erfc(math.sqrt(x / 2)), 2: math.exp(-x / 2)}[len(seen) - 1]


def ks_exponential(xs: list[float], mean: float) -> float:
    """Kolmogorov-Smirnov distance of xs from the exponential distribution of that mean."""
    s, n = sorted(xs), len(xs)
    cdf = [1 - math.exp(-x / mean) for x in s]
    return max(max((k + 1) / n - c, c - k / n) for k, c in enumerate(cdf))


ROOT = Path(__file__).resolve().parent.parent
ENDS = {0, 2}  # <|endoftext|>, <|im_end|>: every reply ends at them
TEXT = list(range(1000, 1343))  # 343 ids, as the benchmark text has under SmolLM2's tokenizer
SEQ, MAXP = 256, 255


def _plan(**kw) -> LoadPlan:
    return dataclasses.replace(LoadPlan(), **{"rate": 2.0, "requests": 50, **kw})


# ---------------------------------------------------------------- the workload

def test_the_same_seed_gives_the_same_requests_and_another_seed_others() -> None:
    a = open_loop(_plan(seed=7), TEXT, SEQ)
    assert a == open_loop(_plan(seed=7), TEXT, SEQ)
    assert a != open_loop(_plan(seed=8), TEXT, SEQ)
    u = [r for _, r in zip(range(20), user_requests(_plan(users=3, rate=None), 2, TEXT, SEQ),
                           strict=False)]
    assert u == [r for _, r in zip(range(20), user_requests(_plan(users=3, rate=None), 2, TEXT,
                                                             SEQ), strict=False)]
    assert {r.tenant for r in u} == {"carol"}  # user 2 of 3 tenants


def test_every_request_fits_its_class_and_the_model() -> None:
    for r in open_loop(_plan(requests=400), TEXT, SEQ):
        c = next(c for c in DEFAULT_CLASSES if c.name == r.cls)
        assert c.prompt[0] <= len(r.prompt) <= c.prompt[1]
        assert c.new[0] <= r.max_tokens <= c.new[1]
        assert len(r.prompt) + r.max_tokens <= SEQ
        start = r.prompt[0] - TEXT[0]  # a window of exactly its length into the text
        assert list(r.prompt) == TEXT[start:start + len(r.prompt)]
    arrivals = [r.arrival for r in open_loop(_plan(requests=400), TEXT, SEQ)]
    assert arrivals == sorted(arrivals)


def test_arrivals_come_at_the_rate_asked() -> None:
    # Poisson at rate 2/s for 500 s: the count is Poisson(1000); |N - 1000| <= 5 sd
    # (sd = sqrt(1000) = 31.6) fails by chance with probability below 1e-6.
    n = len(open_loop(_plan(rate=2.0, requests=None, duration=500.0), TEXT, SEQ))
    assert abs(n - 1000) <= 5 * math.sqrt(1000), n
    # and the gaps are exponential of mean 0.5 s: Kolmogorov-Smirnov, P(D > c / sqrt(n))
    # is about 2 exp(-2 c^2), so c = sqrt(ln(2 / P_FALSE) / 2)
    reqs = open_loop(_plan(rate=2.0, requests=2000), TEXT, SEQ)
    gaps = [reqs[0].arrival] + [b.arrival - a.arrival for a, b in zip(reqs, reqs[1:],
                                                                       strict=False)]
    c = math.sqrt(math.log(2 / P_FALSE) / 2)
    assert ks_exponential(gaps, 0.5) <= c / math.sqrt(len(gaps))
    assert ks_exponential(gaps, 0.4) > c / math.sqrt(len(gaps))  # the test can tell 2.5/s


def test_the_class_and_tenant_mix_is_the_one_asked() -> None:
    plan = _plan(requests=3000, tenants=(Tenant("a", 3.0), Tenant("b", 1.0), Tenant("c", 1.0)))
    reqs = open_loop(plan, TEXT, SEQ)
    # classes 0.8 / 0.2 (1 degree of freedom), tenants 3:1:1 (2)
    seen = [sum(r.cls == c.name for r in reqs) for c in DEFAULT_CLASSES]
    assert chi_square_p(seen, [0.8 * 3000, 0.2 * 3000]) > P_FALSE, seen
    assert chi_square_p(seen, [0.7 * 3000, 0.3 * 3000]) < P_FALSE  # it can tell 0.7 / 0.3
    seen = [sum(r.tenant == t for r in reqs) for t in "abc"]
    assert chi_square_p(seen, [1800, 600, 600]) > P_FALSE, seen
    assert chi_square_p(seen, [1000, 1000, 1000]) < P_FALSE


def test_a_long_prompt_leaves_room_for_its_output() -> None:
    # prompts of 220-250 ids in 256 positions: at most 256 - n new ids, whatever the class says
    plan = _plan(classes=(RequestClass("big", (220, 250), (4, 64)),), requests=300)
    for r in open_loop(plan, TEXT, SEQ):
        assert 4 <= r.max_tokens <= SEQ - len(r.prompt)


@pytest.mark.parametrize("change, message", [
    ({"rate": None}, "give exactly one of --rate R"),
    ({"load": 0.8}, "not rate and load"),
    ({"requests": None}, "give exactly one of --duration S and --requests N"),
    ({"rate": -1.0}, "--rate must be above 0"),
    ({"policies": ("fifo", "lottery")}, "unknown policy 'lottery'"),
    ({"policies": ("fifo", "fifo")}, "names one twice"),
    ({"classes": (RequestClass("x", (5, 300), (1, 2)),)}, "takes at most 255"),
    ({"classes": (RequestClass("x", (250, 255), (8, 9)),)}, "leaves no room for 8 new ids"),
    ({"classes": (RequestClass("x", (9, 5), (1, 2)),)}, "1 <= lo <= hi"),
    ({"tenants": ()}, "no tenants"),
    ({"tenants": (Tenant("x", 1.0, -1),)}, "priority must be 0 or more"),
    ({"prefill_chunk": 0}, "--prefill-chunk must be 1..8 (AI_CHUNK_MAX), not 0"),
    ({"prefill_chunk": 32}, "--prefill-chunk must be 1..8 (AI_CHUNK_MAX), not 32"),
    ({"prefill_budget": 9}, "--prefill-budget must be 1..8 (AI_CHUNK_MAX), not 9"),
])
def test_a_bad_plan_is_refused_with_one_line(change, message) -> None:
    with pytest.raises(BenchError) as e:
        check_plan(_plan(**change), SEQ, MAXP, len(TEXT))
    assert message in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_a_toml_plan_is_read_and_its_bad_keys_named_with_their_line(tmp_path: Path) -> None:
    good = tmp_path / "good.toml"
    good.write_text('mode = "load"\npolicies = ["fifo", "fair"]\nrate = 0.5\nrequests = 9\n'
                    'slo_tbt = "150ms"\n[classes.small]\nprompt = [5, 9]\nnew = [2, 4]\n'
                    '[tenants.t1]\npriority = 2\n')
    assert load_plan_file(good) == {
        "mode": "load", "policies": ("fifo", "fair"), "rate": 0.5, "requests": 9,
        "slo_tbt": 0.15, "classes": (RequestClass("small", (5, 9), (2, 4), 1.0),),
        "tenants": (Tenant("t1", 1.0, 2),)}
    for text, message in [
        ('mode = "load"\nrat = 1\n', ":2: unknown key 'rat'"),
        ('mode = "load"\n\nusers = 0\n', ":3: users: give a whole number of users"),
        ('mode = "load"\nslo_ttft = "2 min"\n', ":2: slo_ttft: give a time above 0"),
        ('mode = "load"\n[classes.a]\nprompt = [5]\nnew = [1, 2]\n', ":2: [classes.a]: prompt"),
        ('mode = "load"\n[tenants.a]\ncolour = 1\n', ":2: [tenants.a]: give weight"),
        ('mode = "load"\npolicies = ["rr"]\n', ":2: policies: give a list of policies"),
    ]:
        bad = tmp_path / "bad.toml"
        bad.write_text(text)
        with pytest.raises(BenchError) as e:
            load_plan_file(bad)
        assert message in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_times_are_read_in_seconds() -> None:
    assert (seconds("2s", "x"), seconds("200ms", "x"), seconds(0.5, "x")) == (2.0, 0.2, 0.5)
    with pytest.raises(BenchError):
        seconds("0ms", "x")


def test_the_cli_refuses_a_bad_load_plan_in_one_line(capsys, tmp_path) -> None:
    plan = tmp_path / "p.toml"
    plan.write_text('mode = "load"\nrequests = 5\nrate = "fast"\n')
    assert main(["bench", "--config", str(plan)]) == 1  # mode = "load": a load plan
    err = capsys.readouterr().err.strip()
    assert f"{plan}:3: rate: give requests per second" in err and "\n" not in err, err
    assert main(["bench", "--mode", "load", "--rate", "1", "--users", "2"]) == 1
    err = capsys.readouterr().err.strip()
    assert "give exactly one of --rate R" in err and "\n" not in err, err
    assert main(["bench", "--mode", "load", "--url", "http://127.0.0.1:9",
                 "--policies", "fifo,fair"]) == 1
    assert "--url measures the one server it names" in capsys.readouterr().err


# ---------------------------------------------------------------- the statistics

def _out(tenant: str, sent: float, chunks: list[float], end: float, prompt: int = 10,
         tokens: int | None = None, status: str = "ok", cls: str = "mice") -> Outcome:
    return Outcome("fifo", 0, cls, tenant, 0, prompt, 8, None, sent, sent=sent,
                   first=chunks[0] if chunks else None, end=end, chunks=chunks,
                   completion_tokens=len(chunks) if tokens is None else tokens, status=status)


def test_percentiles_interpolate_between_ranks() -> None:
    xs = [10.0, 20.0, 30.0, 40.0]
    # p50: rank 1.5 -> 20 + 0.5 * 10 = 25; p99: rank 2.97 -> 30 + 0.97 * 10 = 39.7
    assert st.percentile(xs, 50) == 25.0
    assert st.percentile(xs, 99) == pytest.approx(39.7)
    assert st.percentile([5.0], 99) == 5.0 and st.percentile([], 50) is None


def test_jains_index() -> None:
    assert st.jain([1.0, 1.0, 1.0, 1.0]) == 1.0
    assert st.jain([1.0, 0.0, 0.0, 0.0]) == 0.25  # one got all: 1/n
    assert st.jain([1.0, 3.0]) == pytest.approx(16 / 20)  # (1+3)^2 / (2 * (1+9)) = 0.8


def test_ttft_gaps_stall_and_goodput() -> None:
    o = _out("a", 1.0, [1.5, 1.625, 2.0, 2.25], 2.5)  # binary fractions: exact sums
    assert st.ttft(o) == 0.5
    assert st.gaps(o) == [0.125, 0.375, 0.25]
    assert st.tpot(o) == 0.25  # (2.25 - 1.5) / 3
    assert st.e2e(o) == 1.5
    assert st.meets_slo(o, 0.5, 0.25)  # both exactly at their targets
    assert not st.meets_slo(o, 0.4, 0.25) and not st.meets_slo(o, 0.5, 0.24)
    assert not st.meets_slo(_out("a", 0, [0.1], 0.2, status="rejected"), 9, 9)
    # a class row: 2 of 3 requests meet TTFT <= 0.5 s and TPOT <= 0.25 s
    outs = [o, _out("b", 0.0, [0.25, 0.5], 0.75), _out("c", 0.0, [1.0, 1.25], 1.5)]
    row = st.class_row(outs, 2.5, 0.5, 0.25)
    assert row["goodput"] == round(2 / 3, 3)
    assert row["stall_max_ms"] == 375.0
    assert row["ttft_p50_ms"] == 500.0  # of 0.5, 0.25, 1.0
    assert row["tokens_per_s"] == round(8 / 2.5, 2)


def test_service_counts_the_prompt_at_the_first_token_and_the_rest_at_the_end() -> None:
    o = _out("a", 0.0, [1.0, 2.0], 3.0, prompt=7, tokens=5)
    assert st.service_events(o) == [(1.0, 7.0), (1.0, 1.0), (2.0, 1.0), (3.0, 3.0)]


def test_service_difference_between_backlogged_tenants() -> None:
    # a is backlogged over [0, 10] and served 5 tokens at t=1, 2 and 3 (15 in all); b is
    # backlogged over [2, 10] and served 5 at t=4. Both are backlogged only over [2, 10]:
    # D = S_a - S_b is 10 at t=2, 15 at t=3 and 10 at t=4, so the most one pulled ahead
    # of the other over a stretch is 15 - 10 = 5 (b's service before t=2 does not count).
    events = {"a": [(1.0, 5.0), (2.0, 5.0), (3.0, 5.0)], "b": [(4.0, 5.0)]}
    backlog = {"a": [(0.0, 10.0)], "b": [(2.0, 10.0)]}
    assert st.service_difference(events, backlog) == 5.0
    # never backlogged together: no difference counts
    assert st.service_difference(events, {"a": [(0.0, 1.5)], "b": [(2.0, 10.0)]}) == 0.0
    # three tenants: the worst pair (c gets 20 while a and b are all waiting)
    events["c"] = [(5.0, 20.0)]
    backlog["c"] = [(4.5, 6.0)]
    assert st.service_difference(events, backlog) == 20.0


def test_policy_rows_have_a_row_per_class_and_one_for_all() -> None:
    outs = [_out("a", 0.0, [0.5, 0.6], 0.7, prompt=10), _out("b", 0.0, [0.2], 0.3, prompt=10,
                                                            cls="elephants")]
    rows = st.policy_rows("fifo", outs, 2.0, 0.2)
    assert [r["class"] for r in rows] == ["mice", "elephants", "all"]
    # service: a 10 + 2 = 12, b 10 + 1 = 11; Jain = 23^2 / (2 * (144 + 121)) = 529 / 530
    assert rows[-1]["jain"] == round(529 / 530, 4)
    assert [r["service_tokens"] for r in st.tenant_rows("fifo", outs)] == [12, 11]
    xs, ys = st.tokens_over_time(outs, 0.5)
    assert (xs, ys) == ([0.0, 0.5], [2.0, 4.0])  # 1 token in [0, 0.5), 2 in [0.5, 1)


# ---------------------------------------------------------------- a real run

GUEST_PLAN = """mode = "load"
rate = 1.0
requests = 4
seed = 3
slo_ttft = "60s"
slo_tbt = "5s"
[classes.short]
prompt = [5, 12]
new = [4, 8]
weight = 1
[classes.longer]
prompt = [20, 30]
new = [6, 10]
weight = 1
[tenants.alice]
priority = 0
[tenants.bob]
priority = 1
"""
FILES = ("load.md", "load_summary.csv", "load_tenants.csv", "load_requests.csv", "load.json",
         "load_ttft_cdf.png", "load_tokens_per_s.png", "load_service.png", "journal.jsonl")
SUMMARY_COLUMNS = ("ttft_p50_ms", "ttft_p99_ms", "tbt_p50_ms", "tbt_p99_ms", "stall_max_ms",
                   "e2e_p50_ms", "e2e_p99_ms", "kernel_ttft_p50_ms", "kernel_ttft_p99_ms",
                   "kernel_queued_p50_ms", "tokens_per_s", "goodput", "goodput_per_s")


def _expected_text(prompt: list[int], n: int) -> tuple[str, int]:
    """The reference's greedy reply (and its length in ids) to prompt with max_tokens n."""
    ids = lc.until_stop(lc.reference_ids(lc.smol_dir("v3"), [prompt], n)[0], ENDS)
    tok = load_tokenizer("smol")
    return tok.decode([i for i in ids if i not in ENDS], skip_special_tokens=True), len(ids)


def _check_replies(out: Path, plan: Path) -> list[dict]:
    """Every policy got the plan's requests, and every reply is the reference's greedy text;
    the runs of load.json."""
    runs = json.loads((out / "load.json").read_text())["runs"]
    workload = open_loop(_plan(**{k: v for k, v in load_plan_file(plan).items()
                                  if k in ("rate", "requests", "seed", "classes", "tenants")}),
                         load_tokenizer("smol").encode(TEXT_OF_BENCH), SEQ)
    for run in runs:
        assert len(run["requests"]) == len(workload)
        for got, req in zip(run["requests"], workload, strict=True):
            text, n = _expected_text(list(req.prompt), req.max_tokens)
            assert (got["text"], got["completion_tokens"]) == (text, n), (run["policy"], got)
            assert (got["tenant"], got["priority"]) == (req.tenant, req.priority)
            assert got["kernel_ttft_us"] > 0 and got["kernel_total_us"] >= got["kernel_ttft_us"]
    return runs


def _smol_built() -> None:
    lc.smol_or_skip()
    with build_lock():  # the servers' own build step then finds everything up to date
        prepare(ROOT, MODELS["smol"])


@pytest.mark.guest
def test_a_short_load_on_the_guest_writes_every_column_and_plot(tmp_path, capsys) -> None:
    _smol_built()
    policies = "fifo,fair" if "--sched" in serve_help(ROOT) else "fifo"
    plan = tmp_path / "plan.toml"
    plan.write_text(GUEST_PLAN)
    out = tmp_path / "out"
    argv = ["bench", "--config", str(plan), "--policies", policies, "--out", str(out),
            "--no-progress"]
    assert main(argv) == 0, capsys.readouterr().err
    table = capsys.readouterr().out
    for f in FILES:
        assert (out / f).stat().st_size > 0, f
    for f in FILES[5:8]:
        assert (out / f).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f
    summary = list(csv.DictReader((out / "load_summary.csv").open()))
    assert [r["policy"] for r in summary if r["class"] == "all"] == policies.split(",")
    for r in summary:
        assert r["ok"] == r["requests"] != "0", r
        assert all(r[c] != "" for c in SUMMARY_COLUMNS), r
    assert all(r["jain"] != "" for r in summary if r["class"] == "all")
    _check_replies(out, plan)
    assert "| fifo | all | 4 | 4 |" in table
    # the journal holds every policy: a resumed run boots nothing and gives the same rows
    assert main([*argv, "--resume", str(out / "journal.jsonl")]) == 0
    assert "in the journal, not measured again" in capsys.readouterr().err
    assert list(csv.DictReader((out / "load_summary.csv").open())) == summary


@pytest.mark.guest
@pytest.mark.skipif(not importlib.util.find_spec("distributed"),
                    reason="dask.distributed is not installed: run `make deps`")
def test_a_policy_runs_as_a_task_on_a_dask_worker(tmp_path, capsys) -> None:
    _smol_built()
    plan = tmp_path / "plan.toml"
    plan.write_text(GUEST_PLAN.replace("requests = 4", "requests = 2"))
    out = tmp_path / "out"
    with loopback_cluster(tmp_path / "logs") as cluster:
        cluster.add_worker("w1")
        cluster.wait_for(1)
        rc = main(["bench", "--config", str(plan), "--policies", "fifo", "--out", str(out),
                   "--no-progress", "--cluster", cluster.address])
        assert rc == 0, capsys.readouterr().err
    runs = _check_replies(out, plan)
    assert [(r["policy"], r["host"]) for r in runs] == [("fifo", "w1")]
    assert "fifo: measured on w1" in capsys.readouterr().err


def test_the_example_plan_is_the_default_mix_under_every_policy() -> None:
    plan = load_plan_file(ROOT / "docs/load-example.toml")
    assert (plan["classes"], plan["tenants"]) == (DEFAULT_CLASSES, LoadPlan().tenants)
    assert plan["policies"] == ("fifo", "priority", "shortest", "fair")
    assert (plan["load"], plan["slo_ttft"], plan["slo_tbt"]) == (0.8, 2.0, 0.2)


def test_the_journal_gives_back_its_policies_and_refuses_another_plan(tmp_path) -> None:
    plan = _plan(policies=("fifo", "fair"), rate=None, load=0.5)
    path = tmp_path / "journal.jsonl"
    journal, result = open_journal(path, plan, resume=False)
    assert result.runs == []
    journal.append({"kind": "capacity", "capacity": 0.25})
    run = PolicyRun("fifo", [_out("a", 0.0, [0.5, 0.75], 1.0)], "serve", "t", "h")
    journal_policy(journal, run, 0.125)
    _, back = open_journal(path, plan, resume=True)
    assert (back.capacity, back.rate) == (0.25, 0.125)  # the rate: load x capacity
    assert back.runs == [run]
    with pytest.raises(BenchError, match="written for another plan"):
        open_journal(path, dataclasses.replace(plan, seed=2), resume=True)
    with pytest.raises(BenchError, match="already holds"):
        open_journal(path, plan, resume=False)


def test_load_runs_every_policy_at_load_times_the_capacity_measured_once(tmp_path,
                                                                        monkeypatch) -> None:
    # the HTTP side replaced: each "measurement" notes the rate of the requests it got
    from pyaisvc.bench.load import run as loadrun

    seen: list[tuple[str, int]] = []
    monkeypatch.setattr(loadrun, "measure", lambda setup, url, policy, plan, reqs, done:
                        seen.append((policy, len(reqs))) or [])
    capacity = []
    monkeypatch.setattr(loadrun, "measure_capacity",
                        lambda setup, url, plan, note: capacity.append(url) or 0.5)
    plan = _plan(rate=None, load=0.8, requests=None, duration=100.0, policies=("fifo",))
    setup = loadrun.Setup(ROOT, tmp_path, TEXT, SEQ, url="http://127.0.0.1:9")
    result = loadrun.run_load(setup, plan, tmp_path / "j.jsonl", False, print, print)
    assert capacity == ["http://127.0.0.1:9"] and result.capacity == 0.5
    assert result.rate == pytest.approx(0.4)
    # the workload was drawn at 0.4 requests/s: exactly the requests open_loop gives then
    assert seen == [("fifo", len(open_loop(dataclasses.replace(plan, rate=0.4), TEXT, SEQ)))]
