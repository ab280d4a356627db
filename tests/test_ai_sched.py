"""The AI service's scheduling policies with the real worker (docs/AI_SERVICE.md
section 11, docs/SCHEDULING.md), the tiny synthetic Qwen3.5 at /AI/QWEN:

- aistress (random prompts, priorities and three tenants) under every policy and
  every step budget 1..8 (boot arguments aisched= and aichunk=), on 1 and 2 harts,
  with the scalar and the vector kernels: every result is pyaisvc.model.reference's for
  its own prompt, whatever the order, the chunks and the pauses;
- preemption for real: one place (aibatch=1) under `priority`, a long low-priority
  request paused by each urgent one that comes while it runs, each time keeping its
  KV cache in the worker: every id the reference's, and the table counts the pauses;
- `pyaisvc serve --sched fair --chunk 4`: two users' requests at once (tenants of
  their own, one with a priority), the reference's text, /metrics by user;
- switching the policy at run time (`ai sched`) while aistress runs loses nothing;
- bad values: a boot argument init cannot apply, `ai sched` with an unknown policy,
  a bad budget, without the right; a negative priority: each named, nothing changed.

The policies' order, aging, fair's bound and pause/cancel/exit while paused on
crafted queues are aitest's cases (tests/test_ai_service.py runs it).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from host import llmcases as lc

from pyaisvc.guest.qemu import CONSOLE_AI_WORKER, VECTOR_CPU, Guest, QemuConfig
from pyaisvc.image import fsimg
from pyaisvc.model.assets import load_assets
from pyaisvc.model.reference import Reference

pytestmark = pytest.mark.guest

SCALAR_CPU = "rv64,v=false"
STRESS = re.compile(r"^aistress: (\d+) ok, (\d+) errors, table used (\d+), (\d+) ms$", re.M)
PAUSES = re.compile(r"^(\d+) pauses by the scheduling policy since boot$", re.M)


@pytest.fixture(scope="module")
def qwen_dir() -> Path:
    return lc.qwen_tiny_dir("v3")


@pytest.fixture(scope="module")
def reference(qwen_dir) -> Reference:
    return Reference(load_assets(qwen_dir))


@pytest.fixture(scope="module")
def image(build, qwen_dir, tmp_path_factory) -> Path:
    tree = fsimg.Tree(fsimg.load_layout())
    for name, elf in build.uprogs.items():
        tree.add_file(name, elf)
    tree.add_dir("AI/QWEN", qwen_dir)
    path = tmp_path_factory.mktemp("aisched") / "ai.img"
    fsimg.build_image(path, tree)
    return path


def boot(build, image: Path, cpus: int, cpu: str, append: str) -> Guest:
    """The guest to boot (`with` boots it and closes it)."""
    return Guest(QemuConfig(kernel=build.kernel, image=image, ram="256M", cpus=cpus,
                            snapshot=True, cpu=cpu, append=append))


def check_stress(out: str, reference: Reference, nresults: int) -> None:
    """aistress's summary is clean and every R line's ids are the reference's."""
    m = STRESS.search(out)
    assert m and m.group(2) == "0" and m.group(3) == "0", out
    lines = [ln for ln in out.splitlines() if ln.startswith("R ")]
    assert len(lines) == nresults, out
    for line in lines:
        head, prompt, result = line.split(":")
        predict = int(head.split()[3])
        ids = [int(v) for v in prompt.split()]
        assert [int(v) for v in result.split()] == reference.generate(ids, predict), line


def pauses(g: Guest) -> int:
    out = g.run("ai info")
    m = PAUSES.search(out)
    assert m, out
    return int(m.group(1))


@pytest.mark.parametrize("policy,chunk,prefill,cpus,cpu", [
    ("fifo", 1, 0, 1, SCALAR_CPU),
    ("priority", 2, 0, 2, VECTOR_CPU),
    ("shortest", 3, 0, 1, VECTOR_CPU),
    ("fair", 4, 0, 2, SCALAR_CPU),
    ("priority", 5, 2, 1, SCALAR_CPU),
    ("shortest", 6, 0, 2, SCALAR_CPU),
    ("fair", 7, 3, 1, VECTOR_CPU),
    ("shortest", 8, 1, 2, VECTOR_CPU),
    ("fifo", 8, 1, 2, VECTOR_CPU),
])
def test_policy_and_budget_token_exact(build, image, reference, policy: str, chunk: int,
                                       prefill: int, cpus: int, cpu: str) -> None:
    """aistress under the policy, the step budget and the prompt budget (0: none given):
    each result is the reference's."""
    nproc, nreq = 6, 4
    boot_args = f"aisched={policy} aichunk={chunk}" + (f" aiprefill={prefill}" if prefill else "")
    said = f"policy {policy}, {chunk} positions per step" + (
        f", {prefill} for prompts beside a decoder" if prefill else "")
    with boot(build, image, cpus, cpu, boot_args) as g:
        assert f"init: AI scheduling {said}\n" in g.transcript.replace("\r", ""), g.transcript
        assert g.run("ai sched") == said + "\n"
        out = g.run(f"aistress {nproc} {nreq} {chunk} 24 12", timeout=1500)
        check_stress(out, reference, nproc * nreq)
        assert "slots 0/16 used" in g.run("ai info")
        if policy == "fifo":
            assert pauses(g) == 0
        assert "panic" not in g.transcript


@pytest.mark.parametrize("cpus,cpu", [(1, SCALAR_CPU), (1, VECTOR_CPU), (2, SCALAR_CPU),
                                      (2, VECTOR_CPU)])
def test_paused_request_resumes_token_exact(build, image, reference, qwen_dir, cpus: int,
                                            cpu: str) -> None:
    """One place (aibatch=1) under priority: a long request of priority 0 runs in the
    background; while it runs, urgent requests come one after another (each waited
    for; the long one runs again while the shell starts the next), and each pauses
    it; it resumes after each from its kept KV cache. Every result is the
    reference's, and the table counted a pause for every urgent request that found it
    running (all but perhaps the last, which may come as it ends). How many come
    depends on the host's speed; aitest pauses one request 11 times on purpose."""
    low = lc.FRANCE["qwen"]
    high = lc.qwen_prompts()[1][:4]
    want_high = " ".join(map(str, reference.generate(high, 2)))
    with boot(build, image, cpus, cpu, "aisched=priority aibatch=1") as g:
        g.run(f"ai call 240 {' '.join(map(str, low))} > /low.txt & echo started")
        highs = 0  # urgent requests sent while the long one was still held
        for _ in range(8):
            if re.search(r" 0 running", g.run("ai info")):
                break  # the long request ended
            out = g.run(f"ai call --priority 90 2 {' '.join(map(str, high))}", timeout=300)
            assert out.splitlines()[0] == want_high, out
            highs += 1
        deadline = time.monotonic() + 600
        while not (done := g.run("cat /low.txt").strip()) and time.monotonic() < deadline:
            g.run("sleep 10")
        assert done.splitlines()[0] == " ".join(map(str, reference.generate(low, 240))), done
        if highs == 0:  # aitest pauses and resumes a request deterministically
            pytest.skip("the long request ended before the shell could send an urgent one")
        assert pauses(g) >= max(1, highs - 1), g.run("ai info")
        assert "slots 0/16 used" in g.run("ai info")
        assert "panic" not in g.transcript


def test_held_requests_fit_the_kv_pool(build, image, reference) -> None:
    """aikv=16: the KV pool holds one window of 256 positions, so the worker serves one
    request at a time and holds no more than one (a cache each would let it hold 8).
    Three long requests of rising priority under `priority`: a 150-id prompt runs; the
    two more urgent ones, sent once it decodes, wait in the queue rather than pausing it
    (its blocks kept) and running out of blocks; none fails, and each gets the
    reference's ids."""
    long = lc.qwen_prompts()[4]
    reqs = [(long, 100, 0), (long[5:10], 100, 40), (long[10:15], 100, 80)]
    with boot(build, image, 2, VECTOR_CPU, "aisched=priority aikv=16") as g:
        assert "the kv pool holds 1 full windows: serving 1 at once" in g.transcript, \
            g.transcript
        for k, (prompt, predict, priority) in enumerate(reqs):
            g.run(f"ai call --priority {priority} {predict} {' '.join(map(str, prompt))} "
                  f"> /r{k}.txt & echo started", timeout=120)
            deadline = time.monotonic() + 300
            while k == 0 and not re.search(r"RUNNING .* [1-9]\d*/100 ", g.run(
                    "ai top -n 1", timeout=120)):  # its prompt is in the pool: it decodes
                assert time.monotonic() < deadline, g.transcript[-2000:]
        deadline = time.monotonic() + 900
        outs = ["", "", ""]
        while not all(outs) and time.monotonic() < deadline:
            g.run("sleep 10", timeout=120)
            outs = [g.run(f"cat /r{k}.txt", timeout=120).strip() for k in range(3)]
        for (prompt, predict, _), out in zip(reqs, outs, strict=True):
            want = " ".join(map(str, reference.generate(prompt, predict)))
            assert out.splitlines()[0] == want, out
        assert "slots 0/16 used" in g.run("ai info")
        assert "panic" not in g.transcript


def test_switching_policy_under_load_loses_nothing(build, image, reference) -> None:
    """`ai sched` (with the worker right: aiworker=console) switches the policy and
    the budget as often as the shell can while aistress runs: every request ends,
    each with the reference's ids."""
    nproc, nreq = 8, 8
    with boot(build, image, 2, VECTOR_CPU, CONSOLE_AI_WORKER) as g:
        g.run(f"aistress {nproc} {nreq} 9 48 32 > /stress.txt & echo started")
        settings = ["priority 3", "shortest 8", "fair 2", "fifo 5", "shortest 1", "fair 8"]
        deadline = time.monotonic() + 1200
        k = 0
        while "aistress:" not in g.run("cat /stress.txt") and time.monotonic() < deadline:
            said = g.run(f"ai sched {settings[k % len(settings)]}")
            name, chunk = settings[k % len(settings)].split()
            assert f"policy {name}, {chunk} positions per step" in said, said
            k += 1
        assert k >= 2, "aistress ended before the policy changed twice"
        check_stress(g.run("cat /stress.txt", timeout=60), reference, nproc * nreq)
        assert "slots 0/16 used" in g.run("ai info")
        assert "panic" not in g.transcript


def test_bad_scheduling_values_are_named(build, image) -> None:
    """A boot argument init cannot apply is named and the defaults stay; `ai sched`
    names an unknown policy, a bad budget and the missing right; a priority out of
    range is refused by the kernel with its own code."""
    with boot(build, image, 1, VECTOR_CPU, "aisched=lottery aichunk=4") as g:
        assert ("init: aisched=lottery aichunk=4 aiprefill=-: no such scheduling policy (fifo, "
                "priority, shortest, fair); left as they were") in g.transcript, g.transcript
        assert g.run("ai sched") == "policy fifo, 8 positions per step\n"
        out = g.run("ai sched fair")
        assert "sched: error -118: not entitled to the AI worker role" in out, out
        assert "boot with aisched=NAME aichunk=N aiprefill=N, or aiworker=console" in out, out
        out = g.run("ai submit --priority -1 4 1 2 3")
        assert "error -120: priority out of range (0..100)" in out, out
        out = g.run("ai submit --priority 101 4 1 2 3")
        assert "error -120: priority out of range (0..100)" in out, out
        assert "error -115: invalid argument" in g.run("ai submit --tenant -3 4 1 2 3")
        assert g.run("ai sched") == "policy fifo, 8 positions per step\n"
    with boot(build, image, 1, VECTOR_CPU, f"{CONSOLE_AI_WORKER} aichunk=0") as g:
        assert "step or prompt budget out of range (1..8 positions)" in g.transcript, \
            g.transcript
        out = g.run("ai sched lottery")
        assert "error -119: no such scheduling policy (fifo, priority, shortest, fair)" in out
        assert "error -121: step or prompt budget out of range (1..8 positions)" in g.run(
            "ai sched fair -2")
        assert "error -121" in g.run("ai sched fair 9")
        assert "error -121" in g.run("ai sched fair 4 9")
        assert "error -121" in g.run("ai sched fair 4 x")
        assert g.run("ai sched") == "policy fifo, 8 positions per step\n"
        assert g.run("ai sched shortest 2") == "policy shortest, 2 positions per step\n"
        assert g.run("ai sched fifo 8 2") == \
            "policy fifo, 8 positions per step, 2 for prompts beside a decoder\n"
        assert g.run("ai sched shortest 2 8") == "policy shortest, 2 positions per step\n"
        top = g.run("ai top -n 1")
        assert "policy shortest, 2 positions per step" in top, top
        assert "TENANT PRI" in top and all(len(ln) <= 80 for ln in top.splitlines()), top


def _table(url: str) -> dict:
    """The kernel's table now, through the server (/v1/aisvc/table: a V frame)."""
    import httpx

    r = httpx.get(url + "/v1/aisvc/table", timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def _watch_table(url: str, stop, seen: list[dict]) -> None:
    """Appends snapshots of the kernel's table to seen until stop is set (a thread)."""
    while not stop.is_set():
        seen.append(_table(url))
        time.sleep(0.1)


def _live_slots(snap: dict) -> list[dict]:
    """The table's slots that hold a request (queued or running)."""
    return [s for s in snap["slots"] if s["state"] in ("QUEUED", "RUNNING")]


def test_serve_passes_policy_tenant_and_priority(tmp_path) -> None:
    """`pyaisvc serve --sched fair --chunk 4` boots the guest with aisched=fair aichunk=4;
    two users' requests at once (tenants of their own) and one with a priority each get
    the reference's greedy continuation, and /metrics counts the ids served by user;
    the kernel's table, read while they run, shows the policy, the budget, each slot's
    user as its tenant and bob's priority. Then carol sends 10 requests (8 reach the
    kernel: her window; 2 wait in the host queue) and dave one: dave's request is in
    the kernel's table while carol holds 8 slots there, so her backlog never held him
    out."""
    import asyncio
    import threading

    import httpx
    from host.serveproc import serving_smol

    smol = lc.smol_or_skip()
    with serving_smol(tmp_path, "--sched", "fair", "--chunk", "4", "--verbose") as srv:
        url, log = srv.url, srv.log
        prompts = [lc.FRANCE["smol"], lc.smol_prompts()[2]]
        users = [("alice", None), ("bob", 50)]

        async def ask() -> list[list[int]]:
            async with httpx.AsyncClient(base_url=url, timeout=600) as client:
                async def one(prompt, user, priority):
                    body = {"model": "smol", "prompt": prompt, "max_tokens": 8,
                            "temperature": 0, "user": user}
                    if priority is not None:
                        body["priority"] = priority
                    r = await client.post("/v1/completions", json=body)
                    assert r.status_code == 200, r.text
                    return r.json()["usage"]["completion_tokens"], r.json()["choices"][0]
                return await asyncio.gather(*(one(p, u, pr) for p, (u, pr) in
                                              zip(prompts, users, strict=True)))

        stop, seen = threading.Event(), []
        watcher = threading.Thread(target=_watch_table, args=(url, stop, seen))
        watcher.start()
        try:
            got = asyncio.run(ask())
        finally:
            stop.set()
            watcher.join()
        _check_table_saw_the_users(seen)
        _check_a_backlog_keeps_no_one_out(url)
        from pyaisvc.model.tokenizer import load_tokenizer
        tok = load_tokenizer("smol")
        for (n, choice), prompt in zip(got, prompts, strict=True):
            want = lc.until_stop(lc.reference_ids(smol, [prompt], 8)[0], {0, 2})
            text = tok.decode([i for i in want if i not in (0, 2)], skip_special_tokens=True)
            assert (n, choice["text"]) == (len(want), text), (choice, want)
        metrics = httpx.get(url + "/metrics").text
        for user, prompt in zip(("alice", "bob"), prompts, strict=True):
            assert (f'aisvc_tenant_tokens_total{{kind="prompt",tenant="{user}"}} '
                    f'{float(len(prompt))}') in metrics, metrics
        assert "boot arguments 'aisched=fair aichunk=4'" in log.read_text(), log.read_text()


def _check_table_saw_the_users(seen: list[dict]) -> None:
    """Some snapshot taken while alice's and bob's requests ran shows both in the kernel's
    table, each as a tenant of its own (bob's at priority 50), under fair with budget 4."""
    assert seen and all((s["policy"], s["chunk"]) == ("fair", 4) for s in seen), seen[:1]
    both = [s for s in seen if {x["tenant_name"] for x in _live_slots(s)} >= {"alice", "bob"}]
    assert both, [[(x["tenant_name"], x["state"]) for x in _live_slots(s)] for s in seen]
    slots = {x["tenant_name"]: x for x in _live_slots(both[0])}
    assert slots["alice"]["tenant"] != slots["bob"]["tenant"]
    assert (slots["alice"]["priority"], slots["bob"]["priority"]) == (0, 50)


def _check_a_backlog_keeps_no_one_out(url: str) -> None:
    """carol: 10 requests of 32 ids at once; once 8 of hers are in the kernel's table,
    dave's one request reaches the table while she still holds those 8 (her other 2
    wait in the host queue)."""
    import asyncio

    import httpx

    async def run() -> list[dict]:
        async with httpx.AsyncClient(base_url=url, timeout=900) as client:
            def post(user: str, n: int):
                return client.post("/v1/completions", json={
                    "model": "smol", "prompt": "Once upon a time", "max_tokens": n,
                    "temperature": 0, "user": user})
            carol = [asyncio.create_task(post("carol", 32)) for _ in range(10)]
            snap = await _until(url, lambda s: _count(s, "carol") == 8, "carol's 8")
            dave = asyncio.create_task(post("dave", 2))
            snap = await _until(url, lambda s: _count(s, "dave") == 1 or dave.done(), "dave")
            assert _count(snap, "dave") == 1 and _count(snap, "carol") == 8, \
                [(x["tenant_name"], x["state"]) for x in _live_slots(snap)]
            replies = await asyncio.gather(dave, *carol)
            assert all(r.status_code == 200 for r in replies), [r.text for r in replies]
            return snap

    asyncio.run(run())


def _count(snap: dict, user: str) -> int:
    return sum(x["tenant_name"] == user for x in _live_slots(snap))


async def _until(url: str, cond, what: str, seconds: float = 600) -> dict:
    """The first snapshot of the kernel's table for which cond holds (polled)."""
    import asyncio

    deadline = time.monotonic() + seconds
    while True:
        snap = await asyncio.to_thread(_table, url)
        if cond(snap):
            return snap
        assert time.monotonic() < deadline, f"{what}: not within {seconds} s"
        await asyncio.sleep(0.05)
