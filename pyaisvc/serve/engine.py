"""The guest behind the server: boot, the gateway connection, health, reboot.

``Engine.start()`` starts the guest under QEMU with the gateway port on a
Unix socket: by default a clone of the machine's template (saved once with
the model loaded; a cold boot makes it when there is none:
pyaisvc.guest.template.starter, docs/COLDSTART.md), with ``cold_boot`` a
boot that waits for the shell. It connects to the socket and says hello
until the gateway answers (init starts the gateway once the worker has
loaded the model, so the answer means both are up); the log and the
metrics say how the guest started and each phase's time.
Then a supervisor task keeps it so:

- it reads the gateway's frames (``Gateway.run``) and polls the table
  (``I``) for the metrics, often while requests are live; ``table()`` asks for
  the whole table (``V``) for the live view, and ``ended`` keeps the last
  requests' ``E`` frames with the time they came;
- a thread drains the serial console (QEMU stops when its console output is
  not read) and watches it for a kernel panic;
- when the connection ends (QEMU exited or was killed) or the kernel
  panicked, the live requests end with ``GuestDown`` (503), ``state`` says
  ``down``, the old QEMU is stopped and a fresh guest started (a clone from
  the pool of waiting QEMUs); failed starts are retried, a few seconds
  apart, until ``close()``.

``enqueue()`` hands a request to the current gateway's host queue; while
the guest is not up it raises ``GuestDown`` at once.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pexpect

from pyaisvc.errors import AisvcError
from pyaisvc.guest.qemu import PANIC, Guest, GuestError, QemuConfig
from pyaisvc.guest.template import store as template_store
from pyaisvc.guest.template.starter import Starter
from pyaisvc.serve import frames
from pyaisvc.serve.gateway import Gateway, GuestDown, Submitted
from pyaisvc.serve.metrics import Metrics

log = logging.getLogger("pyaisvc.serve")
POLL_BUSY, POLL_IDLE = 0.2, 0.5  # seconds between I frames with / without live requests
REBOOT_PAUSE = 3.0  # seconds between failed boots
ENDED_KEPT = 64  # E frames kept for the live view
QUEUE_MAX = 64  # requests the host queue holds beyond what the gateway holds, by default
GUEST_WAIT = 300.0  # seconds: to the shell prompt, from it to the R frame, a console command


@dataclass(frozen=True)
class EngineConfig:
    kernel: Path
    image: Path
    ram: str
    cpus: int
    qemu: str
    queue_max: int = QUEUE_MAX
    boot_timeout: float = GUEST_WAIT  # seconds to the shell prompt
    ready_timeout: float = GUEST_WAIT  # seconds from the prompt to the gateway's R frame
    append: str = ""  # the guest's boot arguments, e.g. aibatch=4 (the worker's places)
    cold_boot: bool = False  # boot every guest, never start one from the template
    template_root: Path = template_store.ROOT  # where templates are kept


class _Console:
    """A thread that reads the guest's console until told to stop; it calls on_lost
    (from the thread) when QEMU's output ends or the kernel panics."""

    def __init__(self, guest: Guest, on_lost: Callable[[str], object]) -> None:
        self._guest, self._on_lost = guest, on_lost
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="guest-console", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        """Reads the console until stop(); calls on_lost once when QEMU's output ends or the
        kernel panics (the thread then ends)."""
        child, tail = self._guest.child, ""
        while not self._stop.is_set() and child is not None:
            try:
                data = child.read_nonblocking(4096, timeout=0.2)
            except pexpect.TIMEOUT:
                continue
            except (pexpect.EOF, OSError, ValueError):
                self._on_lost("QEMU exited")
                return
            tail = (tail + data)[-200:]
            if PANIC in tail:
                self._on_lost("the kernel panicked")
                return

    def stop(self) -> None:
        """Tells the thread to stop and waits for it (unless called from the thread itself)."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5)


class Engine:
    """One guest at a time and its gateway; see the module's comment."""

    def __init__(self, cfg: EngineConfig, metrics: Metrics) -> None:
        """An engine that has not booted yet (start() boots); metrics get the guest's boots
        and health."""
        self.cfg, self.metrics = cfg, metrics
        self.state = "starting"  # then "up", "down" (rebooting) or "stopped"
        self.why_down = ""
        self.gateway: Gateway | None = None
        self.guest: Guest | None = None
        self._console: _Console | None = None
        self._on_lost: Callable[[str], object] = lambda why: None  # from the console thread
        self._dir: Path | None = None
        c = cfg
        self._starter = Starter(QemuConfig(kernel=c.kernel, image=c.image, ram=c.ram,
                                           cpus=c.cpus, qemu=c.qemu, append=c.append),
                                use_template=not c.cold_boot, root=c.template_root)
        self._supervisor: asyncio.Task[None] | None = None
        # the last requests' E frames, each with time.monotonic() when it came
        self.ended: collections.deque[tuple[float, frames.End]] = collections.deque(
            maxlen=ENDED_KEPT)

    @property
    def qemu_pid(self) -> int | None:
        g = self.guest
        return g.child.pid if g is not None and g.child is not None else None

    @property
    def ready(self) -> frames.Ready | None:
        return self.gateway.ready if self.gateway is not None else None

    async def start(self) -> None:
        """Boots the first guest (its errors raised as they are), then keeps one up."""
        try:
            gw = await self._bring_up()
        except BaseException:
            self._stop_guest()
            raise
        self._supervisor = asyncio.create_task(self._supervise(gw))
        self._supervisor.add_done_callback(self._supervisor_ended)

    def _supervisor_ended(self, task: asyncio.Task[None]) -> None:
        """Says so, loudly, if the supervisor ever ends other than by close()."""
        if not task.cancelled() and task.exception() is not None:
            self.state, self.why_down = "down", f"the supervisor failed: {task.exception()!r}"
            log.error("%s; the server no longer serves: restart it", self.why_down)

    async def enqueue(self, request: frames.Request) -> Submitted:
        """Hands one request to the current gateway (Gateway.admit: a place, maybe after
        the host queue, then its S frame); GuestDown at once while the guest is not up,
        QueueFull when the host queue is full."""
        gw = self.gateway
        if self.state != "up" or gw is None:
            raise GuestDown(f"the guest is {self.state}" +
                            (f" ({self.why_down})" if self.why_down else ""))
        return await gw.admit(request)

    async def table(self) -> frames.Table:
        """The kernel's whole table now (a V frame); GuestDown while the guest is not up."""
        gw = self.gateway
        if self.state != "up" or gw is None:
            raise GuestDown(f"the guest is {self.state}")
        return await gw.ask(frames.Table)

    def run_at_console(self, cmd: str, timeout: float = GUEST_WAIT) -> str:
        """Runs one shell command at the guest's console (Guest.run) and returns its
        output, e.g. ``aistress --bench`` beside the HTTP load; blocking (call it in a
        thread). The console thread pauses meanwhile."""
        guest = self.guest
        if self.state != "up" or guest is None or self._console is None:
            raise GuestDown(f"the guest is {self.state}")
        self._console.stop()
        try:
            return guest.run(cmd, timeout=timeout)
        finally:
            if guest is self.guest and self.state == "up":
                self._console = _Console(guest, self._on_lost)

    def close(self) -> None:
        """Stops the supervisor, the gateway connection and QEMU (synchronous: also safe
        while the event loop is being torn down)."""
        self.state = "stopped"
        if self._supervisor is not None:
            self._supervisor.cancel()
        if self.gateway is not None:
            self.gateway.close("the server is stopping")
        self._stop_guest()
        self._starter.close()

    # ------------------------------------------------------------ the guest's life

    async def _bring_up(self) -> Gateway:
        """Starts a guest (a clone of the template, or a cold boot: Starter) with the gateway
        port on a fresh socket, starts its console thread and connects to its gateway; the
        Gateway once its R frame came. GuestError when the start or the gateway fails."""
        self._dir = Path(tempfile.mkdtemp(prefix="aisvc-serve-"))
        c = self.cfg
        self.metrics.guest_boots.inc()
        log.info("starting the guest (%s, %d hart(s), %s, boot arguments '%s')",
                 "cold boot" if c.cold_boot else "from its template", c.cpus, c.ram, c.append)
        started = time.monotonic()
        guest = self.guest = await asyncio.to_thread(self._starter.start, self._dir,
                                                     c.boot_timeout)
        sock = guest.cfg.port_socket
        assert sock is not None
        loop = asyncio.get_running_loop()
        self._on_lost = lambda why: loop.call_soon_threadsafe(self._lost, guest, why)
        self._console = _Console(guest, self._on_lost)
        try:
            reader, writer = await asyncio.open_unix_connection(str(sock))
        except OSError as e:
            raise GuestError(f"cannot connect to the gateway port {sock}: {e}") from e
        try:
            gw = await Gateway.connect(reader, writer, c.queue_max, c.ready_timeout)
        except GuestDown as e:
            raise GuestError(f"{e}: is the AI worker up and /gateway in the image (run `make "
                             "all`)?", guest.transcript) from e
        gw.on_end = self._ended
        self._started(started)
        self.gateway, self.state, self.why_down = gw, "up", ""
        self.metrics.guest_up.set(1)
        log.info("the gateway is ready: vocab %d, seq_len %d, window %d (QEMU pid %s)",
                 gw.ready.vocab, gw.ready.seq_len, gw.window, self.qemu_pid)
        return gw

    def _started(self, since: float) -> None:
        """Logs how the guest started and each phase's seconds, into the metrics too."""
        record = self._starter.last
        if record is None:
            return
        now = time.monotonic()
        phases = {**record.phases, "gateway": now - since - sum(record.phases.values()),
                  "total": now - since}
        self.metrics.saw_start(record.kind, phases)
        log.info("the guest started: %s (%s)", record.kind,
                 ", ".join(f"{p} {s * 1000:.0f} ms" for p, s in phases.items()))

    def _lost(self, guest: Guest, why: str) -> None:
        """The console thread saw QEMU exit or the kernel panic (unless that guest is
        already gone)."""
        if guest is self.guest and self.gateway is not None:
            self.gateway.close(f"the guest died: {why}")

    def _ended(self, end: frames.End) -> None:
        """Keeps an E frame for the live view, its kernel TTFT and its cached prompt
        positions in the metrics."""
        self.ended.append((time.monotonic(), end))
        if end.ttft_us:
            self.metrics.kernel_ttft.observe(end.ttft_us / 1e6)
        self.metrics.prompt_cached.inc(end.cached)

    async def _supervise(self, gw: Gateway) -> None:
        """Keeps a guest up until cancelled: runs gw's frames and the poll, and when the
        connection ends (or reading it raised what nobody foresaw: logged with its
        traceback) marks the guest down, stops it and boots fresh ones until one comes
        up."""
        while True:
            poll = asyncio.create_task(self._poll(gw))
            try:
                await gw.run()
            except Exception:  # a bug on the host's side: this guest is dropped, not serving
                log.exception("the gateway's reader failed")
            poll.cancel()
            self.state, self.why_down = "down", str(gw.down or "the gateway's reader failed")
            for gauge in (self.metrics.guest_up, self.metrics.live, self.metrics.queue_depth):
                gauge.set(0)
            log.warning("%s; starting a fresh guest", self.why_down)
            await asyncio.to_thread(self._stop_guest)
            while True:
                try:
                    gw = await self._bring_up()
                    break
                except Exception as e:  # AisvcError, OSError, or one not foreseen
                    if not isinstance(e, AisvcError | OSError):
                        log.exception("a boot failed unexpectedly")
                    self.why_down = f"a boot failed: {(str(e) or repr(e)).splitlines()[0]}"
                    log.warning("%s; trying again in %.0f s", self.why_down, REBOOT_PAUSE)
                    await asyncio.to_thread(self._stop_guest)
                    await asyncio.sleep(REBOOT_PAUSE)

    async def _poll(self, gw: Gateway) -> None:
        """The table (I frames) and the host's queue into the metrics, until cancelled."""
        m = self.metrics
        while gw.down is None:
            m.live.set(gw.live)
            m.queue_depth.set(gw.queued)
            try:
                info = await gw.ask(frames.Info)
            except TimeoutError:
                log.warning("the gateway did not answer an I frame in time")
            except GuestDown:
                return
            else:
                m.saw_info(info.used, info.queued, info.running)
                m.saw_kv(info)
            await asyncio.sleep(POLL_BUSY if gw.live or gw.queued else POLL_IDLE)

    def _stop_guest(self) -> None:
        """Stops the console thread and QEMU and removes the socket's directory
        (idempotent)."""
        if self._console is not None:
            self._console.stop()
            self._console = None
        if self.guest is not None:
            self.guest.close()
            self.guest = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
