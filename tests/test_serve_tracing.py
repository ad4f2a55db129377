"""The proxy's OpenTelemetry spans, with the real SDK and its in-memory exporter: a server span
per request that continues the client's trace, its phases as children, the pipeline's span
under it, and the trace context carried on to the upstream."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

httpx = pytest.importorskip("httpx")
sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")

from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind

from promptslim import tracing

from .test_serve import BODY, Seam, ThreadServer, proxy

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
MARKER = "zebra-quartz-7731"


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(tracing, "_otel", provider.get_tracer("promptslim"))
    yield exporter
    provider.shutdown()


@pytest.fixture(scope="module")
def seam() -> Iterator[tuple[Seam, str]]:
    s = Seam()
    with ThreadServer(s.app) as server:
        yield s, server.url + "/v1"


@pytest.mark.parametrize("stream", [True, False])
def test_a_request_is_one_server_span_in_the_clients_trace(
    spans: InMemorySpanExporter, seam: tuple[Seam, str], stream: bool
) -> None:
    upstream, base = seam
    body = {**BODY, "stream": stream, "messages": [{"role": "user", "content": MARKER}]}
    with proxy(base) as (url, _):
        r = httpx.post(url + "/v1/chat/completions", json=body, timeout=10,
                       headers={"traceparent": f"00-{TRACE_ID}-{CLIENT_SPAN}-01"})  # fmt: skip
        assert r.status_code == 200
    finished = spans.get_finished_spans()
    server = next(s for s in finished if s.kind == SpanKind.SERVER)
    assert f"{server.context.trace_id:032x}" == TRACE_ID
    assert server.parent is not None and f"{server.parent.span_id:016x}" == CLIENT_SPAN
    assert server.attributes["http.response.status_code"] == 200
    children = {
        s.name: s for s in finished if s.parent and s.parent.span_id == server.context.span_id
    }
    for name in ("promptslim.queue", "promptslim.pipeline", "promptslim.upstream.first_byte",
                 "promptslim.relay.first_token"):  # fmt: skip
        assert name in children, sorted(children)
        assert children[name].start_time <= children[name].end_time
    assert any(s.name == "promptslim.history" for s in finished)  # stages under the pipeline
    sent = upstream.headers[-1]["traceparent"]
    assert sent.split("-")[1] == TRACE_ID  # the upstream joins the client's trace...
    assert sent.split("-")[2] == f"{server.context.span_id:016x}"  # ...under the proxy's span
    assert all(MARKER not in str(dict(s.attributes or {})) for s in finished)


def test_no_spans_and_the_clients_context_untouched_without_a_provider(
    seam: tuple[Seam, str],
) -> None:
    upstream, base = seam
    assert tracing.tracer() is None
    header = f"00-{TRACE_ID}-{CLIENT_SPAN}-01"
    with proxy(base, default=False) as (url, _):
        r = httpx.post(url + "/v1/chat/completions", json=BODY, timeout=10,
                       headers={"traceparent": header})  # fmt: skip
    assert r.status_code == 200
    assert upstream.headers[-1]["traceparent"] == header
