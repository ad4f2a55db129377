"""The proxy's Prometheus metrics, kept and rendered by ``prometheus_client``.

One process keeps them in a registry of its own (so several apps in one process never share
figures). Under ``promptslim serve --workers N`` each worker is a process of its own: ``serve``
sets ``PROMETHEUS_MULTIPROC_DIR`` before the workers start, prometheus_client then keeps every
value in a file there, and whichever worker answers a scrape adds up all of them (its
multiprocess collector). Counters of a worker that has gone stay counted; its gauges do not
(a worker marks itself dead when it stops).

Histogram buckets resolve both the proxy's own overhead (sub-millisecond) and TTFT SLOs (steps
of a quarter second from 0.5 to 3 s), so ``histogram_quantile`` can tell a 1.5 s P99 from a 2 s
one. The pipeline's whole time is ``promptslim_pipeline_seconds``; ``promptslim_stage_seconds``
holds the stages only.
"""

from __future__ import annotations

import os
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Literal

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from prometheus_client import multiprocess as prometheus_multiprocess

__all__ = ["LATENCY_BUCKETS", "MULTIPROC_ENV", "Metrics"]

_Mode = Literal["livesum", "max"]

#: prometheus_client reads this at import to choose where values live
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

#: seconds: fine at the low end, where proxy overhead and stage times live, and steps of a
#: quarter second from 0.5 to 3 s, where TTFT SLOs live
LATENCY_BUCKETS: tuple[float, ...] = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5,
    1.75, 2.0, 2.5, 3.0, 4.0, 5.0, 10.0, 30.0,
)  # fmt: skip


def _version() -> str:
    try:
        return version("promptslim")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


class Metrics:
    """What ``GET /metrics`` reports. Updated only from the event loop."""

    def __init__(self) -> None:
        self.multiprocess = bool(os.environ.get(MULTIPROC_ENV))
        # in multiprocess mode values live in files, not in a registry: none is needed
        reg = None if self.multiprocess else CollectorRegistry()
        self.registry = reg
        latency: dict[str, Any] = {"buckets": LATENCY_BUCKETS, "registry": reg}
        self.requests = Counter(
            "promptslim_requests", "Requests answered, by route and HTTP status (499: the "
            "client went away first).", ["route", "status"], registry=reg,
        )  # fmt: skip
        self.pipeline_seconds = Histogram(
            "promptslim_pipeline_seconds", "Time of the whole pipeline per request.", **latency
        )
        self.stage_seconds = Histogram(
            "promptslim_stage_seconds", "Time per pipeline stage.", ["stage"], **latency
        )
        self.ttft = Histogram(
            "promptslim_ttft_seconds",
            "Request received to first upstream body byte relayed (proxy clock).",
            **latency,
        )
        self.upstream_ttfb = Histogram(
            "promptslim_upstream_ttfb_seconds", "Upstream request sent to its response headers.",
            **latency,
        )  # fmt: skip
        self._counters(reg)
        self._gauges(reg)
        if reg is not None:  # per-process figures have no sum over workers
            ProcessCollector(registry=reg)

    def _counters(self, reg: CollectorRegistry | None) -> None:
        def counter(name: str, text: str, labels: tuple[str, ...] = ()) -> Counter:
            return Counter(name, text, list(labels), registry=reg)

        self.tokens_in = counter("promptslim_tokens_in", "Prompt tokens before the pipeline.")
        self.tokens_out = counter("promptslim_tokens_out", "Prompt tokens after the pipeline.")
        self.tokens_saved = counter(
            "promptslim_tokens_saved", "Prompt tokens the pipeline removed."
        )
        self.cacheable_tokens = counter(
            "promptslim_cacheable_tokens", "Leading prompt tokens a prefix cache can reuse."
        )
        self.pipeline_failures = counter(
            "promptslim_pipeline_failures",
            "Pipeline failures (the original request was forwarded).",
        )
        self.pipeline_timeouts = counter(
            "promptslim_pipeline_timeouts",
            "Pipelines past their time budget (the original request was forwarded).",
        )
        self.pipeline_degraded = counter(
            "promptslim_pipeline_degraded",
            "Pipelines that sent a prompt over its budget (on_infeasible best_effort).",
        )
        self.connections_closed = counter(
            "promptslim_connections_closed", "Client connections closed by a limit, by reason.",
            ("reason",),
        )  # fmt: skip
        self.expand_answered = counter(
            "promptslim_expand_answered",
            "promptslim_expand calls the proxy answered from the tool store.",
        )
        self.store_events = counter(
            "promptslim_store_events", "Shared-store (Redis) events: hits, misses, errors, "
            "oversize values, degraded requests, summaries and embeddings computed.", ("event",),
        )  # fmt: skip
        self._store_seen: dict[str, float] = {}

    def _gauges(self, reg: CollectorRegistry | None) -> None:
        def gauge(
            name: str, text: str, labels: tuple[str, ...] = (), mode: _Mode = "livesum"
        ) -> Gauge:
            return Gauge(name, text, list(labels), registry=reg, multiprocess_mode=mode)

        self.queued = gauge("promptslim_queue_length", "Requests waiting for admission.")
        self.in_flight = gauge("promptslim_in_flight", "Requests admitted and not finished.")
        self.open_connections = gauge("promptslim_open_connections", "Open client connections.")
        self.workers = gauge("promptslim_workers", "Worker processes whose figures these are.")
        self.redis_p99 = gauge(
            "promptslim_redis_p99_seconds", "P99 of recent shared-store calls.", mode="max"
        )
        self.workers.set(1)
        build = gauge("promptslim_build_info", "promptslim's version.", ("version",), "max")
        build.labels(version=_version()).set(1)

    # ---- updates

    def count_request(self, route: str, status: int) -> None:
        self.requests.labels(route=route, status=str(status)).inc()

    def count_closed(self, reason: str) -> None:
        self.connections_closed.labels(reason=reason).inc()

    def observe_report(
        self, *, pipeline_s: float, stages_ms: dict[str, float], report: Any
    ) -> None:
        """One slimmed request's figures: times, tokens, cacheable tokens, degraded."""
        self.pipeline_seconds.observe(pipeline_s)
        for stage, ms in stages_ms.items():
            self.stage_seconds.labels(stage=stage).observe(ms / 1e3)
        self.tokens_in.inc(report.tokens_in)
        self.tokens_out.inc(report.tokens_out)
        self.tokens_saved.inc(max(report.tokens_in - report.tokens_out, 0))
        if report.cacheable_tokens:
            self.cacheable_tokens.inc(report.cacheable_tokens)
        if report.degraded is not None:
            self.pipeline_degraded.inc()

    def sync_store_stats(self, snapshot: dict[str, float]) -> None:
        """Bring the shared-store counters up to ``snapshot`` (``STORE_STATS.snapshot()``:
        running totals, so each call adds what happened since the last)."""
        for event, total in snapshot.items():
            if event.endswith("_ms"):
                continue
            delta = total - self._store_seen.get(event, 0.0)
            if delta > 0:
                self.store_events.labels(event=event).inc(delta)
                self._store_seen[event] = total
        if "redis_p99_ms" in snapshot:
            self.redis_p99.set(snapshot["redis_p99_ms"] / 1e3)

    def set_load(self, *, queued: int, in_flight: int, open_connections: int) -> None:
        self.queued.set(queued)
        self.in_flight.set(in_flight)
        self.open_connections.set(open_connections)

    # ---- scrape

    def render(self) -> bytes:
        """The Prometheus text format: this process's figures, or every worker's."""
        if self.registry is not None:
            return generate_latest(self.registry)
        registry = CollectorRegistry()
        prometheus_multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry)

    @staticmethod
    def mark_dead(pid: int) -> None:
        """Drop a stopped worker's gauges (multiprocess mode; its counters stay)."""
        if os.environ.get(MULTIPROC_ENV):
            prometheus_multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]
