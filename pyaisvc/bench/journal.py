"""The journal of a sweep: one JSON line per cell, appended the moment the cell arrives.

A sweep on a cluster (pyaisvc.bench.cluster) writes ``OUT/journal.jsonl``;
Ctrl-C, a crash of the client or a lost connection leaves every line written
so far, and ``pyaisvc bench ... --resume OUT/journal.jsonl`` runs only the
cells it does not hold. Each line is a JSON object whose "kind" says what it
is:

- ``plan`` (the first line): the plan's matrix, harts, RAM, profile flag and
  the commit it was measured at; a resumed sweep must have the same ones,
  or rows measured at two commits or of two plans would mix.
- ``cell``: one cell's samples (every repeat and harts value), the worker that
  measured them and that worker's machine. A cell with such a line is done.
- ``failed``: a cell that failed on its last try, with the error and the tail
  of the guest's console; it is not done, so a resumed sweep runs it again.

A load run (pyaisvc.bench.load.run) writes the same kind of file with its own
lines after the plan: ``capacity`` (the requests/s measured for --load) and
``policy`` (one policy's every request, as the clients saw it).

Every line is flushed and fsynced before the next cell is taken; a last line
cut short by a crash is dropped (and cut off the file) when it is resumed.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pyaisvc.bench.matrix import BenchError, Cell
from pyaisvc.bench.runner import Machine
from pyaisvc.bench.sample import Sample


def cell_key(cell: Cell) -> list[object]:
    """The cell as the journal writes it: [model, mode, prompt_len, gen_len]."""
    return [cell.model, cell.mode, cell.prompt_len, cell.gen_len]


@dataclass
class Done:
    """What a journal already holds."""

    cells: set[Cell] = field(default_factory=set)
    samples: list[Sample] = field(default_factory=list)
    machines: dict[str, Machine] = field(default_factory=dict)  # model -> its first machine
    workers: dict[str, str] = field(default_factory=dict)  # worker name -> CPU model


def _sample(d: dict) -> Sample:
    """A Sample from its journal record."""
    return Sample(**{**d, "ids": tuple(d["ids"])})


class Journal:
    """An open journal; append one line per cell with ``cell`` and ``failed``."""

    def __init__(self, path: Path) -> None:
        """The journal at path (already there: see create and resume)."""
        self.path = path

    @staticmethod
    def check_new(path: Path) -> None:
        """BenchError if path already holds a journal (a finished or interrupted sweep is
        continued with --resume, never overwritten)."""
        if path.exists() and path.stat().st_size > 0:
            raise BenchError(f"{path} already holds a sweep's journal: continue it with "
                             f"--resume {path}, or pass another --out")

    @classmethod
    def create(cls, path: Path, plan: dict[str, object]) -> Journal:
        """A new journal whose first line is plan (check_new's BenchError if one is there)."""
        cls.check_new(path)
        journal = cls(path)
        journal._append({"kind": "plan", **plan})
        return journal

    @classmethod
    def resume(cls, path: Path, plan: dict[str, object]) -> tuple[Journal, Done]:
        """The journal at path and what it holds; BenchError when it is missing, is not a
        journal, or was written for another plan or commit."""
        try:
            raw = path.read_bytes()
        except OSError as e:
            raise BenchError(f"--resume {path}: {e.strerror or e}") from e
        if raw and not raw.endswith(b"\n"):  # a line cut short by a crash
            raw = raw[: raw.rfind(b"\n") + 1]
            with path.open("r+b") as f:
                f.truncate(len(raw))
        lines = [json.loads(line) for line in raw.decode().splitlines() if line.strip()]
        if not lines or lines[0].get("kind") != "plan":
            raise BenchError(f"--resume {path}: not a sweep's journal (its first line is "
                             "not a plan); pass the journal.jsonl a sweep wrote")
        old = {k: v for k, v in lines[0].items() if k != "kind"}
        differ = [k for k in sorted(set(old) | set(plan)) if old.get(k) != plan.get(k)]
        if differ:
            said = "; ".join(f"{k}: journal {old.get(k)!r}, now {plan.get(k)!r}" for k in differ)
            raise BenchError(f"--resume {path}: the journal was written for another plan or "
                             f"commit ({said}); resume with the same flags and checkout, or "
                             "start a new sweep with another --out")
        done = Done()
        for line in lines[1:]:
            if line.get("kind") != "cell":
                continue
            done.cells.add(Cell(*line["cell"]))
            done.samples += [_sample(s) for s in line["samples"]]
            done.machines.setdefault(line["cell"][0], Machine(**line["machine"]))
            done.workers[line["worker"]] = line["cpu"]
        return cls(path), done

    def append(self, record: dict[str, object]) -> None:
        """Appends one line (a record with its own "kind"), flushed and fsynced."""
        self._append(record)

    def _append(self, record: dict[str, object]) -> None:
        """Appends record as one JSON line and syncs it to disk, so a crash loses no finished
        cell."""
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def cell(self, cell: Cell, worker: str, cpu: str, samples: list[Sample],
             machine: Machine) -> None:
        """Journals a finished cell: the worker and CPU that measured it, its machine and
        samples."""
        self._append({"kind": "cell", "cell": cell_key(cell), "worker": worker, "cpu": cpu,
                      "machine": asdict(machine), "samples": [asdict(s) for s in samples]})

    def failed(self, cell: Cell, error: str, tail: str) -> None:
        """Journals a cell that failed on its last try, with its error and console tail."""
        self._append({"kind": "failed", "cell": cell_key(cell), "error": error, "tail": tail})
