"""`make qemu-gdb` with gdb-multiarch: QEMU waits for gdb, gdb stops at the kernel's main.

`make deps` installs gdb-multiarch (tools/setup.sh). This runs the make target
as a user would (on a free port), attaches gdb in batch mode with a
breakpoint on main, and checks that the kernel reaches it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from host.loopback import free_port

ROOT = Path(__file__).resolve().parent.parent


def _wait_listening(port: int, proc: subprocess.Popen, timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            pytest.fail(f"make qemu-gdb exited: {proc.stdout.read() if proc.stdout else ''}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    pytest.fail(f"QEMU did not listen for gdb on port {port} within {timeout} s")


@pytest.mark.guest
def test_make_qemu_gdb_stops_at_main(build, make_image):
    gdb = shutil.which("gdb-multiarch")
    if gdb is None:
        pytest.fail("gdb-multiarch is missing: run `make deps`")
    port = free_port()
    # An image of its own: qemu-gdb opens it for writing, which QEMU refuses while other
    # tests' guests read build/fs.img.
    image = make_image({})
    qemu = subprocess.Popen(["make", "-s", "qemu-gdb", "CPUS=1", f"GDBPORT={port}",
                             f"QEMU_IMAGE={image}"], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        _wait_listening(port, qemu, 60)
        out = subprocess.run([gdb, "-batch", "-nx", str(build.kernel),
                              "-ex", f"target remote localhost:{port}",
                              "-ex", "break main", "-ex", "continue",
                              "-ex", "info registers pc"],
                             capture_output=True, text=True, timeout=120)
    finally:
        if qemu.poll() is None:
            os.killpg(qemu.pid, signal.SIGTERM)
        qemu.wait(timeout=30)
    text = out.stdout + out.stderr
    assert "Breakpoint 1 at 0x" in text, text
    assert "Breakpoint 1, main ()" in text, text
    assert "kernel/core/main.c" in text, text
