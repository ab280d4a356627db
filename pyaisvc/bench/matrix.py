"""What a benchmark measures: the cells and their deterministic prompts.

A cell is one (model, mode, prompt length, generated length). Every run of a
cell uses the same prompt: a fixed piece of real English prose (``TEXT``,
public domain) encoded with the model's own tokenizer and cut to the prompt
length, so the numbers are comparable between runs, machines and students.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyaisvc.errors import AisvcError
from pyaisvc.guest.llmguest import max_prompt

MODES = ("cold", "service")
# The opening of Charles Dickens, "A Tale of Two Cities" (1859), public domain:
# about 330 SmolLM2 tokens, more than any prompt the runtime accepts (max_prompt()).
TEXT = (
    "It was the best of times, it was the worst of times, it was the age of wisdom, "
    "it was the age of foolishness, it was the epoch of belief, it was the epoch of "
    "incredulity, it was the season of Light, it was the season of Darkness, it was "
    "the spring of hope, it was the winter of despair, we had everything before us, "
    "we had nothing before us, we were all going direct to Heaven, we were all going "
    "direct the other way - in short, the period was so far like the present period, "
    "that some of its noisiest authorities insisted on its being received, for good or "
    "for evil, in the superlative degree of comparison only. There were a king with a "
    "large jaw and a queen with a plain face, on the throne of England; there were a "
    "king with a large jaw and a queen with a fair face, on the throne of France. In "
    "both countries it was clearer than crystal to the lords of the State preserves of "
    "loaves and fishes, that things in general were settled for ever. It was the year "
    "of Our Lord one thousand seven hundred and seventy-five. Spiritual revelations "
    "were conceded to England at that favoured period, as at this. Mrs. Southcott had "
    "recently attained her five-and-twentieth blessed birthday, of whom a prophetic "
    "private in the Life Guards had heralded the sublime appearance by announcing that "
    "arrangements were made for the swallowing up of London and Westminster. Even the "
    "Cock-lane ghost had been laid only a round dozen of years, after rapping out its "
    "messages, as the spirits of this very year last past (supernaturally deficient in "
    "originality) rapped out theirs."
)


class BenchError(AisvcError):
    """A benchmark cannot be set up or run; the message says what to do."""


@dataclass(frozen=True)
class Cell:
    """One combination of the matrix; its runs are repeats of the same request."""

    model: str
    mode: str
    prompt_len: int
    gen_len: int

    @property
    def label(self) -> str:
        """The cell in words, e.g. "smol cold prompt=8 gen=16"."""
        return f"{self.model} {self.mode} prompt={self.prompt_len} gen={self.gen_len}"


@dataclass(frozen=True)
class Run:
    """One request of the plan: a cell, its repeat number and its prompt ids."""

    cell: Cell
    repeat: int
    prompt: tuple[int, ...]
    weight: float  # relative cost, for the progress bar's time estimate


def parse_lengths(text: str, what: str) -> list[int]:
    """"8,16,32" -> [8, 16, 32]; raises BenchError on anything else."""
    try:
        values = [int(w) for w in text.split(",") if w.strip()]
    except ValueError:
        raise BenchError(f"{what} {text!r}: give positive whole numbers separated by "
                         "commas, e.g. 8,16,32") from None
    if not values or any(v < 1 for v in values):
        raise BenchError(f"{what} {text!r}: give positive whole numbers separated by "
                         "commas, e.g. 8,16,32")
    return sorted(set(values))


def check_lengths(prompt_lens: list[int], gen_lens: list[int], seq_len: int, model: str) -> None:
    """Raises BenchError if a cell exceeds what the runtime accepts for this model."""
    if max(prompt_lens) > max_prompt():
        raise BenchError(f"--prompt-lens: {max(prompt_lens)} exceeds the runtime's limit of "
                         f"{max_prompt()} prompt ids")
    longest = max(prompt_lens) + max(gen_lens)
    if longest > seq_len:
        raise BenchError(f"--prompt-lens/--gen-lens: {max(prompt_lens)} + {max(gen_lens)} = "
                         f"{longest} positions exceed {model}'s runtime_seq_len {seq_len}; "
                         "use shorter lengths")


def prompt_ids(encode: Callable[[str], list[int]], n: int) -> list[int]:
    """The first n ids of TEXT under `encode` (the model's tokenizer)."""
    ids = encode(TEXT)
    if len(ids) < n:
        raise BenchError(f"the benchmark text encodes to only {len(ids)} ids; a prompt of {n} "
                         "ids cannot be cut from it")
    return ids[:n]


def plan_runs(models: list[str], modes: list[str], prompt_lens: list[int], gen_lens: list[int],
              repeat: int, prompts: dict[str, dict[int, list[int]]],
              size_mb: dict[str, float]) -> list[Run]:
    """Every run, model by model; within a model the whole matrix once per repeat.

    Running repeat by repeat (not cell by cell) spreads slow drift of the
    host over all cells alike. The weight estimates a run's cost as the
    model's size times (load + prefill + decode), with prefill tokens
    a quarter of a decode step (they go through the layers in batches).
    """
    runs = []
    for model in models:
        for r in range(repeat):
            for mode in modes:
                for p in prompt_lens:
                    for g in gen_lens:
                        weight = size_mb[model] * (3 + p / 4 + g) * (1 if mode == "cold" else 0.8)
                        runs.append(Run(Cell(model, mode, p, g), r, tuple(prompts[model][p]),
                                        weight))
    return runs
