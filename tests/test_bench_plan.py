"""`pyaisvc bench --config FILE.toml`: a whole measurement plan in one file.

The README's example (docs/bench-example.toml) must turn into exactly the
benchmark its comments describe, a flag on the command line must win over
the file, and every bad key must be reported with its file and line.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pyaisvc.cli import main
from pyaisvc.commands import bench as bench_cmd
from pyaisvc.errors import AisvcError

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "docs/bench-example.toml"


def _planned(argv: list[str], monkeypatch, capsys, tmp_path: Path):
    """The BenchConfig and --out that `pyaisvc bench ARGV` would measure with (nothing runs)."""
    seen = {}

    def fake_run_bench(cfg, progress=None, note=None):
        seen["cfg"] = cfg
        raise AisvcError("stopped before measuring")

    monkeypatch.setattr(bench_cmd, "run_bench", fake_run_bench)
    monkeypatch.setattr(bench_cmd, "check_out", lambda out: seen.setdefault("out", out))
    rc = main(["bench", *argv])
    _, err = capsys.readouterr()
    assert rc == 1 and "stopped before measuring" in err, err
    return seen["cfg"], seen["out"]


def test_the_readme_example_is_the_plan_it_describes(monkeypatch, capsys, tmp_path):
    cfg, out = _planned(["--config", str(EXAMPLE)], monkeypatch, capsys, tmp_path)
    assert (cfg.models, cfg.modes) == (["smol"], ["cold", "service"])
    assert (cfg.prompt_lens, cfg.gen_lens, cfg.repeat) == ([8, 16, 32], [8, 16, 32], 3)
    assert (cfg.cpus, cfg.ram, cfg.profile) == ([1], "512M", False)
    assert out == Path("build/bench/hw2")


def test_flags_on_the_command_line_win(monkeypatch, capsys, tmp_path):
    cfg, out = _planned(["--config", str(EXAMPLE), "--repeat", "1", "--gen-lens", "4",
                         "--out", str(tmp_path)], monkeypatch, capsys, tmp_path)
    assert (cfg.repeat, cfg.gen_lens, cfg.prompt_lens) == (1, [4], [8, 16, 32])
    assert out == tmp_path


def test_no_config_keeps_the_defaults(monkeypatch, capsys, tmp_path):
    cfg, _ = _planned([], monkeypatch, capsys, tmp_path)
    assert (cfg.models, cfg.modes, cfg.repeat, cfg.prompt_lens) == (["smol"], ["cold"], 3,
                                                                     [8, 16, 32])


@pytest.mark.parametrize("text, message", [
    ('model = "smol"\n\nprompt_len = [8]\n',
     ":3: unknown key 'prompt_len'; the keys are model, mode, prompt_lens"),
    ('repeat = 2\ngen_lens = [8, "x"]\n',
     ":2: gen_lens: give a list of whole numbers, e.g. [8, 16, 32], not [8, 'x']"),
    ('model = "llama"\n', ':1: model: give "smol", "qwen" or "both", not \'llama\''),
    ("cpus = true\n",
     ":1: cpus: give a whole number of at least 1 or a list of them, e.g. [1, 2], not True"),
    ("repeat = \n", ": not valid TOML: Invalid value (at line 1, column 10)"),
])
def test_bad_keys_are_reported_with_their_line(tmp_path, capsys, text, message):
    plan = tmp_path / "plan.toml"
    plan.write_text(text)
    rc = main(["bench", "--config", str(plan)])
    _, err = capsys.readouterr()
    assert rc == 1 and err.count("\n") == 1, err
    assert err.startswith("pyaisvc bench: ") and message in err, err
    assert str(plan) in err
