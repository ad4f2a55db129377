"""Prometheus text-format metrics, kept by hand (no client library: a few counters and
histograms updated on the event loop, rendered on ``GET /metrics``).

With several worker processes each keeps its own and leaves a ``snapshot`` (plain JSON) where
the others can read it; the worker that answers ``/metrics`` adds them up (``absorb``)."""

from __future__ import annotations

import bisect
import json
import os
import time
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

__all__ = ["Histogram", "Metrics", "merged", "write_snapshot"]

#: seconds; fine at the low end, where proxy overhead and stage times live, and steps of a
#: quarter second from 0.5 to 3 s, where TTFT SLOs live, so ``histogram_quantile`` can tell a
#: 1.5 s P99 from a 2 s one
LATENCY_BUCKETS: tuple[float, ...] = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5,
    1.75, 2.0, 2.5, 3.0, 4.0, 5.0, 10.0, 30.0,
)  # fmt: skip


class Histogram:
    """Cumulative-bucket histogram as Prometheus expects it."""

    def __init__(self, buckets: tuple[float, ...] = LATENCY_BUCKETS) -> None:
        self.buckets = buckets
        self.counts = [0] * (len(buckets) + 1)  # last slot: +Inf
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.sum += value
        self.count += 1

    def snapshot(self) -> dict[str, Any]:
        return {"buckets": list(self.buckets), "counts": list(self.counts), "sum": self.sum}

    def absorb(self, data: Mapping[str, Any]) -> None:
        """Add another histogram's ``snapshot`` (same buckets) to this one."""
        if tuple(data["buckets"]) != self.buckets:
            raise ValueError("histograms with different buckets")
        self.counts = [a + int(b) for a, b in zip(self.counts, data["counts"], strict=True)]
        self.sum += float(data["sum"])
        self.count = sum(self.counts)

    def lines(self, name: str, labels: str = "") -> list[str]:
        sep = "," if labels else ""
        out, running = [], 0
        for bound, n in zip((*self.buckets, float("inf")), self.counts):
            running += n
            le = "+Inf" if bound == float("inf") else repr(bound)
            out.append(f'{name}_bucket{{{labels}{sep}le="{le}"}} {running}')
        label_block = f"{{{labels}}}" if labels else ""
        out.append(f"{name}_sum{label_block} {self.sum!r}")
        out.append(f"{name}_count{label_block} {self.count}")
        return out


class Metrics:
    """What ``GET /metrics`` reports. Updated only from the event loop."""

    def __init__(self) -> None:
        self.requests: defaultdict[tuple[str, int], int] = defaultdict(int)
        self.stage_seconds: defaultdict[str, Histogram] = defaultdict(Histogram)
        self.ttft = Histogram()
        self.upstream_ttfb = Histogram()
        self.tokens_in = 0
        self.tokens_out = 0
        self.pipeline_failures = 0
        self.pipeline_timeouts = 0
        #: client connections a limit closed, by reason (``header_timeout``, ``connection_cap``)
        self.connections_closed: dict[str, int] = {}

    def count_request(self, route: str, status: int) -> None:
        self.requests[(route, status)] += 1

    # ---- several workers

    def snapshot(self) -> dict[str, Any]:
        """Everything this process counted, as plain JSON data."""
        return {
            "requests": [[route, status, n] for (route, status), n in self.requests.items()],
            "stage_seconds": {k: h.snapshot() for k, h in self.stage_seconds.items()},
            "ttft": self.ttft.snapshot(),
            "upstream_ttfb": self.upstream_ttfb.snapshot(),
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "pipeline_failures": self.pipeline_failures,
            "pipeline_timeouts": self.pipeline_timeouts,
            "connections_closed": dict(self.connections_closed),
        }

    def absorb(self, data: Mapping[str, Any]) -> None:
        """Add another process's ``snapshot`` to these figures."""
        for route, status, n in data["requests"]:
            self.requests[(str(route), int(status))] += int(n)
        for stage, hist in data["stage_seconds"].items():
            self.stage_seconds[stage].absorb(hist)
        self.ttft.absorb(data["ttft"])
        self.upstream_ttfb.absorb(data["upstream_ttfb"])
        self.tokens_in += int(data["tokens_in"])
        self.tokens_out += int(data["tokens_out"])
        self.pipeline_failures += int(data["pipeline_failures"])
        self.pipeline_timeouts += int(data.get("pipeline_timeouts", 0))
        for reason, n in dict(data.get("connections_closed", {})).items():
            self.connections_closed[reason] = self.connections_closed.get(reason, 0) + int(n)

    def render(
        self, *, queued: int, in_flight: int, workers: int = 1, open_connections: int = 0
    ) -> str:
        lines = [
            "# HELP promptslim_requests_total Requests answered, by route and HTTP status.",
            "# TYPE promptslim_requests_total counter",
        ]
        for (route, status), n in sorted(self.requests.items()):
            lines.append(f'promptslim_requests_total{{route="{route}",status="{status}"}} {n}')
        lines += [
            "# HELP promptslim_stage_seconds Time per pipeline stage ('pipeline' is the whole run).",
            "# TYPE promptslim_stage_seconds histogram",
        ]
        for stage, hist in sorted(self.stage_seconds.items()):
            lines += hist.lines("promptslim_stage_seconds", f'stage="{stage}"')
        lines += [
            "# HELP promptslim_ttft_seconds Request received to first upstream body byte relayed (proxy clock).",
            "# TYPE promptslim_ttft_seconds histogram",
            *self.ttft.lines("promptslim_ttft_seconds"),
            "# HELP promptslim_upstream_ttfb_seconds Upstream request sent to its response headers.",
            "# TYPE promptslim_upstream_ttfb_seconds histogram",
            *self.upstream_ttfb.lines("promptslim_upstream_ttfb_seconds"),
            "# HELP promptslim_tokens_in_total Prompt tokens before the pipeline.",
            "# TYPE promptslim_tokens_in_total counter",
            f"promptslim_tokens_in_total {self.tokens_in}",
            "# HELP promptslim_tokens_out_total Prompt tokens after the pipeline.",
            "# TYPE promptslim_tokens_out_total counter",
            f"promptslim_tokens_out_total {self.tokens_out}",
            "# HELP promptslim_tokens_saved_total Prompt tokens the pipeline removed.",
            "# TYPE promptslim_tokens_saved_total counter",
            f"promptslim_tokens_saved_total {self.tokens_in - self.tokens_out}",
            "# HELP promptslim_pipeline_failures_total Pipeline failures (the original request was forwarded).",
            "# TYPE promptslim_pipeline_failures_total counter",
            f"promptslim_pipeline_failures_total {self.pipeline_failures}",
            "# HELP promptslim_pipeline_timeouts_total Pipelines past their time budget (the original request was forwarded).",
            "# TYPE promptslim_pipeline_timeouts_total counter",
            f"promptslim_pipeline_timeouts_total {self.pipeline_timeouts}",
            "# HELP promptslim_connections_closed_total Client connections closed by a limit, by reason.",
            "# TYPE promptslim_connections_closed_total counter",
            *(
                f'promptslim_connections_closed_total{{reason="{reason}"}} {n}'
                for reason, n in sorted(self.connections_closed.items())
            ),
            "# HELP promptslim_open_connections Client connections open in the process that answered.",
            "# TYPE promptslim_open_connections gauge",
            f"promptslim_open_connections {open_connections}",
            "# HELP promptslim_queue_length Requests waiting for admission.",
            "# TYPE promptslim_queue_length gauge",
            f"promptslim_queue_length {queued}",
            "# HELP promptslim_in_flight Requests admitted and not finished.",
            "# TYPE promptslim_in_flight gauge",
            f"promptslim_in_flight {in_flight}",
            "# HELP promptslim_workers Worker processes whose figures these are.",
            "# TYPE promptslim_workers gauge",
            f"promptslim_workers {workers}",
        ]
        return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- shared between workers


def write_snapshot(folder: str, *, metrics: Metrics, queued: int, in_flight: int) -> None:
    """This process's figures as ``<folder>/<pid>.json``, replaced atomically (a reader never
    sees half a file)."""
    pid = os.getpid()
    data = {"pid": pid, "queued": queued, "in_flight": in_flight, "metrics": metrics.snapshot()}
    path = os.path.join(folder, f"{pid}.json")
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f)
    os.replace(tmp, path)


#: a worker whose snapshot is older than this is taken for gone (each rewrites its own every
#: second; the age, not the PID, decides, since a PID can be reused)
STALE_S = 5.0


def merged(
    folder: str, own: Metrics, *, queued: int, in_flight: int
) -> tuple[Metrics, int, int, int]:
    """``own`` plus every other worker's last snapshot in ``folder``: ``(metrics, queued,
    in_flight, workers)``. A worker that has gone keeps its counts (counters must not go down
    when a worker is replaced) but not its gauges, and is not counted as a worker."""
    total = Metrics()
    total.absorb(own.snapshot())
    workers = 1
    mine = f"{os.getpid()}.json"
    now = time.time()
    try:
        names = os.listdir(folder)
    except OSError:  # the folder goes when the server stops
        names = []
    for name in names:
        if not name.endswith(".json") or name == mine:
            continue
        path = os.path.join(folder, name)
        try:
            age = now - os.stat(path).st_mtime
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            total.absorb(data["metrics"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # gone or not ours: a scrape must not fail on one worker's file
        if age < STALE_S:
            workers += 1
            queued += int(data["queued"])
            in_flight += int(data["in_flight"])
    return total, queued, in_flight, workers
