"""The page `pyaisvc serve` serves at /, in a real browser: Debian's chromium driven by
Playwright, against the real guest (SmolLM2, a worker of 4 places: --batch 4).

The test types a message in the chat and reads the streamed reply from the page: it
must be the reference's greedy reply (pyaisvc.model.reference over the chat template written
out by hand, cut at the end of turn). Then it fires a burst of 8 requests from the
page and watches the 16 slots the page draws from the kernel's table: requests pass
QUEUED -> RUNNING -> DONE, and the batch holds more than one at a time. A JavaScript
error in the page fails the test. Screenshots: build/serve-page.png (wide, during
the burst) and build/serve-page-narrow.png (a phone-wide window).
"""

from __future__ import annotations

import functools
import json
import shutil
import threading
import time
from pathlib import Path

import httpx
import pytest
from host import llmcases as lc
from host.serveproc import serving_smol

from pyaisvc.model.tokenizer import load_tokenizer

pytestmark = pytest.mark.guest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")  # Debian's (tools/setup.sh installs it)
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
MESSAGE = "What is the capital of France?"
N = 12  # the chat's max tokens
ENDS = {0, 2}  # <|endoftext|>, <|im_end|>
BURST = 8

# The slots as the page draws them: [slot, shown state, rid].
SLOTS_JS = """() => Array.from(document.querySelectorAll('.slot')).map(
    el => [Number(el.id.slice(5)), el.dataset.state, Number(el.dataset.rid || 0)])"""


@functools.cache
def _want_reply() -> str:
    """The reference's greedy reply to MESSAGE (N ids at most), as the page shows it."""
    tok = load_tokenizer("smol")
    prompt = tok.encode(lc.smol_chat_text(MESSAGE))
    ids = lc.until_stop(lc.reference_ids(lc.smol_dir("v3"), [prompt], N)[0], ENDS)
    return tok.decode([i for i in ids if i not in ENDS], skip_special_tokens=True)


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory):
    lc.smol_or_skip()
    if not CHROMIUM.exists() or shutil.which("chromium") is None:
        pytest.skip("Debian's chromium is missing: run `make deps`")
    with serving_smol(tmp_path_factory.mktemp("page"), "--batch", "4",
                      "--enable-burst") as srv:
        yield srv.url


@pytest.fixture
def page(url: str):
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        pg = browser.new_page(viewport={"width": 1280, "height": 900})
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.goto(url + "/")
        pg.wait_for_selector("#slot-15", timeout=60_000)  # the first snapshot came
        yield pg
        browser.close()
    assert errors == [], f"JavaScript errors in the page: {errors}"


def test_chat_streams_the_references_reply(page) -> None:
    page.fill("#max-tokens", str(N))
    page.fill("#prompt", MESSAGE)
    page.press("#prompt", "Enter")  # Enter sends
    reply = page.wait_for_selector(".msg.assistant[data-state]", timeout=300_000)
    assert reply.get_attribute("data-state") == "done", page.inner_text("#chat-error")
    assert reply.text_content() == _want_reply()
    assert page.is_hidden("#chat-error")
    assert page.text_content(".msg.user") == MESSAGE


def test_chat_shows_each_tokens_alternatives(page) -> None:
    """With "alternatives" ticked, the reply is the same text, one span per token, each
    with the 5 likeliest tokens of its step in its tooltip, the token itself first
    (greedy) with its probability."""
    page.fill("#max-tokens", str(N))
    page.check("#alternatives")
    page.fill("#prompt", MESSAGE)
    page.press("#prompt", "Enter")
    reply = page.wait_for_selector(".msg.assistant[data-state]", timeout=300_000)
    assert reply.get_attribute("data-state") == "done", page.inner_text("#chat-error")
    assert reply.text_content() == _want_reply()
    spans = page.query_selector_all(".msg.assistant .tok")
    assert "".join(s.text_content() for s in spans) == _want_reply()
    for s in spans:
        lines = s.get_attribute("title").splitlines()
        shown = json.dumps(s.text_content(), ensure_ascii=False)  # as JSON.stringify
        assert len(lines) == 5 and lines[0].startswith(shown), lines
        assert all(line.endswith("%") for line in lines)


def test_a_burst_fills_the_queue_and_drains(page) -> None:
    page.fill("#burst-n", str(BURST))
    page.click("#burst")
    seen: dict[int, list[str]] = {}  # rid -> the states the page showed it in, in order
    biggest_batch, queued_max, shot = 0, 0, False
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        slots = page.evaluate(SLOTS_JS)
        for _, state, rid in slots:
            if rid and state != "FREE" and (not seen.get(rid) or seen[rid][-1] != state):
                seen.setdefault(rid, []).append(state)
        batch = int(page.get_attribute("#batch", "data-size"))
        biggest_batch = max(biggest_batch, batch)
        queued = sum(state == "QUEUED" for _, state, _ in slots)
        queued_max = max(queued_max, queued)
        if queued and batch > 1 and not shot:  # the queue and the batch both on screen
            (ROOT / "build").mkdir(exist_ok=True)
            page.screenshot(path=str(ROOT / "build/serve-page.png"), full_page=True)
            shot = True
        if page.get_attribute("#burst-status", "data-done") == "1" and \
                all(state in ("FREE", "DONE") for _, state, _ in slots):
            break
        time.sleep(0.05)
    status = page.text_content("#burst-status")
    assert status == f"{BURST}/{BURST} done", status
    assert len(seen) >= BURST, seen
    full_path = [r for r, states in seen.items()
                 if [s for s in states if s in ("QUEUED", "RUNNING", "DONE")][:3] ==
                 ["QUEUED", "RUNNING", "DONE"]]
    assert full_path, f"no request was seen QUEUED, then RUNNING, then DONE: {seen}"
    assert all(states[-1] == "DONE" for states in seen.values()), seen
    assert biggest_batch > 1 and queued_max >= 1, (biggest_batch, queued_max)
    assert shot
    # the chart has the burst's requests
    recent = httpx.get(page.url.rstrip("/") + "/v1/aisvc/table", timeout=30).json()["recent"]
    assert sum(r["finish"] == "length" and r["ttft_ms"] for r in recent) >= BURST, recent


# The slots' tenant lines and the tenants table as the page draws them.
OWNERS_JS = """() => Array.from(document.querySelectorAll('.slot .owner')).map(
    el => el.textContent)"""
TENANTS_JS = """() => Array.from(document.querySelectorAll('#tenants tbody tr')).map(
    tr => Array.from(tr.children).map(td => td.textContent))"""
COUNTING = "1, 2, 3, 4, 5, 6, 7, 8,"  # greedy SmolLM2 counts on: no early end
USERS = {"alice": 7, "bob": 0}  # user -> priority


def test_the_table_shows_the_policy_the_tenants_and_what_each_was_served(page) -> None:
    """Two users' requests through the API while the page watches: their slots name the
    user (alice's with her priority), and the tenants table then lists each user's
    generated ids, equal to the usage the server's replies counted."""
    assert page.text_content("#policy").startswith("policy fifo, "), \
        page.text_content("#policy")
    base = page.url.rstrip("/")
    usage: dict[str, dict] = {}

    def post(user: str) -> None:
        body = {"model": "smol", "prompt": COUNTING, "max_tokens": 64, "temperature": 0,
                "user": user, "priority": USERS[user]}
        r = httpx.post(base + "/v1/completions", json=body, timeout=600)
        usage[user] = r.json().get("usage") or {"error": r.text}

    threads = [threading.Thread(target=post, args=(u,)) for u in USERS]
    for t in threads:
        t.start()
    shown: set[str] = set()
    while any(t.is_alive() for t in threads):
        shown.update(page.evaluate(OWNERS_JS))
        time.sleep(0.05)
    for t in threads:
        t.join()
    assert {"alice \u00b7 prio 7", "bob"} <= shown, shown
    want = {u: str(usage[u]["completion_tokens"]) for u in USERS}
    assert all(n == "64" for n in want.values()), usage
    from playwright.sync_api import TimeoutError as PageTimeout

    try:  # the next snapshots (5 a second) catch up with the replies
        page.wait_for_function(f"""() => ({TENANTS_JS})().filter(
            r => r[0] === "alice" && r[3] === "{want['alice']}" ||
                 r[0] === "bob" && r[3] === "{want['bob']}").length === 2""", timeout=10_000)
    except PageTimeout:
        pass  # the assertions below show what the page has
    rows = {r[0]: r for r in page.evaluate(TENANTS_JS)}
    for user in USERS:
        assert rows[user][3] == want[user], rows
        assert rows[user][1].isdigit() and rows[user][2] == str(usage[user]["prompt_tokens"])
    assert rows["alice"][1] != rows["bob"][1], "two users, one kernel tenant"


def test_the_page_fits_a_narrow_window(page) -> None:
    page.set_viewport_size({"width": 390, "height": 844})
    page.wait_for_timeout(500)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    assert page.is_visible("#prompt") and page.is_visible("#slot-0")
    page.screenshot(path=str(ROOT / "build/serve-page-narrow.png"), full_page=True)
