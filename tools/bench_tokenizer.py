"""Wall time of `pyaisvc translate` with an empty and a warm tokenizer cache.

    .venv/bin/python tools/bench_tokenizer.py [--runs 3]

The first call after the cache is emptied reads SmolLM2's GGUF with
transformers (what every call cost before the cache existed) and writes the
cache; every later call reads the cached tokenizer.json. Each line is one
`python -m pyaisvc translate ...` process, timed from start to exit; the
last line is the ratio. The cache lives in a temporary directory
(AISVC_CACHE), so build/cache is left alone.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CALLS = {
    "encode": ["translate", "encode", "--model", "smol", "--text", "The capital of France is"],
    "decode": ["translate", "decode", "--model", "smol", "--tokens", "504 3575 282 4649 314"],
}


def timed(argv: list[str], env: dict[str, str]) -> float:
    """Seconds one `python -m pyaisvc ARGV` takes; exits on failure."""
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pyaisvc", *argv], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    took = time.monotonic() - t0
    if proc.returncode != 0:
        sys.exit(f"bench_tokenizer: `pyaisvc {' '.join(argv)}` failed: {proc.stderr.strip()}")
    return took


def main() -> int:
    """Prints the wall time of `pyaisvc translate` with an empty cache, each verb's with a warm
    one over --runs calls, and their ratio; 0."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3, help="warm calls per verb (default 3)")
    runs = p.parse_args().runs
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "AISVC_CACHE": cache}
        cold = timed(CALLS["encode"], env)
        print(f"translate encode, empty cache (reads the GGUF): {cold:.2f} s")
        warm = []
        for verb, argv in CALLS.items():
            times = [timed(argv, env) for _ in range(runs)]
            warm += times
            print(f"translate {verb}, cached: median {statistics.median(times):.2f} s "
                  f"(min {min(times):.2f}, max {max(times):.2f}, {runs} runs)")
    print(f"cached / uncached: {statistics.median(warm) / cold:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
