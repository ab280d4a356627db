"""pyaisvc.model.sampling, the numpy twin of user/llm/sample.c: its rules on small
logits (the guest equality is tests/test_llmrun_host.py and
tests/test_sampling_guest.py)."""

from __future__ import annotations

import numpy as np
import pytest

from pyaisvc.model.sampling import Sampler, SamplingError, SamplingOptions, splitmix64


def test_ties_go_to_the_lower_id_and_top_k_top_p_cut() -> None:
    logits = np.array([0.0, 1.0, 2.0, 5.0, 1.0, 0.5, 3.0, 5.0])
    assert {Sampler(1.0, top_k=1, seed=s).choose(logits) for s in range(20)} == {3}
    # top_k 2 keeps the two tied best (3 and 7), nothing else.
    assert {Sampler(1.0, top_k=2, top_p=1.0, seed=s).choose(logits) for s in range(40)} == {3, 7}
    # A tiny top_p keeps only the first candidate.
    assert {Sampler(1.0, top_k=0, top_p=0.01, seed=s).choose(logits) for s in range(20)} == {3}
    # A cold temperature leaves weight only on the maxima.
    assert {Sampler(0.01, top_k=0, top_p=1.0, seed=s).choose(logits) for s in range(40)} == {3, 7}
    # temp 0 is greedy.
    assert Sampler(0.0).choose(logits) == 3


def test_same_seed_same_draws_reset_restarts() -> None:
    logits = np.linspace(0.0, 2.0, 50)
    a = Sampler(1.0, top_k=0, top_p=1.0, seed=42)
    first = [a.choose(logits) for _ in range(10)]
    a.reset()
    assert [a.choose(logits) for _ in range(10)] == first
    b = Sampler(1.0, top_k=0, top_p=1.0, seed=43)
    assert [b.choose(logits) for _ in range(10)] != first


def test_splitmix64_is_64_bit() -> None:
    state, out = 0, 0
    for _ in range(3):
        state, out = splitmix64(state)
    assert state == (3 * 0x9E3779B97F4A7C15) % 2**64
    assert 0 <= out < 2**64


def test_options_to_guest_args() -> None:
    assert SamplingOptions().guest_args() == []
    assert SamplingOptions("0.8", 0, "1", 9).guest_args() == [
        "--temp", "0.8", "--top-k", "0", "--top-p", "1", "--seed", "9"]
    with pytest.raises(SamplingError):
        SamplingOptions("0.8", 40, "0").sampler()
    with pytest.raises(SamplingError):
        SamplingOptions("-1").sampler()
