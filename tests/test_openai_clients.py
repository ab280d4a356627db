"""Real clients, unchanged, against `pyaisvc serve` on the real guest (docs/OPENAI.md):
LangChain's ChatOpenAI, LiteLLM with an `openai/` model, and Simon Willison's `llm` CLI
configured for an OpenAI-compatible model, each getting the reference's greedy reply to
the France question, whole and streamed; the guest's log-probabilities (top 5) against
the numpy reference's, whole and streamed in step with the text; penalties and a logit
bias against the numpy sampler. Shares test_serve.py's server fixture (one guest)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import test_serve
from host import llmcases as lc
from test_serve import ENDS, N, Server, expected, reference, tok

from pyaisvc.model.sampling import SamplingOptions, lp_micro

pytestmark = pytest.mark.guest
server = test_serve.server  # test_serve's module fixture, here for this module: one guest
QUESTION = "What is the capital of France?"


def chat_reply() -> str:
    """The reference's greedy reply to QUESTION in the model's chat template."""
    prompt = tok().encode(lc.smol_chat_text(QUESTION))
    return expected(reference(prompt))[0]


def test_langchain_chat_openai_invoke_and_stream(server: Server) -> None:
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(model="smol", base_url=server.url + "/v1", api_key="unused",
                     temperature=0, max_tokens=N, max_retries=0)
    assert llm.invoke(QUESTION).content == chat_reply()
    assert "".join(chunk.content for chunk in llm.stream(QUESTION)) == chat_reply()


def test_litellm_completion_with_an_openai_model(server: Server) -> None:
    import litellm

    args = {"model": "openai/smol", "api_base": server.url + "/v1", "api_key": "unused",
            "messages": [{"role": "user", "content": QUESTION}], "temperature": 0,
            "max_tokens": N}
    out = litellm.completion(**args)
    assert out.choices[0].message.content == chat_reply()
    stream = litellm.completion(**args, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream) == chat_reply()


def test_llm_cli_with_an_openai_compatible_model(server: Server, tmp_path: Path) -> None:
    (tmp_path / "extra-openai-models.yaml").write_text(
        f"- model_id: aisvc-smol\n  model_name: smol\n  api_base: {server.url}/v1\n")
    env = os.environ | {"LLM_USER_PATH": str(tmp_path), "OPENAI_API_KEY": "unused",
                        "LLM_LOAD_PLUGINS": ""}  # only llm itself, none of the venv's plugins
    llm = Path(sys.executable).parent / "llm"
    for stream in ([], ["--no-stream"]):
        p = subprocess.run([str(llm), "-m", "aisvc-smol", *stream, "-o", "temperature", "0",
                            "-o", "max_tokens", str(N), QUESTION], env=env,
                           capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stderr
        assert p.stdout == chat_reply() + "\n", (stream, p.stdout, p.stderr)


def reference_records(prompt: list[int], opts: SamplingOptions) -> tuple[list[int], list]:
    """The reference's ids (cut after an end id) and logprob records for opts."""
    sampler = opts.sampler()
    ids = lc.reference_model(lc.smol_dir("v3")).generate(prompt, N, stop=ENDS,
                                                         sampler=sampler)
    return ids, sampler.records


def test_chat_logprobs_are_the_references(server: Server) -> None:
    """Top 5 per token: the ids' texts and values equal the numpy reference's log-softmax
    (pyaisvc.model.sampling.log_softmax, in millionths: exactly), the chosen token's value is
    its entry, and a stream carries the same entries in step with its text."""
    prompt = tok().encode(lc.smol_chat_text(QUESTION))
    ids, records = reference_records(prompt, SamplingOptions(logprobs=5))
    want = [(tok().decode([r.id]), lp_micro(r.lp),
             [(tok().decode([t]), lp_micro(v)) for t, v in r.top])
            for r in records if r.id not in ENDS]
    body = {"model": "smol", "messages": [{"role": "user", "content": QUESTION}],
            "temperature": 0, "max_tokens": N, "logprobs": True, "top_logprobs": 5}
    out = server.client().chat.completions.create(**body)
    got = [(e.token, round(e.logprob * 1e6), [(t.token, round(t.logprob * 1e6))
                                              for t in e.top_logprobs])
           for e in out.choices[0].logprobs.content]
    assert got == want
    assert all(any(t == (g[0], g[1]) for t in g[2]) for g in got if g[1] > -1e6)
    r = httpx.post(server.url + "/v1/chat/completions", json=body | {"stream": True},
                   timeout=600)
    chunks = [json.loads(ln[6:]) for ln in r.text.splitlines() if ln.startswith("data: {")]
    pieces, streamed = [], []
    for c in chunks:
        choice = c["choices"][0]
        entries = (choice["logprobs"] or {}).get("content") or []
        piece = choice["delta"].get("content", "")
        assert "".join(e["token"] for e in entries) == piece  # in step with the text
        pieces.append(piece)
        streamed += [(e["token"], round(e["logprob"] * 1e6)) for e in entries]
    assert "".join(pieces) == out.choices[0].message.content
    assert streamed == [g[:2] for g in got]


def test_penalties_and_bias_are_the_numpy_samplers(server: Server) -> None:
    """Greedy and seeded completions with presence and frequency penalties and a logit
    bias: the ids of pyaisvc.model.sampling over the reference's logits."""
    prompt = lc.FRANCE["smol"]
    client = server.client()
    for temp, seed in (("0", 0), ("0.8", 11)):
        opts = SamplingOptions(None if temp == "0" else temp, 40, "1", seed, "1.5", "1.5",
                               ((13, "2"),))
        ids, _ = reference_records(prompt, opts)
        out = client.completions.create(
            model="smol", prompt=prompt, max_tokens=N, temperature=float(temp), top_p=1,
            seed=seed, presence_penalty=1.5, frequency_penalty=1.5, logit_bias={"13": 2})
        assert out.choices[0].text == expected(ids)[0], (temp, ids)
        assert ids != reference(prompt)[:len(ids)]  # the penalties changed the reply
