"""OpenTelemetry spans of the library, recorded by the real OpenTelemetry SDK's in-memory
exporter; and the Report's figures the adapters hand to tracers.

The SDK's provider is local to each test (a global provider can be set once per process and
would make every later test trace): promptslim's tracer is taken from it directly.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from promptslim import (
    Budget,
    BudgetInfeasible,
    CompressStage,
    HistoryStage,
    PassThrough,
    Pipeline,
    PrefixStage,
    Request,
    RetrievalStage,
    tracing,
)
from promptslim.tracing import report_figures

sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import StatusCode

MARKER = "zebra-quartz-7731"  # prompt text that must never reach a span


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(tracing, "_otel", provider.get_tracer("promptslim"))
    yield exporter
    provider.shutdown()


def rag_request() -> Request:
    turns = []
    for i in range(6):
        turns += [
            {"role": "user", "content": f"{MARKER} question {i} about the refund window " * 3},
            {"role": "assistant", "content": f"{MARKER} answer {i}: thirty days, pro-rated " * 3},
        ]
    return Request.from_openai(
        {
            "messages": [
                {"role": "system", "content": f"You answer from documents. Today is 2026-01-14. {MARKER}"},
                *turns,
                {"role": "user", "content": f"What is the refund window? {MARKER}"},
            ],
            "documents": [
                {"id": f"d{i}", "text": f"{MARKER} passage {i} on refunds and windows. " * (4 + i)}
                for i in range(8)
            ],
        }
    )  # fmt: skip


def pipeline(**kwargs: Any) -> Pipeline:
    stages = [
        PrefixStage(),
        HistoryStage(),
        RetrievalStage(scorer="bm25", max_k=3),
        CompressStage(),
    ]
    return Pipeline(stages, **kwargs)


def by_name(exporter: InMemorySpanExporter) -> dict[str, Any]:
    return {s.name: s for s in exporter.get_finished_spans()}


def test_one_pipeline_span_with_a_child_per_stage(spans: InMemorySpanExporter) -> None:
    result = pipeline().run(rag_request(), Budget(history=150, documents=200))
    found = by_name(spans)
    names = [
        "promptslim.prefix",
        "promptslim.history",
        "promptslim.retrieval",
        "promptslim.compress",
    ]
    assert set(found) == {"promptslim.pipeline", *names}
    root = found["promptslim.pipeline"]
    assert root.parent is None
    assert all(found[n].parent.span_id == root.context.span_id for n in names)
    attrs = root.attributes
    assert attrs["promptslim.tokens_in"] == result.report.tokens_in
    assert attrs["promptslim.tokens_out"] == result.report.tokens_out
    assert attrs["promptslim.cacheable_tokens"] == result.report.cacheable_tokens > 0
    assert attrs["promptslim.degraded"] is False
    assert list(attrs["promptslim.stages"]) == ["prefix", "history", "retrieval", "compress"]
    retrieval = found["promptslim.retrieval"].attributes
    assert retrieval["promptslim.documents_in"] == 8
    assert retrieval["promptslim.documents_kept"] == len(result.request.documents) <= 3
    assert retrieval["promptslim.documents_dropped"] == 8 - retrieval["promptslim.documents_kept"]
    assert found["promptslim.prefix"].attributes["promptslim.cacheable_tokens"] > 0
    history = found["promptslim.history"].attributes
    assert history["promptslim.tokens_out"] < history["promptslim.tokens_in"]


def test_no_prompt_text_in_any_span(spans: InMemorySpanExporter) -> None:
    result = pipeline().run(rag_request(), Budget(history=150, documents=200))
    assert MARKER in result.to_openai()["messages"][-1]["content"]  # it did go through
    for span in spans.get_finished_spans():
        assert MARKER not in span.name and MARKER not in repr(dict(span.attributes or {}))
        assert MARKER not in repr([e.attributes for e in span.events])


def test_degraded_and_fallback_are_attributes(
    spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    from promptslim.backends import embeddings

    for name in ("torch", "transformers", "sentence_transformers", "llmlingua"):
        monkeypatch.setitem(sys.modules, name, None)  # the lm extra is not installed
    monkeypatch.setattr(embeddings, "_services", {})
    stages = [PrefixStage(), CompressStage(compressor="lm", rate=0.3)]
    Pipeline(stages, on_infeasible="best_effort").run(rag_request(), Budget(total=40))
    found = by_name(spans)
    root = found["promptslim.pipeline"].attributes
    assert root["promptslim.degraded"] is True
    assert root["promptslim.degraded_reason"].startswith("over budget by")
    assert list(root["promptslim.fallback"]) == ["compress"]
    compress = found["promptslim.compress"].attributes
    assert compress["promptslim.fallback.used"] == "extractive"
    assert compress["promptslim.fallback.error"] == "BackendUnavailable"


def test_an_infeasible_budget_is_an_error_span(spans: InMemorySpanExporter) -> None:
    with pytest.raises(BudgetInfeasible):
        Pipeline([PassThrough()]).run(rag_request(), Budget(total=5))
    (root,) = [s for s in spans.get_finished_spans() if s.name == "promptslim.pipeline"]
    assert root.status.status_code is StatusCode.ERROR
    assert [e.name for e in root.events] == ["exception"]


def test_nested_pipelines_and_the_async_run(spans: InMemorySpanExporter) -> None:
    outer = Pipeline([PassThrough(), Pipeline([PassThrough()])])
    asyncio.run(outer.arun(rag_request()))
    names = sorted(s.name for s in spans.get_finished_spans())
    assert names == ["promptslim.passthrough"] * 2 + ["promptslim.pipeline"] * 2


def test_no_spans_without_a_tracer_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tracing, "_otel", None)  # looked up again: the API's proxy tracer
    assert tracing.tracer() is None  # no provider set: spans would go nowhere


def test_without_opentelemetry_nothing_is_imported() -> None:
    code = (
        "import sys\nsys.modules['opentelemetry'] = None\n"
        "from promptslim import Pipeline, PassThrough, Request, tracing\n"
        "r = Pipeline([PassThrough()]).run(Request.from_openai({'messages': [{'role': 'user', 'content': 'hi'}]}))\n"
        "print(tracing.tracer(), r.report.tokens_in > 0)\n"
    )  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.stdout.split() == ["None", "True"], out.stderr


def test_report_figures_count_items_and_carry_no_text() -> None:
    result = pipeline().run(rag_request(), Budget(history=150, documents=200))
    figures = report_figures(result.report)
    assert figures["tokens_in"] == result.report.tokens_in
    assert figures["cacheable_tokens"] == result.report.cacheable_tokens
    history = result.report.stage("history")
    handled = sum(1 for c in history.changes if c.kind in ("dropped", "summarised"))
    assert (
        figures["stages"]["history"].get("dropped", 0)
        + figures["stages"]["history"].get("summarised", 0)
        >= handled
        > 0
    )
    dropped_docs = len(result.report.stage("retrieval").of_kind("dropped"))
    kept = len(result.request.documents)
    assert figures["stages"]["retrieval"]["documents_dropped"] == dropped_docs == 8 - kept
    assert MARKER not in repr(figures)
