"""Model images (pyaisvc.image.modelimage, `pyaisvc image`, the Makefile's fs-smol.img rules)
and the facts pyaisvc.guest.llmguest reads from the kernel headers. Host only, no QEMU."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from pyaisvc.bench.plan import KEYS
from pyaisvc.cli import main as cli_main
from pyaisvc.guest.llmguest import MODELS, POLICIES, max_batch, max_prompt
from pyaisvc.image import fsimg
from pyaisvc.image.modelimage import build_model_image
from pyaisvc.model.tokenizer import MODELS as TOKENIZERS

ROOT = Path(__file__).resolve().parent.parent


def _model(path: Path, fill: bytes, mtime_ns: int) -> Path:
    """A fake asset directory: two files of fixed sizes filled with `fill`, all at mtime_ns."""
    path.mkdir(parents=True)
    for name, size in (("CFG.BIN", 100), ("EMB.BIN", 3 * fsimg.load_layout().BSIZE + 7)):
        f = path / name
        f.write_bytes(fill * size)
        os.utime(f, ns=(mtime_ns, mtime_ns))
    return path


def _read(image: Path, path: str) -> bytes:
    with fsimg.Image(image) as img:
        return img.read_file(img.lookup(path).inum)


@pytest.fixture
def programs(tmp_path: Path) -> dict[str, Path]:
    elf = tmp_path / "bin/_cat"
    elf.parent.mkdir()
    elf.write_bytes(b"\x7fELF cat")
    return {"cat": elf}


def test_image_is_rebuilt_when_the_model_content_changes(tmp_path: Path,
                                                         programs: dict[str, Path]) -> None:
    image = tmp_path / "fs-smol.img"
    smol = _model(tmp_path / "models/SMOL", b"n", 2_000_000_000_000_000_000)
    dirs = {"AI/SMOL": smol}
    assert build_model_image(image, programs, dirs) is not None
    assert build_model_image(image, programs, dirs) is None  # same content: untouched
    # Swap in older files of the same names and sizes: only their bytes differ.
    smol.rename(tmp_path / "models/SMOL.new")
    _model(smol, b"o", 1_000_000_000_000_000_000)
    assert build_model_image(image, programs, dirs) is not None
    assert _read(image, "AI/SMOL/EMB.BIN")[:1] == b"o"
    assert build_model_image(image, programs, dirs) is None
    # A changed program rebuilds too.
    programs["cat"].write_bytes(b"\x7fELF cat 2")
    assert build_model_image(image, programs, dirs) is not None
    assert _read(image, "cat") == b"\x7fELF cat 2"


def test_cli_builds_then_says_up_to_date(tmp_path: Path, programs: dict[str, Path],
                                         capsys: pytest.CaptureFixture[str]) -> None:
    smol = _model(tmp_path / "SMOL", b"s", 1_500_000_000_000_000_000)
    argv = ["image", "--quiet", "--out", str(tmp_path / "x.img"), "--model", f"smol={smol}",
            "--add", f"cat={programs['cat']}"]
    assert cli_main(argv) == 0
    assert "entries" in capsys.readouterr().out
    assert cli_main(argv) == 0
    assert "up to date" in capsys.readouterr().out
    assert _read(tmp_path / "x.img", MODELS["smol"].guest_dir + "/CFG.BIN") == b"s" * 100
    assert cli_main(["image", "--out", str(tmp_path / "y.img"), "--model", "llama"]) == 1
    assert "unknown model 'llama'" in capsys.readouterr().err


def test_makefile_builds_model_images_with_pyaisvc_image() -> None:
    dry = subprocess.run(["make", "-n", "-W", "models/SMOL/INFO.TXT", "build/fs-smol.img"],
                         cwd=ROOT, capture_output=True, text=True)
    assert "-m pyaisvc image" in dry.stdout and "--model smol=models/SMOL" in dry.stdout, \
        dry.stdout + dry.stderr


def test_prompt_limit_is_the_kernels() -> None:
    header = (ROOT / "kernel/include/aisvc.h").read_text()
    m = re.search(r"^#define\s+AI_MAX_PROMPT\s+(\d+)", header, re.M)
    assert m is not None and max_prompt() == int(m.group(1)) == 255


def test_batch_limit_is_the_workers() -> None:
    """AI_BATCH has one definition, in the kernel's header, that the worker uses."""
    header = (ROOT / "kernel/include/aisvc.h").read_text()
    m = re.search(r"^#define\s+AI_BATCH\s+(\d+)", header, re.M)
    assert m is not None and max_batch() == int(m.group(1)) == 8
    daemon = (ROOT / "user/ai/ai_daemon.c").read_text()
    assert "AI_BATCH" in daemon and not re.search(r"^#define\s+AI_BATCH\b", daemon, re.M)


def test_policy_names_are_the_kernels() -> None:
    """The host's policy names are the kernel's: each sched_*.c names itself by its
    AI_SCHED_ string of aisvc.h, and every such string is a policy's."""
    assert POLICIES == ("fifo", "priority", "shortest", "fair")  # docs/SCHEDULING.md
    used = set()
    for path in sorted((ROOT / "kernel/ai").glob("sched_*.c")):
        m = re.search(r"\.name\s*=\s*AI_SCHED_(\w+)\s*,", path.read_text())
        assert m is not None, f"{path.name} does not name itself by an AI_SCHED_ string"
        used.add(m.group(1).lower())
    assert used == set(POLICIES)


def test_every_model_list_is_the_model_table() -> None:
    """The tokenizers, the guest's model table and a bench plan's "model" key name the
    same models."""
    assert tuple(MODELS) == TOKENIZERS == ("smol", "qwen")
    accept = KEYS["model"].convert
    assert [accept(m) for m in (*MODELS, "both", "llama")] == [*MODELS, "both", None]


def test_makefile_ram_defaults_are_the_model_tables() -> None:
    for spec in MODELS.values():
        var = f"{spec.name.upper()}_RAM"
        out = subprocess.run(["make", "-s", "--no-print-directory", f"print-{var}"], cwd=ROOT,
                             capture_output=True, text=True).stdout.strip()
        assert out == spec.ram, \
            f"Makefile {var}={out}, pyaisvc.guest.llmguest.MODELS says {spec.ram}"
