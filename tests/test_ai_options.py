"""Penalties, logit biases and log-probabilities through the AI service (struct ai_opts,
ai_logprob / ai_logprobs; docs/AI_SERVICE.md section 10): `ai gen` in the guest, with the
tiny synthetic Qwen3.5 served by ai_daemon, gets the ids and the log-probability
millionths of pyaisvc.model.sampling over pyaisvc.model.reference's logits, exactly."""

from __future__ import annotations

import re

import pytest
from host import llmcases as lc

from pyaisvc.model.sampling import SamplingOptions, lp_micro

pytestmark = pytest.mark.guest
GEN = 6
LINE = re.compile(r"^logprob i=(\d+) id=(\d+) lp=(-?\d+\.\d{6}) top=(.*)$", re.M)


@pytest.fixture(scope="module")
def qwen_dir():
    return lc.qwen_tiny_dir("v3")


@pytest.fixture
def guest(boot_guest, make_image, qwen_dir):
    files = {f"AI/QWEN/{f.name}": f for f in sorted(qwen_dir.iterdir()) if f.is_file()}
    return boot_guest(image=make_image(files), timeout=120)


def micro(text: str) -> int:
    whole, _, frac = text.lstrip("-").partition(".")
    v = int(whole) * 1_000_000 + int(frac)
    return -v if text.startswith("-") else v


def records(out: str) -> list[tuple[int, int, int, list[tuple[int, int]]]]:
    """(i, id, lp, [(id, lp), ...]) of each logprob line of `ai gen`, in millionths."""
    return [(int(i), int(t), micro(lp), [(int(a), micro(b)) for a, b in
                                         (p.split(":") for p in top.split(",") if p)])
            for i, t, lp, top in LINE.findall(out)]


def expected(qwen_dir, opts: SamplingOptions) -> tuple[list[int], list]:
    """The reference's ids and logprob records (millionths) for opts."""
    sampler = opts.sampler()
    ids = lc.reference_model(qwen_dir).generate(lc.FRANCE["qwen"], GEN, sampler=sampler)
    recs = [(i, r.id, lp_micro(r.lp), [(t, lp_micro(v)) for t, v in r.top])
            for i, r in enumerate(sampler.records)]
    return ids, recs


CASES = [
    SamplingOptions(None, 40, "0.95", 0, "0.5", "1.25", ((200064, "1"),), 3),
    SamplingOptions("0.9", 0, "1", 11, "-0.3", "1.75", ((314, "-100"), (760, "1")), 5),
    SamplingOptions(None, 40, "0.95", 0, "0", "0", (), 0),
]


def test_penalties_bias_and_logprobs_match_reference(guest, qwen_dir) -> None:
    ids = " ".join(map(str, lc.FRANCE["qwen"]))
    greedy = lc.reference_ids(qwen_dir, [lc.FRANCE["qwen"]], GEN)[0]
    for opts in CASES:
        want_ids, want_lp = expected(qwen_dir, opts)
        flags = " ".join(opts.service_args())
        out = guest.run(f"ai gen {flags} {GEN} {ids}", timeout=120)
        assert out.splitlines()[0].strip() == " ".join(map(str, want_ids)), (flags, out)
        got = records(out)
        assert got == want_lp, (flags, out)
        assert len(got) == GEN and all(len(r[3]) == opts.logprobs for r in got)
        assert all(v == r[2] for r in got for t, v in r[3] if t == r[1])
    assert expected(qwen_dir, CASES[0])[0] != greedy  # the penalties changed the ids
    assert "slots 0/16 used" in guest.run("ai info")


def test_options_checked(guest) -> None:
    ids = " ".join(map(str, lc.FRANCE["qwen"]))
    out = guest.run(f"ai call --logit-bias 99999999:1 2 {ids}")
    assert "call: error -102" in out, out  # the bias id against the model's vocab
    for bad in ("--presence-penalty 2.5", "--frequency-penalty -3", "--logit-bias 5:101",
                "--logit-bias x:1", "--logprobs 6"):
        out = guest.run(f"ai call {bad} 2 {ids}")
        assert "not a valid value" in out, (bad, out)
    out = guest.run(f"ai gen --logprobs 0 2 {ids}")
    assert len(records(out)) == 2 and all(r[3] == [] for r in records(out)), out
    assert "slots 0/16 used" in guest.run("ai info")
