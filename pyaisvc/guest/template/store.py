"""Templates: a guest saved once with the model loaded, kept under build/cache/templates/.

``ensure(cfg)`` returns the template of the machine cfg describes: the one
on disk when it checks out (``load``), else a new one (``make``): a cold
boot whose worker loaded the model and whose gateway answered a hello, then
stopped and saved over QMP. Its files, in ``build/cache/templates/SLOT-KEY/``:

- ``base.img``: the guest's image as it booted (a hard link, so rebuilding
  the image, which renames a new file over the old, leaves it as it was);
- ``disk.qcow2``: the layer over it the template's boot wrote; frozen, each
  clone writes to a fresh overlay of its own over it;
- ``ram``: the guest RAM, a memory-backend-file the template mapped shared;
- ``state``: the device state, migrated with ``x-ignore-shared`` (the RAM is
  left out: it is the file above);
- ``meta.json``: written last (its directory is renamed into place whole), with
  the key and each file's size, and the state file's sha256.

KEY is the content hash of everything a template depends on (``key()``):
kernel, image, QEMU's version and binary, the machine and boot arguments;
SLOT names what it is for (image path and machine), so making a template
removes the slot's stale ones. ``load`` never returns a missing, partial,
corrupt or stale template: it says why (``TemplateMissing``) and the caller
cold boots and saves a new one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import secrets
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from pyaisvc.errors import AisvcError
from pyaisvc.guest.qemu import Guest, GuestError, QemuConfig, cpu_option
from pyaisvc.guest.template.qmp import Qmp
from pyaisvc.image.modelimage import stored_digest

log = logging.getLogger("pyaisvc.guest.template")
ROOT = Path("build/cache/templates")
FORMAT = 1  # the layout above; another value is another key
SAVE_TIMEOUT = 120.0  # seconds for the migration to write the state file
HELLO_EVERY = 1.0  # seconds between hellos while the gateway has not answered


class TemplateMissing(AisvcError):
    """No usable template: the message says why (missing, partial, corrupt, stale)."""


@dataclass(frozen=True)
class Template:
    """A saved guest: cfg is the machine it ran on (the clones take it), dir its files."""

    cfg: QemuConfig
    dir: Path
    key: str

    @property
    def disk(self) -> Path:
        return self.dir / "disk.qcow2"

    @property
    def ram(self) -> Path:
        return self.dir / "ram"

    @property
    def state(self) -> Path:
        return self.dir / "state"


def qemu_img() -> str:
    """qemu-img's path; GuestError saying how to install it."""
    found = shutil.which("qemu-img")
    if found is None:
        raise GuestError("qemu-img not found; run 'make deps' (installs qemu-utils)")
    return found


def file_sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _image_digest(image: Path) -> str:
    """The image's content hash: the one its builder stored, else its bytes' sha256; with
    its size and mtime, so an image changed in place is another image too."""
    st = image.stat()
    return f"{stored_digest(image) or file_sha256(image)} {st.st_size} {st.st_mtime_ns}"


def _qemu_identity(qemu: str) -> str:
    """QEMU's --version text and its binary's size and mtime."""
    path = shutil.which(qemu) or qemu
    out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30,
                         check=False).stdout
    st = Path(path).stat()
    return f"{out.strip()} {st.st_size} {st.st_mtime_ns}"


def slot(cfg: QemuConfig) -> str:
    """What a template is for: the image's path and the machine (16 hex digits)."""
    what = f"{Path(cfg.image or '').resolve()} {cfg.ram} {cfg.cpus} {cfg.qemu} {cfg.append}"
    return hashlib.sha256(what.encode()).hexdigest()[:16]


def key(cfg: QemuConfig) -> str:
    """The content hash of everything a template of cfg depends on (the module's comment)."""
    if cfg.image is None:
        raise GuestError("a template needs an image")
    parts = [f"format {FORMAT}", f"kernel {file_sha256(Path(cfg.kernel))}",
             f"image {_image_digest(Path(cfg.image))}", f"qemu {_qemu_identity(cfg.qemu)}",
             f"machine ram={cfg.ram} cpus={cfg.cpus} cpu={cpu_option(cfg)}",
             f"append {cfg.append}"]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _dir(root: Path, cfg: QemuConfig, digest: str) -> Path:
    return root / f"{slot(cfg)}-{digest[:24]}"


def _meta_check(t: Template) -> None:
    """TemplateMissing naming the first file that is not as meta.json recorded."""
    try:
        meta = json.loads((t.dir / "meta.json").read_text())
    except (OSError, ValueError) as e:
        raise TemplateMissing(f"template {t.dir.name} is partial (meta.json: {e})") from None
    if not isinstance(meta, dict) or meta.get("key") != t.key or meta.get("format") != FORMAT:
        raise TemplateMissing(f"template {t.dir.name} is stale (its key differs)")
    for name in ("base.img", "disk.qcow2", "ram", "state"):
        try:
            size = (t.dir / name).stat().st_size
        except OSError:
            raise TemplateMissing(f"template {t.dir.name} has no {name}") from None
        if size != meta.get("sizes", {}).get(name):
            raise TemplateMissing(f"template {t.dir.name}: {name} is {size} bytes, "
                                  f"not the {meta.get('sizes', {}).get(name)} it was saved with")
    if file_sha256(t.state) != meta.get("state_sha256"):
        raise TemplateMissing(f"template {t.dir.name}: the state file is corrupt (sha256)")


def load(cfg: QemuConfig, root: Path = ROOT, digest: str | None = None) -> Template:
    """The template of cfg on disk; TemplateMissing saying why there is no usable one."""
    digest = digest or key(cfg)
    t = Template(cfg, _dir(root, cfg, digest), digest)
    if not t.dir.is_dir():
        raise TemplateMissing(f"no template {t.dir.name} yet")
    _meta_check(t)
    return t


def remove_stale(cfg: QemuConfig, root: Path = ROOT, keep: str = "") -> list[Path]:
    """Removes the slot's templates other than keep's, and partial ones no live process
    writes; returns what it removed."""
    gone: list[Path] = []
    mine = slot(cfg)
    for d in sorted(root.glob(f"{mine}-*")) + sorted(root.glob(f".tmp-{mine}-*")):
        if d.name == keep:
            continue
        if d.name.startswith(".tmp-") and _pid_alive(d.name.rsplit("-", 2)[-2]):
            continue
        shutil.rmtree(d, ignore_errors=True)
        gone.append(d)
    return gone


def _pid_alive(word: str) -> bool:
    try:
        os.kill(int(word), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


def discard(t: Template) -> None:
    """Removes t's files (a template QEMU refused)."""
    shutil.rmtree(t.dir, ignore_errors=True)


def ensure(cfg: QemuConfig, root: Path = ROOT, timeout: float = 300.0) -> Template:
    """The usable template of cfg: load()'s, else a new one made (one log line says why)."""
    digest = key(cfg)
    try:
        return load(cfg, root, digest)
    except TemplateMissing as e:
        log.warning("%s: cold boot to make one", e)
    return make(cfg, root, digest, timeout)


def hello(path: Path, deadline: float) -> float:
    """Says hello on the gateway socket at path until the R frame echoing its nonce comes
    (docs/GATEWAY.md); returns time.monotonic() then. GuestError past deadline."""
    nonce = secrets.randbelow(2**62) + 1
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(str(path))
        f = s.makefile("rb")
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise GuestError(f"the gateway on {path} did not answer a hello")
            s.sendall(f"H {nonce}\n".encode())
            s.settimeout(min(HELLO_EVERY, left))
            try:
                while True:
                    words = f.readline().decode("ascii", "replace").split()
                    if not words:
                        raise GuestError(f"the gateway on {path} closed before it was ready")
                    if words[0] == "R" and words[-1] == str(nonce):
                        return time.monotonic()
            except TimeoutError:
                continue


def _layers(tmp: Path, image: Path) -> None:
    """base.img (image, hard-linked or copied) and the template's qcow2 layer over it."""
    try:
        os.link(image, tmp / "base.img")
    except OSError:
        shutil.copyfile(image, tmp / "base.img")
    subprocess.run([qemu_img(), "create", "-q", "-f", "qcow2", "-b", "base.img", "-F", "raw",
                    str(tmp / "disk.qcow2")], check=True, capture_output=True, timeout=60)


def save(qmp: Qmp, state: Path, timeout: float = SAVE_TIMEOUT) -> None:
    """Stops the guest and migrates its device state (x-ignore-shared: not the RAM, which
    is its file) to state; GuestError when the migration fails."""
    qmp.command("stop")
    qmp.command("migrate-set-capabilities",
                capabilities=[{"capability": "x-ignore-shared", "state": True}])
    qmp.command("migrate", uri=f"file:{state}")
    wait_migration(qmp, timeout, "saving the template")


def wait_migration(qmp: Qmp, timeout: float, what: str) -> None:
    """Waits for the migration to complete; GuestError naming what when it fails or
    does not end in timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        info = qmp.command("query-migrate")
        status = info.get("status")
        if status == "completed":
            return
        if status in ("failed", "cancelled"):
            raise GuestError(f"{what}: the migration {status}: {info.get('error-desc', '')}")
        if time.monotonic() > deadline:
            raise GuestError(f"{what}: the migration did not end in {timeout:.0f} s")
        time.sleep(0.001)


def make(cfg: QemuConfig, root: Path = ROOT, digest: str | None = None,
         timeout: float = 300.0) -> Template:
    """Cold boots cfg with its RAM in a shared file, waits for the gateway's answer,
    saves it (save()) and renames its directory into place; removes the slot's stale
    templates. GuestError when the boot or the save fails (nothing is left behind)."""
    digest = digest or key(cfg)
    root.mkdir(parents=True, exist_ok=True)
    final = _dir(root, cfg, digest)
    tmp = root / f".tmp-{slot(cfg)}-{os.getpid()}-{secrets.token_hex(4)}"
    tmp.mkdir()
    try:
        _layers(tmp, Path(cfg.image or ""))
        boot_cfg = dataclasses.replace(cfg, image=tmp / "disk.qcow2", disk_format="qcow2",
                                       snapshot=False, ram_file=tmp / "ram", ram_shared=True,
                                       port_socket=tmp / "gw.sock", qmp_socket=tmp / "qmp.sock",
                                       incoming=False)
        g = Guest(boot_cfg)
        try:
            g.boot(timeout)
            hello(tmp / "gw.sock", time.monotonic() + timeout)
            qmp = Qmp.connect(tmp / "qmp.sock", time.monotonic() + 10)
            try:
                save(qmp, tmp / "state")
            finally:
                qmp.close()
        finally:
            g.close()
        for name in ("gw.sock", "qmp.sock"):
            (tmp / name).unlink(missing_ok=True)
        _write_meta(tmp, digest)
        try:
            os.rename(tmp, final)
        except OSError:  # another process saved the same template first: use that one
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    for gone in remove_stale(cfg, root, keep=final.name):
        log.info("removed the stale template %s", gone.name)
    t = Template(cfg, final, digest)
    _meta_check(t)
    log.info("saved the template %s", final.name)
    return t


def _write_meta(tmp: Path, digest: str) -> None:
    """meta.json: the key and what each file holds, as load() checks them."""
    sizes = {n: (tmp / n).stat().st_size for n in ("base.img", "disk.qcow2", "ram", "state")}
    meta = {"format": FORMAT, "key": digest, "sizes": sizes,
            "state_sha256": file_sha256(tmp / "state")}
    (tmp / "meta.json").write_text(json.dumps(meta))
