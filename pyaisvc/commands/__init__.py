"""One module per CLI verb: add_arguments(parser) and run(args) -> int.

Options more than one verb takes are added here, once.
"""

from __future__ import annotations

import argparse

from pyaisvc.errors import CommandError
from pyaisvc.model.sampling import DEFAULT_TOP_K, DEFAULT_TOP_P, SamplingError, SamplingOptions


def add_sampling_arguments(parser: argparse.ArgumentParser) -> None:
    """--temp/--top-k/--top-p/--seed, passed to llmrun in the guest (user/llm/sample.c)."""
    parser.add_argument("--temp", metavar="T", help="sample with temperature T, a decimal "
                        "such as 0.8 (default: greedy, the most likely token)")
    parser.add_argument("--top-k", type=int, default=DEFAULT_TOP_K, metavar="K",
                        help=f"sample among the K most likely tokens (default {DEFAULT_TOP_K}, "
                        "0: all)")
    parser.add_argument("--top-p", default=str(DEFAULT_TOP_P), metavar="P",
                        help="then among the fewest whose probability reaches P "
                        f"(default {DEFAULT_TOP_P}, 1: off)")
    parser.add_argument("--seed", type=int, default=0, metavar="S",
                        help="the sampler's seed: the same seed gives the same tokens (default 0)")


def sampling_options(args: argparse.Namespace, verb: str) -> SamplingOptions:
    """The checked sampling options; CommandError naming the flag on a bad value."""
    opts = SamplingOptions(args.temp, args.top_k, args.top_p, args.seed)
    try:
        opts.sampler()
    except SamplingError as e:
        raise CommandError(f"{verb}: {e}") from e
    if not 0 <= args.seed < 2**64:
        raise CommandError(f"{verb}: --seed {args.seed} must be between 0 and 2^64-1")
    return opts
