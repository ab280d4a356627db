"""The RVV matmul kernels (user/llm/kernels_rvv.S) give the scalar kernels' tokens.

The guest runs with the vector extension (pyaisvc.guest.qemu.VECTOR_CPU); llmrun serves
the same requests with --kernels vector and --kernels scalar, and both id lists
must equal the numpy reference, for SmolLM2 (our format and the course's, whose
matrices have no group multipliers) and the tiny synthetic Qwen3.5 (whose small
matrices also exercise the rows the vector kernels leave to the scalar ones).
Vector kernels need QEMU 10 to be fast (docs/PERF_NOTES.md, facts 8 (no RVV on QEMU
7.2) and 9 (RVV written for TCG is 2-3x scalar on QEMU 10)): on an older QEMU
these cases skip. Without V the runtime takes the scalar kernels and
refuses --kernels vector, on any QEMU.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from host import llmcases as lc

from pyaisvc.guest.llmguest import MODELS, timings
from pyaisvc.guest.qemu import (
    VECTOR_CPU,
    VECTOR_QEMU,
    Guest,
    QemuConfig,
    default_qemu,
    qemu_version,
)
from pyaisvc.image import fsimg

GEN = 8
pytestmark = pytest.mark.guest


@pytest.fixture(scope="module")
def vec_image(build, tmp_path_factory) -> tuple[Path, dict]:
    """Every program, the models and one request file per model directory."""
    tmp = tmp_path_factory.mktemp("vec")
    tree = build.program_tree()
    reqs = {}
    for fmt, top in (("v3", "SMOL"), ("course", "SMOLC")):
        d = lc.smol_dir(fmt)
        if d is not None:
            p = lc.smol_prompts()
            reqs[top] = (d, [p[0], p[2], p[3]])  # 5, 9 and 17 positions
    for fmt, top in (("v3", "QWEN"), ("course", "QWENC")):
        reqs[top] = (lc.qwen_tiny_dir(fmt), lc.qwen_prompts())
    for top, (d, prompts) in reqs.items():
        tree.add_dir(f"AI/{top}", d)
        (tmp / f"{top}.txt").write_text(lc.request_lines(prompts, GEN))
        tree.add_file(f"REQ/{top}.TXT", tmp / f"{top}.txt")
    image = tmp / "vec.img"
    fsimg.build_image(image, tree)
    return image, reqs


def need_fast_vector() -> None:
    version = qemu_version(default_qemu())
    if version is None or version < VECTOR_QEMU:
        have = "unknown" if version is None else f"{version[0]}.{version[1]}"
        pytest.skip(f"{default_qemu()} is QEMU {have}: vector kernels are tested on QEMU "
                    f">= {VECTOR_QEMU[0]} (set AISVC_QEMU, or run 'make deps')")


def serve(g: Guest, prog: str, top: str, kernels: str) -> tuple[list[list[int]], list[str]]:
    """(id lines, kernels= of each timing line) of one --stdin run."""
    console = g.run(f"{prog} --kernels {kernels} --asset-dir /AI/{top} --stdin "
                    f"< /REQ/{top}.TXT > /out.txt", timeout=900)
    out = g.run("cat /out.txt")
    ids = [[int(v) for v in line.split()] for line in out.splitlines() if line.strip()]
    used = [line.split("kernels=", 1)[1].split()[0]  # other key=value fields may follow
            for line in console.splitlines() if "timing" in line]
    return ids, used


@pytest.mark.parametrize("top,vlen", [("SMOL", 256), ("SMOLC", 256), ("QWEN", 256),
                                      ("QWENC", 256), ("QWEN", 512), ("QWEN", 128)])
def test_vector_tokens_equal_scalar_and_reference(build, vec_image, top: str, vlen: int) -> None:
    """At vlen 512 the kernels use LMUL 2, a code path of its own; at vlen 128
    a block has 16 rows, and every whole-register load and store moves half the
    bytes it moves at 256."""
    need_fast_vector()
    image, reqs = vec_image
    if top not in reqs:
        lc.smol_or_skip()  # only SMOL and SMOLC can be absent
    assets, prompts = reqs[top]
    want = lc.reference_ids(assets, prompts, GEN)
    model = "smol" if top.startswith("SMOL") else "qwen"
    ram = MODELS["smol"].ram if model == "smol" else "256M"
    with Guest(QemuConfig(kernel=build.kernel, image=image, ram=ram, snapshot=True,
                          cpu=VECTOR_CPU.replace("vlen=256", f"vlen={vlen}"))) as g:
        vec, vec_used = serve(g, f"llmrun_{model}", top, "vector")
        sca, sca_used = serve(g, f"llmrun_{model}", top, "scalar")
    assert vec == want
    assert sca == want
    assert vec_used == ["vector"] * len(prompts) and sca_used == ["scalar"] * len(prompts)


def test_without_vector_unit_the_scalar_kernels_run(build, vec_image) -> None:
    image, reqs = vec_image
    assets, prompts = reqs["QWEN"]
    want = lc.reference_ids(assets, prompts, GEN)
    with Guest(QemuConfig(kernel=build.kernel, image=image, ram="256M", snapshot=True,
                          cpu="rv64,v=false")) as g:
        got, used = serve(g, "llmrun_qwen", "QWEN", "auto")
        refused = g.run("llmrun_qwen --kernels vector --asset-dir /AI/QWEN 1 2")
    assert got == want and used == ["scalar"] * len(prompts)
    assert "--kernels vector: this machine has no vector extension" in refused
    assert [t["gen"] for t in timings(refused)] == []
