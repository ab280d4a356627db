"""The KV cache's block pool and prefix reuse (user/llm/kvcache.c) in the host build of
llmrun_smol (make llm-host): every request whose prompt starts with cached blocks gives
the numpy reference's ids, greedy and sampled, on 1 and 2 threads; the positions taken
from the cache are those tests/host/kvcases.py works out from the ids; a pool smaller than
the conversations evicts and still answers exactly, leaking no block; batched requests
with a common prefix end up sharing its blocks; and with every block hash forced equal,
the full comparison alone keeps the answers exact.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from host import kvcases as kc
from host import llmcases as lc
from host.buildlock import build_lock

from pyaisvc.guest.llmguest import cached_positions, kv_counters

ROOT = lc.ROOT
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smol() -> tuple[Path, Path]:
    assets = lc.smol_dir("v3")
    if assets is None:
        pytest.skip("models/SMOL is missing (make smol-assets)")
    with build_lock():
        proc = subprocess.run(["make", "-s", "llm-host"], cwd=ROOT, capture_output=True,
                              text=True)
    if proc.returncode != 0:
        pytest.fail(f"make llm-host failed:\n{proc.stdout}{proc.stderr}", pytrace=False)
    return ROOT / "build/host/llmrun_smol", assets


def serve(smol: tuple[Path, Path], prompts: list[list[int]], args: list[str]
          ) -> tuple[list[list[int]], str]:
    """The prompts through one llmrun_smol --stdin: (the id lines, stderr)."""
    prog, assets = smol
    p = subprocess.run([str(prog), "--asset-dir", str(assets), "--stdin", *args],
                       input=lc.request_lines(prompts, kc.GEN), capture_output=True,
                       text=True, timeout=900)
    assert p.returncode == 0, p.stderr
    return [[int(v) for v in line.split()] for line in p.stdout.splitlines()], p.stderr


def assert_no_leak(err: str, blocks: int) -> None:
    kv = kv_counters(err)
    assert kv["blocks"] == blocks and kv["used"] == 0, kv
    assert kv["cached"] + kv["free"] == blocks, kv


@pytest.mark.parametrize("threads", ["1", "2"])
def test_prefix_reuse_greedy_is_exact(smol, threads: str) -> None:
    prompts = kc.prefix_prompts()
    want = lc.reference_ids(smol[1], prompts, kc.GEN)
    got, err = serve(smol, prompts, ["--threads", threads])
    assert got == want, err
    assert cached_positions(err) == kc.expected_cached(prompts, want)
    assert_no_leak(err, kv_counters(err)["blocks"])


def test_prefix_reuse_sampled_is_exact(smol) -> None:
    case = lc.SAMPLING_CASES[0]
    prompts = kc.prefix_prompts()
    want = [lc.sampled_reference(smol[1], p, kc.GEN, case) for p in prompts]
    got, err = serve(smol, prompts, lc.sampling_args(case))
    assert got == want, err
    assert cached_positions(err) == kc.expected_cached(prompts, want)


def test_off_takes_nothing_from_the_cache(smol) -> None:
    prompts = kc.prefix_prompts()
    want = lc.reference_ids(smol[1], prompts, kc.GEN)
    got, err = serve(smol, prompts, ["--prefix-cache", "off"])
    assert got == want
    assert cached_positions(err) == [0] * len(prompts)
    assert kv_counters(err)["cached"] == 0


def test_forced_hash_collisions_still_exact(smol) -> None:
    """--prefix-hash-bits 0: every block has hash 0, so each lookup meets every published
    block and only the comparison of parent and ids can pick the right one."""
    prompts = kc.prefix_prompts()
    want = lc.reference_ids(smol[1], prompts, kc.GEN)
    got, err = serve(smol, prompts, ["--prefix-hash-bits", "0"])
    assert got == want, err
    assert cached_positions(err) == kc.expected_cached(prompts, want)


def test_small_pool_evicts_and_leaks_nothing(smol) -> None:
    """16 blocks (one window) and six conversations served twice, round robin: they
    leave more full blocks than the pool has, so the least recently used are evicted."""
    prompts = kc.eviction_prompts()
    want = lc.reference_ids(smol[1], prompts, kc.GEN)
    got, err = serve(smol, prompts + prompts, ["--kv-blocks", "16"])
    assert got == want + want, err
    kv = kv_counters(err)
    assert kv["evictions"] > 0, kv
    assert_no_leak(err, 16)


def test_batched_prefix_blocks_shared(smol) -> None:
    """Eight requests with a 48-position common prefix, batched: the ids of each alone,
    and when they end the pool keeps the prefix's three blocks once, not eight times."""
    prompts = kc.shared_prompts()
    want = lc.reference_ids(smol[1], prompts, kc.GEN)
    got, err = serve(smol, prompts, ["--batch", "8"])
    assert got == want, err
    kv = kv_counters(err)
    assert kv["cached"] == 3, kv
    assert_no_leak(err, kv["blocks"])


def test_pool_below_one_window_refused(smol) -> None:
    prog, assets = smol
    p = subprocess.run([str(prog), "--asset-dir", str(assets), "--kv-blocks", "15", "--stdin"],
                       input="", capture_output=True, text=True, timeout=120)
    assert p.returncode == 1
    assert "kv pool of 15 blocks: at least 16" in p.stderr
