"""`pyaisvc serve --api-key` against the real guest: every route but /health and the
page's files answers 401 without the key (and with a wrong one) and 200 with it.

One server process (its own guest) for the module; tests/test_serve_security.py
checks the same rules without a guest, tests/test_serve.py the server without a
key.
"""

from __future__ import annotations

import httpx
import openai
import pytest
from host import llmcases as lc
from host.serveproc import Server, serving_smol
from test_serve import FRANCE_TEXT, expected, reference

pytestmark = pytest.mark.guest

KEY = "a-room-key-for-the-test"
N = 12


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory):
    with serving_smol(tmp_path_factory.mktemp("serve-key"), "--host", "127.0.0.1",
                      "--api-key", KEY) as srv:  # /health needs no key
        yield srv


ROUTES = [("GET", "/v1/models", None), ("GET", "/metrics", None),
          ("GET", "/v1/aisvc/limits", None), ("GET", "/v1/aisvc/table", None),
          ("GET", "/openapi.json", None), ("GET", "/docs", None), ("GET", "/redoc", None),
          ("POST", "/v1/completions", {"model": "smol", "prompt": FRANCE_TEXT,
                                       "max_tokens": 2, "temperature": 0}),
          ("POST", "/v1/chat/completions", {"model": "smol", "max_tokens": 2, "messages": [
              {"role": "user", "content": "Hi"}]}),
          ("POST", "/tokenize", {"content": "Hello"}),
          ("POST", "/detokenize", {"tokens": [7042]}),
          ("POST", "/v1/aisvc/burst", {"n": 2, "max_tokens": 2})]


def test_every_route_needs_the_key(keyed: Server) -> None:
    published = set(httpx.get(keyed.url + "/openapi.json", timeout=60, headers={
        "authorization": f"Bearer {KEY}"}).json()["paths"])
    assert published <= {p for _, p, _ in ROUTES} | {"/health"}, published
    for method, path, body in ROUTES:
        for auth in ({}, {"authorization": "Bearer wrong"}, {"authorization": KEY}):
            r = httpx.request(method, keyed.url + path, json=body, headers=auth, timeout=600)
            assert r.status_code == 401, (path, auth, r.text)
            assert "Authorization: Bearer" in r.json()["error"]["message"]
        r = httpx.request(method, keyed.url + path, json=body, timeout=600,
                          headers={"authorization": f"Bearer {KEY}"})
        assert r.status_code == 200, (path, r.text)
    for path in ("/health", "/", "/web/app.js"):  # no data; the page asks for the key
        assert httpx.get(keyed.url + path, timeout=60).status_code == 200, path


def test_the_table_stream_takes_the_key_as_a_header_or_in_its_query(keyed: Server) -> None:
    url = keyed.url + "/v1/aisvc/table/stream"
    assert httpx.get(url + "?api_key=wrong", timeout=60).status_code == 401
    for kw in ({"url": url + "?api_key=" + KEY},
               {"url": url, "headers": {"authorization": f"Bearer {KEY}"}}):
        with httpx.stream("GET", timeout=60, **kw) as r:
            assert r.status_code == 200
            first = next(line for line in r.iter_lines() if line.startswith("data: "))
            assert '"slots"' in first


def test_the_openai_client_with_the_key_gets_the_reference(keyed: Server) -> None:
    text, _, _ = expected(reference(lc.FRANCE["smol"]))
    client = openai.OpenAI(base_url=keyed.url + "/v1", api_key=KEY, max_retries=0,
                           timeout=600)
    out = client.completions.create(model="smol", prompt=FRANCE_TEXT, max_tokens=N,
                                    temperature=0)
    assert out.choices[0].text == text
    wrong = openai.OpenAI(base_url=keyed.url + "/v1", api_key="nope", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        wrong.models.list()
