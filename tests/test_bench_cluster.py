"""`pyaisvc bench --cluster`: a sweep's cells as tasks on a real Dask cluster on loopback.

Each test starts its own `dask scheduler` and `dask worker` processes (one
guest resource each, bound to 127.0.0.1) and stops them, workers first. The
plan is the smallest the bench tests use: the tiny synthetic Qwen3.5, cold,
prompt 4,8 x gen 2,3, one repeat: four cells of one short guest run each.

- Two workers measure the four cells: the rows are the ones a local run of
  the same plan gives (same columns, cells, harts, repeats, and the numpy
  reference's ids), each naming the worker that measured it.
- A worker killed (with its QEMU) while it measures a cell: the sweep
  completes and every cell is in the output exactly once.
- Ctrl-C (SIGINT to the CLI) after the first cell, then --resume: every cell
  is in the journal exactly once, the first ones untouched.
- A worker whose checkout is at another commit (a git worktree with one more
  commit): the sweep is refused before any cell runs, naming the worker and
  both commits.

- A cell that fails in the guest every time: tried twice, reported with
  its console's tail, and the other cells still run.
- run_cell itself refuses another commit or another image before booting.

On the host alone: the journal gives back what it holds (not a failed cell,
not a line cut short) and refuses another plan; tables and speed-ups keep
the rows of different hosts apart; the plan's cluster key and --resume
reach the sweep.
"""

from __future__ import annotations

import csv
import dataclasses
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from host import llmcases as lc
from host.loopcluster import ROOT, LoopbackCluster, descendants, loopback_cluster, stop

from pyaisvc.bench import report
from pyaisvc.bench.journal import Journal
from pyaisvc.bench.matrix import BenchError, Cell
from pyaisvc.bench.runner import Machine
from pyaisvc.bench.sample import Sample

PROMPTS, GENS = [4, 8], [2, 3]
CELLS = {("qwen", "cold", p, g) for p in PROMPTS for g in GENS}
WAIT_S = 300  # the longest any one step may take on a loaded 2-core host

pytestmark = pytest.mark.skipif(not importlib.util.find_spec("distributed"),
                                reason="dask.distributed is not installed: run `make deps`")


# ---------------------------------------------------------------- host only

PLAN = {"commit": "c0ffee", "models": ["qwen"], "cpus": [1, 2]}


def _sample(host: str, harts: int, ttft: int, p: int = 4) -> Sample:
    return Sample("qwen", "cold", p, 2, 0, 100, 120, ttft, 50, 0.5, (7, 9), harts=harts,
                  host=host, cpu="RISC-V hart")


def test_journal_resumes_what_it_holds_and_only_its_own_plan(tmp_path):
    path = tmp_path / "journal.jsonl"
    j = Journal.create(path, PLAN)
    done_cell, failed_cell = Cell("qwen", "cold", 4, 2), Cell("qwen", "cold", 8, 2)
    samples = [_sample("w1", 1, 900), _sample("w1", 2, 500)]
    j.cell(done_cell, "w1", "RISC-V hart", samples, Machine("QEMU 10", 1, 512, 1.5))
    j.failed(failed_cell, "worker w2: boom", "$ llmrun_qwen\npanic")
    with path.open("a") as f:
        f.write('{"kind": "cell", "cell": ["qwen", "cold", 8')  # a crash mid-line
    with pytest.raises(BenchError, match="already holds a sweep's journal"):
        Journal.create(path, PLAN)
    _, done = Journal.resume(path, PLAN)
    assert done.cells == {done_cell}  # the failed cell and the cut line are not done
    assert done.samples == samples and done.workers == {"w1": "RISC-V hart"}
    assert done.machines == {"qwen": Machine("QEMU 10", 1, 512, 1.5)}
    assert path.read_text().endswith("boom\", \"tail\": \"$ llmrun_qwen\\npanic\"}\n")
    with pytest.raises(BenchError, match=r"another plan or commit \(cpus: journal \[1, 2\], "
                                         r"now \[1\]\)"):
        Journal.resume(path, {**PLAN, "cpus": [1]})
    path.write_text('{"kind": "cell"}\n')
    with pytest.raises(BenchError, match="not a sweep's journal"):
        Journal.resume(path, PLAN)


def test_tables_compare_only_rows_of_one_host():
    """w1 measured 1 and 2 harts, w2 only 1 hart (slower CPU): w1's ratio is its own
    (600/1000), not against the two hosts' pooled median, and w2 gets none."""
    samples = [_sample("w1", 1, 1000), _sample("w1", 2, 600), _sample("w2", 1, 2000)]
    cells = report.summarize(samples)
    assert [(c.host, c.harts, c.stats["ttft_us"].median) for c in cells] == [
        ("w1", 1, 1000), ("w1", 2, 600), ("w2", 1, 2000)]
    lines = report.speedup_table(cells, [1, 2])
    assert lines[0].startswith("Speed-up (median with N harts / median with 1 on the same host")
    assert lines[-2:] == ["| 4 | 2 | cold | 2 | w1 | 0.60 | 1.00 |", ""]


def test_the_plan_cluster_key_and_the_flags_reach_the_sweep(monkeypatch, capsys, tmp_path):
    """`cluster = "..."` in a --config plan sends the sweep to run_cluster with the out
    directory's journal; --resume alone, or --cluster with --burst, is refused."""
    import pyaisvc.bench.cluster as bench_cluster
    from pyaisvc.cli import main

    seen = {}

    def fake_run_cluster(cfg, address, journal, resume, progress=None, note=None):
        seen.update(address=address, journal=journal, resume=resume, cpus=cfg.cpus)
        raise BenchError("stopped before measuring")

    monkeypatch.setattr(bench_cluster, "run_cluster", fake_run_cluster)
    plan = tmp_path / "plan.toml"
    plan.write_text('cluster = "tcp://127.0.0.1:9"\ncpus = [1, 2]\n')
    assert main(["bench", "--config", str(plan), "--out", str(tmp_path / "o")]) == 1
    assert "stopped before measuring" in capsys.readouterr().err
    assert seen == {"address": "tcp://127.0.0.1:9", "journal": tmp_path / "o/journal.jsonl",
                    "resume": False, "cpus": [1, 2]}
    journal = tmp_path / "old/journal.jsonl"
    assert main(["bench", "--config", str(plan), "--resume", str(journal)]) == 1
    assert (seen["journal"], seen["resume"]) == (journal, True)  # --out: its directory
    assert main(["bench", "--resume", str(journal)]) == 1
    assert "--resume continues a sweep on a cluster: pass --cluster" in capsys.readouterr().err
    assert main(["bench", "--mode", "service", "--burst", "--cluster", "tcp://h:1"]) == 1
    assert "--burst runs on this machine only" in capsys.readouterr().err


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LoopbackCluster]:
    with loopback_cluster(tmp_path / "logs") as c:
        yield c


@pytest.fixture(scope="module")
def qwen(build) -> Path:
    return lc.qwen_tiny_dir("v3")


def _argv(qwen: Path, out: Path, *flags: str) -> list[str]:
    return [sys.executable, "-m", "pyaisvc", "bench", "--model", "qwen", "--assets-qwen",
            str(qwen), "--ram", "512M", "--prompt-lens", ",".join(map(str, PROMPTS)),
            "--gen-lens", ",".join(map(str, GENS)), "--repeat", "1", "--no-progress",
            "--out", str(out), *flags]


def _bench(qwen: Path, out: Path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run(_argv(qwen, out, *flags), cwd=ROOT, capture_output=True, text=True,
                          timeout=WAIT_S * 2)


def _rows(out: Path) -> list[dict[str, str]]:
    return list(csv.DictReader((out / "results.csv").open()))


def _cell(r: dict[str, str]) -> tuple[str, str, int, int]:
    return (r["model"], r["mode"], int(r["prompt_len"]), int(r["gen_len"]))


def _journal_cells(journal: Path) -> list[tuple]:
    lines = [json.loads(x) for x in journal.read_text().splitlines() if x.strip()]
    assert lines[0]["kind"] == "plan"
    return [tuple(x["cell"]) for x in lines[1:] if x["kind"] == "cell"]


def _popen(qwen: Path, out: Path, *flags: str) -> subprocess.Popen:
    return subprocess.Popen(_argv(qwen, out, *flags), cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


@pytest.mark.guest
def test_two_workers_give_the_rows_of_a_local_run(cluster, qwen, tmp_path):
    cluster.add_worker("w1")
    cluster.add_worker("w2")
    cluster.wait_for(2)
    local = _bench(qwen, tmp_path / "local")
    assert local.returncode == 0, local.stderr[-3000:]
    on_cluster = _bench(qwen, tmp_path / "cluster", "--cluster", cluster.address)
    assert on_cluster.returncode == 0, on_cluster.stderr[-3000:]

    header = (tmp_path / "local/results.csv").open().readline()
    assert header == (tmp_path / "cluster/results.csv").open().readline()
    mine, theirs = _rows(tmp_path / "local"), _rows(tmp_path / "cluster")
    key = ("model", "mode", "prompt_len", "gen_len", "harts", "repeat", "ids")
    assert [[r[k] for k in key] for r in theirs] == [[r[k] for k in key] for r in mine]
    assert {_cell(r) for r in theirs} == CELLS and len(theirs) == len(CELLS)
    # the ids are the numpy reference's greedy continuation of each prompt
    data = json.loads((tmp_path / "cluster/results.json").read_text())
    prompts = [data["prompts"]["qwen"][str(p)] for p in PROMPTS]
    want = lc.reference_ids(qwen, prompts, max(GENS))
    for r in theirs:
        expect = want[PROMPTS.index(int(r["prompt_len"]))][:int(r["gen_len"])]
        assert [int(i) for i in r["ids"].split()] == expect, r
    assert {r["host"] for r in mine} == {socket.gethostname()}
    assert {r["host"] for r in theirs} <= {"w1", "w2"}
    assert all(r["cpu"] and r["cpu"] == mine[0]["cpu"] for r in theirs)  # one machine here
    assert "Measured on the Dask cluster at" in (tmp_path / "cluster/results.md").read_text()
    assert sorted(_journal_cells(tmp_path / "cluster/journal.jsonl")) == sorted(CELLS)


@pytest.mark.guest
def test_a_worker_killed_mid_cell_loses_nothing(cluster, qwen, tmp_path):
    cluster.add_worker("w1")
    cluster.add_worker("w2")
    cluster.wait_for(2)
    proc = _popen(qwen, tmp_path, "--cluster", cluster.address)
    try:
        victim, deadline = None, time.monotonic() + WAIT_S
        while victim is None:  # a worker with a cell running and its guest up
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            for name, keys in cluster.running_on().items():
                if any(k.startswith("bench-") for k in keys) and any(
                        "qemu" in Path(f"/proc/{p}/comm").read_text()
                        for p in descendants(cluster.workers[name].pid)
                        if Path(f"/proc/{p}/comm").exists()):
                    victim = name
            time.sleep(0.2)
        stop(cluster.workers[victim], signal.SIGKILL)
        out, err = proc.communicate(timeout=WAIT_S * 2)
    finally:
        if proc.poll() is None:
            stop(proc)
    assert proc.returncode == 0, err[-3000:]
    rows = _rows(tmp_path)
    assert sorted(_cell(r) for r in rows) == sorted(CELLS)  # each exactly once
    assert sorted(_journal_cells(tmp_path / "journal.jsonl")) == sorted(CELLS)


@pytest.mark.guest
def test_ctrl_c_then_resume_runs_only_the_rest(cluster, qwen, tmp_path):
    cluster.add_worker("w1")
    cluster.add_worker("w2")
    cluster.wait_for(2)
    journal = tmp_path / "journal.jsonl"
    proc = _popen(qwen, tmp_path, "--cluster", cluster.address)
    try:
        deadline = time.monotonic() + WAIT_S
        while not (journal.exists() and _journal_cells(journal)):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.1)
        os.kill(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            stop(proc)
    assert proc.returncode == 1 and f"--resume {journal}" in err, err[-3000:]
    first = _journal_cells(journal)
    assert 1 <= len(first) < len(CELLS), first

    again = _bench(qwen, tmp_path, "--cluster", cluster.address, "--resume", str(journal))
    assert again.returncode == 0, again.stderr[-3000:]
    assert (f"{len(first)} of {len(CELLS)} cells done, {len(CELLS) - len(first)} to run"
            in again.stderr)
    cells = _journal_cells(journal)
    assert cells[:len(first)] == first and sorted(cells) == sorted(CELLS)
    assert sorted(_cell(r) for r in _rows(tmp_path)) == sorted(CELLS)


@pytest.mark.guest
def test_a_cell_that_fails_twice_is_reported_with_its_console(cluster, qwen, tmp_path):
    """48 MiB of guest RAM boots but cannot hold the model's KV cache: every cell fails,
    each is tried twice (the workers' logs), reported with its console's tail, and the
    sweep goes on to the next instead of stopping at the first."""
    cluster.add_worker("w1")
    cluster.add_worker("w2")
    cluster.wait_for(2)
    proc = _bench(qwen, tmp_path, "--cluster", cluster.address, "--ram", "48M")
    assert proc.returncode == 1
    for p in PROMPTS:
        for g in GENS:
            assert f"bench: qwen cold prompt={p} gen={g} failed twice: worker w" in proc.stderr
    tails = [line for line in proc.stderr.splitlines()
             if line.startswith("  ") and "llmrun_qwen --predict" in line]
    assert len(tails) == len(CELLS), proc.stderr[-3000:]
    assert "out of memory for the KV cache" in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith(
        f"pyaisvc bench: {len(CELLS)} cell(s) failed twice (above); {tmp_path}/journal.jsonl")
    lines = [json.loads(x) for x in (tmp_path / "journal.jsonl").read_text().splitlines()]
    assert sorted(tuple(x["cell"]) for x in lines if x["kind"] == "failed") == sorted(CELLS)
    tries = sum((tmp_path / f"logs/{w}.log").read_text().count("Compute Failed")
                for w in ("w1", "w2"))
    assert tries == 2 * len(CELLS)


@pytest.mark.guest
def test_a_cell_checks_commit_and_image_before_it_boots(qwen):
    """run_cell, as a worker runs it: another commit, or an image whose content hash is
    not the client's, is refused naming this machine (outside a worker: its host name)
    and both sides, before any guest boots."""
    from pyaisvc.bench.cluster import CellTask, run_cell
    from pyaisvc.cluster.workers import WrongCode, git_commit

    head = git_commit(ROOT)
    cell = Cell("qwen", "cold", 4, 2)
    task = CellTask(cell, (), "f" * 40, "0" * 64, str(qwen), (1,), "512M", False)
    with pytest.raises(WrongCode, match=rf"^worker {socket.gethostname()} runs {ROOT} at "
                                        rf"commit {head[:12]}, this client is at ffffffffffff"):
        run_cell(task)
    with pytest.raises(WrongCode, match=rf"^worker {socket.gethostname()}: its qwen image "
                                        r".* has content hash [0-9a-f]{12}, the client's has "
                                        rf"000000000000 at the same commit {head[:12]}"):
        run_cell(dataclasses.replace(task, commit=head))


@pytest.mark.guest
def _git(where: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(where), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def test_a_worker_at_another_commit_is_refused(cluster, qwen, tmp_path):
    """Two real other checkouts (git worktrees): one at a commit made after this one (the
    same code), one from before pyaisvc/cluster/workers.py existed (it cannot even load the
    check). Both are named, with their commits and this one, before anything runs."""
    mine = _git(ROOT, "rev-parse", "HEAD")
    other, older = tmp_path / "other", tmp_path / "older"
    added = _git(ROOT, "log", "--diff-filter=A", "--format=%H", "--", "pyaisvc/cluster/workers.py")
    before = added.splitlines()[-1] + "^" if added else None
    trees = []
    try:
        _git(ROOT, "worktree", "add", "--detach", str(other), "HEAD")
        trees.append(other)
        _git(other, "-c", "user.name=test", "-c", "user.email=test@localhost", "commit",
             "--allow-empty", "-q", "-m", "another commit")
        theirs = _git(other, "rev-parse", "HEAD")
        cluster.add_worker("elsewhere", other)
        if before is not None:  # a clone with that history
            _git(ROOT, "worktree", "add", "--detach", str(older), before)
            trees.append(older)
            cluster.add_worker("oldie", older)
        cluster.wait_for(len(trees))
        proc = _bench(qwen, tmp_path / "out", "--cluster", cluster.address)
        assert proc.returncode == 1
        err = proc.stderr.strip().splitlines()[-1]
        assert err.startswith("pyaisvc bench: ") and f"worker elsewhere runs {other} " in err
        assert f"at commit {theirs[:12]}, this client is at {mine[:12]}" in err, err
        if before is not None:
            old = _git(older, "rev-parse", "HEAD")
            # (Python adds "'pyaisvc.cluster' is not a package" where that checkout
            # had pyaisvc/cluster.py, a module)
            assert (f"worker oldie is at commit {old[:12]} and cannot run this client's code "
                    "(ModuleNotFoundError(\"No module named 'pyaisvc.cluster.workers'") in err, err
            assert f"this client is at {mine[:12]}: check out {mine[:12]} there" in err, err
        assert not (tmp_path / "out/journal.jsonl").exists()  # nothing ran, nothing to resume
    finally:
        cluster.close()
        for tree in trees:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                           capture_output=True)
