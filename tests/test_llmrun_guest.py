"""llmrun_smol / llmrun_qwen in the guest under QEMU, against pyaisvc.model.reference.

One image holds every UPROG, the real SmolLM2 in our format (/AI/SMOL, v3), in
the kernels' layout that the guest maps (/AI/SMOL4, v4) and in the course's
(/AI/SMOLC), the tiny synthetic Qwen3.5 in all three (/AI/QWEN, /AI/QWEN4, /AI/QWENC),
request files (/REQ) and malformed asset directories (/BAD/<version>/<case>:
the changed small files; EMB.BIN, when unchanged, is hard-linked in the guest
to keep the image small). Requests go through --stdin from a file, the ids
to a file (stdout), so the console shows only the messages and timing lines.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from host import llmcases as lc

from pyaisvc.guest.llmguest import MODELS, timings
from pyaisvc.image import fsimg

GEN = 8
STREAMED = 3  # prompts the --stream test runs (every prompt runs in test_smol_matches_reference)
SMOL_RAM = MODELS["smol"].ram
QWEN_RAM = "256M"  # the tiny synthetic Qwen3.5, not the real one
pytestmark = pytest.mark.guest


def _add_malformed(tree: fsimg.Tree, tmp: Path) -> dict[tuple[int, str], list[str]]:
    """Add /BAD/<version>/<case>/ for every case; returns the ln commands each needs."""
    links = {}
    for version, fmt in ((2, "course"), (3, "v3")):
        good = lc.qwen_tiny_dir(fmt)
        for name, mutate, _ in lc.malformed_cases(version):
            bad = lc.make_malformed(good, tmp / f"bad{version}" / name, mutate)
            target = f"BAD/{version}/{name}"
            cmds = []
            for f in sorted(bad.iterdir()):
                if f.name == "EMB.BIN" and f.is_symlink():
                    cmds.append(f"ln /AI/{'QWEN' if version == 3 else 'QWENC'}/EMB.BIN "
                                f"/{target}/EMB.BIN")
                else:
                    tree.add_file(f"{target}/{f.name}", f)
            links[(version, name)] = cmds
    return links


@pytest.fixture(scope="module")
def llm_image(build, tmp_path_factory) -> tuple[Path, dict, dict]:
    tmp = tmp_path_factory.mktemp("llm")
    tree = build.program_tree()
    reqs = {}
    # The course format differs from v3 only in its scales: its prompts stop at 17 tokens.
    for fmt, top, count in (("v3", "SMOL", 6), ("v4", "SMOL4", 6), ("course", "SMOLC", 4)):
        d = lc.smol_dir(fmt)
        if d is not None:
            tree.add_dir(f"AI/{top}", d)
            reqs[top] = (d, lc.smol_prompts()[:count])
    for fmt, top in (("v3", "QWEN"), ("v4", "QWEN4"), ("course", "QWENC")):
        d = lc.qwen_tiny_dir(fmt)
        tree.add_dir(f"AI/{top}", d)
        reqs[top] = (d, lc.qwen_prompts())
    for top, (_, prompts) in reqs.items():
        (tmp / f"{top}.txt").write_text(lc.request_lines(prompts, GEN))
        tree.add_file(f"REQ/{top}.TXT", tmp / f"{top}.txt")
    if "SMOL" in reqs:  # the first three (up to 9 tokens), for the --stream test
        (tmp / "short.txt").write_text(lc.request_lines(reqs["SMOL"][1][:STREAMED], GEN))
        tree.add_file("REQ/SHORT.TXT", tmp / "short.txt")
    limits = [f"3 {' '.join(map(str, lc.FRANCE['qwen']))}",
              *[line for line, _ in lc.limit_cases(248320, 256)],
              f"3 {' '.join(map(str, lc.FRANCE['qwen']))}", "exit", "2 1 2"]
    (tmp / "limits.txt").write_text("\n".join(limits) + "\n")
    tree.add_file("REQ/LIMITS.TXT", tmp / "limits.txt")
    links = _add_malformed(tree, tmp)
    image = tmp / "llm.img"
    fsimg.build_image(image, tree)
    return image, reqs, links


def served_ids(g, cmd: str, timeout: float) -> tuple[list[list[int]], str]:
    """Run cmd with stdout to a file; (the id lines, the console output)."""
    console = g.run(f"{cmd} > /out.txt", timeout=timeout)
    out = g.run("cat /out.txt")
    return [[int(v) for v in line.split()] for line in out.splitlines() if line.strip()], console


def _mapped(console: str, top: str) -> None:
    """A version 4 model's weights were mapped: its first request's forward passes took
    page faults (faults= of the first timing line); the other formats' none."""
    faults = [int(v) for v in re.findall(r" faults=(\d+) ", console)]
    assert faults, console
    assert (faults[0] > 0) == top.endswith("4"), console


@pytest.mark.slow
@pytest.mark.parametrize("top", ["SMOL", "SMOL4", "SMOLC"])
def test_smol_matches_reference(boot_guest, llm_image, top: str) -> None:
    lc.smol_or_skip()  # SMOLC is exported from it
    image, reqs, _ = llm_image
    assets, prompts = reqs[top]
    want = lc.reference_ids(assets, prompts, GEN)
    g = boot_guest(ram=SMOL_RAM, image=image)
    got, console = served_ids(g, f"llmrun_smol --asset-dir /AI/{top} --stdin < /REQ/{top}.TXT",
                              timeout=900)
    assert got == want, console
    counts = [(t["prompt"], t["gen"]) for t in timings(console)]
    assert counts == [(len(p), GEN) for p in prompts]
    _mapped(console, top)


@pytest.mark.parametrize("top", ["QWEN", "QWEN4", "QWENC"])
def test_qwen_tiny_matches_reference(boot_guest, llm_image, top: str) -> None:
    image, reqs, _ = llm_image
    assets, prompts = reqs[top]
    want = lc.reference_ids(assets, prompts, GEN)
    g = boot_guest(ram=QWEN_RAM, image=image)
    got, console = served_ids(g, f"llmrun_qwen --asset-dir /AI/{top} --stdin < /REQ/{top}.TXT",
                              timeout=900)
    assert got == want, console
    _mapped(console, top)
    # the same prompt from the command line, one process per request
    p = prompts[2]
    got, _ = served_ids(g, f"llmrun_qwen --asset-dir /AI/{top} --predict {GEN} "
                        + " ".join(map(str, p)), timeout=300)
    assert got == [want[2]]


def test_stdin_limits_and_bad_lines(boot_guest, llm_image) -> None:
    image, reqs, _ = llm_image
    want = lc.reference_ids(reqs["QWEN"][0], [lc.FRANCE["qwen"]], 3)[0]
    g = boot_guest(ram=QWEN_RAM, image=image)
    got, console = served_ids(g, "llmrun_qwen --asset-dir /AI/QWEN --quiet --stdin "
                              "< /REQ/LIMITS.TXT", timeout=300)
    assert got == [want, want], console
    for _, msg in lc.limit_cases(248320, 256):
        assert msg in console
    console = g.run("llmrun_qwen --asset-dir /AI/QWEN --predict 300 1 2")
    assert "exceeds runtime_seq_len 256" in console


@pytest.mark.parametrize("version", [2, 3])
def test_malformed_assets(boot_guest, llm_image, version: int) -> None:
    image, _, links = llm_image
    g = boot_guest(ram=QWEN_RAM, image=image)
    failures = []
    for name, _, msg in lc.malformed_cases(version):
        for cmd in links[(version, name)]:
            g.run(cmd)
        out = g.run(f"llmrun_qwen --asset-dir /BAD/{version}/{name} 1 2", timeout=120)
        if msg not in out or not out.startswith("llmrun_qwen: "):
            failures.append((name, msg, out))
    assert not failures


def test_wrong_program_and_dir(boot_guest, llm_image) -> None:
    image, _, _ = llm_image
    g = boot_guest(ram=QWEN_RAM, image=image)
    out = g.run("llmrun_smol --asset-dir /AI/QWEN 1")
    assert "CFG.BIN: field model_kind: 1 (qwen), but llmrun_smol runs model_kind 0" in out
    out = g.run("llmrun_qwen --asset-dir /nowhere 1")
    assert "cannot enter the asset directory" in out


@pytest.mark.slow
def test_smol_stream_prints_the_same_ids(boot_guest, llm_image) -> None:
    """--stream writes each id as it is chosen; stdout ends up byte for byte the same,
    from --stdin and from the command line."""
    lc.smol_or_skip()
    image, reqs, _ = llm_image
    assets, prompts = reqs["SMOL"]
    want = lc.reference_ids(assets, prompts[:STREAMED], GEN)
    g = boot_guest(ram=SMOL_RAM, image=image)
    outs = {}
    for name, opt in (("plain", ""), ("stream", "--stream ")):
        g.run(f"llmrun_smol --quiet {opt}--stdin < /REQ/SHORT.TXT > /{name}1.txt", timeout=900)
        g.run(f"llmrun_smol --quiet {opt}--predict {GEN} {' '.join(map(str, prompts[0]))} "
              f"> /{name}2.txt", timeout=300)
        outs[name] = g.run(f"cat /{name}1.txt /{name}2.txt")
    assert outs["stream"] == outs["plain"]
    lines = [[int(v) for v in line.split()] for line in outs["plain"].splitlines()]
    assert lines == want + want[:1], outs
