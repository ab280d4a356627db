"""A `pyaisvc serve` process that a test starts on a free loopback port (SmolLM2 in
its own guest), waits for and stops: test_serve.py, test_serve_key.py,
test_serve_page.py, test_ai_sched.py."""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import openai
from host import llmcases as lc
from host.buildlock import build_lock
from host.loopback import free_port

from pyaisvc.guest.llmguest import MODELS, prepare

ROOT = Path(__file__).resolve().parents[2]
BOOT_SECONDS = 900.0  # build what is missing, boot, load the model: generous on a busy host


@dataclass
class Server:
    url: str
    proc: subprocess.Popen
    log: Path

    def output(self) -> str:
        """The end of the server's log (its stdout and stderr), for a failure's message."""
        return self.log.read_text(errors="replace")[-4000:]

    def client(self) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.url + "/v1", api_key="unused", max_retries=0,
                             timeout=600)

    def health(self) -> httpx.Response:
        return httpx.get(self.url + "/health", timeout=30)

    def metric(self, name: str, labels: str = "") -> float:
        """The value of one sample of /metrics (name and its {labels} as the text shows them)."""
        text = httpx.get(self.url + "/metrics", timeout=30).text
        m = re.search(rf"^{re.escape(name + labels)} (\S+)$", text, re.M)
        assert m, f"{name}{labels} not in /metrics"
        return float(m.group(1))

    def wait_up(self, deadline: float) -> dict:
        """/health's reply once it is 200; fails if the process exits or the deadline
        (time.monotonic()) passes first."""
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"pyaisvc serve exited:\n{self.output()}"
            try:
                r = self.health()
                if r.status_code == 200:
                    return r.json()
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        raise AssertionError(f"the server did not become healthy:\n{self.output()}")


@contextlib.contextmanager
def serving_smol(log_dir: Path, *flags: str) -> Iterator[Server]:
    """`pyaisvc serve --model smol --port P FLAGS` on a free port P, healthy, its log
    at log_dir/serve.log; stopped (with its guest) when the block ends. Skips without
    models/SMOL."""
    lc.smol_or_skip()
    with build_lock():  # the server's own build step then finds everything up to date
        prepare(ROOT, MODELS["smol"])
    log = log_dir / "serve.log"
    port = free_port()
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "pyaisvc", "serve", "--model", "smol",
                                 "--port", str(port), *flags],
                                cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    srv = Server(f"http://127.0.0.1:{port}", proc, log)
    try:
        srv.wait_up(time.monotonic() + BOOT_SECONDS)
        yield srv
    finally:
        stop_server(proc)


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
