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
[8, 16, 32]``.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from pyaisvc.bench.matrix import BenchError
from pyaisvc.guest.llmguest import MODELS


def _lengths(v: object) -> str | None:
    ok = isinstance(v, list) and v and all(isinstance(x, int) and not isinstance(x, bool)
                                           and x > 0 for x in v)
    return ",".join(str(x) for x in v) if ok else None


def _harts(v: object) -> str | None:
    """One number of harts or a list of them (a series), as the --cpus flag takes it."""
    return _lengths([v] if isinstance(v, int) else v)


def _positive(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def _text(v: object) -> str | None:
    return v if isinstance(v, str) and v else None


def _choice(*allowed: str):
    return lambda v: v if v in allowed else None


def _flag(v: object) -> bool | None:
    return v if isinstance(v, bool) else None


# key -> (converter to the flag's value or None when bad, what a good value looks like)
KEYS = {
    "model": (_choice(*MODELS, "both"), ", ".join(f'"{m}"' for m in MODELS) + ' or "both"'),
    "mode": (_choice("cold", "service", "both"), '"cold", "service" or "both"'),
    "prompt_lens": (_lengths, "a list of whole numbers, e.g. [8, 16, 32]"),
    "gen_lens": (_lengths, "a list of whole numbers, e.g. [8, 16, 32]"),
    "repeat": (_positive, "a whole number of at least 1"),
    "cpus": (_harts, "a whole number of at least 1 or a list of them, e.g. [1, 2]"),
    "ram": (_text, 'a RAM size such as "512M" or "2G"'),
    "out": (_text, 'a directory such as "build/bench/hw2"'),
    "assets_smol": (_text, "a SmolLM2 asset directory"),
    "assets_qwen": (_text, "a Qwen3.5 asset directory"),
    "profile": (_flag, "true or false"),
    "cluster": (_text, 'a Dask scheduler\'s address such as "tcp://lab01:8786"'),
}
PATHS = ("out", "assets_smol", "assets_qwen")  # relative to the current directory


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


def load_plan(path: Path) -> dict[str, object]:
    """The flags the file sets (key -> value as the flag's parser gives it); BenchError
    naming the file and line of the first bad key."""
    text, data = read_toml(path)
    plan: dict[str, object] = {}
    for key, value in data.items():
        where = f"{path}:{line_of(text, key)}"
        if key not in KEYS:
            raise BenchError(f"{where}: unknown key {key!r}; the keys are "
                             f"{', '.join(KEYS)}")
        convert, wanted = KEYS[key]
        got = convert(value)
        if got is None:
            raise BenchError(f"{where}: {key}: give {wanted}, not {value!r}")
        plan[key] = Path(got) if key in PATHS else got
    return plan
