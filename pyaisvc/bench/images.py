"""Build what a measurement needs: kernel, guest programs, model assets, an image.

``prepare(root, model, assets)`` runs ``make kernel uprogs`` (a no-op when up
to date), checks the asset directory (running the model's make target for
the default one when it is missing) and builds ``build/bench/fs-MODEL-HASH.img``
with every guest program at /NAME and the assets at the model's directory
(/AI/SMOL or /AI/QWEN); HASH names the asset directory, so two asset sets
never share an image. The image is rebuilt only when an input is newer,
into a new file renamed over the old one: a QEMU still running on the old
image (snapshot=on reads the file) keeps reading the old contents.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from pyaisvc import fsimg
from pyaisvc.bench.matrix import BenchError, ModelSpec

IMAGE_DIR = Path("build/bench")
KERNEL = Path("build/kernel/kernel")


@dataclass(frozen=True)
class Prepared:
    """A bootable kernel and image for one model."""

    kernel: Path
    image: Path
    assets: Path
    size_mb: float  # the assets' total size
    title: str  # what the assets hold, from INFO.TXT (e.g. "Qwen3.5 synthetic (0.8b)")


def _make(root: Path, *targets: str, hint: str = "fix the build first") -> None:
    proc = subprocess.run(["make", *targets], cwd=root, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr)[-3000:]
        raise BenchError(f"`make {' '.join(targets)}` failed; {hint}:\n{tail}")


def uprogs(root: Path) -> dict[str, Path]:
    """Guest program name -> ELF, from the Makefile's UPROGS."""
    proc = subprocess.run(["make", "-s", "--no-print-directory", "print-UPROGS"], cwd=root,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise BenchError(f"`make print-UPROGS` failed: {proc.stderr.strip()}")
    return {n: root / "build/user" / f"_{n}" for n in proc.stdout.split()}


def check_assets(root: Path, spec: ModelSpec, assets: Path | None) -> Path:
    """The asset directory to use; runs `make MODEL-assets` for a missing default one."""
    if assets is None:
        assets = root / spec.assets
        if not (assets / "INFO.TXT").is_file() and not (assets / "CFG.BIN").is_file():
            _make(root, spec.make_assets, hint=f"pass --assets-{spec.name} DIR, or give "
                  "make what it asks for")
    if not (assets / "CFG.BIN").is_file():
        raise BenchError(f"{assets}: no CFG.BIN, so no {spec.title} assets; run "
                         f"`make {spec.make_assets}` (see the Makefile's [models] section) "
                         f"or pass --assets-{spec.name} DIR")
    return assets


def _newest(paths: list[Path]) -> float:
    return max(p.stat().st_mtime for p in paths)


def prepare(root: Path, spec: ModelSpec, assets: Path | None = None,
            extra: dict[str, Path] | None = None) -> Prepared:
    """Kernel, programs and an image holding them and the model; see the module doc."""
    _make(root, "kernel", "uprogs")
    assets = check_assets(root, spec, assets)
    progs = uprogs(root)
    files = sorted(p for p in assets.iterdir() if p.is_file())
    key = hashlib.sha256(str(assets.resolve()).encode()).hexdigest()[:8]
    image = root / IMAGE_DIR / f"fs-{spec.name}-{key}.img"
    stamp = image.with_suffix(".src")
    source = "\n".join([str(assets.resolve()), *sorted(progs), *sorted(extra or {})])
    inputs = [*progs.values(), *files, *(extra or {}).values()]
    fresh = (image.is_file() and stamp.is_file() and stamp.read_text() == source
             and image.stat().st_mtime >= _newest(inputs))
    if not fresh:
        image.parent.mkdir(parents=True, exist_ok=True)
        tree = fsimg.Tree(fsimg.load_layout())
        for name, elf in progs.items():
            tree.add_file(name, elf)
        tree.add_dir(spec.guest_dir.lstrip("/"), assets)
        for target, host in (extra or {}).items():
            tree.add_file(target, host)
        tmp = image.with_name(f"{image.name}.{os.getpid()}.tmp")
        fsimg.build_image(tmp, tree)
        os.replace(tmp, image)
        stamp.write_text(source)
    size_mb = sum(f.stat().st_size for f in files) / 1e6
    return Prepared(root / KERNEL, image, assets, size_mb, asset_title(assets, spec.title))


def asset_title(assets: Path, default: str) -> str:
    """INFO.TXT's source model name, or default when there is none."""
    try:
        info = json.loads((assets / "INFO.TXT").read_text())
        return str(info["source"]["model"])
    except (OSError, ValueError, KeyError, TypeError):
        return default
