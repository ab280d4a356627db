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

Before step 1 (the guest's rule 0), penalties and biases, in millionths:
id j's ``A_j = bias_j - c_j * frequency - (c_j > 0) * presence`` with ``c_j``
how often the request generated j so far (not the prompt: OpenAI's
definition counts sampled tokens); ids with ``A_j != 0`` get
``logit_j + A_j / 1e6``. Greedy then takes the first maximum of those.

Log-probabilities (``log_softmax``): of the raw logits at temperature 1,
``lp_i = (l_i - m) - log(S)`` with ``m`` the first maximum and ``S`` the
sequential sum of ``exp(l_i - m)`` (refmath's exp and log): the guest's
doubles exactly.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

from pyaisvc.errors import AisvcError
from pyaisvc.model.refmath import exp, log

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
MIX1 = 0xBF58476D1CE4E5B9
MIX2 = 0x94D049BB133111EB
WEIGHT_ONE = 2.0**32  # the best candidate's integer weight
DEFAULT_TOP_K = 40
DEFAULT_TOP_P = 0.95
MICRO = 1_000_000  # 1.0 in the penalties', biases' and log-probabilities' millionths
MAX_TOP_LOGPROBS = 5  # LLM_MAX_TOPLP, AI_MAX_TOPLP
_DECIMAL = re.compile(r"(\d+)(?:\.(\d+))?")
_MICRO = re.compile(r"-?\d+(?:\.\d{1,6})?")
PENALTY_MAX = 2  # |presence|, |frequency| at most this (OpenAI's range)
BIAS_MAX = 100  # |logit_bias| at most this (OpenAI's range)


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


def parse_micro(text: str, hi: int, what: str) -> int:
    """The millionths the guest's parse_micro reads from text ([-]DIGITS[.DIGITS], at most
    6 decimals, magnitude at most hi); SamplingError otherwise."""
    if _MICRO.fullmatch(text) is None:
        raise SamplingError(f"{what}: '{text}' is not a decimal such as -0.5 "
                            "(at most 6 decimals, no exponent)")
    whole, _, frac = text.lstrip("-").partition(".")
    v = int(whole) * MICRO + int(frac.ljust(6, "0") or 0)
    if v > hi * MICRO:
        raise SamplingError(f"{what}: '{text}' is not between -{hi} and {hi}")
    return -v if text.startswith("-") else v


def splitmix64(state: int) -> tuple[int, int]:
    """(new state, output): one step of the generator."""
    state = (state + GOLDEN) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * MIX1) & MASK64
    z = ((z ^ (z >> 27)) * MIX2) & MASK64
    return state, z ^ (z >> 31)


@dataclass(frozen=True)
class LogProb:
    """One generated id's log-probability and its most likely alternatives, best first."""

    id: int
    lp: float
    top: tuple[tuple[int, float], ...]


def order(logits: np.ndarray) -> np.ndarray:
    """Ids by logit, highest first, equal logits by lower id (the guest's step 1)."""
    return np.lexsort((np.arange(logits.size), -logits))


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """The guest's log-probabilities of float64 logits (module docstring), bit for bit."""
    logits = np.asarray(logits, dtype=np.float64)
    d = logits - logits[int(np.argmax(logits))]
    return d - float(log(np.cumsum(exp(d))[-1]))


def lp_micro(lp: float) -> int:
    """A log-probability in millionths, as the guest prints and reports it."""
    return int(np.clip(np.rint(lp * MICRO), -2**31, 2**31 - 1))


@dataclass
class Sampler:
    """Sampling options (temp 0: greedy), penalties and biases in millionths, the
    generator's state, and the ids this request generated (for the penalties). With
    ``logprobs``, ``records`` gets a LogProb per id chosen."""

    temp: float = 0.0
    top_k: int = DEFAULT_TOP_K
    top_p: float = DEFAULT_TOP_P
    seed: int = 0
    presence_micro: int = 0
    frequency_micro: int = 0
    bias_micro: dict[int, int] = field(default_factory=dict)
    logprobs: bool = False
    top_logprobs: int = 0
    rng: int = field(default=0, init=False)
    generated: list[int] = field(default_factory=list, init=False)
    records: list[LogProb] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        """SamplingError for a setting out of range; then the generator starts from the seed
        (reset)."""
        if self.temp < 0 or self.top_k < 0 or not 0.0 < self.top_p <= 1.0:
            raise SamplingError("sampling: need temp >= 0, top_k >= 0, 0 < top_p <= 1")
        if not 0 <= self.seed <= MASK64:
            raise SamplingError("sampling: the seed must be below 2^64")
        if not 0 <= self.top_logprobs <= MAX_TOP_LOGPROBS:
            raise SamplingError(f"sampling: top_logprobs must be 0..{MAX_TOP_LOGPROBS}")
        self.reset()

    def reset(self) -> None:
        """Restart the generator from the seed and forget the request's ids (the guest
        does so per request)."""
        self.rng = self.seed
        self.generated = []
        self.records = []

    def adjusted(self, logits: np.ndarray) -> np.ndarray:
        """The logits after the penalties and biases (rule 0), a new array."""
        counts: dict[int, int] = {}
        for t in self.generated:
            counts[t] = counts.get(t, 0) + 1
        out = logits.copy()
        for j in set(counts) | set(self.bias_micro):
            c = counts.get(j, 0)
            a = (self.bias_micro.get(j, 0) - c * self.frequency_micro
                 - (self.presence_micro if c > 0 else 0))
            if a != 0:
                out[j] = logits[j] + float(a) / MICRO
        return out

    def choose(self, logits: np.ndarray) -> int:
        """The next token from one row of float64 logits (raw: before rule 0)."""
        raw = np.asarray(logits, dtype=np.float64)
        tok = self._draw(self.adjusted(raw))
        self.generated.append(tok)
        if self.logprobs:
            lp = log_softmax(raw)
            top = order(raw)[:self.top_logprobs]
            self.records.append(LogProb(tok, float(lp[tok]),
                                        tuple((int(j), float(lp[j])) for j in top)))
        return tok

    def _draw(self, logits: np.ndarray) -> int:
        """Steps 1-4 (greedy: the first maximum) on adjusted logits."""
        if self.temp <= 0:
            return int(np.argmax(logits))
        k = self.top_k if 0 < self.top_k < logits.size else logits.size
        cand = order(logits)[:k]
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
    presence: str = "0"
    frequency: str = "0"
    logit_bias: tuple[tuple[int, str], ...] = ()
    logprobs: int | None = None  # None: none; N: each id's and the N likeliest

    def sampler(self) -> Sampler | None:
        """The reference's sampler (None: greedy, nothing else); SamplingError on a bad
        value."""
        if self.temp is None and self._adjust_args() == []:
            return None
        top_p = parse_decimal(self.top_p, "--top-p")
        if not 0.0 < top_p <= 1.0:
            raise SamplingError(f"--top-p: '{self.top_p}' is not above 0 and at most 1")
        if self.top_k < 0:
            raise SamplingError(f"--top-k: {self.top_k} must be 0 (all ids) or more")
        bias: dict[int, int] = {}
        for tok, text in self.logit_bias:
            bias[tok] = bias.get(tok, 0) + parse_micro(text, BIAS_MAX, "--logit-bias")
        temp = 0.0 if self.temp is None else parse_decimal(self.temp, "--temp")
        return Sampler(temp, self.top_k, top_p, self.seed,
                       parse_micro(self.presence, PENALTY_MAX, "--presence-penalty"),
                       parse_micro(self.frequency, PENALTY_MAX, "--frequency-penalty"),
                       bias, self.logprobs is not None, self.logprobs or 0)

    def _adjust_args(self) -> list[str]:
        """The penalty, bias and logprobs flags (llmrun's and `ai gen`'s)."""
        args = [f"--logit-bias={t}:{b}" for t, b in self.logit_bias]
        for flag, text in (("--presence-penalty", self.presence),
                           ("--frequency-penalty", self.frequency)):
            if parse_micro(text, PENALTY_MAX, flag) != 0:
                args += [flag, text]
        if self.logprobs is not None:
            args += ["--logprobs", str(self.logprobs)]
        return [a for arg in args for a in arg.split("=", 1)]

    def guest_args(self) -> list[str]:
        """llmrun's options for the same sampling (none when greedy with nothing else)."""
        if self.sampler() is None:
            return []
        args = [] if self.temp is None else [
            "--temp", str(self.temp), "--top-k", str(self.top_k), "--top-p", self.top_p,
            "--seed", str(self.seed)]
        return args + self._adjust_args()

    def service_args(self) -> list[str]:
        """`ai gen`'s options for the same sampling: llmrun's flags, but the kernel carries
        the decimals in millionths (struct ai_opts), so each may have at most 6 decimal
        places and be below 4295; SamplingError otherwise."""
        args = self.guest_args()
        if not args:  # greedy
            return args
        for flag, text in (("--temp", str(self.temp or "0")), ("--top-p", self.top_p)):
            if len(text.partition(".")[2]) > 6 or parse_decimal(text, flag) >= 4295:
                raise SamplingError(f"{flag}: the AI service takes at most 6 decimal places "
                                    f"and values below 4295, not '{text}'")
        if self.top_k >= 2**32:
            raise SamplingError(f"--top-k: the AI service takes values below 2^32, not "
                                f"{self.top_k}")
        return args
