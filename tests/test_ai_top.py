"""`ai top` (user/ai/ai.c) and the call under it, ai_table (docs/AI_SERVICE.md,
rule 14), in the guest.

With the real SmolLM2 served by an ai_daemon of two places (boot argument
aibatch=2), three requests from three processes fill the table: `ai top` shows two
RUNNING in the batch and one QUEUED in the FIFO, then the table draining to the one
request whose owner has not collected it (DONE, all its ids), then empty once that
owner is gone. The two collected results equal pyaisvc.model.reference's. Without a model,
`ai top` shows an empty table, refreshes until Ctrl-C, and the shell goes on.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

import pytest
from host import llmcases as lc

from pyaisvc.guest.llmguest import MODELS
from pyaisvc.guest.qemu import PROMPT

pytestmark = pytest.mark.guest

CTRL_C = "\x03"
CLEAR = "\x1b[H\x1b[2J"  # what ai top prints before each refresh
HEAD = re.compile(r"^worker pid (\d+), (\d+) completed; slots (\d+)/16 used, queue (\d+), "
                  r"batch (\d+)$", re.M)
ROW = re.compile(r"^ *(\d+) (QUEUED|RUNNING|DONE|FAILED) +(\d+|gone) +(\d+) +(\d+)/(\d+) ", re.M)
LIST = re.compile(r"^(FIFO|BATCH)[^:]*:((?: \d+)*)(?: \(empty\))?$", re.M)


@dataclass
class Frame:
    """One refresh of ai top, as printed."""

    worker: int
    completed: int
    used: int
    queue: int
    batch: int
    rows: dict[int, tuple[str, str, int, int, int]] = field(default_factory=dict)
    lists: dict[str, list[int]] = field(default_factory=dict)

    def states(self) -> list[str]:
        return sorted(r[0] for r in self.rows.values())


def frames(out: str) -> list[Frame]:
    """The frames of ai top's output, each checked against itself: the header's
    counts, the rows and the FIFO and batch lines must agree."""
    got = []
    for text in out.split(CLEAR)[1:]:
        for line in text.splitlines():
            assert len(line) <= 80, f"wider than 80 columns: {line!r}"
        head = HEAD.search(text)
        assert head, text
        f = Frame(*map(int, head.groups()))
        for m in ROW.finditer(text):
            f.rows[int(m.group(1))] = (m.group(2), m.group(3), int(m.group(4)),
                                       int(m.group(5)), int(m.group(6)))
        f.lists = {m.group(1): [int(v) for v in m.group(2).split()] for m in LIST.finditer(text)}
        assert sorted(f.lists) == ["BATCH", "FIFO"], text
        assert len(f.rows) == f.used, text
        assert f.lists["FIFO"] == sorted(f.lists["FIFO"], key=lambda s: f.lists["FIFO"].index(s))
        assert len(f.lists["FIFO"]) == f.queue == f.states().count("QUEUED"), text
        assert len(f.lists["BATCH"]) == f.batch == f.states().count("RUNNING"), text
        assert all(f.rows[s][0] == "QUEUED" for s in f.lists["FIFO"]), text
        assert all(f.rows[s][0] == "RUNNING" for s in f.lists["BATCH"]), text
        got.append(f)
    return got


def top(g, n: int = 1) -> list[Frame]:
    out = g.run(f"ai top -n {n}", timeout=120)
    got = frames(out)
    assert len(got) == n, out
    return got


def poll(g, want, what: str, seconds: float) -> Frame:
    """The first frame for which want(frame) holds, refreshing until seconds pass."""
    deadline = time.monotonic() + seconds
    seen = []
    while time.monotonic() < deadline:
        for f in top(g, 3):
            if want(f):
                return f
            seen.append(f)
    raise AssertionError(f"ai top never showed {what}; last frames: {seen[-3:]}")


def test_ai_top_shows_the_table_fill_and_drain(boot_guest, make_image) -> None:
    smol = lc.smol_or_skip()
    prompt = lc.FRANCE["smol"]
    ids = " ".join(map(str, prompt))
    want = " ".join(map(str, lc.reference_ids(smol, [prompt], 12)[0]))
    files: dict = {f"AI/SMOL/{f.name}": f for f in sorted(smol.iterdir()) if f.is_file()}
    # An ai session that submits and then sleeps without collecting: its request
    # stays DONE until the session ends.
    files["REQ/HOLD.TXT"] = f"submit 6 {ids}\nsleep 6000\n".encode()
    g = boot_guest(image=make_image(files), ram=MODELS["smol"].ram, timeout=300,
                   append="aibatch=2")
    empty = top(g)[0]
    assert empty.worker > 0 and empty.used == 0 and empty.rows == {}, empty
    g.run("ai < /REQ/HOLD.TXT > /hold.txt & echo started")
    g.run(f"ai call 12 {ids} > /c1.txt & echo started")
    g.run(f"ai call 12 {ids} > /c2.txt & echo started")

    full = poll(g, lambda f: f.states() == ["QUEUED", "RUNNING", "RUNNING"],
                "two requests running and one queued", 120)
    assert full.batch == 2 and full.queue == 1 and full.worker == empty.worker, full
    assert sorted(r[4] for r in full.rows.values()) == [6, 12, 12], full
    assert all(r[2] == len(prompt) for r in full.rows.values()), full
    assert len({r[1] for r in full.rows.values()}) == 3, full  # three owners
    queued = full.lists["FIFO"][0]
    assert full.rows[queued][3] == 0, full  # no id before it runs

    # The queued request gets a place once one ends; then all end, and the one
    # nobody collects stays DONE with all its ids.
    poll(g, lambda f: queued in f.lists["BATCH"], "the queued request running", 300)
    held = poll(g, lambda f: f.states() == ["DONE"], "the uncollected request alone", 600)
    (state, owner, plen, got, predict), = held.rows.values()
    assert (got, predict, plen) == (6, 6, len(prompt)), held
    assert held.completed == empty.completed + 3 and held.batch == held.queue == 0, held
    for name in ("/c1.txt", "/c2.txt"):
        assert g.run(f"cat {name}").splitlines()[0] == want
    # Its owner gone, the slot is free.
    g.run(f"kill {owner}")
    gone = poll(g, lambda f: f.used == 0, "the table empty again", 60)
    assert gone.rows == {} and gone.lists == {"FIFO": [], "BATCH": []}, gone
    assert "panic" not in g.transcript


def test_ai_top_until_ctrl_c(boot_guest) -> None:
    """Without a model: an empty table, no worker; `ai top` refreshes until ^C ends it,
    and the shell answers the next command. A bad -n says what to type."""
    g = boot_guest()
    (f,) = top(g)
    assert (f.worker, f.used, f.rows, f.lists) == (0, 0, {}, {"FIFO": [], "BATCH": []}), f
    assert "usage: top [-n N]" in g.run("ai top -n 0")
    g.child.send("ai top\n")
    for _ in range(3):  # three refreshes: it goes on by itself
        g.child.expect_exact(CLEAR, timeout=30)
    g.child.send(CTRL_C)
    g.child.expect_exact("^C", timeout=10)
    g.child.expect_exact(PROMPT, timeout=10)
    assert g.run("echo alive") == "alive\n"
    assert g.run("ai info").startswith("worker pid 0")
