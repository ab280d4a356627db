"""tools/setup.sh's QEMU version probe, run as the script runs it.

The script runs under `set -euo pipefail`. On a machine with no QEMU at all
the probe's `qemu-system-riscv64 --version` fails; that must not end the
whole set-up (exit 127, no message), or `make deps` and `.ci/run` would stop on
every fresh machine without QEMU. These tests take the function
out of the script as it is and run it with a PATH that holds only the tools
it pipes through and, where a case wants one, a fake QEMU.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

SETUP = Path(__file__).resolve().parents[1] / "tools" / "setup.sh"


def qemu_major_function() -> str:
    """The text of setup.sh's qemu_major function."""
    m = re.search(r"^qemu_major\(\) \{\n.*?^\}\n", SETUP.read_text(), re.M | re.S)
    assert m, "tools/setup.sh has no qemu_major function"
    return m.group(0)


def run_probe(bindir: Path) -> subprocess.CompletedProcess[str]:
    """qemu_major under the script's shell options, PATH = bindir only."""
    for tool in ("sed", "head"):
        (bindir / tool).symlink_to(shutil.which(tool) or f"/usr/bin/{tool}")
    script = (f"set -euo pipefail\n{qemu_major_function()}"
              'major=$(qemu_major)\necho "major=[$major]"\n')
    bash = shutil.which("bash") or "/bin/bash"
    return subprocess.run([bash, "-c", script], env={"PATH": str(bindir)},
                          capture_output=True, text=True, timeout=30)


def fake_qemu(bindir: Path, version_line: str) -> None:
    """A qemu-system-riscv64 in bindir that prints version_line for --version."""
    exe = bindir / "qemu-system-riscv64"
    exe.write_text(f"#!{shutil.which('bash') or '/bin/bash'}\necho '{version_line}'\n")
    exe.chmod(0o755)


def test_no_qemu_gives_an_empty_version_and_the_script_goes_on(tmp_path: Path) -> None:
    out = run_probe(tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "major=[]\n"


def test_installed_qemu_gives_its_major_version(tmp_path: Path) -> None:
    fake_qemu(tmp_path, "QEMU emulator version 10.0.2 (Debian 1:10.0.2+ds-2+deb13u1~bpo12+1)")
    out = run_probe(tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "major=[10]\n"


def test_debian_12_qemu_gives_7(tmp_path: Path) -> None:
    fake_qemu(tmp_path, "QEMU emulator version 7.2.15 (Debian 1:7.2+dfsg-7+deb12u13)")
    assert run_probe(tmp_path).stdout == "major=[7]\n"
