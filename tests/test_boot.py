"""Boot the real kernel under QEMU and check the core: shell, exec, faults, harts, RAM.

The QEMU command line comes from pyaisvc.guest.qemu.qemu_argv for the tests, `pyaisvc run`
and `make qemu` alike (make runs `python -m pyaisvc.guest.qemu`); the first test checks that
make really passes its knobs through that path.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import struct
import subprocess
from pathlib import Path

import pytest

from pyaisvc.commands import run as run_cmd
from pyaisvc.guest.qemu import CONSOLE_AI_WORKER, DEFAULT_RAM, QemuConfig, default_cpus, qemu_argv

ELF_PHDR_SIZE = 56


def test_make_qemu_uses_qemu_argv(repo_root: Path) -> None:
    dry = subprocess.run(["make", "-n", "qemu", "CPUS=2", "RAM=512M", "QEMU=/x/qemu"],
                         cwd=repo_root, capture_output=True, text=True, check=True).stdout
    line = next(x for x in dry.splitlines() if "-m pyaisvc.guest.qemu" in x)
    printed = subprocess.run(shlex.split(line) + ["--print"], cwd=repo_root,
                             capture_output=True, text=True, check=True).stdout.split()
    want = qemu_argv(QemuConfig(kernel=Path("build/kernel/kernel"),
                                image=Path("build/fs.img"), ram="512M", cpus=2, qemu="/x/qemu"))
    assert printed == want


def test_make_qemu_defaults_are_pyaisvc_qemus(repo_root: Path) -> None:
    """Without CPUS= and RAM= make boots with pyaisvc.guest.qemu's default_cpus() harts (the
    host's cores, at most 4) and DEFAULT_RAM; `pyaisvc run` takes the same harts."""
    dry = subprocess.run(["make", "-n", "qemu", "QEMU=/x/qemu"],
                         cwd=repo_root, capture_output=True, text=True, check=True).stdout
    line = next(x for x in dry.splitlines() if "-m pyaisvc.guest.qemu" in x)
    printed = subprocess.run(shlex.split(line) + ["--print"], cwd=repo_root,
                             capture_output=True, text=True, check=True).stdout.split()
    cores = min(len(os.sched_getaffinity(0)), 4)
    assert printed[printed.index("-m") + 1] == DEFAULT_RAM == "256M"
    assert printed[printed.index("-smp") + 1] == str(default_cpus()) == str(cores)
    parser = argparse.ArgumentParser()
    run_cmd.add_arguments(parser)
    assert parser.parse_args(["--", "echo"]).cpus == cores


@pytest.mark.parametrize("cores,harts", [(1, 1), (2, 2), (3, 3), (4, 4), (16, 4)])
def test_default_harts_are_the_cores_up_to_four(monkeypatch, cores: int, harts: int) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)))
    assert default_cpus() == harts


def test_qemu_argv_snapshot_and_gdb() -> None:
    argv = qemu_argv(QemuConfig(kernel=Path("k"), image=Path("i.img"), snapshot=True,
                                gdb_port=26000))
    assert "file=i.img,if=none,format=raw,id=x0,snapshot=on" in argv
    assert argv[-3:] == ["-S", "-gdb", "tcp::26000"]
    assert "-drive" not in qemu_argv(QemuConfig(kernel=Path("k")))


def test_boot_arguments_reach_qemu(repo_root: Path) -> None:
    """QemuConfig.append and make's BOOTARGS= become -append; a normal boot has none."""
    argv = qemu_argv(QemuConfig(kernel=Path("k"), append=CONSOLE_AI_WORKER))
    assert argv[argv.index("-append") + 1] == "aiworker=console"
    assert "-append" not in qemu_argv(QemuConfig(kernel=Path("k")))
    dry = subprocess.run(["make", "-n", "qemu", "BOOTARGS=aiworker=console ai.reqid_max=20"],
                         cwd=repo_root, capture_output=True, text=True, check=True).stdout
    line = next(x for x in dry.splitlines() if "-m pyaisvc.guest.qemu" in x)
    printed = subprocess.run(shlex.split(line) + ["--print"], cwd=repo_root,
                             capture_output=True, text=True, check=True).stdout
    assert "-append aiworker=console ai.reqid_max=20" in printed
    dry = subprocess.run(["make", "-n", "qemu-smol"], cwd=repo_root, capture_output=True,
                         text=True).stdout
    line = next(x for x in dry.splitlines() if "-m pyaisvc.guest.qemu" in x)
    assert "--append" not in line


@pytest.mark.guest
def test_bad_boot_arguments_are_named_and_ignored(boot_guest) -> None:
    """A kernel boot argument out of range or malformed is named and ignored; the
    system boots with the default (kernel/core/bootargs.c); init ignores unknown words."""
    g = boot_guest(append="ai.reqid_max=5 ai.reqid_max=x bogus")
    assert "aisvc: boot arguments: ai.reqid_max=5 ai.reqid_max=x bogus" in g.transcript
    assert ("aisvc: ignoring boot argument ai.reqid_max=5 (want ai.reqid_max=N, "
            "17 <= N <= 2147483647)") in g.transcript
    assert "reqids wrap after" not in g.transcript
    assert g.run("echo hi | cat") == "hi\n"
    assert g.run("ai right") == "AI worker right: no\n"  # bogus is not aiworker=console
    assert "init: unknown argument 'bogus' ignored" in g.transcript


@pytest.mark.guest
@pytest.mark.parametrize("cpus,ram,mib", [(1, "128M", 128), (2, "2G", 2048), (2, "4G", 4096)])
def test_boot_reports_harts_and_ram(boot_guest, cpus: int, ram: str, mib: int) -> None:
    g = boot_guest(cpus=cpus, ram=ram)
    assert (g.harts, g.ram_mib) == (cpus, mib)
    assert g.run("echo hi | cat") == "hi\n"


@pytest.mark.guest
def test_shell_basics(boot_guest, build) -> None:
    g = boot_guest()
    assert g.run("echo hi | cat") == "hi\n"
    listing = g.run("ls /")
    for name in build.uprogs:
        assert re.search(rf"\b{name}\n", listing), f"/{name} missing from ls /:\n{listing}"
    assert g.run("echo abc > f ; cat < f | wc").split() == ["1", "1", "4"]


@pytest.mark.guest
def test_console_line_editing(boot_guest) -> None:
    g = boot_guest()
    # ^U kills the line typed so far, DEL erases one character.
    g.child.send("echo wrong\x15echo ri\x7fight ; echo EDIT-OK\n")
    g.child.expect(r"\nright\r*\nEDIT-OK", timeout=10)
    g.child.expect_exact("$ ", timeout=10)
    # ^D at the start of a line ends cat's input.
    g.child.send("cat ; echo CAT-DONE\n")
    g.child.send("typed\n")
    g.child.expect(r"typed\r*\ntyped\r*\n", timeout=10)
    g.child.send("\x04")
    g.child.expect("CAT-DONE", timeout=10)
    g.child.expect_exact("$ ", timeout=10)
    assert g.run("echo after") == "after\n"


def _elf_variants(elf: bytes) -> dict[str, bytes]:
    """Files that exec must refuse with -ENOEXEC, made from a good ELF."""
    phoff = struct.unpack_from("<Q", elf, 32)[0]
    load = next(phoff + i * ELF_PHDR_SIZE for i in range(struct.unpack_from("<H", elf, 56)[0])
                if struct.unpack_from("<I", elf, phoff + i * ELF_PHDR_SIZE)[0] == 1)

    def patch(fmt: str, off: int, value: int, *more: tuple[str, int, int]) -> bytes:
        b = bytearray(elf)
        for f, o, v in ((fmt, off, value), *more):
            struct.pack_into(f, b, o, v)
        return bytes(b)

    filesz = struct.unpack_from("<Q", elf, load + 32)[0]
    return {
        "notelf": b"hello, I am only text\n",
        "empty": b"",
        "short": elf[:40],
        "class32": patch("<B", 4, 1),
        "bigendian": patch("<B", 5, 2),
        "dyn": patch("<H", 16, 3),
        "x86": patch("<H", 18, 62),
        "phentsize": patch("<H", 54, 32),
        "phofffar": patch("<Q", 32, 1 << 40),
        "unaligned": patch("<Q", load + 16, 0x1008),
        "page0": patch("<Q", load + 16, 0),
        "memszsmall": patch("<Q", load + 40, filesz - 1),
        "wrap": patch("<Q", load + 16, (1 << 64) - 4096),
        "huge": patch("<Q", load + 40, 1 << 45),
        "offfar": patch("<Q", load + 8, 1 << 40),
        # The file ends before the segment's bytes do.
        "pastend": patch("<Q", load + 32, len(elf) + 8192, ("<Q", load + 40, len(elf) + 8192)),
    }


@pytest.mark.guest
def test_exec_refuses_bad_executables(boot_guest, make_image, build) -> None:
    variants = _elf_variants(build.uprogs["echo"].read_bytes())
    g = boot_guest(image=make_image(variants))
    for name in variants:
        out = g.run(f"/{name} x")
        assert "not an executable" in out, f"/{name}: {out!r}"
        assert g.run("echo alive") == "alive\n"
    assert "panic" not in g.transcript


FAULTS = {
    "load0": r"load page fault at 0x0 ",
    "store0": r"store page fault at 0x0 ",
    "kernel": r"store page fault at 0x80000000 ",
    "kread": r"load page fault at 0x80000000 ",
    "uart": r"store page fault at 0x10000000 ",
    "illegal": r"illegal instruction at 0x[0-9a-f]+ ",
    "jump0": r"instruction page fault at 0x0 ",
    "stack": r"store page fault at 0x[0-9a-f]+ ",
}


@pytest.mark.guest
def test_faulting_program_is_killed(boot_guest, make_image, build) -> None:
    g = boot_guest(image=make_image({"fault": build.testprogs["fault"]}))
    for mode, what in FAULTS.items():
        out = g.run(f"fault {mode}")
        assert re.fullmatch(rf"pid \d+ fault: killed: {what}\(pc 0x[0-9a-f]+\)\n", out), out
        assert g.run("echo alive") == "alive\n"


@pytest.mark.guest
@pytest.mark.parametrize("cpus", [1, 2])
def test_fp_registers_are_per_process(boot_guest, make_image, build, cpus: int) -> None:
    g = boot_guest(cpus=cpus, image=make_image({"fpmix": build.testprogs["fpmix"]}))
    assert g.run("fpmix", timeout=120) == "fpmix: ok\n"


@pytest.mark.guest
def test_sbrk_grows_past_a_gigabyte(boot_guest, make_image, build) -> None:
    g = boot_guest(ram="2G", image=make_image({"sbrkbig": build.testprogs["sbrkbig"]}))
    assert re.fullmatch(r"sbrkbig: 1536 MiB ok \(\d+ ms\)\n", g.run("sbrkbig 1536", timeout=180))
    # Too much for the machine: sbrk fails cleanly and the shell lives.
    assert "failed" in g.run("sbrkbig 4000", timeout=60)
    assert g.run("echo alive") == "alive\n"


@pytest.mark.guest
def test_pyaisvc_run_prints_output_and_boot_time(build, capsys) -> None:
    from pyaisvc.cli import main

    rc = main(["run", "--cpus", "1", "--kernel", str(build.kernel), "--image",
               str(build.image), "--", "echo", "from", "run"])
    out, err = capsys.readouterr()
    assert (rc, out) == (0, "from run\n")
    # its exit status is the command's: 127 for one that does not exist
    rc = main(["run", "--cpus", "1", "--kernel", str(build.kernel), "--image",
               str(build.image), "--", "nonexistent"])
    assert rc == 127, capsys.readouterr()
    assert re.match(r"pyaisvc run: booted to the shell prompt in \d+\.\d\d s \(1 harts", err)
