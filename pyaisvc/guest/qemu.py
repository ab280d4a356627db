"""Drive the aisvc guest under QEMU: the command line, boot, commands, shutdown.

``qemu_argv()`` is the single source of the QEMU command line: the tests,
``pyaisvc run`` and the Makefile's ``qemu``/``qemu-gdb`` targets (through
``python -m pyaisvc.guest.qemu``, which execs it) all use it, so the options cannot
drift apart.

``Guest`` owns one QEMU process and its console. ``run`` covers one shell
command that ends; ``send_line``, ``expect`` and ``match`` talk to a program
that keeps running and reading lines (``llmrun --stdin``, the ``ai`` tool)::

    with Guest(QemuConfig(kernel=..., image=..., snapshot=True)) as g:   # boots
        print(g.run("echo hi | cat"))                                     # "hi\\n"

How many harts: ``default_cpus()``, the host's cores up to 4, unless told
(``QemuConfig.cpus``, which the library leaves at 1; ``--cpus``, make's
``CPUS=``).

Which QEMU: ``AISVC_QEMU`` (a path) when set, else ``qemu-system-riscv64``
on PATH. Which CPU: on QEMU 10 or later the guest gets the vector extension
(``-cpu rv64,v=true,vlen=256``; docs/PERF_NOTES.md, facts 9 (RVV written for
TCG is 2-3x scalar on QEMU 10) and 17 (the RVV kernels on QEMU 10, vlen 256));
older QEMUs keep their default CPU, because RVV is slower than scalar code there
(fact 8 (no RVV on QEMU 7.2)). ``QemuConfig.cpu`` (``--cpu``, make's ``CPU=``) overrides: a
``-cpu`` value, or ``default`` for QEMU's own CPU.

Every wait has a deadline. A wait that expires raises ``GuestTimeout``; QEMU
exiting or the kernel printing ``panic:`` raises ``GuestCrashed``. Both carry
the tail of the console transcript; a panic's message also says in which
function and file:line each address of the kernel's fault lines lies
(``explain()``, pyaisvc.guest.symbolize), as ``pyaisvc run`` does for a user
process killed by a fault. ``close()`` always stops QEMU, also after
errors.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pexpect

from pyaisvc.errors import AisvcError
from pyaisvc.guest import symbolize

PROMPT = "$ "
BANNER = re.compile(r"aisvc: (\d+) harts, (\d+) MiB RAM")
PANIC = "panic: "
# The banner comes within a second or two of QEMU starting, even on a busy host;
# without it after this long the kernel is not running (e.g. too little RAM to
# hold it), and waiting for the whole boot timeout would only hide that.
BANNER_SECONDS = 20.0
# init's line when the shell cannot be started, e.g. in too little RAM.
SHELL_FAILED = r"init: cannot run /sh: ([^\r\n]*)"
TAIL_CHARS = 3000  # how much of a console's (or a test's) end an error quotes
QEMU_EXIT_KEYS = "\x01x"  # Ctrl-A x: QEMU's -nographic monitor escape for "quit"
QEMU_ENV = "AISVC_QEMU"  # the QEMU binary to use, when set
QEMU_NAME = "qemu-system-riscv64"
# vlen chosen by measurement: PERF_NOTES.md, fact 17 (the RVV kernels on QEMU 10, vlen 256)
VECTOR_CPU = "rv64,v=true,vlen=256"
# The first QEMU whose RVV beats scalar code: PERF_NOTES.md, facts 8 (no RVV on QEMU 7.2)
# and 9 (RVV written for TCG is 2-3x scalar on QEMU 10).
VECTOR_QEMU = (10, 0)
QEMU_DEFAULT_CPU = "default"  # QemuConfig.cpu: no -cpu option
# The boot argument (QemuConfig.append) that lets the console shell keep the AI
# worker right, for tests that act as the worker (aitest, usertests' AI cases, the
# syscall fuzzer's worker): docs/AI_SERVICE.md, rule 13. Never in a normal boot.
CONSOLE_AI_WORKER = "aiworker=console"
# What make builds and boots by default, relative to the repository root.
KERNEL = Path("build/kernel/kernel")
# The guest RAM when nothing else is asked for: the Makefile's `make qemu` passes none
# and so boots with this too (tests/test_qemu_defaults.py checks that).
DEFAULT_RAM = "256M"
# default_cpus() gives the guest no more harts than this: past it more harts do
# not help on the course's 2-core hosts (docs/PERF_NOTES.md, fact 30 (4 harts run
# as fast as 2 on 2 cores)).
MAX_DEFAULT_CPUS = 4


def default_cpus() -> int:
    """The guest's harts when none are asked for: the host cores this process may run
    on, at most MAX_DEFAULT_CPUS. `make qemu*`, `pyaisvc run`, `generate`, `chat`,
    `bench` and the HTTP server all take it; the runtime in the guest measures how
    many harts really run at once and uses one thread on a busy host, so more harts
    cost nothing there (docs/PERF_NOTES.md, fact 38 (one hart per host core by
    default))."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_DEFAULT_CPUS))


def default_qemu() -> str:
    """The QEMU binary: $AISVC_QEMU, else qemu-system-riscv64 (found on PATH)."""
    return os.environ.get(QEMU_ENV) or QEMU_NAME


@cache
def qemu_version(qemu: str) -> tuple[int, int] | None:
    """(major, minor) from `qemu --version`, or None when it does not run."""
    try:
        out = subprocess.run([qemu, "--version"], capture_output=True, text=True,
                             timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"version (\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else None


def default_cpu(qemu: str) -> str:
    """The -cpu value for qemu: with RVV on QEMU 10 and later, else QEMU's default."""
    version = qemu_version(qemu)
    return VECTOR_CPU if version is not None and version >= VECTOR_QEMU else QEMU_DEFAULT_CPU


class GuestError(AisvcError):
    """The guest misbehaved; the message ends with the console's last lines."""

    def __init__(self, message: str, transcript: str = "") -> None:
        """The error message, followed by the last TAIL_CHARS of the console when there is one
        (kept whole in transcript)."""
        tail = transcript[-TAIL_CHARS:]
        text = message if not tail else f"{message}\n--- console (last lines) ---\n{tail}"
        super().__init__(text)
        self.transcript = transcript


class GuestTimeout(GuestError):
    """A wait for the guest passed its deadline."""


class GuestCrashed(GuestError):
    """QEMU exited, or the kernel panicked."""


@dataclass(frozen=True)
class QemuConfig:
    """What to boot and on what machine."""

    kernel: Path
    image: Path | None = None
    ram: str = DEFAULT_RAM
    cpus: int = 1  # harts; the CLI verbs and make boot default_cpus() unless told
    gdb_port: int | None = None  # wait for gdb on this TCP port before starting
    snapshot: bool = False  # write to a throw-away overlay, never to the image
    qemu: str = field(default_factory=default_qemu)
    cpu: str | None = None  # -cpu value; None: default_cpu(qemu); "default": no -cpu
    append: str = ""  # the boot command line (-append; kernel/core/bootargs.c), "" for none
    # The gateway port's host end (docs/GATEWAY.md): a Unix socket QEMU listens on,
    # None for no port. The port is a virtio serial port on virtio-mmio bus 1.
    port_socket: Path | None = None
    # Templates and clones (pyaisvc/guest/template/, docs/COLDSTART.md): the guest RAM
    # in this file (a memory-backend-file), mapped shared (the template writes it) or
    # privately (a clone: pages read on first touch, writes copy-on-write).
    ram_file: Path | None = None
    ram_shared: bool = False
    disk_format: str = "raw"  # the image's format: "qcow2" for a template's disk layers
    qmp_socket: Path | None = None  # a QMP monitor on this Unix socket, None for none
    incoming: bool = False  # -incoming defer: wait for migrate-incoming over QMP


def cpu_option(cfg: QemuConfig) -> str:
    """The -cpu value cfg boots with ("default": QEMU's own CPU)."""
    return cfg.cpu or default_cpu(cfg.qemu)


def qemu_argv(cfg: QemuConfig) -> list[str]:
    """The QEMU command line for cfg."""
    machine = "virt" if cfg.ram_file is None else "virt,memory-backend=ram0"
    argv = [
        cfg.qemu,
        "-machine", machine,
        "-bios", "none",  # the kernel starts in M-mode itself (kernel/arch/riscv/start.c)
        "-kernel", str(cfg.kernel),
        "-m", cfg.ram,
        "-smp", str(cfg.cpus),
        "-nographic",
        # Modern virtio-mmio (version 2), which virtio_blk.c drives.
        "-global", "virtio-mmio.force-legacy=false",
    ]
    cpu = cpu_option(cfg)
    if cpu != QEMU_DEFAULT_CPU:
        argv += ["-cpu", cpu]
    if cfg.ram_file is not None:
        share = "on" if cfg.ram_shared else "off"
        argv += ["-object", f"memory-backend-file,id=ram0,size={cfg.ram},"
                 f"mem-path={cfg.ram_file},share={share}"]
    if cfg.image is not None:
        drive = f"file={cfg.image},if=none,format={cfg.disk_format},id=x0"
        if cfg.snapshot:
            drive += ",snapshot=on"
        argv += ["-drive", drive, "-device", "virtio-blk-device,drive=x0,bus=virtio-mmio-bus.0"]
    if cfg.port_socket is not None:
        argv += ["-device", "virtio-serial-device,bus=virtio-mmio-bus.1",
                 "-chardev", f"socket,id=gw0,path={cfg.port_socket},server=on,wait=off",
                 # a virtserialport: QEMU holds the guest back while the socket is full,
                 # where a virtconsole drops bytes (docs/GATEWAY.md, "Flow control")
                 "-device", "virtserialport,chardev=gw0"]
    if cfg.append:
        argv += ["-append", cfg.append]
    if cfg.qmp_socket is not None:
        argv += ["-qmp", f"unix:{cfg.qmp_socket},server=on,wait=off"]
    if cfg.incoming:
        argv += ["-incoming", "defer"]
    if cfg.gdb_port is not None:
        argv += ["-S", "-gdb", f"tcp::{cfg.gdb_port}"]
    return argv


def check_files(cfg: QemuConfig) -> None:
    """Raises GuestError naming what is missing, and how to make it."""
    if shutil.which(cfg.qemu) is None:
        raise GuestError(f"{cfg.qemu} not found; run 'make deps' (installs qemu-system-misc), "
                         f"or set {QEMU_ENV}=/path/to/qemu-system-riscv64")
    if not Path(cfg.kernel).is_file():
        raise GuestError(f"kernel {cfg.kernel} not found; run 'make'")
    if cfg.image is not None and not Path(cfg.image).is_file():
        raise GuestError(f"image {cfg.image} not found; run 'make fsimg'")


class Guest:
    """One booted guest. Use as a context manager: entering boots, leaving closes."""

    def __init__(self, cfg: QemuConfig) -> None:
        """A guest for cfg, not yet started (boot(), or use it as a context manager)."""
        self.cfg = cfg
        self.child: pexpect.spawn | None = None
        self.log = io.StringIO()
        self.boot_seconds: float | None = None
        self.harts: int | None = None
        self.ram_mib: int | None = None
        self._serial = 0
        self.last_status: int | None = None  # the shell's $? after the last run()

    def __enter__(self) -> Guest:
        """The guest booted to its shell prompt; QEMU closed when the boot fails."""
        try:
            self.boot()
        except BaseException:
            self.close()  # __exit__ does not run when __enter__ raises
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        """Stops QEMU."""
        self.close()

    @property
    def transcript(self) -> str:
        """Everything the console printed so far, without carriage returns."""
        return self.log.getvalue().replace("\r", "")

    def spawn(self, timeout: float = 60.0) -> None:
        """Starts QEMU with its console on a terminal this object reads (no wait)."""
        check_files(self.cfg)
        argv = qemu_argv(self.cfg)
        self.child = pexpect.spawn(argv[0], argv[1:], encoding="utf-8",
                                   codec_errors="replace", timeout=timeout)
        self.child.logfile_read = self.log
        self.child.delaybeforesend = None

    def boot(self, timeout: float = 60.0) -> float:
        """Starts QEMU and waits for the shell prompt; returns the seconds it took."""
        start = time.monotonic()
        self.spawn(timeout)
        deadline = start + timeout
        try:
            self.expect([BANNER.pattern], min(deadline, start + BANNER_SECONDS),
                        "the kernel's boot banner")
        except GuestTimeout:
            waited = min(timeout, BANNER_SECONDS)
            raise GuestTimeout(f"the kernel printed nothing in {waited:.0f} s: it cannot boot "
                               f"with -m {self.cfg.ram} (too little RAM for the kernel?) or "
                               f"{self.cfg.kernel} is not an aisvc kernel; boot with more RAM "
                               f"(e.g. {DEFAULT_RAM})", self.transcript) from None
        except GuestCrashed as e:
            said = [ln.strip() for ln in self.transcript.splitlines() if ln.strip()]
            why = f" ({said[-1]})" if said else ""
            raise GuestCrashed(f"QEMU exited before the kernel's boot banner{why}: it cannot "
                               f"boot with -m {self.cfg.ram} or this kernel; boot with more RAM "
                               f"(e.g. {DEFAULT_RAM})", self.transcript) from e
        self.harts, self.ram_mib = int(self.match.group(1)), int(self.match.group(2))
        if self.expect([re.escape(PROMPT), SHELL_FAILED], deadline, "the shell prompt") == 1:
            raise GuestCrashed(f"the kernel booted but init cannot start the shell "
                               f"({self.match.group(1)}) in {self.ram_mib} MiB; boot with "
                               f"more RAM (e.g. {DEFAULT_RAM})", self.transcript)
        self.boot_seconds = time.monotonic() - start
        return self.boot_seconds

    def run(self, cmd: str, timeout: float = 30.0) -> str:
        """Runs one shell command line; returns its output (echo and \\r stripped).

        The line is sent as ``CMD ; echo MARKER $?`` and the output is what the
        console prints between the echo of that line and MARKER, so it is exact
        even when the command prints "$ " or nothing at all; the shell's exit
        status of CMD's last pipeline becomes ``last_status``. The image must
        therefore hold /echo.
        """
        if self.child is None:
            raise GuestError("run: the guest is not booted")
        if "\n" in cmd:
            raise GuestError(f"run: one line at a time, got {cmd!r}")
        self._serial += 1
        marker = f"AISVC-DONE-{self._serial}-{os.getpid()}"
        line = f"{cmd} ; echo {marker} $?"
        deadline = time.monotonic() + timeout
        self.child.send(line + "\n")
        self.expect([re.escape(line) + r"\r*\n"], deadline, f"the echo of {cmd!r}")
        self.expect([re.escape(marker) + r" (-?\d+)\r*\n"], deadline, f"the end of {cmd!r}")
        self.last_status = int(self.match.group(1))
        output = (self.child.before or "").replace("\r", "")
        self.expect([re.escape(PROMPT)], deadline, "the shell prompt")
        return output

    def close(self) -> None:
        """Stops QEMU: Ctrl-A x first, then SIGTERM, then SIGKILL. Never raises."""
        child, self.child = self.child, None
        if child is None:
            return
        try:
            if child.isalive():
                child.send(QEMU_EXIT_KEYS)
                child.expect(pexpect.EOF, timeout=3)
        except (pexpect.ExceptionPexpect, OSError):
            pass
        finally:
            if child.isalive():
                child.terminate(force=True)
            child.close(force=True)

    def explain(self, text: str) -> list[str]:
        """Function and file:line of each code address in text's fault lines: the kernel's
        from cfg.kernel, a user process's from the guest program of that name the build
        made beside the kernel (build/user/_NAME, build/tests/_NAME)."""
        build = Path(self.cfg.kernel).resolve().parent.parent

        def elf_for(name: str) -> Path | None:
            """The built ELF of program name (a guest program's, or a test program's), or None."""
            found = [build / d / f"_{name}" for d in ("user", "tests")]
            return next((p for p in found if p.is_file()), None)

        return symbolize.explain(text, Path(self.cfg.kernel), elf_for)

    def send_line(self, line: str) -> None:
        """Types line and Enter at the console (for a program that keeps reading it)."""
        if self.child is None or not self.child.isalive():
            raise GuestCrashed("the guest is not running", self.transcript)
        self.child.send(line + "\n")

    def expect(self, patterns: list[str], deadline: float, what: str) -> int:
        """Index of the first of patterns the console prints before deadline
        (time.monotonic()); GuestCrashed on a panic or QEMU's exit, GuestTimeout after it."""
        if self.child is None:
            raise GuestCrashed(f"the guest is not running (waiting for {what})", self.transcript)
        wait = max(0.0, deadline - time.monotonic())
        i = self.child.expect(patterns + [PANIC, pexpect.EOF, pexpect.TIMEOUT], timeout=wait)
        if i < len(patterns):
            return i
        if i == len(patterns):
            # Let the rest of the panic line arrive before reporting it.
            self.child.expect([r"\n", pexpect.EOF, pexpect.TIMEOUT], timeout=1)
            where = "".join(f"; {x}" for x in self.explain(self.transcript[-TAIL_CHARS:]))
            raise GuestCrashed(f"the kernel panicked while waiting for {what}{where}",
                               self.transcript)
        if i == len(patterns) + 1:
            raise GuestCrashed(f"QEMU exited while waiting for {what}", self.transcript)
        raise GuestTimeout(f"timed out waiting for {what}", self.transcript)

    @property
    def match(self) -> re.Match[str]:
        """The match of the last successful expect."""
        assert self.child is not None and isinstance(self.child.match, re.Match)
        return self.child.match


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m pyaisvc.guest.qemu`: exec QEMU with qemu_argv() (used by make qemu)."""
    p = argparse.ArgumentParser(prog="python -m pyaisvc.guest.qemu", description=main.__doc__)
    p.add_argument("--qemu", default=default_qemu(),
                   help=f"the QEMU binary (default: ${QEMU_ENV} or {QEMU_NAME})")
    p.add_argument("--cpu", help="-cpu value (default: RVV on QEMU >= 10); 'default': none")
    p.add_argument("--kernel", type=Path, required=True)
    p.add_argument("--image", type=Path)
    p.add_argument("--ram", default=DEFAULT_RAM)
    p.add_argument("--cpus", type=int, default=default_cpus(),
                   help=f"harts (default: the host's cores, at most {MAX_DEFAULT_CPUS})")
    p.add_argument("--gdb", type=int, metavar="PORT", help="wait for gdb on PORT")
    p.add_argument("--snapshot", action="store_true", help="do not write to the image")
    p.add_argument("--append", default="", metavar="ARGS",
                   help=f"boot arguments, e.g. {CONSOLE_AI_WORKER} (docs/AI_SERVICE.md)")
    p.add_argument("--print", action="store_true", help="print the command, do not run it")
    a = p.parse_args(argv)
    cfg = QemuConfig(kernel=a.kernel, image=a.image, ram=a.ram, cpus=a.cpus,
                     gdb_port=a.gdb, snapshot=a.snapshot, qemu=a.qemu,
                     cpu=a.cpu or None, append=a.append)
    cmd = qemu_argv(cfg)
    if a.print:
        print(" ".join(cmd))
        return 0
    try:
        check_files(cfg)
    except GuestError as e:
        print(f"pyaisvc.guest.qemu: {e}", file=sys.stderr)
        return 1
    print(f"*** QEMU: {cfg.cpus} harts, {cfg.ram} RAM (make: CPUS=, RAM= to change); "
          "Ctrl-A x quits", file=sys.stderr)
    os.execvp(cmd[0], cmd)
    return 1  # not reached: execvp replaces this process


if __name__ == "__main__":
    sys.exit(main())
