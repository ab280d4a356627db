"""Requests through the kernel AI service: the resident worker keeps the model loaded.

init starts ``ai_daemon`` at boot when the image holds a model; it loads the
model once and prints ``ai_daemon: pid N serving DIR (...), load X ms, batch B,
kernels K, threads T``.
Each run then goes through the ``ai`` tool at the shell, in one session
(a request belongs to the process that submitted it)::

    ai> submit G ID ...        -> reqid R            (ai_submit)
    ai> query R                -> state and timings  (ai_query), until "done"
    ai> wait R                 -> the generated ids  (ai_wait; frees the request)

The timings come from the kernel's ai_status (kernel/include/aisvc.h):
ttft_us = first token - submit, total_us = finish - submit, so
TPOT = (total_us - ttft_us) / (G - 1). load_us is the daemon's one load.
ai_wait consumes the request and no blocking call returns the timings, so
the host polls ai_query until the request is done; the timings are the
kernel's own timestamps, so the polling interval does not change them.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from pyaisvc.bench.matrix import BenchError, Run
from pyaisvc.bench.sample import Note, Sample
from pyaisvc.guest.llmguest import ModelSpec
from pyaisvc.guest.qemu import PROMPT, Guest

# The worker's line at boot (user/ai/ai_daemon.c).
DAEMON = re.compile(r"ai_daemon: pid (\d+) serving (\S+) \(.*\), load (\d+) ms, batch (\d+), "
                    r"kernels (\w+), threads (\d+)")
# The worker's line when it measured its pool again and the count changed.
RESIZED = re.compile(r"ai_daemon: threads \d+ -> (\d+) \(measured again while idle\)")
AI_PROMPT = "ai> "
QUERY = (r"reqid (\d+): (\w+)[^\n]*\n\s*prompt (\d+), predict (\d+); "
         r"queued_us (\d+) ttft_us (\d+) total_us (\d+)\r*\n")
ERROR = r"(\w+): error (-?\d+): ([^\r\n]*)\r*\n"
POLL_S = 0.25  # host seconds between two ai_query calls


@dataclass(frozen=True)
class Worker:
    """The AI worker a guest started at boot, from its line in the transcript."""

    pid: int
    served: str  # its asset directory
    load_ms: int
    batch: int  # requests per forward pass
    ran: str  # "kernels/threads", e.g. "vector/2"


def boot_worker(transcript: str) -> Worker | None:
    """The last worker that started in the transcript, with the thread count it last
    reported (it measures its pool again when idle); None if none started."""
    found = list(DAEMON.finditer(transcript))
    if not found:
        return None
    pid, served, load_ms, batch, kernels, threads = found[-1].groups()
    changes = RESIZED.findall(transcript, found[-1].end())
    if changes:
        threads = changes[-1]
    return Worker(int(pid), served, int(load_ms), int(batch), f"{kernels}/{threads}")


class ServiceClient:
    """Runs requests through the AI service of one booted guest."""

    def __init__(self, guest: Guest, spec: ModelSpec, note: Note) -> None:
        """A client of the AI worker that booted in guest, serving spec's model; BenchError when
        no worker started or it serves another model. Its load time is the worker's."""
        self.guest, self.spec = guest, spec
        w = boot_worker(guest.transcript)
        if w is None:
            raise BenchError("--mode service: no AI worker started at boot (no 'ai_daemon: "
                             "pid N serving ...' line); the image needs /ai_daemon and /ai "
                             "(the Makefile's UPROGS) and init must start the daemon")
        if w.served != spec.guest_dir:
            raise BenchError(f"--mode service: the worker serves {w.served}, not "
                             f"{spec.guest_dir}")
        self.load_us = w.load_ms * 1000
        note(f"{spec.name}: AI worker pid {w.pid} loaded the model in {w.load_ms} ms "
             f"({w.ran})")

    def run(self, run: Run, timeout: float) -> Sample:
        """One run through the ai tool (submit, poll, wait) as a Sample with the kernel's
        timings; BenchError when the ids or the prompt length differ from the run's."""
        c = run.cell
        deadline = time.monotonic() + timeout
        ran = self._ran()
        t0 = time.monotonic()
        self.guest.send_line("ai")
        self.guest.expect([re.escape(AI_PROMPT)], deadline, "the ai tool's prompt")
        try:
            reqid = self._command(f"submit {c.gen_len} " + " ".join(map(str, run.prompt)),
                                  r"reqid (\d+)\r*\n", deadline)
            timing = self._poll(int(reqid.group(1)), deadline)
            ids_m = self._command(f"wait {reqid.group(1)}", r"(\d+(?: \d+)*)\r*\n", deadline)
        finally:
            self.guest.send_line("quit")
            self.guest.expect([re.escape(PROMPT)], time.monotonic() + 30, "the shell prompt")
        wall = time.monotonic() - t0
        ids = tuple(int(v) for v in ids_m.group(1).split())
        if len(ids) != c.gen_len or timing["prompt"] != c.prompt_len:
            raise BenchError(f"ai: asked for {c.gen_len} ids on {c.prompt_len} prompt ids, "
                             f"got {len(ids)} ids (query says prompt {timing['prompt']})")
        ttft, total = timing["ttft_us"], timing["total_us"]
        tpot = (total - ttft) // (c.gen_len - 1) if c.gen_len > 1 else 0
        return Sample(c.model, c.mode, c.prompt_len, c.gen_len, run.repeat, self.load_us,
                      self.load_us, ttft, tpot, wall, ids, ran=ran)

    def _ran(self) -> str:
        """kernels/threads the worker reported last: its pool is measured again when
        idle, so the count at boot may have changed."""
        w = boot_worker(self.guest.transcript)
        assert w is not None  # found at __init__, and the transcript only grows
        return w.ran

    def _poll(self, reqid: int, deadline: float) -> dict[str, int]:
        """Queries reqid until it is done; its prompt length and timings."""
        while True:
            m = self._command(f"query {reqid}", QUERY, deadline)
            state = m.group(2)
            if state == "done":
                names = ("prompt", "predict", "queued_us", "ttft_us", "total_us")
                return dict(zip(names, (int(m.group(i)) for i in range(3, 8)), strict=True))
            if state not in ("queued", "running"):
                raise BenchError(f"ai: request {reqid} is {state}: {m.group(0).strip()}")
            time.sleep(POLL_S)  # see the module doc: no call blocks and returns the timings

    def _command(self, line: str, reply: str, deadline: float) -> re.Match[str]:
        """Sends one ai command; its reply's match (after which the next prompt came)."""
        self.guest.send_line(line)
        self.guest.expect([re.escape(line) + r"\r*\n"], deadline, f"the echo of {line[:40]!r}")
        if self.guest.expect([reply, ERROR], deadline, f"the reply to {line[:40]!r}") == 1:
            m = self.guest.match
            raise BenchError(f"ai {line.split()[0]}: error {m.group(2)}: {m.group(3)}")
        m = self.guest.match
        self.guest.expect([re.escape(AI_PROMPT)], deadline, "the ai tool's prompt")
        return m
