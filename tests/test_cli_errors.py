"""Errors never lose work, and every CLI error is one line saying what to do.

- ``bench --out`` that cannot be written is refused before anything is
  measured; a benchmark that fails or is interrupted part-way writes the runs
  measured so far (the guest is a stand-in here, so each failure point can be
  chosen: the real guest path is tests/test_bench.py's);
- the runtime's limits (prompt length, prompt + new tokens) are checked on
  the host before a guest boots;
- argparse's complaints and a missing program are one line ``pyaisvc VERB: ...``
  naming flags the verb accepts;
- a kernel that cannot boot in the given RAM is reported as such, in seconds.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from host import llmcases as lc

from pyaisvc.bench import runner
from pyaisvc.cli import main
from pyaisvc.commands import generate
from pyaisvc.guest import qemu
from pyaisvc.guest.llmguest import MODELS, Prepared
from pyaisvc.guest.qemu import GuestCrashed

ROOT = Path(__file__).resolve().parent.parent
IDS = "7042 30 198 198"


def _cli(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        rc = main(argv)
    except SystemExit as e:  # argparse's usage errors
        rc = int(e.code or 0)
    out, err = capsys.readouterr()
    return rc, out, err


def test_bench_refuses_an_unwritable_out_before_measuring(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(runner, "prepare", lambda *a, **k: pytest.fail("bench measured"))
    (tmp_path / "file").write_text("not a directory")
    rc, out, err = _cli(["bench", "--out", str(tmp_path / "file" / "results")], capsys)
    assert rc == 1 and out == ""
    assert err.startswith("pyaisvc bench: --out ") and err.count("\n") == 1, err
    assert "pass --out with a directory you can write" in err


def test_bench_coldstart_refuses_a_bad_repeat_or_out_before_booting(tmp_path, capsys,
                                                                     monkeypatch):
    from pyaisvc.bench import coldstart

    monkeypatch.setattr(coldstart, "run", lambda *a, **k: pytest.fail("bench measured"))
    rc, out, err = _cli(["bench", "--mode", "coldstart", "--repeat", "0",
                         "--out", str(tmp_path / "r")], capsys)
    assert rc == 1 and out == "" and err.count("\n") == 1, err
    assert "--repeat must be at least 1" in err
    (tmp_path / "file").write_text("not a directory")
    rc, out, err = _cli(["bench", "--mode", "coldstart",
                         "--out", str(tmp_path / "file" / "results")], capsys)
    assert rc == 1 and "pass --out with a directory you can write" in err, err


class _FakeGuest:
    """Stands in for pyaisvc.guest.qemu.Guest: boots at once, serves `ok` cold runs, then
    fails the way `failure` says (an exception instance or class)."""

    ok = 1
    failure: BaseException = GuestCrashed("QEMU exited while waiting for the end of the run")

    def __init__(self, cfg) -> None:
        self.cfg, self.calls = cfg, 0
        self.harts, self.ram_mib, self.boot_seconds = 1, 512, 0.5

    def boot(self, timeout: float = 60.0) -> float:
        return 0.5

    def run(self, cmd: str, timeout: float = 30.0) -> str:
        self.calls += 1
        if self.calls > self.ok:
            raise self.failure
        return (f"{IDS}\nllmrun_smol: timing load_us=100 init_us=120 ttft_us=300 tpot_us=40 "
                "prompt=8 gen=4\n")

    def close(self) -> None:
        pass


@pytest.mark.parametrize("failure", [GuestCrashed("QEMU exited"), KeyboardInterrupt()],
                         ids=["guest-fails", "ctrl-c"])
def test_bench_keeps_what_it_measured_when_it_stops(tmp_path, capsys, monkeypatch, failure):
    spec = MODELS["smol"]
    prepared = Prepared(ROOT / "build/kernel/kernel", tmp_path / "fs.img", ROOT / spec.assets,
                        135.0, "SmolLM2 stand-in")
    monkeypatch.setattr(runner, "prepare", lambda *a, **k: prepared)
    monkeypatch.setattr(runner, "qemu_version", lambda q: "QEMU 0.0")
    monkeypatch.setattr(runner, "Guest", _FakeGuest)
    monkeypatch.setattr(_FakeGuest, "failure", failure)
    out = tmp_path / "results"
    rc, stdout, err = _cli(["bench", "--out", str(out), "--prompt-lens", "8", "--gen-lens", "4",
                            "--repeat", "3", "--cpus", "1", "--no-progress"], capsys)
    assert rc == 1 and stdout == ""
    last = err.strip().splitlines()[-1]
    assert last.startswith("pyaisvc bench: ") and "after 1 of 3 runs" in last, err
    assert f"wrote the 1 runs measured so far to {out}/" in last
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert [(r["prompt_len"], r["gen_len"], r["ttft_us"], r["ids"]) for r in rows] == \
        [("8", "4", "300", IDS)]
    data = json.loads((out / "results.json").read_text())
    assert data["command"].endswith("# incomplete") and len(data["samples"]) == 1
    assert "| cold | 8 | 4 | 1 |" in (out / "results.md").read_text()


@pytest.mark.parametrize("argv, message", [
    (["--max-new-tokens", "300", "The capital of France is"],
     "prompt 5 + 300 new tokens = 305 exceeds the model's runtime_seq_len 256: lower "
     "--max-new-tokens to at most 251"),
    (["word " * 300], "the prompt is 301 tokens; the runtime takes at most 255: shorten the text"),
])
def test_generate_checks_the_limits_before_booting(capsys, monkeypatch, argv, message):
    lc.smol_or_skip()
    monkeypatch.setattr(generate, "prepare", lambda *a, **k: pytest.fail("generate booted"))
    rc, out, err = _cli(["generate", "--model", "smol", *argv], capsys)
    assert rc == 1 and out == ""
    assert err == f"pyaisvc generate: {message}\n"


@pytest.mark.parametrize("argv, wanted", [
    (["bench", "--bogus"], "pyaisvc bench: unrecognized arguments: --bogus; pyaisvc bench "
                           "accepts --assets-qwen, --assets-smol, --batch, --burst, --cluster, "
                           "--config, --cpus"),
    (["generate", "--assets-qwen=x", "hi"], "pyaisvc generate: unrecognized arguments: "
                                             "--assets-qwen=x; pyaisvc generate accepts "
                                             "--assets, --backend"),
    (["chat", "--model", "llama"], "pyaisvc chat: argument --model: invalid choice: 'llama'"),
])
def test_usage_errors_are_one_line_naming_the_verbs_flags(capsys, argv, wanted):
    rc, out, err = _cli(argv, capsys)
    assert rc == 2 and out == ""
    assert err.startswith(wanted) and err.count("\n") == 1, err


def test_a_missing_make_is_one_line_saying_what_to_do(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path)}  # no make, no QEMU
    proc = subprocess.run([sys.executable, "-m", "pyaisvc", "bench", "--out", str(tmp_path / "o"),
                           "--no-progress"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("pyaisvc bench: ") and "make deps" in last, proc.stderr


@pytest.mark.guest
def test_a_kernel_that_cannot_boot_in_the_ram_says_so(build, capsys, monkeypatch):
    monkeypatch.setattr(qemu, "BANNER_SECONDS", 3.0)  # the same path as 20 s, sooner
    rc, out, err = _cli(["run", "--cpus", "1", "--ram", "1K", "--kernel", str(build.kernel),
                         "--image", str(build.image), "--", "echo", "hi"], capsys)
    assert rc == 1 and out == ""
    # QEMU 7.2 starts and the kernel stays silent; QEMU 10 refuses to start (no room for
    # the device tree). Either way the error names the RAM and what to do.
    assert err.startswith(("pyaisvc run: the kernel printed nothing in 3 s: it cannot boot "
                           "with -m 1K", "pyaisvc run: QEMU exited before the kernel's boot "
                           "banner")), err
    assert "-m 1K" in err
    assert "boot with more RAM" in err


def test_fsimg_list_takes_the_image_as_an_argument(build, capsys):
    rc, out, _ = _cli(["fsimg", "list", str(build.image)], capsys)
    assert rc == 0 and "/sh\n" in out and out.startswith("d ")
    rc, out, err = _cli(["fsimg", "list"], capsys)
    assert rc == 1 and err == "pyaisvc fsimg list: give the image: pyaisvc fsimg list IMAGE\n"
