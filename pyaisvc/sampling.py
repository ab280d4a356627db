"""The guest's sampler (user/llm/sample.c), step for step, for the reference.

Greedy is the first index of the largest logit. With a temperature above 0
a token is drawn, and every step is exact, so the same logits and seed give
the guest's ids:

1. candidates: ids ordered by logit, highest first, equal logits by lower id;
   the first ``top_k`` (0: all);
2. weights ``w = exp((logit - best) / temp)`` with refmath's exp, then the
   integers ``W = floor(w * 2**32)`` and their cumulative sums ``C``;
3. top-p keeps the fewest candidates with ``C_i >= ceil(top_p * C_last)``;
4. ``r = splitmix64() % C_kept``; the token is the first candidate with ``C_i > r``.

The generator restarts from the seed at every request (``reset``).
Temperatures and top-p values are decimals as the guest reads them
(``parse_decimal``), so both sides hold the same double.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

from pyaisvc.errors import AisvcError
from pyaisvc.refmath import exp

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
MIX1 = 0xBF58476D1CE4E5B9
MIX2 = 0x94D049BB133111EB
WEIGHT_ONE = 2.0**32  # the best candidate's integer weight
DEFAULT_TOP_K = 40
DEFAULT_TOP_P = 0.95
_DECIMAL = re.compile(r"(\d+)(?:\.(\d+))?")


class SamplingError(AisvcError):
    """A sampling option the guest would refuse."""


def parse_decimal(text: str, what: str) -> float:
    """The double the guest's parse_decimal reads from text (DIGITS[.DIGITS],
    at most 15 significant digits and 22 decimals); SamplingError otherwise."""
    m = _DECIMAL.fullmatch(text)
    digits = (m.group(1) + (m.group(2) or "")).lstrip("0") if m else ""
    if m is None or len(digits) > 15 or len(m.group(2) or "") > 22:
        raise SamplingError(f"{what}: '{text}' is not a decimal such as 0.8 "
                            "(at most 15 digits, no exponent)")
    return float(text)


def splitmix64(state: int) -> tuple[int, int]:
    """(new state, output): one step of the generator."""
    state = (state + GOLDEN) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * MIX1) & MASK64
    z = ((z ^ (z >> 27)) * MIX2) & MASK64
    return state, z ^ (z >> 31)


@dataclass
class Sampler:
    """Sampling options (temp 0: greedy) and the generator's state."""

    temp: float = 0.0
    top_k: int = DEFAULT_TOP_K
    top_p: float = DEFAULT_TOP_P
    seed: int = 0
    rng: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if self.temp < 0 or self.top_k < 0 or not 0.0 < self.top_p <= 1.0:
            raise SamplingError("sampling: need temp >= 0, top_k >= 0, 0 < top_p <= 1")
        if not 0 <= self.seed <= MASK64:
            raise SamplingError("sampling: the seed must be below 2^64")
        self.reset()

    def reset(self) -> None:
        """Restart the generator from the seed (the guest does so per request)."""
        self.rng = self.seed

    def choose(self, logits: np.ndarray) -> int:
        """The next token from one row of float64 logits."""
        logits = np.asarray(logits, dtype=np.float64)
        if self.temp <= 0:
            return int(np.argmax(logits))
        ids = np.arange(logits.size)
        order = np.lexsort((ids, -logits))
        k = self.top_k if 0 < self.top_k < logits.size else logits.size
        cand = order[:k]
        w = exp((logits[cand] - logits[cand[0]]) / self.temp)
        cum = np.cumsum(np.floor(w * WEIGHT_ONE).astype(np.uint64))
        n = k
        if self.top_p < 1.0:
            threshold = math.ceil(self.top_p * float(cum[-1]))
            n = min(int(np.searchsorted(cum, threshold, side="left")), k - 1) + 1
        self.rng, r = splitmix64(self.rng)
        r %= int(cum[n - 1])
        return int(cand[int(np.searchsorted(cum[:n], r, side="right"))])


@dataclass(frozen=True)
class SamplingOptions:
    """Sampling as the user typed it (temp None: greedy); the decimals stay text
    so the guest reads exactly the double ``sampler()`` holds."""

    temp: str | None = None
    top_k: int = DEFAULT_TOP_K
    top_p: str = str(DEFAULT_TOP_P)
    seed: int = 0

    def sampler(self) -> Sampler | None:
        """The reference's sampler (None: greedy); SamplingError on a bad value."""
        if self.temp is None:
            return None
        top_p = parse_decimal(self.top_p, "--top-p")
        if not 0.0 < top_p <= 1.0:
            raise SamplingError(f"--top-p: '{self.top_p}' is not above 0 and at most 1")
        if self.top_k < 0:
            raise SamplingError(f"--top-k: {self.top_k} must be 0 (all ids) or more")
        return Sampler(parse_decimal(self.temp, "--temp"), self.top_k, top_p, self.seed)

    def guest_args(self) -> list[str]:
        """llmrun's options for the same sampling (none when greedy)."""
        if self.sampler() is None:
            return []
        return ["--temp", str(self.temp), "--top-k", str(self.top_k), "--top-p", self.top_p,
                "--seed", str(self.seed)]

    def service_args(self) -> list[str]:
        """`ai gen`'s options for the same sampling: llmrun's flags, but the kernel carries
        the decimals in millionths (struct ai_opts), so each may have at most 6 decimal
        places and be below 4295; SamplingError otherwise."""
        args = self.guest_args()
        if not args:  # greedy
            return args
        for flag, text in (("--temp", str(self.temp)), ("--top-p", self.top_p)):
            if len(text.partition(".")[2]) > 6 or parse_decimal(text, flag) >= 4295:
                raise SamplingError(f"{flag}: the AI service takes at most 6 decimal places "
                                    f"and values below 4295, not '{text}'")
        if self.top_k >= 2**32:
            raise SamplingError(f"--top-k: the AI service takes values below 2^32, not "
                                f"{self.top_k}")
        return args
