"""OpenAI's request fields on pyaisvc serve, host side (docs/OPENAI.md's table): every
field offered is accepted and reaches the guest as the table says (struct ai_opts through
the S frame), every value not offered is a 400 naming the field and what is offered, and
log-probabilities take each endpoint's shape, in step with a stream's text. Over the fake
gateway of tests/test_serve_host.py (the real guest: tests/test_openai_clients.py)."""

from __future__ import annotations

import json

import pytest
from test_serve_host import PARIS, api_test

from pyaisvc.model.chattemplate import render
from pyaisvc.model.tokenizer import load_tokenizer
from pyaisvc.serve import frames

USER = {"role": "user", "content": "What is the capital of France?"}
CHAT = {"model": "smol", "messages": [USER], "temperature": 0}
DONE = [*PARIS, 2]  # " Paris." then the end of the turn


def chat(**fields) -> dict:
    return CHAT | fields


# (fields added to a greedy chat request, the options the guest gets)
ACCEPTED = [
    ({}, frames.Options()),
    ({"presence_penalty": 0, "frequency_penalty": 0}, frames.Options()),
    ({"presence_penalty": 0.5, "frequency_penalty": -1.25},
     frames.Options(presence_micro=500000, frequency_micro=-1250000)),
    ({"logit_bias": {"198": -100, "30": 2.5}},
     frames.Options(bias=((30, 2500000), (198, -100000000)))),
    ({"logprobs": True}, frames.Options(logprobs=1)),
    ({"logprobs": True, "top_logprobs": 5}, frames.Options(logprobs=6)),
    ({"logprobs": False, "top_logprobs": None}, frames.Options()),
    ({"response_format": {"type": "text"}}, frames.Options()),
    ({"stream_options": {"include_usage": True}}, frames.Options()),
    ({"max_completion_tokens": 3}, frames.Options()),
    ({"tool_choice": "none", "parallel_tool_calls": False, "modalities": ["text"],
      "metadata": {"k": "v"}, "store": False, "service_tier": "auto",
      "reasoning_effort": "low", "verbosity": "low", "prompt_cache_key": "p",
      "safety_identifier": "s", "seed": 3, "n": 1}, frames.Options()),
    # the user is the kernel's tenant: the first user of a server gets the first tenant id
    ({"user": "u", "priority": 7}, frames.Options(tenant=100000, priority=7)),
    ({"user": "u"}, frames.Options(tenant=100000)),
]

# (fields of a chat request, the field named, words of the message)
REFUSED = [
    ({"n": 2}, "n", "one choice"),
    ({"response_format": {"type": "json_object"}}, "response_format", "only 'text'"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}},
     "response_format", "only 'text'"),
    ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools", "not offered"),
    ({"tool_choice": "auto"}, "tool_choice", "only 'none'"),
    ({"functions": [{"name": "f"}]}, "functions", "not offered"),
    ({"function_call": "auto"}, "function_call", "not offered"),
    ({"audio": {"voice": "alloy", "format": "wav"}}, "audio", "text only"),
    ({"modalities": ["text", "audio"]}, "modalities", "only ['text']"),
    ({"prediction": {"type": "content", "content": "x"}}, "prediction", "not offered"),
    ({"web_search_options": {}}, "web_search_options", "not offered"),
    ({"top_logprobs": 2}, "top_logprobs", "needs logprobs"),
    ({"logprobs": True, "top_logprobs": 6}, "top_logprobs", "at most 5"),
    ({"logprobs": True, "top_logprobs": 21}, "top_logprobs", "less than or equal to 20"),
    ({"max_tokens": 3, "max_completion_tokens": 4}, "max_completion_tokens", "give one"),
    ({"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}]}, "messages",
     "text only"),
    ({"messages": [{"role": "user", "content": [
        {"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}]}]},
     "messages", "text only"),
    ({"messages": [USER, {"role": "tool", "content": "x", "tool_call_id": "1"}]}, "messages",
     "function calling"),
    ({"messages": [USER, {"role": "assistant", "tool_calls": [{"id": "1"}]}]}, "messages",
     "not offered"),
    ({"presence_penalty": 2.01}, "presence_penalty", "less than or equal to 2"),
    ({"logit_bias": {"-1": 1}}, "logit_bias", "not a token id"),
    ({"bogus_field": 1}, "bogus_field", "does not support this field"),
]


def test_offered_chat_fields_reach_the_guest() -> None:
    async def body(client, engine, fake):
        for fields, opts in ACCEPTED:
            r = await client.post("/v1/chat/completions", json=chat(**fields))
            assert r.status_code == 200, (fields, r.text)
            assert r.json()["choices"][0]["message"]["content"] == " Paris.", fields
            assert engine.last[2] == opts, fields
            if "max_completion_tokens" in fields:
                assert engine.last[1] == 3

    api_test(DONE, window=4, queue_max=4, body=body)


@pytest.mark.parametrize("fields, param, words", REFUSED)
def test_unoffered_values_are_400s_naming_the_field(fields, param, words) -> None:
    async def body(client, engine, fake):
        r = await client.post("/v1/chat/completions", content=json.dumps(chat(**fields)),
                              headers={"content-type": "application/json"})
        assert r.status_code == 400, r.text
        err = r.json()["error"]
        assert err["param"] == param and words in err["message"], err
        assert not any(s.startswith("S") for s in fake.seen)

    api_test(DONE, window=4, queue_max=4, body=body)


def test_text_parts_and_the_developer_role_are_the_plain_prompt() -> None:
    tok = load_tokenizer("smol")
    plain = [{"role": "system", "content": "Be brief."}, USER]
    want = tok.encode(render(tok, plain))
    parts = [{"role": "developer", "content": [{"type": "text", "text": "Be "},
                                               {"type": "text", "text": "brief."}]},
             {"role": "user", "content": [{"type": "text", "text": USER["content"]}],
              "name": "student"}]

    async def body(client, engine, fake):
        for messages in (plain, parts):
            r = await client.post("/v1/chat/completions", json=chat(messages=messages))
            assert r.status_code == 200, r.text
            assert engine.last[0] == want

    api_test(DONE, window=4, queue_max=4, body=body)


def test_chat_logprobs_whole_and_streamed_in_step() -> None:
    tok = load_tokenizer("smol")

    async def body(client, engine, fake):
        r = await client.post("/v1/chat/completions",
                              json=chat(logprobs=True, top_logprobs=3))
        assert r.status_code == 200, r.text
        lp = r.json()["choices"][0]["logprobs"]["content"]
        assert [e["token"] for e in lp] == [" Paris", "."]  # no entry for the end of turn
        assert [e["logprob"] for e in lp] == [-0.1, -0.2]
        for e, tid in zip(lp, PARIS, strict=True):
            assert e["bytes"] == list(e["token"].encode())
            assert [t["token"] for t in e["top_logprobs"]] == [
                tok.decode([tid + k]) for k in range(3)]
            assert e["top_logprobs"][0]["logprob"] == e["logprob"]  # the chosen id's entry
        r = await client.post("/v1/chat/completions",
                              json=chat(logprobs=True, top_logprobs=1, stream=True))
        chunks = [json.loads(ln[6:]) for ln in r.text.splitlines()
                  if ln.startswith("data: {")]
        text = [c["choices"][0]["delta"].get("content", "") for c in chunks]
        entries = [(c["choices"][0]["logprobs"] or {"content": []})["content"]
                   for c in chunks]
        assert "".join(text) == " Paris."
        for piece, ents in zip(text, entries, strict=True):
            assert "".join(e["token"] for e in ents) == piece  # in step with the text

    api_test(DONE, window=4, queue_max=4, body=body)


def test_completion_logprobs_and_echo() -> None:
    tok = load_tokenizer("smol")

    async def body(client, engine, fake):
        r = await client.post("/v1/completions", json={
            "model": "smol", "prompt": "The capital of France is", "temperature": 0,
            "logprobs": 2, "max_tokens": 3})
        choice = r.json()["choices"][0]
        assert choice["text"] == " Paris."
        assert choice["logprobs"] == {
            "tokens": [" Paris", "."], "token_logprobs": [-0.1, -0.2],
            "top_logprobs": [{" Paris": -0.1, tok.decode([7043]): -0.6},
                             {".": -0.2, tok.decode([31]): -0.7}],
            "text_offset": [0, 6]}
        assert engine.last[2] == frames.Options(logprobs=3)
        for stream in (False, True):
            r = await client.post("/v1/completions", json={
                "model": "smol", "prompt": ["The capital of France is"], "echo": True,
                "temperature": 0, "max_tokens": 3, "stream": stream})
            if stream:
                text = "".join(json.loads(ln[6:])["choices"][0]["text"]
                               for ln in r.text.splitlines() if ln.startswith("data: {"))
            else:
                text = r.json()["choices"][0]["text"]
            assert text == "The capital of France is Paris."
        r = await client.post("/v1/completions", json={
            "model": "smol", "prompt": [[504, 3575]], "temperature": 0, "max_tokens": 1})
        assert r.status_code == 200 and engine.last[0] == [504, 3575]

    api_test(DONE, window=4, queue_max=4, body=body)
