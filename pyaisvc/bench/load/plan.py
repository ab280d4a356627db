"""A load plan in TOML: `pyaisvc bench --mode load --config FILE.toml` (docs/load-example.toml).

    mode = "load"
    policies = ["fifo", "priority", "shortest", "fair"]
    load = 0.8                 # or rate = 0.5 (requests/s), or users = 8 (closed loop)
    duration = 120             # seconds of arrivals, or requests = 60
    seed = 1
    slo_ttft = "2s"
    slo_tbt = "200ms"
    [classes.mice]             # any classes given replace the default mix
    prompt = [5, 32]
    new = [8, 16]
    weight = 0.8
    [tenants.alice]            # any tenants given replace the default ones
    weight = 1
    priority = 0

Every top-level key is a flag of `pyaisvc bench --mode load` (dashes as
underscores); a flag on the command line wins over the file. The defaults
are pyaisvc.bench.load.workload's. A bad key is reported with its file and line.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from pyaisvc.bench.load.workload import RequestClass, Tenant
from pyaisvc.bench.matrix import BenchError
from pyaisvc.bench.plan import line_of, read_toml
from pyaisvc.guest.llmguest import POLICIES

DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s)?\s*$")


def seconds(value: object, what: str) -> float:
    """A time as a number of seconds or a string "2s", "200ms", "0.5"; BenchError if bad."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return float(value)
    m = DURATION.match(value) if isinstance(value, str) else None
    if m is None or float(m.group(1)) <= 0:
        raise BenchError(f"{what}: give a time above 0 such as 2s, 200ms or 0.5, not {value!r}")
    return float(m.group(1)) / (1000 if m.group(2) == "ms" else 1)


def _number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _whole(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# key -> (check, what a good value looks like); times are checked by seconds()
KEYS = {
    "mode": (lambda v: v == "load", '"load"'),
    "policies": (lambda v: isinstance(v, list) and v and all(p in POLICIES for p in v),
                 f"a list of policies from {', '.join(POLICIES)}"),
    "prefill_chunk": (lambda v: _whole(v) and v > 0, "a whole number of positions, e.g. 4"),
    "prefill_budget": (lambda v: _whole(v) and v > 0, "a whole number of positions, e.g. 1"),
    "seed": (lambda v: _whole(v) and v >= 0, "a whole number of at least 0"),
    "rate": (lambda v: _number(v) and v > 0, "requests per second above 0, e.g. 0.5"),
    "load": (lambda v: _number(v) and v > 0, "a fraction of the capacity, e.g. 0.8"),
    "users": (lambda v: _whole(v) and v > 0, "a whole number of users, e.g. 8"),
    "duration": (lambda v: _number(v) and v > 0, "seconds above 0, e.g. 120"),
    "requests": (lambda v: _whole(v) and v > 0, "a whole number of requests, e.g. 60"),
    "slo_ttft": (None, 'a time such as "2s"'),
    "slo_tbt": (None, 'a time such as "200ms"'),
    "cpus": (lambda v: _whole(v) and v > 0, "a whole number of guest harts"),
    "ram": (lambda v: isinstance(v, str) and v, 'a RAM size such as "512M"'),
    "out": (lambda v: isinstance(v, str) and v, 'a directory such as "build/bench/lab"'),
    "url": (lambda v: isinstance(v, str) and v.startswith("http"),
            'a running server\'s address such as "http://127.0.0.1:8080"'),
    "cluster": (lambda v: isinstance(v, str) and v, 'a Dask scheduler such as "tcp://lab:8786"'),
    "classes": (None, "tables [classes.NAME] with prompt, new and weight"),
    "tenants": (None, "tables [tenants.NAME] with weight and priority"),
}


def _pair(v: object) -> tuple[int, int] | None:
    ok = isinstance(v, list) and len(v) == 2 and all(_whole(x) and x > 0 for x in v)
    return (v[0], v[1]) if ok and v[0] <= v[1] else None


def _classes(value: object, where: str) -> tuple[RequestClass, ...]:
    if not isinstance(value, dict) or not value:
        raise BenchError(f"{where}: classes: give tables [classes.NAME] with prompt = [lo, hi], "
                         "new = [lo, hi] and weight")
    out = []
    for name, t in value.items():
        known = {"prompt", "new", "weight"}
        if not isinstance(t, dict) or set(t) - known or not {"prompt", "new"} <= set(t):
            raise BenchError(f"{where}: [classes.{name}]: give prompt = [lo, hi], new = [lo, hi] "
                             "and optionally weight, nothing else")
        prompt, new, weight = _pair(t["prompt"]), _pair(t["new"]), t.get("weight", 1.0)
        if prompt is None or new is None:
            raise BenchError(f"{where}: [classes.{name}]: prompt and new must be [lo, hi], whole "
                             f"numbers 1 <= lo <= hi, not {t['prompt']!r} and {t['new']!r}")
        if not (_number(weight) and weight > 0):
            raise BenchError(f"{where}: [classes.{name}]: weight must be above 0, not {weight!r}")
        out.append(RequestClass(name, prompt, new, float(weight)))
    return tuple(out)


def _tenants(value: object, where: str) -> tuple[Tenant, ...]:
    if not isinstance(value, dict) or not value:
        raise BenchError(f"{where}: tenants: give tables [tenants.NAME] with weight and priority")
    out = []
    for name, t in value.items():
        if not isinstance(t, dict) or set(t) - {"weight", "priority"}:
            raise BenchError(f"{where}: [tenants.{name}]: give weight and priority, nothing else")
        weight, priority = t.get("weight", 1.0), t.get("priority", 0)
        if not (_number(weight) and weight > 0 and _whole(priority)):
            raise BenchError(f"{where}: [tenants.{name}]: weight must be above 0 and priority a "
                             f"whole number, not {weight!r} and {priority!r}")
        out.append(Tenant(name, float(weight), priority))
    return tuple(out)


def _table_line(text: str, key: str) -> int:
    """The line of the first [key.NAME] table (or of key = ..., an inline table)."""
    m = re.search(rf"^[ \t]*\[{key}\.", text, re.M)
    return text.count("\n", 0, m.start()) + 1 if m else line_of(text, key)


def load_plan_file(path: Path) -> dict[str, object]:
    """The keys the file sets, converted (times in seconds, classes and tenants as tuples);
    BenchError naming the file and the line of the first bad key."""
    text, data = read_toml(path)
    plan: dict[str, object] = {}
    for key, value in data.items():
        where = f"{path}:{line_of(text, key)}"
        if key not in KEYS:
            raise BenchError(f"{where}: unknown key {key!r}; a load plan's keys are "
                             f"{', '.join(KEYS)}")
        check, wanted = KEYS[key]
        if key == "classes":
            plan[key] = _classes(value, f"{path}:{_table_line(text, key)}")
        elif key == "tenants":
            plan[key] = _tenants(value, f"{path}:{_table_line(text, key)}")
        elif key.startswith("slo_"):
            plan[key] = seconds(value, f"{where}: {key}")
        elif not check(value):
            raise BenchError(f"{where}: {key}: give {wanted}, not {value!r}")
        else:
            plan[key] = tuple(value) if key == "policies" else value
    return plan


def is_load_plan(path: Path) -> bool:
    """Whether the TOML file at path says mode = "load" (False when it cannot be read: the
    plan's reader then says why)."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8")).get("mode") == "load"
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return False
