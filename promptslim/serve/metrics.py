"""Prometheus text-format metrics, kept by hand (no client library: a few counters and
histograms updated on the event loop, rendered on ``GET /metrics``)."""

from __future__ import annotations

import bisect
from collections import defaultdict

__all__ = ["Histogram", "Metrics"]

#: seconds; fine at the low end, where proxy overhead and stage times live
LATENCY_BUCKETS: tuple[float, ...] = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
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

    def count_request(self, route: str, status: int) -> None:
        self.requests[(route, status)] += 1

    def render(self, *, queued: int, in_flight: int) -> str:
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
            "# HELP promptslim_queue_length Requests waiting for admission.",
            "# TYPE promptslim_queue_length gauge",
            f"promptslim_queue_length {queued}",
            "# HELP promptslim_in_flight Requests admitted and not finished.",
            "# TYPE promptslim_in_flight gauge",
            f"promptslim_in_flight {in_flight}",
        ]
        return "\n".join(lines) + "\n"
