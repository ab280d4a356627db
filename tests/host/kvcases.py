"""Requests that exercise the KV cache's prefix reuse (user/llm/kvcache.c), and what the
cache must give them, worked out here from the ids alone (not from the runtime).

A sequence publishes every block of B positions it has run: its prompt and the ids it
generated, all but the last (never fed back). A later prompt takes the longest chain of
published full blocks that equals its own start, but always leaves its last position to
compute.
"""

from __future__ import annotations

from host import llmcases as lc

B = 16  # LLM_KV_BLOCK
GEN = 4


def prefix_prompts() -> list[list[int]]:
    """Prompts, in the order they are served, whose cached prefixes end inside a block,
    at a block boundary, one short of the whole prompt and at the whole prompt."""
    base = lc.heldout_ids("smol", 60)
    other = base[40:60]
    return [
        base[:37],               # nothing cached; publishes blocks 0 and 1
        base[:20] + other[:10],  # shares 20 positions: the cache gives block 0 (16)
        base[:32] + other[:5],   # shares a block boundary (32)
        base[:33],               # the cache holds all but its last position
        base[:32],               # the whole prompt cached: its last position runs again
        base[:50],               # a longer turn after them
    ]


def shared_prompts() -> list[list[int]]:
    """Eight prompts with one 48-position common prefix (three blocks), each its own tail."""
    base = lc.heldout_ids("smol", 60)
    return [base[:48] + [base[50 + i]] for i in range(8)]


def eviction_prompts() -> list[list[int]]:
    """Six conversations of 50 positions, no two with a common first block: each leaves
    three full blocks (48 positions) cached, 18 in all, more than a 16-block pool holds."""
    base = lc.heldout_ids("smol", 120)
    return [base[k * 12:k * 12 + 50] for k in range(6)]


def expected_cached(prompts: list[list[int]], outputs: list[list[int]]) -> list[int]:
    """The positions each prompt takes from an unbounded cache, served one after another:
    the longest run of full blocks some earlier sequence completed, at most n - 1."""
    published: set[tuple[int, ...]] = set()
    want = []
    for prompt, out in zip(prompts, outputs, strict=True):
        k = 0
        while (k + 1) * B <= len(prompt) and tuple(prompt[:(k + 1) * B]) in published:
            k += 1
        want.append(min(k * B, len(prompt) - 1))
        seq = prompt + out
        fed = len(prompt) + len(out) - 1
        for j in range(1, fed // B + 1):
            published.add(tuple(seq[:j * B]))
    return want
