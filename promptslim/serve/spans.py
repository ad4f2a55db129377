"""OpenTelemetry spans for the proxy: one server span per request, continuing the client's trace.

The server span (``POST /v1/chat/completions``, kind SERVER) continues the ``traceparent`` the
client sent, and its context goes on to the upstream in the forwarded request's own
``traceparent``, so the model server's spans join the same trace. The Pipeline's own span
(``promptslim.pipeline``, with a child per stage) is its child: it runs in a worker thread that
inherits the request's context. The other phases become child spans when the request is over,
from the moments the exchange recorded: ``promptslim.queue`` (waiting for admission),
``promptslim.upstream.connect`` (a new connection's TCP connect), ``promptslim.upstream.first_byte``
(request sent → response headers) and ``promptslim.relay.first_token`` (response headers → first
body chunk written to the client).

Nothing is started unless an application has set a tracer provider (``promptslim.tracing.tracer``
is None then), and no attribute holds prompt text, a header value or a credential.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

from ..tracing import tracer
from .exchange import Exchange

__all__ = ["end_server_span", "inject_context", "server_span", "use_span"]

_TRACE_HEADERS = frozenset({b"traceparent", b"tracestate"})


def server_span(method: str, route: str, headers: list[tuple[bytes, bytes]]) -> Any:
    """A started server span continuing the client's trace, or None when nothing traces."""
    active = tracer()
    if active is None:
        return None
    from opentelemetry import propagate
    from opentelemetry.trace import SpanKind

    carrier = {k.decode("latin-1"): v.decode("latin-1") for k, v in headers if k in _TRACE_HEADERS}
    parent = propagate.extract(carrier)
    return active.start_span(
        f"{method} {route}",
        context=parent,
        kind=SpanKind.SERVER,
        attributes={"http.request.method": method, "http.route": route},
    )


@contextlib.contextmanager
def use_span(span: Any) -> Iterator[None]:
    """Make ``span`` the current one (it is ended later, by ``end_server_span``)."""
    if span is None:
        yield
        return
    from opentelemetry import trace

    with trace.use_span(span, end_on_exit=False, record_exception=False):
        yield


def inject_context(span: Any, headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """``headers`` with the trace context of ``span`` in place of the client's own."""
    if span is None:
        return headers
    from opentelemetry import propagate, trace

    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=trace.set_span_in_context(span))
    kept = [(k, v) for k, v in headers if k.lower() not in _TRACE_HEADERS]
    return kept + [(k.encode("latin-1"), v.encode("latin-1")) for k, v in carrier.items()]


def end_server_span(span: Any, ex: Exchange, status: int) -> None:
    """The phases as child spans, the outcome as attributes, and the server span ended."""
    if span is None:
        return
    from opentelemetry import trace
    from opentelemetry.trace import Status, StatusCode

    active = tracer()
    if active is not None:
        context = trace.set_span_in_context(span)
        to_ns = _clock(ex)
        for name, start, end in _phases(ex):
            child = active.start_span(name, context=context, start_time=to_ns(start))
            child.end(end_time=to_ns(end))
    span.set_attributes(_outcome(ex, status))
    if status >= 500:
        span.set_status(Status(StatusCode.ERROR, ex.error or f"status {status}"))
    span.end()


def _clock(ex: Exchange) -> Any:
    """perf_counter seconds → epoch nanoseconds, anchored once per request."""
    offset = time.time_ns() - int(time.perf_counter() * 1e9)
    return lambda seconds: offset + int(seconds * 1e9)


def _phases(ex: Exchange) -> list[tuple[str, float, float]]:
    marks = ex.marks
    spans = [
        ("promptslim.queue", "queued", "admitted"),
        ("promptslim.upstream.connect", "connect_started", "connect_done"),
        ("promptslim.upstream.first_byte", "sent", "headers"),
        ("promptslim.relay.first_token", "headers", "first_relayed"),
    ]
    return [(name, marks[a], marks[b]) for name, a, b in spans if a in marks and b in marks]


def _outcome(ex: Exchange, status: int) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "http.response.status_code": status,
        "promptslim.request_id": ex.id,
        "promptslim.stream": ex.stream,
        "promptslim.pipeline": ex.pipeline,
        "promptslim.bytes_in": ex.bytes_in,
        "promptslim.bytes_out": ex.bytes_out,
    }
    for name in ("tokens_in", "tokens_out", "queue_ms", "pipeline_ms", "first_chunk_ms"):
        value = getattr(ex, name)
        if value is not None:
            attrs[f"promptslim.{name}"] = value
    if ex.error is not None:  # our own codes (upstream_timeout, client_disconnected...)
        attrs["promptslim.error"] = ex.error
    return attrs
