"""How each guest of a long-running host (``pyaisvc serve``) starts: a clone of the
machine's template, or a cold boot.

``Starter.start(workdir)`` returns a running guest and records how it
started (``last``: the kind, ``cold``, ``clone`` or ``pool``, and each
phase's seconds). From a template: the first start loads or makes it
(``store.ensure``: a missing, partial, corrupt or stale one is said in one
line and replaced by a cold boot that saves a new one) and fills a pool of
waiting QEMUs; each start takes a clone from the pool. When a clone cannot
be had (QEMU refuses the state, a file vanished), one line says why, the
template is dropped (the next start makes a new one) and this start cold
boots, so the host keeps serving.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from pyaisvc.errors import AisvcError
from pyaisvc.guest.qemu import Guest, QemuConfig
from pyaisvc.guest.template import store
from pyaisvc.guest.template.clone import Pool, start_clone

log = logging.getLogger("pyaisvc.guest.template")


@dataclass
class StartRecord:
    """How one guest started: kind ("cold", "clone", "pool") and phase -> seconds."""

    kind: str
    phases: dict[str, float] = field(default_factory=dict)


class Starter:
    """Starts the guests of one machine (cfg without a gateway socket; see the module)."""

    def __init__(self, cfg: QemuConfig, use_template: bool = True, pool_size: int = 1,
                 root: Path = store.ROOT) -> None:
        self.cfg, self.use_template, self.pool_size, self.root = cfg, use_template, pool_size, root
        self.template: store.Template | None = None
        self.pool: Pool | None = None
        self.last: StartRecord | None = None

    def start(self, workdir: Path, timeout: float = 300.0) -> Guest:
        """A running guest whose gateway socket is its cfg.port_socket (workdir's for a
        cold boot); GuestError or OSError when even a cold boot fails."""
        if self.use_template:
            try:
                return self._clone(timeout)
            except (AisvcError, OSError) as e:
                log.warning("no clone: %s; cold boot instead", (str(e) or repr(e)).splitlines()[0])
                self._drop_template()
        return self._cold(workdir, timeout)

    def _clone(self, timeout: float) -> Guest:
        """A clone of the template (made first when there is none), from the pool."""
        phases: dict[str, float] = {}
        if self.template is None:
            start = time.monotonic()
            self.template = store.ensure(self.cfg, self.root, timeout)
            self.pool = Pool(self.template, self.pool_size)
            phases["template"] = time.monotonic() - start
        assert self.pool is not None
        guest = start_clone(self.template, self.pool)
        kind = "clone" if "qemu" in guest.phases else "pool"
        self.last = StartRecord(kind, {**phases, **guest.phases})
        return guest

    def _cold(self, workdir: Path, timeout: float) -> Guest:
        """A cold boot on a throw-away overlay of the image (GuestError when it fails)."""
        guest = Guest(dataclasses.replace(self.cfg, snapshot=True,
                                          port_socket=workdir / "gateway.sock"))
        start = time.monotonic()
        try:
            guest.boot(timeout)
        except BaseException:
            guest.close()
            raise
        self.last = StartRecord("cold", {"boot": time.monotonic() - start})
        return guest

    def _drop_template(self) -> None:
        """Forgets the template and removes its files (QEMU refused it or it broke)."""
        if self.pool is not None:
            self.pool.close()
            self.pool = None
        if self.template is not None:
            store.discard(self.template)
            self.template = None

    def close(self) -> None:
        """Stops the pool's waiting QEMUs (the template stays for the next server)."""
        if self.pool is not None:
            self.pool.close()
            self.pool = None
