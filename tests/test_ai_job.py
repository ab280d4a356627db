"""What the AI worker receives: its job holds the request and nothing else.

tests/progs/jobzero.c registers as the worker (the console keeps the worker
right: CONSOLE_AI_WORKER), leaves pages full of a pattern at the head of the
kernel's free list and takes a one-id request with ai_next and with ai_take:
every byte of the struct ai_job beyond the request's fields and its id (the
ids past count, the padding) is zero, so no stale kernel memory reaches the
worker (kernel/ai/ai_table.c, slot_start).
"""

from __future__ import annotations

import pytest

from pyaisvc.guest.qemu import CONSOLE_AI_WORKER


@pytest.mark.guest
def test_the_job_beyond_the_request_is_zero(boot_guest, build, make_image) -> None:
    image = make_image({"jobzero": build.testprogs["jobzero"]})
    g = boot_guest(image=image, append=CONSOLE_AI_WORKER)
    out = g.run("jobzero", timeout=60)
    assert "jobzero: ai_next ok" in out, out
    assert "jobzero: ai_take ok" in out, out
    assert g.last_status == 0, out
    assert "slots 0/16 used" in g.run("ai info")
