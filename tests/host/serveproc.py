"""Stopping a `pyaisvc serve` process that a test started (test_serve.py,
test_serve_page.py)."""

from __future__ import annotations

import signal
import subprocess


def stop_server(proc: subprocess.Popen) -> None:
    """Ctrl-C, as a user would (the server then stops its guest); killed after 60 s."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
