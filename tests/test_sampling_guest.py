"""Sampling and --stop in the guest (user/llm/sample.c, user/llm/session.c):
llmrun_smol under QEMU draws exactly the reference's tokens for a seed
(pyaisvc.model.sampling over pyaisvc.model.reference's logits), and stops at a --stop id
with its timing line."""

from __future__ import annotations

import pytest
from host import llmcases as lc

from pyaisvc.guest.llmguest import MODELS, timings
from pyaisvc.model.sampling import SamplingOptions, lp_micro

GEN = 8
pytestmark = pytest.mark.guest


@pytest.fixture(scope="module")
def smol() -> object:
    return lc.smol_or_skip()


def test_sampled_ids_and_stop_match_reference(boot_guest, make_image, smol) -> None:
    files = {f"AI/SMOL/{f.name}": f for f in sorted(smol.iterdir()) if f.is_file()}
    g = boot_guest(image=make_image(files), ram=MODELS["smol"].ram, timeout=120)
    prompt = lc.FRANCE["smol"]
    ids = " ".join(map(str, prompt))
    for case in lc.SAMPLING_CASES[:3]:
        want = lc.sampled_reference(smol, prompt, GEN, case)
        args = " ".join(lc.sampling_args(case))
        out = g.run(f"llmrun_smol --predict {GEN} {args} {ids} > /out.txt", timeout=120)
        assert [t["gen"] for t in timings(out)] == [GEN], out
        assert g.run("cat /out.txt") == " ".join(map(str, want)) + "\n", case
    # --stop at the greedy continuation's third id: three ids, gen=3.
    greedy = lc.reference_ids(smol, [prompt], GEN)[0]
    stop = greedy[2]
    cut = greedy[:greedy.index(stop) + 1]
    out = g.run(f"llmrun_smol --predict {GEN} --stop {stop} {ids}", timeout=120)
    lines = [line for line in out.splitlines() if not line.startswith("llmrun_smol:")]
    assert lines[0] == " ".join(map(str, cut))
    assert [t["gen"] for t in timings(out)] == [len(cut)]
    # Penalties, a bias and --logprobs 2, sampled: the numpy sampler's ids and
    # log-probability millionths, exactly.
    opts = SamplingOptions("0.8", 40, "0.95", 4, "0.5", "1", ((198, "-3.5"),), 2)
    sampler = opts.sampler()
    want = lc.reference_model(smol).generate(prompt, GEN, sampler=sampler)
    args = " ".join(opts.guest_args())
    out = g.run(f"llmrun_smol --predict {GEN} {args} {ids} > /out.txt", timeout=120)
    assert g.run("cat /out.txt") == " ".join(map(str, want)) + "\n"
    lines = [line for line in out.splitlines() if " logprob " in line]
    assert lines == [
        f"llmrun_smol: logprob i={i} id={r.id} lp={lp_text(r.lp)} top="
        + ",".join(f"{t}:{lp_text(v)}" for t, v in r.top)
        for i, r in enumerate(sampler.records)], out


def lp_text(lp: float) -> str:
    """A log-probability as llmrun prints it: millionths, 6 decimals."""
    m = lp_micro(lp)
    return f"{'-' if m < 0 else ''}{abs(m) // 1_000_000}.{abs(m) % 1_000_000:06d}"
