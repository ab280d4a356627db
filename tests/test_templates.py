"""Guest templates and their clones (pyaisvc.guest.template, docs/COLDSTART.md).

One template is made for the module (one cold boot, in a directory of the
module's own); every test restores clones of it or checks copies of its
files:

- two clones at once answer greedy and seeded requests over the gateway
  exactly as the numpy reference does, and each other, whatever the other
  was asked (the seed is the host's);
- a template whose files are truncated, corrupt, partial or stale is never
  loaded: the reason is one line; a missing overlay and a state QEMU refuses
  fail the clone, and the Starter then cold boots (one log line) and the
  guest serves;
- stale templates of a slot are removed, clones' directories removed when
  they close;
- under the Engine (pyaisvc serve's guest), a killed QEMU is replaced by a
  clone from the pool and the next request succeeds.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

import pytest
from host import llmcases as lc
from host.buildlock import build_lock

from pyaisvc.guest.llmguest import MODELS, prepare
from pyaisvc.guest.qemu import GuestError, QemuConfig, default_cpus
from pyaisvc.guest.template import store
from pyaisvc.guest.template.clone import Clone, start_clone
from pyaisvc.guest.template.starter import Starter
from pyaisvc.serve import frames
from pyaisvc.serve.engine import Engine, EngineConfig
from pyaisvc.serve.gateway import Gateway
from pyaisvc.serve.metrics import Metrics

pytestmark = pytest.mark.guest

ROOT = Path(__file__).resolve().parent.parent
N = 8  # ids per request
SEEDED = ("0.8", 40, "0.95", 7)  # temp, top_k, top_p, seed (lc.SAMPLING_CASES' kind)


def _options(case: tuple[str, int, str, int]) -> frames.Options:
    temp, k, p, seed = case
    return frames.Options(temp_micro=int(float(temp) * 1e6), top_k=k,
                          top_p_micro=int(float(p) * 1e6), seed=seed)


@pytest.fixture(scope="module")
def assets() -> Path:
    return lc.smol_or_skip()


@pytest.fixture(scope="module")
def template(assets: Path, tmp_path_factory: pytest.TempPathFactory) -> store.Template:
    with build_lock():
        p = prepare(ROOT, MODELS["smol"])
    cfg = QemuConfig(kernel=p.kernel, image=p.image, ram=MODELS["smol"].ram,
                     cpus=default_cpus())
    return store.ensure(cfg, tmp_path_factory.mktemp("templates"))


async def _ask(sock: Path, requests: list[frames.Options]) -> list[list[int]]:
    """Each request (the France prompt, N ids) in turn over the gateway at sock."""
    reader, writer = await asyncio.open_unix_connection(str(sock))
    gw = await Gateway.connect(reader, writer, queue_max=4, timeout=60)
    run = asyncio.create_task(gw.run())
    out = []
    try:
        for opts in requests:
            sub = await gw.admit(frames.request(lc.FRANCE["smol"], N, opts, []))
            ids: list[int] = []
            async for ev in sub.events():
                if isinstance(ev, frames.Tokens):
                    ids += ev.ids
            out.append(ids)
    finally:
        gw.close("done")
        run.cancel()
    return out


def test_two_clones_answer_as_the_reference(template: store.Template, assets: Path) -> None:
    greedy = lc.reference_ids(assets, [lc.FRANCE["smol"]], N)[0]
    seeded = lc.sampled_reference(assets, lc.FRANCE["smol"], N, SEEDED)
    other = lc.sampled_reference(assets, lc.FRANCE["smol"], N, SEEDED[:3] + (0,))
    assert seeded != other, "the two seeds must draw differently for the check to mean much"
    a, b = start_clone(template), start_clone(template)
    try:
        assert a.dir != b.dir and a.child is not None and b.child is not None
        assert a.child.pid != b.child.pid

        async def both() -> tuple[list[list[int]], list[list[int]]]:
            assert a.cfg.port_socket is not None and b.cfg.port_socket is not None
            return await asyncio.gather(
                _ask(a.cfg.port_socket, [frames.Options(), _options(SEEDED)]),
                _ask(b.cfg.port_socket, [_options(SEEDED[:3] + (0,)), _options(SEEDED),
                                         frames.Options()]))

        got_a, got_b = asyncio.run(both())
    finally:
        a.close()
        b.close()
    assert got_a == [greedy, seeded]
    assert got_b == [other, seeded, greedy]
    assert not a.dir.exists() and not b.dir.exists(), "a clone's overlay outlived it"


def _copy(t: store.Template, root: Path) -> store.Template:
    """A copy of t under root (hard links: the files a case changes are replaced whole)."""
    d = root / t.dir.name
    shutil.copytree(t.dir, d, copy_function=os.link)
    return dataclasses.replace(t, dir=d)


def _rewrite(path: Path, data: bytes | None = None, size: int | None = None) -> None:
    """Replaces path (a hard link) by a file of its own: data, or its bytes cut to size."""
    body = path.read_bytes() if data is None else data
    path.unlink()
    with open(path, "wb") as f:
        f.write(body[:size] if size is not None else body)


def _truncate_ram(t: store.Template) -> None:
    size = t.ram.stat().st_size
    t.ram.unlink()
    with open(t.ram, "wb") as f:
        f.truncate(size - 4096)


BREAKS = {
    "truncated RAM": (_truncate_ram, "ram is"),
    "truncated state": (lambda t: _rewrite(t.state, size=100), "state is"),
    "corrupt state": (lambda t: _rewrite(t.state, t.state.read_bytes()[::-1]), "corrupt"),
    "no meta (partial)": (lambda t: (t.dir / "meta.json").unlink(), "partial"),
    "no disk layer": (lambda t: t.disk.unlink(), "no disk.qcow2"),
}


@pytest.mark.parametrize("case", sorted(BREAKS))
def test_a_broken_template_is_not_loaded(template: store.Template, tmp_path: Path,
                                         case: str) -> None:
    t = _copy(template, tmp_path)
    assert store.load(t.cfg, tmp_path, t.key).dir == t.dir  # the copy itself loads
    breaks, why = BREAKS[case]
    breaks(t)
    with pytest.raises(store.TemplateMissing, match=why) as e:
        store.load(t.cfg, tmp_path, t.key)
    assert "\n" not in str(e.value)


def test_a_changed_kernel_or_image_is_another_template(template: store.Template,
                                                       tmp_path: Path) -> None:
    kernel = tmp_path / "kernel"
    shutil.copyfile(template.cfg.kernel, kernel)
    cfg = dataclasses.replace(template.cfg, kernel=kernel)
    assert store.key(cfg) == template.key
    with open(kernel, "ab") as f:
        f.write(b"\0")
    assert store.key(cfg) != template.key
    with pytest.raises(store.TemplateMissing, match="no template .* yet"):
        store.load(cfg, template.dir.parent)  # so ensure() cold boots and saves a new one
    assert store.key(dataclasses.replace(template.cfg, append="aicache=0")) != template.key
    image = tmp_path / "image"
    shutil.copyfile(template.cfg.image or "", image)
    os.utime(image, ns=(1, 1))
    assert store.key(dataclasses.replace(template.cfg, image=image)) != template.key


def test_stale_templates_of_a_slot_are_removed(template: store.Template, tmp_path: Path) -> None:
    t = _copy(template, tmp_path)
    stale = tmp_path / f"{store.slot(t.cfg)}-{'0' * 24}"
    shutil.copytree(t.dir, stale, copy_function=os.link)
    dead = tmp_path / f".tmp-{store.slot(t.cfg)}-999999999-abcd"  # a dead writer's
    dead.mkdir()
    other = tmp_path / f"{'f' * 16}-{'0' * 24}"  # another slot's: kept
    other.mkdir()
    gone = store.remove_stale(t.cfg, tmp_path, keep=t.dir.name)
    assert sorted(gone) == sorted([stale, dead])
    assert t.dir.is_dir() and other.is_dir() and not stale.exists() and not dead.exists()


def test_a_missing_overlay_fails_the_clone(template: store.Template) -> None:
    c = Clone(template)
    c.start_waiting()
    (c.dir / "disk.qcow2").unlink()
    with pytest.raises(GuestError, match="overlay is missing"):
        c.restore()
    assert c.child is None and not c.dir.exists()


def test_a_refused_state_cold_boots_and_serves(template: store.Template, assets: Path,
                                              tmp_path: Path,
                                              caplog: pytest.LogCaptureFixture) -> None:
    t = _copy(template, tmp_path / "root")
    _rewrite(t.state, b"QEVM garbage" * 100)
    meta = json.loads((t.dir / "meta.json").read_text())  # passes load(): QEMU must refuse it
    meta["sizes"]["state"] = t.state.stat().st_size
    meta["state_sha256"] = store.file_sha256(t.state)
    _rewrite(t.dir / "meta.json", json.dumps(meta).encode())
    starter = Starter(t.cfg, root=tmp_path / "root")
    workdir = tmp_path / "work"
    workdir.mkdir()
    with caplog.at_level(logging.INFO, logger="pyaisvc.guest.template"):
        guest = starter.start(workdir)
    try:
        assert starter.last is not None and starter.last.kind == "cold"
        said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(said) == 1 and "QEMU refused" in said[0] and "cold boot" in said[0], said
        assert not t.dir.exists(), "the refused template was kept"
        assert guest.cfg.port_socket is not None
        greedy = lc.reference_ids(assets, [lc.FRANCE["smol"]], N)[0]
        assert asyncio.run(_ask(guest.cfg.port_socket, [frames.Options()])) == [greedy]
    finally:
        guest.close()
        starter.close()


def test_engine_recovers_a_killed_guest_with_a_clone(template: store.Template, assets: Path,
                                                     tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # every clone's directory here
    greedy = lc.reference_ids(assets, [lc.FRANCE["smol"]], N)[0]
    c = template.cfg
    metrics = Metrics()
    engine = Engine(EngineConfig(c.kernel, c.image or Path(), c.ram, c.cpus, c.qemu,
                                 template_root=template.dir.parent), metrics)

    async def ask() -> list[int]:
        sub = await engine.enqueue(frames.request(lc.FRANCE["smol"], N, frames.Options(), []))
        return [i async for ev in sub.events() if isinstance(ev, frames.Tokens) for i in ev.ids]

    async def scenario() -> tuple[list[int], list[int], float]:
        await engine.start()
        first = await ask()
        pid = engine.qemu_pid
        assert pid is not None
        killed = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        while engine.state == "up" and engine.qemu_pid == pid:
            await asyncio.sleep(0.01)
        while engine.state != "up":
            await asyncio.sleep(0.01)
        recovered = time.monotonic() - killed
        return first, await ask(), recovered

    try:
        first, after, recovered = asyncio.run(scenario())
        dirs = [engine.guest.dir] if isinstance(engine.guest, Clone) else []
    finally:
        engine.close()
    print(f"recovery after a killed guest: {recovered * 1000:.0f} ms")
    assert first == greedy and after == greedy
    starts = {s.labels["start"]: s.value for m in metrics.registry.collect()
              if m.name == "aisvc_guest_starts" for s in m.samples if s.name.endswith("_total")}
    assert starts.get("clone", 0) + starts.get("pool", 0) == 2, starts
    assert starts.get("pool", 0) >= 1, starts  # the recovery took a waiting QEMU
    assert dirs and dirs[0].parent == tmp_path
    assert not list(tmp_path.glob("aisvc-clone-*")), "a clone's directory (or the pool's) leaked"
