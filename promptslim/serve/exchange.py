"""One proxied request's record: sizes and timings, never text (times in ms)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Exchange", "ms_since"]


def ms_since(since: float) -> float:
    """Milliseconds from ``since`` (a ``time.perf_counter()`` reading) to now."""
    return (time.perf_counter() - since) * 1e3


@dataclass(slots=True)
class Exchange:
    """One proxied request: sizes and timings, never text. Times in ms."""

    id: str
    route: str
    start: float
    stream: bool = False
    status: int = 0
    bytes_in: int = 0
    bytes_up: int = 0
    bytes_out: int = 0
    chunks: int = 0
    queue_ms: float | None = None
    #: ok | disabled | failed | timeout (failed and timeout: the original was forwarded)
    pipeline: str = "disabled"
    pipeline_ms: float | None = None
    stages_ms: dict[str, float] = field(default_factory=dict)
    tokens_in: int | None = None
    tokens_out: int | None = None
    # request received → upstream request handed to the connection pool: the proxy's own
    # work before the upstream sees the request (body, checks, admission, pipeline)
    forward_ms: float | None = None
    upstream_ttfb_ms: float | None = None  # upstream request sent → its response headers
    first_chunk_ms: float | None = None  # request received → first body byte relayed
    # first upstream body chunk in the proxy's hands → written to the client's socket
    first_relay_ms: float | None = None
    upstream_ms: float | None = None  # upstream request sent → its body complete
    total_ms: float | None = None
    error: str | None = None
    #: ``time.perf_counter()`` at each phase's edges (queued, admitted, sent, headers,
    #: first_relayed, connect_started, connect_done): the server span's children
    marks: dict[str, float] = field(default_factory=dict)
    #: the OpenTelemetry server span, when tracing
    span: Any = None

    def server_timing(self, *, complete: bool) -> str:
        """The ``Server-Timing`` value: only figures already known when headers go out."""
        parts: list[str] = []
        if self.queue_ms is not None:
            parts.append(f"queue;dur={self.queue_ms:.3f}")
        if self.pipeline_ms is not None:
            parts.append(f'pipeline;dur={self.pipeline_ms:.3f};desc="{self.pipeline}"')
        for stage, ms in self.stages_ms.items():
            parts.append(f"stage-{stage};dur={ms:.3f}")
        if self.forward_ms is not None:
            parts.append(f"forward;dur={self.forward_ms:.3f}")
        if self.upstream_ttfb_ms is not None:
            parts.append(f"upstream-ttfb;dur={self.upstream_ttfb_ms:.3f}")
        if complete and self.upstream_ms is not None:
            parts.append(f"upstream;dur={self.upstream_ms:.3f}")
        return ", ".join(parts)

    def report(self) -> dict[str, Any]:
        """The ``promptslim`` extension field."""
        return {
            "request_id": self.id,
            "pipeline": self.pipeline,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "timing_ms": {
                "queue": self.queue_ms,
                "pipeline": self.pipeline_ms,
                "stages": dict(self.stages_ms),
                "forward": self.forward_ms,
                "upstream_ttfb": self.upstream_ttfb_ms,
                "first_chunk": self.first_chunk_ms,
                "first_relay": self.first_relay_ms,
                "upstream": self.upstream_ms,
            },
        }

    def log_line(self, pid: int) -> str:
        fields: dict[str, Any] = {"event": "request", "pid": pid}  # pid: which worker
        for name in self.__slots__:
            if name not in ("start", "marks", "span"):
                fields[name] = getattr(self, name)
        return json.dumps(fields, default=str)
