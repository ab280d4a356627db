"""The KV cache's block pool and prefix reuse in the guest (docs/KVCACHE.md): llmrun_smol
--stdin alone (scalar kernels on 1 thread, vector kernels on 2) and the AI service's worker
(batched) give the numpy reference's ids for prompts whose cached prefixes end inside a
block, at a block boundary, one short of the whole prompt and at the whole prompt; the
positions each takes from the cache are those tests/host/kvcases.py works out from the
ids. The worker shares a cached prefix between eight batched requests, evicts from a pool
of one window without leaking a block, leaves nothing half-written behind a request
cancelled in its prefill, and with the boot argument aicache=0 takes nothing from it.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from host import kvcases as kc
from host import llmcases as lc

from pyaisvc.guest.llmguest import MODELS, cached_positions, kv_counters
from pyaisvc.guest.qemu import (
    PROMPT,
    VECTOR_CPU,
    VECTOR_QEMU,
    Guest,
    QemuConfig,
    default_qemu,
    qemu_version,
)
from pyaisvc.image import fsimg

pytestmark = [pytest.mark.guest, pytest.mark.slow]
RAM = MODELS["smol"].ram
KV_LINE = re.compile(r"kv cache: (\d+) blocks of 16 positions: (\d+) used, (\d+) cached, "
                     r"(\d+) free\s+prefix reuse (on|off): (\d+) of (\d+) prompt positions "
                     r"cached, (\d+) evictions")


@pytest.fixture(scope="module")
def smol() -> Path:
    d = lc.smol_dir("v3")
    if d is None:
        pytest.skip("models/SMOL is missing (make smol-assets)")
    return d


@pytest.fixture(scope="module")
def kv_image(build, smol, tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("kv")
    tree = fsimg.Tree(fsimg.load_layout())
    for name, elf in build.uprogs.items():
        tree.add_file(name, elf)
    tree.add_dir("AI/SMOL", smol)
    (tmp / "p.txt").write_text(lc.request_lines(kc.prefix_prompts(), kc.GEN))
    tree.add_file("REQ/P.TXT", tmp / "p.txt")
    image = tmp / "kv.img"
    fsimg.build_image(image, tree)
    return image


def ids_of(line: str) -> list[int]:
    return [int(v) for v in line.split()]


def run_alone(g: Guest, args: str) -> tuple[list[list[int]], str]:
    console = g.run(f"llmrun_smol {args} --stdin < /REQ/P.TXT > /out.txt", timeout=1200)
    out = g.run("cat /out.txt")
    return [ids_of(line) for line in out.splitlines() if line.strip()], console


def kv_state(g: Guest) -> dict[str, int | str]:
    """The worker's pool as `ai top -n 1` shows it."""
    m = KV_LINE.search(g.run("ai top -n 1", timeout=60))
    assert m, "no kv cache line in ai top"
    keys = ("blocks", "used", "cached", "free", "reuse", "hits", "prompt", "evictions")
    return {k: (v if k == "reuse" else int(v)) for k, v in zip(keys, m.groups(), strict=True)}


def call(g: Guest, prompt: list[int], extra: str = "") -> list[int]:
    out = g.run(f"ai call {extra}{kc.GEN} {' '.join(map(str, prompt))}", timeout=900)
    return ids_of(out.splitlines()[0])


def test_alone_scalar_one_thread(boot_guest, kv_image, smol) -> None:
    prompts = kc.prefix_prompts()
    want = lc.reference_ids(smol, prompts, kc.GEN)
    g = boot_guest(ram=RAM, image=kv_image, timeout=300)
    got, console = run_alone(g, "--kernels scalar --threads 1")
    assert got == want, console
    assert cached_positions(console) == kc.expected_cached(prompts, want)
    kv = kv_counters(console)
    assert kv["used"] == 0 and kv["cached"] + kv["free"] == kv["blocks"], kv


def test_alone_vector_two_threads(build, kv_image, smol) -> None:
    version = qemu_version(default_qemu())
    if version is None or version < VECTOR_QEMU:
        pytest.skip("vector kernels are tested on QEMU >= 10 (set AISVC_QEMU)")
    prompts = kc.prefix_prompts()
    want = lc.reference_ids(smol, prompts, kc.GEN)
    cfg = QemuConfig(kernel=build.kernel, image=kv_image, ram=RAM, cpus=2, snapshot=True,
                     cpu=VECTOR_CPU)
    with Guest(cfg) as g:
        got, console = run_alone(g, "--kernels vector --threads 2")
    assert got == want, console
    assert cached_positions(console) == kc.expected_cached(prompts, want)
    assert "kernels=vector threads=2" in console


def test_worker_prefix_reuse_and_sharing(boot_guest, kv_image, smol) -> None:
    """One after another, then eight with a common 48-position prefix at once, after one
    request has left that prefix in the cache: each of the eight takes it (48 positions)
    from the cache rather than computing its own copy."""
    prompts = kc.prefix_prompts()
    want = lc.reference_ids(smol, prompts, kc.GEN)
    g = boot_guest(ram=RAM, image=kv_image, timeout=300)
    got = [call(g, p) for p in prompts]
    assert got == want
    kv = kv_state(g)
    assert kv["reuse"] == "on" and kv["hits"] == sum(kc.expected_cached(prompts, want)), kv
    shared = kc.shared_prompts()
    want8 = lc.reference_ids(smol, shared, kc.GEN)
    assert call(g, shared[0]) == want8[0]
    before = kv_state(g)
    script = "".join(f"submit {kc.GEN} {' '.join(map(str, p))}\n" for p in shared)
    script += "".join(f"wait {i}\n" for i in range(len(prompts) + 2, len(prompts) + 10))
    for line in script.splitlines():
        g.run(f"echo {line} >> /s.txt")
    out = g.run("ai < /s.txt", timeout=1800)
    lines = [line.replace("ai> ", "").strip() for line in out.splitlines()]
    got8 = [ids_of(x) for x in lines if re.fullmatch(r"\d+( \d+)*", x) and len(x.split()) > 1]
    assert got8 == want8, out
    after = kv_state(g)
    assert after["hits"] - before["hits"] == 8 * 48, (before, after)
    assert after["used"] == 0 and after["cached"] + after["free"] == after["blocks"], after


def test_worker_small_pool_evicts_cancel_leaves_nothing(boot_guest, kv_image, smol) -> None:
    """aikv=16: one window, so one request at a time and the conversations evict each
    other; a request cancelled during its prefill publishes no block it had not finished."""
    prompts = kc.eviction_prompts()
    want = lc.reference_ids(smol, prompts, kc.GEN)
    g = boot_guest(ram=RAM, image=kv_image, timeout=300, append="aikv=16")
    got = [call(g, p) for p in prompts + prompts]
    assert got == want + want
    kv = kv_state(g)
    assert kv["blocks"] == 16 and kv["evictions"] > 0, kv
    assert kv["used"] == 0 and kv["cached"] + kv["free"] == 16, kv
    long = lc.heldout_ids("smol", 60)
    cancel_in_prefill(g, long)
    again = lc.reference_ids(smol, [long], kc.GEN)[0]
    assert call(g, long) == again
    kv = kv_state(g)
    assert kv["used"] == 0 and kv["cached"] + kv["free"] == 16, kv


def cancel_in_prefill(g: Guest, prompt: list[int], tries: int = 3) -> None:
    """Submits prompt and cancels it while the worker runs its prefill, in one `ai`
    session (its owner stays, so the request is not orphaned): `query` typed together
    with the `cancel` (no console round trip between them) shows it running with no id
    generated yet. A try whose query shows it queued, decoding or done counts for
    nothing (it is cancelled or gone too); AssertionError after tries."""
    deadline = time.monotonic() + 900
    g.send_line("ai")
    g.expect([r"ai> "], deadline, "the ai session's prompt")
    seen = []
    try:
        for _ in range(tries):
            g.send_line(f"submit {kc.GEN} {' '.join(map(str, prompt))}")
            g.expect([r"reqid (\d+)"], deadline, "the submit's reqid")
            reqid = g.child.match.group(1)
            g.expect([r"ai> "], deadline, "the ai session's prompt")
            while True:  # the worker takes it within a step
                g.send_line(f"query {reqid}")
                g.expect([r"ai> "], deadline, "the ai session's prompt")
                if f"reqid {reqid}: queued" not in g.child.before:
                    break
            g.send_line(f"query {reqid}\ncancel {reqid}")
            g.expect([rf"cancelled {reqid}|cancel: error[^\n]*"], deadline, "the cancel")
            out = g.child.before + g.child.after
            g.expect([r"ai> "], deadline, "the ai session's prompt")
            seen.append(out)
            if f"reqid {reqid}: running, 0 of" in out and f"cancelled {reqid}" in out:
                return
    finally:
        g.send_line("quit")
        g.expect([re.escape(PROMPT)], deadline, "the shell prompt")
    raise AssertionError(f"no cancel landed in the prefill in {tries} tries: {seen}")


def test_boot_argument_turns_reuse_off(boot_guest, kv_image, smol) -> None:
    prompts = kc.prefix_prompts()[:2]
    want = lc.reference_ids(smol, prompts, kc.GEN)
    g = boot_guest(ram=RAM, image=kv_image, timeout=300, append="aicache=0")
    assert [call(g, p) for p in prompts] == want
    kv = kv_state(g)
    assert kv["reuse"] == "off" and kv["hits"] == 0 and kv["cached"] == 0, kv
