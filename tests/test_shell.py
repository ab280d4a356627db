"""The shell (user/sh.c) and the utilities, driven through the guest console.

Outputs of wc, grep and ls are checked against values computed here in Python
from the same bytes that were packed into the image, not against recorded output.
"""

from __future__ import annotations

import random
import re
import time

import pytest

from pyaisvc.guest.qemu import PROMPT

MAXLINE = 4096  # user/sh.c: the longest line sh accepts
LS_LINE = re.compile(r"^(dir|file|dev) +(\d+) +(\d+) (.+)$")
WORDS = ["the", "quick", "brown", "fox", "jumped", "over", "lazy", "dogs", "loop",
         "lp", "looop", "one", "o.e", "ended", "x", "abc", "a1c"]


def make_text(seed: int = 7, lines: int = 400) -> bytes:
    """Lines of words with mixed blanks, some empty lines, no final newline."""
    rnd = random.Random(seed)
    out = []
    for _ in range(lines):
        if rnd.random() < 0.08:
            out.append("")
            continue
        words = [rnd.choice(WORDS) for _ in range(rnd.randint(1, 9))]
        line = "".join(w + rnd.choice([" ", "  ", "\t", " \t "]) for w in words)
        out.append(line.rstrip(" \t") + rnd.choice(["", " "]))
    return "\n".join(out).encode()


def run_raw(g, line: str, timeout: float = 10.0) -> str:
    """Sends one line as typed, without run()'s marker, and returns what it
    printed before the next prompt (a syntax error would swallow the marker)."""
    g.child.send(line + "\n")
    g.child.expect(re.escape(line) + r"\r*\n", timeout=timeout)
    g.child.expect_exact(PROMPT, timeout=timeout)
    return g.child.before.replace("\r", "")


@pytest.mark.guest
def test_sequence_and_background(boot_guest) -> None:
    g = boot_guest()
    assert g.run("echo a ; echo b;echo c") == "a\nb\nc\n"
    start = time.monotonic()
    out = g.run("sleep 3 & echo now")
    assert time.monotonic() - start < 2.5, "the shell waited for a background job"
    assert re.fullmatch(r"\[\d+\]\nnow\n", out), out
    # The background job really runs: it writes a file while the shell goes on.
    assert re.fullmatch(r"\[\d+\]\n", g.run("echo late > bg & sleep 1"))
    assert g.run("cat bg") == "late\n"


@pytest.mark.guest
def test_redirection(boot_guest) -> None:
    g = boot_guest()
    assert g.run("echo one > f ; echo two >> f ; echo three >>f ; cat f") == "one\ntwo\nthree\n"
    assert g.run("echo x > f ; cat < f") == "x\n", "> did not truncate"
    assert g.run("echo new >> g ; cat g") == "new\n", ">> did not create a missing file"
    assert g.run("wc < f") == "1 1 2\n"
    assert g.run("cat < nosuch") == "sh: cannot open nosuch: no such file or directory\n"
    assert g.run("echo a b c | wc > cnt ; cat cnt") == "1 3 6\n"


@pytest.mark.guest
def test_command_errors(boot_guest) -> None:
    g = boot_guest()
    assert g.run("nosuchprog arg") == "sh: nosuchprog: command not found\n"
    assert g.run("/nosuch/prog") == "sh: /nosuch/prog: command not found\n"
    assert g.run("echo not a program > script ; ./script") == (
        "sh: exec ./script failed: not an executable\n")
    assert g.run("echo alive") == "alive\n"


@pytest.mark.guest
def test_exit_status(boot_guest) -> None:
    """$? is the last foreground pipeline's exit status (its last command's); quoted,
    it is just the word; the driver reads it after every command."""
    g = boot_guest()
    assert g.run("nosuchprog ; echo $?") == "sh: nosuchprog: command not found\n127\n"
    assert g.last_status == 0  # the echo's
    assert g.run("echo x > notexe ; ./notexe ; echo $?").endswith("126\n")
    # a pipeline's status is its last command's
    out = g.run("nosuchprog | echo last ; echo $?").splitlines()
    assert sorted(out[:2]) == ["last", "sh: nosuchprog: command not found"] and out[2] == "0"
    assert g.run("echo first | nosuchprog ; echo $?") == (
        "sh: nosuchprog: command not found\n127\n")
    assert g.run("cd /nonexistent ; echo $? '$?' \"$?\"").endswith("1 $? $?\n")
    g.run("grep zzz /nosuchfile")
    assert g.last_status != 0
    g.run("echo ok")
    assert g.last_status == 0


@pytest.mark.guest
def test_shell_exit_always_comes_back(boot_guest) -> None:
    """`exit 3` at the prompt, five times: init restarts the shell every time. It
    gives up only background services that keep failing (ai_daemon), never the
    console's shell, which would leave the user without one."""
    g = boot_guest()
    for _ in range(5):
        g.send_line("exit 3")
        g.expect([re.escape("init: /sh exited with status 3; restarting it")],
                 time.monotonic() + 30, "init's restart line")
        g.expect([re.escape(PROMPT)], time.monotonic() + 30, "the new shell's prompt")
    assert g.run("echo back") == "back\n"
    assert g.transcript.count("init: /sh exited with status 3; restarting it") == 5
    assert "no longer restarts" not in g.transcript


@pytest.mark.guest
def test_cd(boot_guest) -> None:
    g = boot_guest()
    assert g.run("cd /nosuch") == "sh: cd: /nosuch: no such file or directory\n"
    assert g.run("echo f > file ; cd file") == "sh: cd: file: not a directory\n"
    # Programs are found from any directory; relative names follow cd.
    assert g.run("mkdir d ; cd d ; echo in d > f ; cat f") == "in d\n"
    assert g.run("cd .. ; cat d/f ; cd ; cat d/f") == "in d\nin d\n"


@pytest.fixture(scope="module")
def parse_guest(boot_shared_guest):
    """One guest for the syntax-error cases: each runs nothing, so none changes what
    another sees."""
    return boot_shared_guest()


@pytest.mark.guest
@pytest.mark.parametrize("line,message", [
    ("echo a |", "missing command after `|'"),
    ("| echo a", "missing command before `|'"),
    ("echo a ;; echo b", "missing command before `;'"),
    ("echo >", "missing file name after `>'"),
    ("cat < ; echo b", "missing file name after `<'"),
    ("> f", "redirection without a command before `end of line'"),
    ('echo "abc', "unterminated `quote'"),
])
def test_syntax_errors_run_nothing(parse_guest, line: str, message: str) -> None:
    g = parse_guest
    out = run_raw(g, f"echo RAN ; {line}")
    assert out == f"sh: syntax error: {message}\n"
    assert g.run("echo alive") == "alive\n"


@pytest.mark.guest
def test_long_lines(boot_guest, make_image) -> None:
    # Four arguments of 1000 bytes (exec takes at most MAXARGLEN = 1024 each).
    long_line = " ".join(c * 1000 for c in "wxyz")
    script = f"echo {long_line}\necho {'z' * (MAXLINE + 10)}\necho after\n".encode()
    g = boot_guest(image=make_image({"long.sh": script}))
    # Typed at the console (run() adds its marker: still under 4 KiB).
    assert g.run(f"echo {long_line}") == long_line + "\n"
    assert g.run("sh long.sh") == (
        f"{long_line}\nsh: line too long (at most {MAXLINE} characters); ignored\nafter\n")


@pytest.mark.guest
def test_wc_grep_ls_match_host(boot_guest, make_image, build) -> None:
    text = make_text()
    g = boot_guest(image=make_image({"data.txt": text, "sub/empty": b""}))

    nl = text.count(b"\n")
    want = f"{nl} {len(text.split())} {len(text)} data.txt\n"
    assert g.run("wc data.txt") == want
    assert g.run("cat data.txt | wc") == want.replace(" data.txt", "")

    lines = text.decode().split("\n")
    for pattern in ["^the", "ed$", "o.e", "lo*p", "a.c", "^$", "x", r"o\.e", "^o.*s$"]:
        expect = [ln for ln in lines if re.search(pattern, ln)]
        out = g.run(f"grep '{pattern}' data.txt")
        assert out.splitlines() == expect, f"grep {pattern!r}"
    assert g.run("grep nowhere data.txt") == ""

    listing = g.run("ls /").splitlines()
    rows = [LS_LINE.match(row) for row in listing]
    assert all(rows), f"ls / printed a line that is not TYPE INODE SIZE NAME:\n{listing}"
    # Aligned: every name starts in the same column.
    assert len({row.start(4) for row in rows}) == 1, "\n".join(listing)
    entries = {row.group(4): (row.group(1), int(row.group(2)), int(row.group(3))) for row in rows}
    want_files = {name: elf.stat().st_size for name, elf in build.uprogs.items()}
    want_files["data.txt"] = len(text)
    for name, size in want_files.items():
        assert entries.get(name, (None,))[0] == "file" and entries[name][2] == size, name
    assert entries["."][:2] == ("dir", 1) and entries[".."][:2] == ("dir", 1)
    assert entries["sub"][0] == "dir" and entries["console"][0] == "dev"
    inodes = [ino for name, (_, ino, _) in entries.items() if name not in (".", "..")]
    assert len(inodes) == len(set(inodes)), "two names share an inode"
    assert set(entries) == set(want_files) | {".", "..", "sub", "console"}
    row = LS_LINE.match(g.run("ls sub/empty").rstrip("\n"))
    assert row and row.group(1, 3, 4) == ("file", "0", "sub/empty")
    assert [r.split()[-1] for r in g.run("ls sub").splitlines()] == [".", "..", "empty"]
