"""`pyaisvc generate` end to end: text -> ids on the host, llmrun_smol (or the AI service) in
the guest, ids -> text."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from host import llmcases as lc

from pyaisvc.guest.llmguest import LlmGuestError, service_ids

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.guest
def test_generate_capital_of_france_in_the_guest() -> None:
    lc.smol_or_skip()
    proc = subprocess.run(
        [sys.executable, "-m", "pyaisvc", "generate", "--cpus", "1", "--model", "smol",
         "--max-new-tokens", "8", "The capital of France is"],
        cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "prompt ids: 504 3575 282 4649 314"
    assert lines[2].startswith("text:  Paris."), proc.stdout
    # The guest's own timing line, as llmrun_smol printed it.
    assert "llmrun_smol: timing load_us=" in proc.stderr
    assert "prompt=5 gen=8" in proc.stderr


@pytest.mark.guest
def test_generate_through_the_service_streams_the_same_ids() -> None:
    """--backend service: the resident worker, read with ai_stream (`ai gen`)."""
    lc.smol_or_skip()
    proc = subprocess.run(
        [sys.executable, "-m", "pyaisvc", "generate", "--cpus", "1", "--backend", "service",
         "--model", "smol",
         "--max-new-tokens", "8", "The capital of France is"],
        cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[1] == "ids: 7042 30 198 198 504 2988 314 42", proc.stdout
    assert "streamed through the AI service" in proc.stderr


@pytest.mark.guest
def test_generate_sampled_guest_equals_reference() -> None:
    lc.smol_or_skip()
    ids = {}
    for backend in ("guest", "service", "reference"):  # the service's worker samples too
        proc = subprocess.run(
            [sys.executable, "-m", "pyaisvc", "generate", "--cpus", "1", "--backend", backend,
             "--max-new-tokens", "8", "--temp", "0.9", "--top-k", "0", "--seed", "5",
             "The capital of France is"],
            cwd=ROOT, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stderr
        ids[backend] = proc.stdout.splitlines()[1]
    assert ids["guest"] == ids["service"] == ids["reference"]
    assert ids["guest"] != "ids: 7042 30 198 198 504 2988 314 42", "sampling changed nothing"


def test_generate_rejects_a_bad_sampling_value_before_booting() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pyaisvc", "generate", "--temp", "0.8", "--top-p", "2", "x"],
        cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr == ("pyaisvc generate: --top-p: '2' is not above 0 and at most 1\n")


def test_service_ids_reads_ai_gen_and_its_refusals() -> None:
    """`ai gen`'s ids line (user/ai/ai.c: stream, then the logprob lines), and the tool's
    error lines (report: "WHAT: error -N: ai_strerror's text") as a refusal."""
    ids = [7042, 30, 198, 198]  # the README's greedy continuation of "The capital of France is"
    assert service_ids("7042 30 198 198\r\n") == ids
    lp = "logprob i=0 id=7042 lp=-0.512345 top=7042:-0.512345"
    assert service_ids(f"7042 30 198 198\r\n{lp}\r\n") == ids
    for out in ("submit: error -102: token id not below the model's vocab size\r\n",
                "\r\nstream: error -108: no AI worker (no model installed)\r\n",
                "7042 30\r\nwait: error -111: the AI worker died while running the request\r\n",
                ""):
        with pytest.raises(LlmGuestError, match="^the AI service refused the request"):
            service_ids(out)
