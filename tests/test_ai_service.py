"""The kernel AI service (docs/AI_SERVICE.md) in the guest under QEMU.

- aitest, the conformance suite (user/tests/aitest.c: one PASS/FAIL line per rule
  of docs/AI_SERVICE.md section 6), with the tiny synthetic Qwen3.5 at /AI/QWEN (init
  starts ai_daemon) on 1 and 2 harts, and on an image without models (no
  worker at all);
- aistress: 8 processes x 8 random requests (prompts up to 24 ids, so that
  prefill chunks share steps with decoding requests), more than the table
  holds, through the batching worker; every result must equal
  pyaisvc.model.reference's tokens for its own prompt;
- the `ai` shell tool, as the README walks through it;
- rule 13, the worker right: in a normal boot a program started at the console
  cannot register as the worker, not even while init restarts the killed
  daemon (aitest and the fuzzer act as the worker, so their boots pass
  CONSOLE_AI_WORKER);
- rule 2, reqids wrap past their maximum (lowered by the boot argument
  ai.reqid_max) and skip the ids of live requests;
- the real SmolLM2: results through the service equal llmrun_smol's and
  the reference; timing of 8 queued requests against 8 cold runs (slow).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from host import llmcases as lc

from pyaisvc.bench.service import boot_worker
from pyaisvc.guest.chat import stop_ids
from pyaisvc.guest.llmguest import MODELS
from pyaisvc.guest.qemu import CONSOLE_AI_WORKER
from pyaisvc.image import fsimg
from pyaisvc.model.tokenizer import load_tokenizer

pytestmark = pytest.mark.guest

SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed$", re.M)
STRESS = re.compile(r"^aistress: (\d+) ok, (\d+) errors, table used (\d+), (\d+) ms$", re.M)
RULES = [  # one or more aitest cases must cover each of these
    "no worker", "call: result", "query never blocks", "timing:", "bad: token count 0",
    "bad: predict 256", "bad: token id == vocab", "bad: prompt + predict > runtime_seq_len",
    "bad: tokens pointer", "bad input: the worker keeps running",
    "query: queued", "query: running", "query: done", "query: failed", "one-shot:",
    "small buffer:", "bad out pointer:", "failed: reported once", "reqid: the old id",
    "ownership: a child", "ownership: the parent", "ownership: a sibling", "cap:",
    "woken by a wait", "by a cancel", "by an owner exit", "by waiting for a failed request",
    "by an orphan's completion", "by the worker's death", "owner exit: queued, done and failed",
    "owner exit: the running request is orphaned", "kill while blocked in submit",
    "kill while blocked in wait", "worker: sleeps while the queue is empty",
    "worker death: the running request fails", "worker death: a queued request stays",
    "real worker killed mid-request", "the restarted daemon serves the queue",
    "no leak: the table fills",
    # batching (docs/AI_SERVICE.md section 9) and streaming
    "batch: a full batch runs at once", "batch: full, the next request queues",
    "cancel: a running request's place goes to the queued one at once",
    "cancel: the orphan is freed within a step", "owner exit mid-batch: its requests are freed",
    "owner exit mid-batch: the other requests go on", "take: nothing queued",
    "stream: running: the ids so far", "stream: done: the rest", "stream: done: 0 at the end",
    "stream: never consumes", "stream: failed: the ids it produced", "stream: failed: then its",
    "stream: blocks while queued and running", "emit: a cancelled running request: stop",
    "complete: must begin with the emitted ids",
    # options: stop ids and the sampler (ai_submit_opts)
    "bad: stop count -1", "bad: stop count above AI_MAX_STOP", "bad: stop id == vocab",
    "bad: top_p above 1", "bad: options pointer in kernel memory",
    "bad: options past the end of memory", "stop ids: the job carries them",
    "options: the job carries the sampler's", "options: ai_submit's job has none",
    "stop ids: the result has those ids", "stop id: the real worker ends the request at it",
    "sampling: one seed, the same ids, side by side in a batch",
    "sampling: temperature 0 is greedy",
    "fairness: at most B/2 running per process while others wait",
    # ai_table: the whole table as anyone sees it
    "table: running: state, owner", "table: queued: the FIFO in order",
    "table: the batch is the worker's running slot",
    "table: another owner's reqid never visible (the child's request)",
    "table: another owner's reqid never visible (a child sees none of ours)",
    "table: done: out of the batch", "table: after the wait the slot is free",
    "table: 200 snapshots while a batch runs", "table: the batch holds our 8 running",
    "bad: ai_table with a bad pointer", "bad: ai_table with a size below the view's",
    # the window per process and tenant (rule 6), paused requests under a full queue and
    # fair's floor (section 11; user/tests/aitest_resume.c)
    "window: one more for that tenant gets AIE_WOULDBLOCK",
    "window: another tenant's requests of the same process fill the table",
    "window: the full table answers AIE_FULL", "full table: an owner of requests gets AIE_FULL",
    "resume: fifo: 6 paused", "resume: priority: 6 paused", "resume: shortest: 6 paused",
    "resume: fair: 6 paused", "fair: a returning tenant starts at the backlogged",
    # the worker right (rule 13)
    "right: a process that dropped the worker right gets AIE_PERM",
    "right: the refusals registered nobody", "right: the parent keeps it",
]


def _image(build, tmp: Path, model_dirs: dict[str, Path],
           files: dict[str, str] | None = None, without: tuple[str, ...] = (),
           testprogs: tuple[str, ...] = ()) -> Path:
    tree = build.program_tree(testprogs, without)
    for target, d in model_dirs.items():
        tree.add_dir(target, d)
    for target, text in (files or {}).items():
        host = tmp / target.replace("/", "_")
        host.write_text(text)
        tree.add_file(target, host)
    image = tmp / "ai.img"
    fsimg.build_image(image, tree)
    return image


@pytest.fixture(scope="module")
def qwen_dir() -> Path:
    return lc.qwen_tiny_dir("v3")


@pytest.fixture(scope="module")
def qwen_image(build, qwen_dir, tmp_path_factory) -> Path:
    script = ("submit 4 760 6511 314 9338 369\nquery 1\nchild query 1\nwait 1\nwait 1\n"
              "err -105\ninfo\nquit\n")
    return _image(build, tmp_path_factory.mktemp("aiq"), {"AI/QWEN": qwen_dir},
                  {"REQ/AI.TXT": script})


def run_aitest(g, timeout: float) -> str:
    out = g.run("aitest", timeout=timeout)
    m = SUMMARY.search(out)
    assert m, out
    fails = [line for line in out.splitlines() if line.startswith("FAIL")]
    passes = [line for line in out.splitlines() if line.startswith("PASS")]
    assert not fails and m.group(2) == "0", out
    assert int(m.group(1)) == len(passes), out
    return out


@pytest.mark.parametrize("cpus", [1, 2])
def test_aitest_with_worker(boot_guest, qwen_image, cpus: int) -> None:
    g = boot_guest(cpus=cpus, image=qwen_image, append=CONSOLE_AI_WORKER)
    out = run_aitest(g, timeout=600)
    passes = [line for line in out.splitlines() if line.startswith("PASS")]
    missing = [r for r in RULES if r != "no worker" and not any(r in p for p in passes)]
    assert not missing, out
    assert "panic" not in g.transcript


def test_aitest_without_models(boot_guest, build) -> None:
    """No model in the image: init starts no worker, submit fails at once."""
    g = boot_guest(image=build.image, append=CONSOLE_AI_WORKER)
    assert "worker pid 0 (none since boot)" in g.run("ai info")
    assert "call: error -108: no AI worker" in g.run("ai call 4 1 2 3")
    out = run_aitest(g, timeout=300)
    assert "PASS no worker: submit fails at once with AIE_NOWORKER" in out
    assert "call: error -108: no AI worker" in g.run("ai call 4 1 2 3")


def test_aitest_needs_the_worker_right(boot_guest, build) -> None:
    """In a normal boot the console has no worker right: aitest says what to do."""
    out = boot_guest(image=build.image).run("aitest")
    assert "aitest: this process lacks the AI worker right" in out, out
    assert "boot with aiworker=console" in out, out
    assert SUMMARY.search(out).groups() == ("0", "1"), out


def test_console_program_cannot_become_the_worker(boot_guest, qwen_image, qwen_dir) -> None:
    """Rule 13 in a normal boot: a program started at the console gets AIE_PERM from
    ai_register, the real daemon keeps serving, and once the daemon is killed and
    init restarts it, the role still goes to the daemon, never to the impostor, even
    while no worker holds it."""
    refused = "register: error -118: not entitled to the AI worker role (no worker right)\n"
    ids = " ".join(map(str, lc.FRANCE["qwen"]))
    want = " ".join(map(str, lc.reference_ids(qwen_dir, [lc.FRANCE["qwen"]], 4)[0]))
    g = boot_guest(image=qwen_image)
    assert g.run("ai register 1000 64") == refused
    assert g.run("ai right") == "AI worker right: no\n"
    assert g.run("ai_daemon").startswith(  # says so before loading the model
        "ai_daemon: cannot register: not entitled to the AI worker role"), g.transcript
    assert g.run(f"ai call 4 {ids}", timeout=120).splitlines()[0] == want
    daemon = int(re.search(r"worker pid (\d+)", g.run("ai info")).group(1))
    assert daemon > 0
    # Right after the kill no worker holds the role (init restarts the daemon,
    # which loads the model first): the impostor tries then, and again later.
    out = g.run(f"kill {daemon} ; ai register 1000 64 ; ai register 1000 64")
    assert out.count(refused) == 2, out  # (init's restart line may come in between)
    # Wait for the restarted daemon's banner without typing: a command typed while
    # it prints gets its echo mixed with the banner.
    banner = r"ai_daemon: pid \d+ serving"
    if not re.search(banner, out):
        g.expect([banner], time.monotonic() + 60, "the restarted daemon's banner")
    worker = int(re.search(r"worker pid (\d+)", g.run("ai info")).group(1))
    assert worker not in (0, daemon), g.transcript
    assert g.run("ai register 1000 64") == refused
    assert g.run(f"ai call 4 {ids}", timeout=120).splitlines()[0] == want
    assert "registered as the AI worker" not in g.transcript


def test_boot_argument_sets_the_worker_batch(boot_guest, qwen_image, qwen_dir) -> None:
    """aibatch=B makes init start ai_daemon --batch B (how bench --burst compares batch
    sizes); the worker serves at that size, its results equal the reference's."""
    ids = " ".join(map(str, lc.FRANCE["qwen"]))
    want = " ".join(map(str, lc.reference_ids(qwen_dir, [lc.FRANCE["qwen"]], 4)[0]))
    g = boot_guest(image=qwen_image, append="aibatch=3")
    w = boot_worker(g.transcript)
    assert w is not None and (w.served, w.batch) == ("/AI/QWEN", 3), g.transcript
    # the worker says which kernels and how many threads it runs: one hart, one thread
    assert w.ran in ("scalar/1", "vector/1"), w
    assert g.run(f"ai call 4 {ids}", timeout=120).splitlines()[0] == want


def test_reqids_wrap_skipping_live_ones(boot_guest, build, qwen_dir, tmp_path) -> None:
    """Rule 2 across the wrap: booted with ai.reqid_max=17, one `ai` session keeps
    request 1 (done, not waited for) and collects 2..17; the next submit's id
    wraps to 1, which is live, so it gets 2; request 1 is untouched. Without the
    wrap every submit would fail with AIE_NOIDS after 2^31-1; a kernel that ignored
    the boot argument would hand out 18."""
    ids = " ".join(map(str, lc.FRANCE["qwen"]))
    want = " ".join(map(str, lc.reference_ids(qwen_dir, [lc.FRANCE["qwen"]], 1)[0]))
    lines = [f"submit 1 {ids}"]
    for k in range(2, 18):
        lines += [f"submit 1 {ids}", f"wait {k}"]
    lines += [f"submit 1 {ids}", "query 1", "wait 1", "wait 2", f"submit 1 {ids}", "info",
              "quit"]
    image = _image(build, tmp_path, {"AI/QWEN": qwen_dir},
                   {"REQ/WRAP.TXT": "\n".join(lines) + "\n"})
    g = boot_guest(image=image, append="ai.reqid_max=17")
    out = g.run("ai < /REQ/WRAP.TXT", timeout=300).replace("ai> ", "\n")
    issued = [int(v) for v in re.findall(r"^reqid (\d+)$", out, re.M)]
    assert issued == list(range(1, 18)) + [2, 3], out
    assert "ai: reqids wrap after 17 (ai.reqid_max)" in g.transcript
    assert out.splitlines().count(want) == 18, out  # 2..17, then 1 and the new 2
    assert re.search(r"^reqid 1: done", out, re.M), out
    assert "error" not in out, out
    assert "slots 1/16 used" in out, out  # the request that got 3, queued or running


def test_unloadable_model_no_worker(boot_guest, build, tmp_path) -> None:
    """A model that cannot load: the shell still starts, submit says "no worker",
    and ai_daemon idles instead of being restarted every second."""
    image = _image(build, tmp_path, {}, {"AI/QWEN/CFG.BIN": "not a config"})
    g = boot_guest(image=image)
    assert "call: error -108: no AI worker" in g.run("ai call 4 1 2 3")
    g.run("sleep 3")  # a daemon that exited would be restarted many times by now
    assert g.transcript.count("ai_daemon: not serving") == 1, g.transcript
    assert "restarting" not in g.transcript


def test_missing_worker_program_is_given_up(boot_guest, build, qwen_dir, tmp_path) -> None:
    """A model but no /ai_daemon: init tries it RESPAWN_LIMIT (4) times, 1, 2 and
    4 s apart, then gives it up with one line; the shell keeps working, and the
    console is not flooded with a line per second."""
    image = _image(build, tmp_path, {"AI/QWEN": qwen_dir}, without=("ai_daemon",))
    g = boot_guest(image=image)
    g.run("sleep 9")  # 1 + 2 + 4 s of back-off, and some to spare
    assert "init: /ai_daemon failed 4 times in a row; init no longer restarts it" in g.transcript
    g.run("sleep 3")
    assert g.transcript.count("init: cannot run /ai_daemon") == 4, g.transcript
    assert "restarting it in 4 s" in g.transcript, g.transcript
    assert "call: error -108: no AI worker" in g.run("ai call 4 1 2 3")
    assert g.run("echo still here").strip() == "still here"


def _parse_stress(out: str) -> dict[tuple[int, int], tuple[list[int], int, list[int]]]:
    got = {}
    for line in out.splitlines():
        if not line.startswith("R "):
            continue
        head, prompt, result = line.split(":")
        _, proc, k, predict = head.split()
        key = (int(proc), int(k))
        assert key not in got, f"duplicate result line {line!r}"
        got[key] = ([int(v) for v in prompt.split()], int(predict),
                    [int(v) for v in result.split()])
    return got


THREADS_CHANGE = re.compile(r"ai_daemon: threads (\d+) -> (\d+) \(measured again while idle\)")
THREADS_BACK = re.compile(r"ai_daemon: threads 1 -> 2 \(measured again between steps\)")


def test_worker_measures_its_pool_again(boot_guest, build, qwen_dir, tmp_path) -> None:
    """ai_daemon sizes its thread pool by measurement at start and again when it goes
    idle long enough after that (RESIZE_US, user/ai/ai_daemon.c): with both harts of a 2-hart guest
    taken by two `spin` processes, the worker's next idle moment leaves it one thread,
    and its results stay the reference's before and after. Once the spinners are
    killed, a long request gets both threads back within it: with fewer threads than
    harts the worker measures again between steps, not only when idle. It needs the
    host's two cores at boot (for the 2 to shrink from) and skips when the worker
    started with one: under `make test`'s two workers that happens; run it alone to
    see it."""
    image = _image(build, tmp_path, {"AI/QWEN": qwen_dir}, testprogs=("spin",))
    g = boot_guest(cpus=2, ram="512M", image=image)
    w = boot_worker(g.transcript)
    assert w is not None, g.transcript
    if w.ran.endswith("/1"):
        pytest.skip("the host gave the guest one core at boot: nothing to shrink")
    ids = " ".join(map(str, lc.FRANCE["qwen"]))
    want = " ".join(map(str, lc.reference_ids(qwen_dir, [lc.FRANCE["qwen"]], 4)[0]))
    assert g.run(f"ai gen 4 {ids}", timeout=120).splitlines()[0].strip() == want
    spinners = re.findall(r"\[(\d+)\]", g.run("spin 40 & spin 40 & echo spinning"))
    assert len(spinners) == 2, g.transcript[-500:]
    # Each request ends in an idle moment of the worker, where it measures again once
    # its last measurement is old enough: requests, each checked, until it says so
    # (while the spinners still run).
    deadline = time.monotonic() + 35
    while not THREADS_CHANGE.search(g.transcript) and time.monotonic() < deadline:
        assert g.run(f"ai gen 4 {ids}", timeout=120).splitlines()[0].strip() == want
        g.run("sleep 1")  # the worker's line follows the reply
    assert THREADS_CHANGE.findall(g.transcript) == [("2", "1")], g.transcript[-2000:]
    # 8 processes submitting back to back, and the spinners killed as they start:
    # the worker is busy from then on, and gets its second thread back between steps.
    g.run(f"aistress 8 6 3 24 24 > /stress.txt & kill {' '.join(spinners)}")
    deadline = time.monotonic() + 600
    while "aistress:" not in (out := g.run("cat /stress.txt")) and time.monotonic() < deadline:
        g.run("sleep 1")
    m = STRESS.search(out)
    assert m and m.group(2) == "0" and m.group(3) == "0", out[-500:]
    assert THREADS_BACK.search(g.transcript), g.transcript[-2000:]
    assert g.run(f"ai gen 4 {ids}", timeout=120).splitlines()[0].strip() == want
    assert "panic" not in g.transcript


@pytest.mark.parametrize("cpus,seed,fmt", [(1, 1, "v3"), (2, 2, "v3"), (2, 3, "v4")])
def test_stress_matches_reference(boot_guest, build, tmp_path, qwen_image, qwen_dir, cpus: int,
                                  seed: int, fmt: str) -> None:
    nproc, nreq = 8, 8
    image = qwen_image
    if fmt == "v4":  # the worker maps its weights (docs/VM.md)
        qwen_dir = lc.qwen_tiny_dir("v4")
        image = _image(build, tmp_path, {"AI/QWEN": qwen_dir}, {})
    g = boot_guest(cpus=cpus, image=image)
    out = g.run(f"aistress {nproc} {nreq} {seed} 24 12", timeout=1500)
    m = STRESS.search(out)
    assert m and m.group(2) == "0" and m.group(3) == "0", out
    got = _parse_stress(out)
    assert sorted(got) == [(p, k) for p in range(nproc) for k in range(nreq)], out
    from pyaisvc.model.assets import load_assets
    from pyaisvc.model.reference import Reference

    ref = Reference(load_assets(qwen_dir))
    for key, (prompt, predict, result) in sorted(got.items()):
        assert result == ref.generate(prompt, predict), (key, prompt, predict)
    assert "slots 0/16 used" in g.run("ai info")
    cached = int(re.search(r"page cache (\d+) KiB", g.run("vmstat"))[1])
    assert (cached > 0) == (fmt == "v4")


def test_shell_tool_walkthrough(boot_guest, qwen_image, qwen_dir) -> None:
    """The README's session: submit, query, another process, wait twice."""
    want = " ".join(map(str, lc.reference_ids(qwen_dir, [lc.FRANCE["qwen"]], 4)[0]))
    g = boot_guest(image=qwen_image)
    out = g.run("ai < /REQ/AI.TXT", timeout=120)
    assert "reqid 1\n" in out, out
    assert re.search(r"reqid 1: (queued, 0 ahead in the queue|running, \d of 4 tokens|done)", out)
    assert re.search(r"\(child pid \d+\) query: error -106: not the owner", out), out
    assert want + "\n" in out, out
    assert "wait: error -105: no such request" in out, out
    assert "-105: no such request" in out
    assert "slots 0/16 used" in out, out
    # streaming through the service: the ids as they come, then collected
    ids = " ".join(map(str, lc.FRANCE["qwen"]))
    out = g.run(f"ai gen 4 {ids}", timeout=120)
    assert out.splitlines()[0].strip() == want, out
    assert "error" not in out, out
    assert "slots 0/16 used" in g.run("ai info")


def test_stop_id_ends_a_service_request(boot_guest, qwen_image, qwen_dir) -> None:
    """`ai gen/call --stop ID` (ai_submit_opts): the request ends after the first
    stop id it generates; its ids are the reference's up to there."""
    full = lc.reference_ids(qwen_dir, [lc.FRANCE["qwen"]], 8)[0]
    stops = {full[2], full[5]}
    want = " ".join(map(str, lc.until_stop(full, stops)))
    assert len(want.split()) < 8
    ids = " ".join(map(str, lc.FRANCE["qwen"]))
    flags = " ".join(f"--stop {s}" for s in sorted(stops))
    g = boot_guest(image=qwen_image)
    out = g.run(f"ai gen {flags} 8 {ids}", timeout=120)
    assert out.splitlines()[0].strip() == want, out
    out = g.run(f"ai call {flags} 8 {ids}", timeout=120)
    assert out.splitlines()[0].strip() == want, out
    out = g.run(f"ai submit --stop 1 --stop 2 --stop 3 --stop 4 --stop 5 8 {ids}")
    assert "at most 4 --stop ids" in out, out
    assert "slots 0/16 used" in g.run("ai info")


def test_sampled_service_requests_match_reference(boot_guest, qwen_image, qwen_dir) -> None:
    """`ai submit --temp T --top-k K --top-p P --seed S` (ai_submit_opts): four requests
    queued at once, so they share the worker's batch, each sampling with its own options;
    each gets the ids the reference's sampler draws for it alone."""
    prompt, n = lc.FRANCE["qwen"], 6
    cases = lc.SAMPLING_CASES
    ids = " ".join(map(str, prompt))
    script = "".join(f"submit --temp {t} --top-k {k} --top-p {p} --seed {s} {n} {ids}\n"
                     for t, k, p, s in cases)
    script += "".join(f"wait {i + 1}\n" for i in range(len(cases)))
    g = boot_guest(image=qwen_image)
    for line in script.splitlines():
        g.run(f"echo {line} >> /s.txt")
    out = g.run("ai < /s.txt", timeout=120)
    assert [f"reqid {i + 1}" for i in range(len(cases))] == re.findall(r"reqid \d+", out), out
    lines = [line.replace("ai> ", "").strip() for line in out.splitlines()]  # the prompts
    got = [[int(v) for v in line.split()] for line in lines if re.fullmatch(r"\d+( \d+)*", line)]
    want = [lc.sampled_reference(qwen_dir, prompt, n, case) for case in cases]
    assert got == want, out
    assert len({tuple(w) for w in want}) > 1  # the options change the draw
    out = g.run(f"ai call --top-p 1.5 2 {ids}")
    assert "--top-p 1.5: not a valid value" in out, out
    assert "slots 0/16 used" in g.run("ai info")


@pytest.mark.slow
def test_smol_service_matches_llmrun(boot_guest, build, tmp_path) -> None:
    smol = lc.smol_or_skip()
    prompts = lc.smol_prompts()[:3]
    gen = 8
    want = lc.reference_ids(smol, prompts, gen)
    g = boot_guest(ram=MODELS["smol"].ram, image=_image(build, tmp_path, {"AI/SMOL": smol}),
                   timeout=300)
    for p, w in zip(prompts, want, strict=True):
        ids = " ".join(map(str, p))
        service = g.run(f"ai call {gen} {ids}", timeout=600).splitlines()[0]
        direct = g.run(f"llmrun_smol --quiet --predict {gen} {ids}", timeout=600).strip()
        assert service == direct == " ".join(map(str, w)), (service, direct)
    # A chat turn ends at the end-of-turn id when the submitter asks for it
    # (a turn without the system prompt: its reply is short).
    tok = load_tokenizer("smol")
    turn = tok.encode("<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
                      "<|im_start|>assistant\n")
    stops = stop_ids(tok)
    want_turn = lc.until_stop(lc.reference_ids(smol, [turn], 16)[0], stops)
    assert len(want_turn) < 16 and want_turn[-1] in stops
    flags = " ".join(f"--stop {s}" for s in sorted(stops))
    service = g.run(f"ai call {flags} 16 {' '.join(map(str, turn))}", timeout=600)
    assert service.splitlines()[0] == " ".join(map(str, want_turn)), service
    # 8 requests submitted at once share the worker's batch, each with its own result
    # (the timing figures: pyaisvc bench --mode service).
    bench = g.run(f"aistress --bench {gen} {' '.join(map(str, prompts[0]))}", timeout=1200)
    results = re.findall(r"^bench \d: .*: (.*)$", bench, re.M)
    assert results == [" ".join(map(str, want[0]))] * 8, bench
