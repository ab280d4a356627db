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
from collections.abc import Callable
from pathlib import Path

from pyaisvc.bench.load.workload import RequestClass, Tenant
from pyaisvc.bench.matrix import BenchError
from pyaisvc.bench.plan import Key, line_of, read_plan
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
    """Whether v is a number (not a bool)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _whole(v: object) -> bool:
    """Whether v is a whole number (not a bool)."""
    return isinstance(v, int) and not isinstance(v, bool)


def _checked(check: Callable[[object], object]) -> Callable[[object], object]:
    """A converter that keeps a value check passes and gives None for any other."""
    return lambda v: v if check(v) else None


def _policies(v: object) -> tuple[str, ...] | None:
    """A non-empty list of the kernel's policies as a tuple, or None."""
    ok = isinstance(v, list) and v and all(p in POLICIES for p in v)
    return tuple(v) if ok else None


def _time(key: str) -> Callable[[object], float]:
    """A converter of key's time to seconds (BenchError, from seconds(), when bad)."""
    return lambda v: seconds(v, key)


def _pair(v: object) -> tuple[int, int] | None:
    """[lo, hi] of whole numbers 1 <= lo <= hi as a tuple, or None."""
    ok = isinstance(v, list) and len(v) == 2 and all(_whole(x) and x > 0 for x in v)
    return (v[0], v[1]) if ok and v[0] <= v[1] else None


def _classes(value: object) -> tuple[RequestClass, ...]:
    """[classes.NAME] tables as request classes; BenchError saying what a bad one lacks."""
    if not isinstance(value, dict) or not value:
        raise BenchError("classes: give tables [classes.NAME] with prompt = [lo, hi], "
                         "new = [lo, hi] and weight")
    out = []
    for name, t in value.items():
        known = {"prompt", "new", "weight"}
        if not isinstance(t, dict) or set(t) - known or not {"prompt", "new"} <= set(t):
            raise BenchError(f"[classes.{name}]: give prompt = [lo, hi], new = [lo, hi] "
                             "and optionally weight, nothing else")
        prompt, new, weight = _pair(t["prompt"]), _pair(t["new"]), t.get("weight", 1.0)
        if prompt is None or new is None:
            raise BenchError(f"[classes.{name}]: prompt and new must be [lo, hi], whole "
                             f"numbers 1 <= lo <= hi, not {t['prompt']!r} and {t['new']!r}")
        if not (_number(weight) and weight > 0):
            raise BenchError(f"[classes.{name}]: weight must be above 0, not {weight!r}")
        out.append(RequestClass(name, prompt, new, float(weight)))
    return tuple(out)


def _tenants(value: object) -> tuple[Tenant, ...]:
    """[tenants.NAME] tables as tenants; BenchError saying what a bad one lacks."""
    if not isinstance(value, dict) or not value:
        raise BenchError("tenants: give tables [tenants.NAME] with weight and priority")
    out = []
    for name, t in value.items():
        if not isinstance(t, dict) or set(t) - {"weight", "priority"}:
            raise BenchError(f"[tenants.{name}]: give weight and priority, nothing else")
        weight, priority = t.get("weight", 1.0), t.get("priority", 0)
        if not (_number(weight) and weight > 0 and _whole(priority)):
            raise BenchError(f"[tenants.{name}]: weight must be above 0 and priority a "
                             f"whole number, not {weight!r} and {priority!r}")
        out.append(Tenant(name, float(weight), priority))
    return tuple(out)


def _table_line(text: str, key: str) -> int:
    """The line of the first [key.NAME] table (or of key = ..., an inline table)."""
    m = re.search(rf"^[ \t]*\[{key}\.", text, re.M)
    return text.count("\n", 0, m.start()) + 1 if m else line_of(text, key)


# key -> how the plan's value is read (pyaisvc.bench.plan.read_plan)
KEYS = {
    "mode": Key(_checked(lambda v: v == "load"), '"load"'),
    "policies": Key(_policies, f"a list of policies from {', '.join(POLICIES)}"),
    "prefill_chunk": Key(_checked(lambda v: _whole(v) and v > 0),
                         "a whole number of positions, e.g. 4"),
    "prefill_budget": Key(_checked(lambda v: _whole(v) and v > 0),
                          "a whole number of positions, e.g. 1"),
    "seed": Key(_checked(lambda v: _whole(v) and v >= 0), "a whole number of at least 0"),
    "rate": Key(_checked(lambda v: _number(v) and v > 0),
                "requests per second above 0, e.g. 0.5"),
    "load": Key(_checked(lambda v: _number(v) and v > 0), "a fraction of the capacity, e.g. 0.8"),
    "users": Key(_checked(lambda v: _whole(v) and v > 0), "a whole number of users, e.g. 8"),
    "duration": Key(_checked(lambda v: _number(v) and v > 0), "seconds above 0, e.g. 120"),
    "requests": Key(_checked(lambda v: _whole(v) and v > 0),
                    "a whole number of requests, e.g. 60"),
    "slo_ttft": Key(_time("slo_ttft"), 'a time such as "2s"'),
    "slo_tbt": Key(_time("slo_tbt"), 'a time such as "200ms"'),
    "cpus": Key(_checked(lambda v: _whole(v) and v > 0), "a whole number of guest harts"),
    "ram": Key(_checked(lambda v: isinstance(v, str) and v), 'a RAM size such as "512M"'),
    "out": Key(_checked(lambda v: isinstance(v, str) and v),
               'a directory such as "build/bench/lab"'),
    "url": Key(_checked(lambda v: isinstance(v, str) and v.startswith("http")),
               'a running server\'s address such as "http://127.0.0.1:8080"'),
    "cluster": Key(_checked(lambda v: isinstance(v, str) and v),
                   'a Dask scheduler such as "tcp://lab:8786"'),
    "classes": Key(_classes, "tables [classes.NAME] with prompt, new and weight", _table_line),
    "tenants": Key(_tenants, "tables [tenants.NAME] with weight and priority", _table_line),
}


def load_plan_file(path: Path) -> dict[str, object]:
    """The keys the file sets, converted (times in seconds, classes and tenants as tuples);
    BenchError naming the file and the line of the first bad key."""
    return read_plan(path, KEYS, "a load plan's keys are")


def is_load_plan(path: Path) -> bool:
    """Whether the TOML file at path says mode = "load" (False when it cannot be read: the
    plan's reader then says why)."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8")).get("mode") == "load"
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return False
