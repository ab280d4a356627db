"""One measured request (``Sample``), as the cold runner and the AI service client report it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

PROFILE_PARTS = ("matmul", "attn", "other")  # the phase's time, split
# serial: thread 0 alone between parallel steps (runs of 2+ threads only); it
# overlaps the parts above.
PROFILE_FIELDS = tuple(f"{ph}_{part}_us" for ph in ("prefill", "decode")
                       for part in (*PROFILE_PARTS, "serial"))

Note = Callable[[str], None]  # receives one line about a set-up step


@dataclass(frozen=True)
class Sample:
    """One measured request. Times in microseconds, as the guest reports them."""

    model: str
    mode: str
    prompt_len: int
    gen_len: int
    repeat: int
    load_us: int  # loading the model (llm_runtime_init); service: the daemon's one load
    init_us: int  # session_init: load + KV cache and workspace
    ttft_us: int  # request start to the first generated token
    tpot_us: int  # mean time per following token
    wall_s: float  # host seconds for the whole shell command
    ids: tuple[int, ...]  # the generated ids
    profile: dict[str, int] = field(default_factory=dict)  # PROFILE_FIELDS, with --profile
    harts: int = 1  # the guest's harts
    ran: str = ""  # "kernels/threads" from the timing line, e.g. "vector/2" (cold runs)
    host: str = ""  # the machine that measured it: its host name, or its Dask worker's name
    cpu: str = ""  # that machine's CPU model (/proc/cpuinfo)
