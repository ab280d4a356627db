"""The server's Prometheus metrics (``GET /metrics``), in a registry of their own.

Host-side figures are the host clock's: TTFT from the moment a request was
admitted by the HTTP layer to its first generated id, TPOT the mean time of
each id after the first. The kernel's own TTFT (from ``ai_submit`` to the
first id, in the ``E`` frame) is beside them, so the difference is what the
HTTP path and the host queue add. The ``aisvc_kernel_*`` gauges come from
the gateway's ``I`` frame, polled; ``aisvc_kernel_running_max`` is the most
requests the worker ran at once since the server started: above 1, the
worker batched. The ``aisvc_kv_*`` gauges are the worker's KV cache from the
same frame (docs/KVCACHE.md): its pool's blocks by state, its evictions and
its hit ratio (prompt positions taken from the cache of all it looked up,
since the worker started); ``aisvc_prompt_tokens_cached`` counts this
server's requests' cached prompt ids (the E frames). ``aisvc_tenant_*``
split the TTFT and the ids served by the request's ``user`` (the kernel's
tenant: docs/SCHEDULING.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

if TYPE_CHECKING:
    from pyaisvc.serve.frames import Info

# Seconds: the guest's TTFT is tens of ms to seconds; its TPOT tens to hundreds of ms.
TTFT_BUCKETS = (0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
TPOT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)
OUTCOMES = ("ok", "cancelled", "bad_request", "rejected", "guest_down", "failed")


class Metrics:
    def __init__(self) -> None:
        """Every metric, in a registry of this server's own, the request counters at 0 for
        each endpoint and outcome."""
        r = self.registry = CollectorRegistry()
        self.running_max = 0
        self.requests = Counter("aisvc_requests", "HTTP generation requests by endpoint and "
                                "outcome (ok, cancelled, bad_request, rejected: 429, "
                                "guest_down: 503, failed)", ["endpoint", "outcome"], registry=r)
        self.queue_depth = Gauge("aisvc_queue_depth", "requests waiting in the host queue for "
                                 "a place in the gateway's window", registry=r)
        self.live = Gauge("aisvc_live_requests", "requests the gateway holds (submitted, not "
                          "ended)", registry=r)
        self.ttft = Histogram("aisvc_ttft_seconds", "time to first token, host clock",
                              buckets=TTFT_BUCKETS, registry=r)
        self.tpot = Histogram("aisvc_tpot_seconds", "time per output token after the first, "
                              "host clock", buckets=TPOT_BUCKETS, registry=r)
        self.kernel_ttft = Histogram("aisvc_kernel_ttft_seconds", "time to first token from "
                                     "ai_submit, the kernel's clock", buckets=TTFT_BUCKETS,
                                     registry=r)
        self.tokens = Counter("aisvc_tokens_generated", "ids the worker generated", registry=r)
        self.prompt_tokens = Counter("aisvc_prompt_tokens", "prompt ids submitted", registry=r)
        self.prompt_cached = Counter("aisvc_prompt_tokens_cached", "prompt ids the worker took "
                                     "from its KV cache (E frames)", registry=r)
        self.kv_blocks = Gauge("aisvc_kv_blocks", "the worker's KV pool's blocks by state "
                               "(used, cached, free)", ["state"], registry=r)
        self.kv_evictions = Gauge("aisvc_kv_evictions", "cached blocks the worker's KV pool "
                                  "evicted since it started", registry=r)
        self.kv_hit_ratio = Gauge("aisvc_kv_hit_ratio", "prompt positions the worker took "
                                  "from its KV cache over all it looked up", registry=r)
        self.tenant_ttft = Histogram("aisvc_tenant_ttft_seconds", "time to first token by "
                                     "tenant (the request's user, \"-\" without one), host "
                                     "clock", ["tenant"], buckets=TTFT_BUCKETS, registry=r)
        self.tenant_tokens = Counter("aisvc_tenant_tokens", "ids served by tenant (the "
                                     "request's user, \"-\" without one): kind prompt or "
                                     "generated", ["tenant", "kind"], registry=r)
        self.kernel_used = Gauge("aisvc_kernel_live_requests", "slots in use in the kernel's "
                                 "table (ai_info used)", registry=r)
        self.kernel_queued = Gauge("aisvc_kernel_queued_requests", "requests in the kernel's "
                                   "FIFO (ai_info queued)", registry=r)
        self.kernel_running = Gauge("aisvc_kernel_running_requests", "requests the worker "
                                    "runs (ai_info running)", registry=r)
        self.kernel_running_max = Gauge("aisvc_kernel_running_max", "the most requests the "
                                        "worker ran at once since the server started",
                                        registry=r)
        self.guest_up = Gauge("aisvc_guest_up", "1 while the guest and its gateway serve",
                              registry=r)
        self.guest_boots = Counter("aisvc_guest_boots", "guests started (the first and every "
                                   "restart after a guest died), however they started",
                                   registry=r)
        self.guest_starts = Counter("aisvc_guest_starts", "guests started by how: cold (a "
                                    "boot), clone (restored from the template), pool (restored "
                                    "into a QEMU already waiting)", ["start"], registry=r)
        self.guest_start_seconds = Gauge("aisvc_guest_start_seconds", "the phases of the last "
                                         "start of each kind: boot (cold), qemu and restore "
                                         "(clones), gateway (to the hello's answer), total",
                                         ["start", "phase"], registry=r)
        for outcome in OUTCOMES:
            for endpoint in ("completions", "chat"):
                self.requests.labels(endpoint, outcome)

    def saw_kv(self, info: Info) -> None:
        """The worker's KV cache (an I frame) into the kv gauges."""
        for state in ("used", "cached", "free"):
            self.kv_blocks.labels(state).set(getattr(info, f"kv_{state}"))
        self.kv_evictions.set(info.kv_evictions)
        self.kv_hit_ratio.set(info.kv_hits / info.kv_prompt if info.kv_prompt else 0.0)

    def forget_tenant(self, user: str) -> None:
        """Drops user's aisvc_tenant_* series (its tenant went to another user)."""
        for metric, labels in ((self.tenant_ttft, (user,)), (self.tenant_tokens, (user, "prompt")),
                               (self.tenant_tokens, (user, "generated"))):
            try:
                metric.remove(*labels)
            except KeyError:
                pass  # no request of user got that far

    def tenant_served(self) -> dict[str, dict[str, int]]:
        """The ids served so far by tenant (aisvc_tenant_tokens): {user: {"prompt": n,
        "generated": m}}, "-" for the requests without a user."""
        served: dict[str, dict[str, int]] = {}
        for family in self.tenant_tokens.collect():
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    row = served.setdefault(sample.labels["tenant"],
                                            {"prompt": 0, "generated": 0})
                    row[sample.labels["kind"]] = int(sample.value)
        return served

    def saw_start(self, kind: str, phases: dict[str, float]) -> None:
        """One guest started (kind: cold, clone or pool) with phases' seconds."""
        self.guest_starts.labels(kind).inc()
        for phase, seconds in phases.items():
            self.guest_start_seconds.labels(kind, phase).set(seconds)

    def saw_info(self, used: int, queued: int, running: int) -> None:
        """The kernel's table at a glance (an I frame) into the gauges; the running maximum
        grows."""
        self.kernel_used.set(used)
        self.kernel_queued.set(queued)
        self.kernel_running.set(running)
        if running > self.running_max:
            self.running_max = running
            self.kernel_running_max.set(running)
