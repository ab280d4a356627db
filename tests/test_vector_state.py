"""The kernel keeps each process's vector state (RVV 1.0) apart: usertests' vecregs case.

The guest gets the vector extension with pyaisvc.guest.qemu.VECTOR_CPU, whatever QEMU
chooses by default (QEMU 7.2 emulates V too, only slowly, and this case does
almost no vector arithmetic). vecregs runs four processes that hold distinct
contents in v0-v31 and distinct vl, vtype and vxrm while the timer interleaves
them, on one hart and on two; the boot banner names the register length the
kernel found. Without V, the same case checks that vlenb() is 0 and that a
vector instruction kills the process (test_usertests runs it that way on QEMU
7.2).
"""

from __future__ import annotations

import pytest

from pyaisvc.guest.qemu import VECTOR_CPU, Guest, QemuConfig


def run_vecregs(build, cpus: int, cpu: str) -> Guest:
    """Boots with cpu and runs `usertests vecregs`; returns the closed guest."""
    cfg = QemuConfig(kernel=build.kernel, image=build.image, ram="256M", cpus=cpus,
                     snapshot=True, cpu=cpu)
    with Guest(cfg) as g:
        out = g.run("usertests vecregs", timeout=120)
    assert "test vecregs: OK" in out and "ALL TESTS PASSED" in out, out
    return g


@pytest.mark.guest
@pytest.mark.parametrize("cpus,vlen", [(1, 256), (2, 256), (2, 512)])
def test_vector_registers_survive_switching(build, cpus: int, vlen: int) -> None:
    cpu = VECTOR_CPU.replace("vlen=256", f"vlen={vlen}")
    g = run_vecregs(build, cpus, cpu)
    assert f"aisvc: vector extension, {vlen}-bit registers" in g.transcript


@pytest.mark.guest
def test_without_vector_unit_a_vector_instruction_kills(build) -> None:
    g = run_vecregs(build, 1, "rv64,v=false")
    assert "vector extension" not in g.transcript
    assert "usertests: killed: illegal instruction" in g.transcript
