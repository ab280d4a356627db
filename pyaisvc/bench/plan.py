"""A measurement plan in a TOML file: `pyaisvc bench --config FILE.toml`.

One file describes a whole experiment, so a TA can hand every student the
same plan (docs/bench-example.toml)::

    model = "smol"            # "smol", "qwen" or "both"
    mode = "both"             # "cold", "service" or "both"
    prompt_lens = [8, 16, 32]
    gen_lens = [8, 16, 32]
    repeat = 3
    cpus = [1, 2]            # harts; a list is a series
    ram = "512M"
    out = "build/bench/hw2"
    cluster = "tcp://lab01:8786"   # optional: the cells as tasks on a Dask cluster

Every key is a `pyaisvc bench` flag (dashes become underscores); a flag
given on the command line wins over the file. ``load_plan`` reads the file
with tomllib and checks each key's name and type; a bad one is reported with
its line: ``plan.toml:4: prompt_lens: give a list of whole numbers, e.g.
[8, 16, 32]``. ``read_plan`` is that reader for any kind of plan, given its
table of keys (pyaisvc.bench.load.plan gives the load mode's).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pyaisvc.bench.matrix import BenchError
from pyaisvc.guest.llmguest import MODELS


def _lengths(v: object) -> str | None:
    """A non-empty list of whole numbers above 0 as the flag takes it ("8,16"), or None."""
    ok = isinstance(v, list) and v and all(isinstance(x, int) and not isinstance(x, bool)
                                           and x > 0 for x in v)
    return ",".join(str(x) for x in v) if ok else None


def _harts(v: object) -> str | None:
    """One number of harts or a list of them (a series), as the --cpus flag takes it."""
    return _lengths([v] if isinstance(v, int) else v)


def _positive(v: object) -> int | None:
    """A whole number above 0, or None."""
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def _text(v: object) -> str | None:
    """A non-empty string, or None."""
    return v if isinstance(v, str) and v else None


def _choice(*allowed: str) -> Callable[[object], object]:
    """A converter that keeps one of the allowed strings and gives None for anything else."""
    return lambda v: v if v in allowed else None


def _flag(v: object) -> bool | None:
    """true or false, or None."""
    return v if isinstance(v, bool) else None


@dataclass(frozen=True)
class Key:
    """One key a plan may set: how its value is read, and what a good one looks like."""

    convert: Callable[[object], object]  # the value as the plan holds it; None when bad
    # (or BenchError saying why, which the reader prefixes with the file and line)
    wanted: str
    line: Callable[[str, str], int] | None = None  # where it is in the text; None: line_of


def _path(v: object) -> Path | None:
    """A non-empty string as a path (relative to the current directory)."""
    return None if (t := _text(v)) is None else Path(t)


KEYS = {
    "model": Key(_choice(*MODELS, "both"), ", ".join(f'"{m}"' for m in MODELS) + ' or "both"'),
    "mode": Key(_choice("cold", "service", "both"), '"cold", "service" or "both"'),
    "prompt_lens": Key(_lengths, "a list of whole numbers, e.g. [8, 16, 32]"),
    "gen_lens": Key(_lengths, "a list of whole numbers, e.g. [8, 16, 32]"),
    "repeat": Key(_positive, "a whole number of at least 1"),
    "cpus": Key(_harts, "a whole number of at least 1 or a list of them, e.g. [1, 2]"),
    "ram": Key(_text, 'a RAM size such as "512M" or "2G"'),
    "out": Key(_path, 'a directory such as "build/bench/hw2"'),
    "assets_smol": Key(_path, "a SmolLM2 asset directory"),
    "assets_qwen": Key(_path, "a Qwen3.5 asset directory"),
    "profile": Key(_flag, "true or false"),
    "cluster": Key(_text, 'a Dask scheduler\'s address such as "tcp://lab01:8786"'),
}


def line_of(text: str, key: str) -> int:
    """The line where key is assigned (1 if it cannot be found, e.g. inside a table)."""
    m = re.search(rf"^[ \t]*[\"']?{re.escape(key)}[\"']?[ \t]*=", text, re.M)
    return text.count("\n", 0, m.start()) + 1 if m else 1


def read_toml(path: Path) -> tuple[str, dict[str, object]]:
    """A plan file's text and its TOML data; BenchError naming the file when it cannot be
    read or is not TOML."""
    try:
        text = path.read_text(encoding="utf-8")
        return text, tomllib.loads(text)
    except OSError as e:
        raise BenchError(f"--config {path}: {e.strerror or e}") from e
    except tomllib.TOMLDecodeError as e:
        raise BenchError(f"--config {path}: not valid TOML: {e}") from e


def read_plan(path: Path, keys: dict[str, Key], keys_are: str) -> dict[str, object]:
    """Every key the plan file at path sets, read by its entry in keys (key -> value as
    the entry converts it); BenchError naming the file and the line of the first bad key
    (an unknown one: "unknown key 'x'; {keys_are} a, b, ...")."""
    text, data = read_toml(path)
    plan: dict[str, object] = {}
    for key, value in data.items():
        if key not in keys:
            raise BenchError(f"{path}:{line_of(text, key)}: unknown key {key!r}; {keys_are} "
                             f"{', '.join(keys)}")
        entry = keys[key]
        where = f"{path}:{(entry.line or line_of)(text, key)}"
        try:
            got = entry.convert(value)
        except BenchError as e:
            raise BenchError(f"{where}: {e}") from None
        if got is None:
            raise BenchError(f"{where}: {key}: give {entry.wanted}, not {value!r}")
        plan[key] = got
    return plan


def load_plan(path: Path) -> dict[str, object]:
    """The flags the file sets (key -> value as the flag's parser gives it); BenchError
    naming the file and line of the first bad key."""
    return read_plan(path, KEYS, "the keys are")
