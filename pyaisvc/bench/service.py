"""Requests through the kernel AI service (ai_submit / ai_wait): not wired up yet."""

from __future__ import annotations

from pyaisvc.bench.matrix import BenchError, ModelSpec, Run
from pyaisvc.bench.runner import Note, Sample
from pyaisvc.qemu import Guest


class ServiceClient:
    def __init__(self, guest: Guest, spec: ModelSpec, note: Note) -> None:
        raise BenchError("--mode service: not available yet")

    def run(self, run: Run, timeout: float) -> Sample:
        raise BenchError("--mode service: not available yet")
