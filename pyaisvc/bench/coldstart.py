"""Cold start measured: each way a guest can start, phase by phase (``bench --mode
coldstart``, docs/COLDSTART.md).

Three ways: a cold boot, a clone of the template (QEMU started, then the
state restored), and a clone from a QEMU already waiting (only the restore).
For each start the host notes when each event happened, from the moment it
started QEMU (or, from the pool, asked for the restore):

- ``qemu``: QEMU's monitor opens (QEMU started);
- ``kernel``: the kernel's banner (cold boot only);
- ``model load``: the worker's load time, as ai_daemon prints it (cold only);
- ``worker``: the rest from the banner until ai_daemon says it serves
  (the kernel's boot to init, init, the worker's start; cold only);
- ``restore``: the device state read back (clones);
- ``gateway``: the gateway answers the hello (docs/GATEWAY.md);
- ``first token``: the first id of a greedy request.

Then four clones run at once and each QEMU's private and shared memory is
read from ``/proc/PID/smaps_rollup``: the weights stay shared through the
host's page cache of the template's RAM file until a clone writes a page.
"""

from __future__ import annotations

import dataclasses
import re
import secrets
import shutil
import socket
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from pyaisvc.guest.qemu import BANNER, Guest, GuestError, QemuConfig
from pyaisvc.guest.template import store
from pyaisvc.guest.template.clone import Clone, Pool, start_clone
from pyaisvc.guest.template.qmp import Qmp

WAYS = ("cold boot", "clone", "clone from the pool")
PHASES = ("qemu", "kernel", "model load", "worker", "restore", "gateway", "first token")
SERVING = r"ai_daemon: pid \d+ serving .* load (\d+) ms"
PROMPT_IDS = (504, 3575, 282, 4649, 314)  # "The capital of France is" (SmolLM2)
CLONES_AT_ONCE = 4


@dataclass(frozen=True)
class Start:
    """One start: its way and each phase's milliseconds."""

    way: str
    phases: dict[str, float]

    @property
    def total(self) -> float:
        return sum(self.phases.values())


def first_token(sock_path: Path, deadline: float) -> tuple[float, float]:
    """Says hello on the gateway at sock_path, then submits one greedy request of the
    France prompt (an S frame, docs/GATEWAY.md); time.monotonic() of the hello's answer and
    of the first T frame."""
    nonce = secrets.randbelow(2**62) + 1
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(str(sock_path))
        s.settimeout(max(0.1, deadline - time.monotonic()))
        f = s.makefile("rb")
        s.sendall(f"H {nonce}\n".encode())
        while not (line := f.readline().decode()).startswith("R ") or \
                not line.split()[-1] == str(nonce):
            if not line:
                raise GuestError("the gateway closed before it answered")
        ready = time.monotonic()
        ids = " ".join(map(str, PROMPT_IDS))
        s.sendall(f"S 1 4 0 0 0 0 0 0 0 0 0 0 0 {len(PROMPT_IDS)} {ids}\n".encode())
        while not (line := f.readline().decode()).startswith("T 1 "):
            if not line or line.startswith("X 1 "):
                raise GuestError(f"the request failed: {line.strip()}")
        return ready, time.monotonic()


def _console_events(g: Guest, deadline: float) -> tuple[float, float, float]:
    """When the kernel's banner and ai_daemon's serving line came (init starts the gateway
    and the shell after it), and the load time the line says (ms)."""
    g.expect([BANNER.pattern], deadline, "the kernel's banner")
    t_banner = time.monotonic()
    g.expect([SERVING], deadline, "ai_daemon's serving line")
    return t_banner, time.monotonic(), float(g.match.group(1))


def cold_start(cfg: QemuConfig, timeout: float = 300.0) -> Start:
    """One cold boot (throw-away overlay), its phases measured."""
    d = Path(tempfile.mkdtemp(prefix="aisvc-coldstart-"))
    g = Guest(dataclasses.replace(cfg, snapshot=True, port_socket=d / "gw.sock",
                                  qmp_socket=d / "qmp.sock"))
    try:
        t0 = time.monotonic()
        g.spawn(timeout)
        Qmp.connect(d / "qmp.sock", t0 + 20).close()
        t_qemu = time.monotonic()
        t_banner, t_worker, load = _console_events(g, t0 + timeout)
        t_ready, t_token = first_token(d / "gw.sock", t0 + timeout)
    finally:
        g.close()
        shutil.rmtree(d, ignore_errors=True)
    worker = max(0.0, t_worker - t_banner) * 1000
    return Start(WAYS[0], {"qemu": (t_qemu - t0) * 1000, "kernel": (t_banner - t_qemu) * 1000,
                           "model load": min(load, worker), "worker": max(0.0, worker - load),
                           "gateway": (t_ready - t_worker) * 1000,
                           "first token": (t_token - t_ready) * 1000})


def clone_start(template: store.Template, pool: Pool | None = None) -> tuple[Start, Clone]:
    """One clone (from pool when given), its phases measured; the clone is still running."""
    t0 = time.monotonic()
    c = start_clone(template, pool)
    t_restored = time.monotonic()
    assert c.cfg.port_socket is not None
    t_ready, t_token = first_token(c.cfg.port_socket, t0 + 60)
    phases = {"restore": c.phases["restore"] * 1000}
    if "qemu" in c.phases:
        phases["qemu"] = (t_restored - t0) * 1000 - phases["restore"]
    phases |= {"gateway": (t_ready - t_restored) * 1000, "first token": (t_token - t_ready) * 1000}
    return Start(WAYS[1] if pool is None else WAYS[2], phases), c


def memory(pid: int) -> dict[str, int]:
    """A process's memory from /proc/PID/smaps_rollup: rss, pss, private, shared (KiB)."""
    text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    kib = {k: int(v) for k, v in re.findall(r"^(\w+):\s+(\d+) kB", text, re.M)}
    return {"rss": kib.get("Rss", 0), "pss": kib.get("Pss", 0),
            "private": kib.get("Private_Clean", 0) + kib.get("Private_Dirty", 0),
            "shared": kib.get("Shared_Clean", 0) + kib.get("Shared_Dirty", 0)}


def run(cfg: QemuConfig, repeat: int, root: Path, note=print) -> tuple[list[Start], list[dict]]:
    """Every way of starting repeat times, in turn (so the host's load falls on each
    alike), then CLONES_AT_ONCE clones at once: the starts and each clone's memory."""
    template = store.ensure(cfg, root)
    pool = Pool(template, 1)
    starts: list[Start] = []
    try:
        pool.fill()
        for i in range(repeat):
            starts.append(cold_start(cfg))
            for p in (None, pool):
                s, c = clone_start(template, p)
                c.close()
                starts.append(s)
                if p is not None:
                    pool.fill()  # waiting again before the next round, off the clock
            note(f"round {i + 1}/{repeat}: " + ", ".join(f"{s.way} {s.total:.0f} ms"
                                                         for s in starts[-3:]))
        clones = [clone_start(template)[1] for _ in range(CLONES_AT_ONCE)]
        try:
            mem = [memory(c.child.pid) for c in clones if c.child is not None]
        finally:
            for c in clones:
                c.close()
    finally:
        pool.close()
    return starts, mem


def median_phases(starts: list[Start]) -> dict[str, dict[str, float]]:
    """way -> phase -> the median of its milliseconds over the starts of that way."""
    out: dict[str, dict[str, float]] = {}
    for way in WAYS:
        mine = [s for s in starts if s.way == way]
        if mine:
            out[way] = {p: statistics.median(s.phases.get(p, 0.0) for s in mine)
                        for p in PHASES if any(p in s.phases for s in mine)}
    return out


def markdown(starts: list[Start], mem: list[dict], machine: str) -> str:
    """The phase table (medians, ms), the totals' range, and the clones' memory."""
    med = median_phases(starts)
    lines = [f"Cold start, median of {len(starts) // len(WAYS)} starts per way ({machine}); "
             "milliseconds", "", "| start | " + " | ".join(PHASES) + " | total | range |",
             "|---|" + "---:|" * (len(PHASES) + 2)]
    for way, phases in med.items():
        totals = [s.total for s in starts if s.way == way]
        cells = [f"{phases[p]:.0f}" if p in phases else "" for p in PHASES]
        lines.append(f"| {way} | " + " | ".join(cells) +
                     f" | {statistics.median(totals):.0f} | {min(totals):.0f}-{max(totals):.0f} |")
    lines += ["", f"{len(mem)} clones running at once (KiB, /proc/PID/smaps_rollup):", "",
              "| clone | rss | pss | private | shared |", "|---|---:|---:|---:|---:|"]
    lines += [f"| {i + 1} | {m['rss']} | {m['pss']} | {m['private']} | {m['shared']} |"
              for i, m in enumerate(mem)]
    return "\n".join(lines) + "\n"


def plot(starts: list[Start], path: Path) -> None:
    """A stacked bar per way: each phase's median milliseconds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    med = median_phases(starts)
    fig, ax = plt.subplots(figsize=(8, 3.5))
    ways = list(med)
    left = [0.0] * len(ways)
    for phase in PHASES:
        widths = [med[w].get(phase, 0.0) for w in ways]
        if any(widths):
            ax.barh(ways, widths, left=left, label=phase)
            left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.set_xlabel("milliseconds from the start (medians)")
    ax.invert_yaxis()
    ax.legend(fontsize=8, ncol=4, loc="lower right")
    ax.set_title("Cold start by phase: boot, clone, clone from the pool")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
