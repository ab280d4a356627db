"""Durability cost: each small write() is one log commit, and a commit
sends virtio-blk FLUSH requests when the disk caches writes (QEMU's does).
The guest program tests/progs/fswrite.c times a loop of such writes; this
test prints the figure (per write, with FLUSH) so that a change in the
commit path shows up. To compare with the cost without FLUSH, build a
kernel with -DAISVC_NOFLUSH and point AISVC_NOFLUSH_KERNEL at it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from pyaisvc.guest.qemu import Guest, QemuConfig

LINE = re.compile(r"fswrite: (\d+) writes in (\d+) us \((\d+) us per write\)")
WRITES = 300

pytestmark = pytest.mark.guest


def _per_write(kernel: Path, image: Path) -> int:
    with Guest(QemuConfig(kernel=kernel, image=image, ram="256M", cpus=1,
                          snapshot=True)) as g:
        out = g.run(f"fswrite {WRITES}", timeout=120)
    m = LINE.search(out)
    assert m and int(m.group(1)) == WRITES, out
    return int(m.group(3))


def test_commit_cost_with_flush(build, make_image, capsys: pytest.CaptureFixture[str]) -> None:
    image = make_image({"fswrite": build.testprogs["fswrite"]})
    us = _per_write(build.kernel, image)
    other = os.environ.get("AISVC_NOFLUSH_KERNEL")
    base = _per_write(Path(other), image) if other else None
    with capsys.disabled():
        print(f"\n[fs] small write (one commit): {us} us with FLUSH"
              + (f", {base} us without" if base is not None else ""))
    assert us < 100_000, "a commit takes over 100 ms"
