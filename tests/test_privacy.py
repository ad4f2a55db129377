"""Privacy (issue 8, DESIGN.md invariant 8): a full pipeline run logs sizes and timings, never
prompt text, at every level, with and without OpenTelemetry; and it makes no network calls."""

from __future__ import annotations

import logging
import socket
from typing import Any

import pytest

from promptslim import pipeline as pipeline_module
from promptslim.pipeline import Pipeline
from promptslim.stages.compress import CompressStage
from promptslim.stages.history import HistoryStage
from promptslim.stages.prefix import PrefixStage
from promptslim.stages.retrieval import RetrievalStage
from promptslim.types import Budget, Request

MARKER = "zqxjv-SECRET-7731"  # appears nowhere but in the prompt


def _request() -> Request:
    messages: list[dict[str, Any]] = [{"role": "system", "content": f"System {MARKER} rules, 2024-05-01."}]
    for i in range(12):
        messages.append({"role": "user", "content": f"Turn {i} {MARKER} question about item {i}? " * 3})
        messages.append({"role": "assistant", "content": f"Item {i} {MARKER} costs {i} dollars. " * 3})
    messages.append({"role": "user", "content": f"Final {MARKER} question?"})
    documents = [{"id": f"d{k}", "text": f"Doc {k} {MARKER} mentions item {k}. " * 10} for k in range(8)]
    return Request.from_openai({"model": "m", "messages": messages, "documents": documents})


def _pipeline() -> Pipeline:
    return Pipeline([PrefixStage(), HistoryStage(), RetrievalStage(scorer="bm25"), CompressStage()])


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("network I/O attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_no_prompt_text_in_debug_logs(caplog: pytest.LogCaptureFixture, offline: None) -> None:
    with caplog.at_level(logging.DEBUG):  # the root logger, so "promptslim.*" and dependencies
        logging.getLogger("promptslim").setLevel(logging.DEBUG)
        result = _pipeline().run(_request(), Budget(total=700))
    assert MARKER in result.to_openai()["messages"][-1]["content"]  # the prompt did go through
    for record in caplog.records:
        assert MARKER not in record.getMessage(), f"prompt text logged by {record.name}"
        assert MARKER not in repr(record.args)


def test_no_prompt_text_in_traces(monkeypatch: pytest.MonkeyPatch, offline: None) -> None:
    """With a tracer present, span names and attributes carry no prompt text."""
    seen: list[Any] = []

    class Span:
        def set_attribute(self, key: str, value: Any) -> None:
            seen.append((key, value))

        def __enter__(self) -> Span:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

    class Tracer:
        def start_as_current_span(self, name: str, **kwargs: Any) -> Span:
            seen.append((name, kwargs))
            return Span()

    monkeypatch.setattr(pipeline_module, "_otel", Tracer())
    _pipeline().run(_request(), Budget(total=700))
    assert any(name == "promptslim.history" for name, _ in seen)
    assert MARKER not in repr(seen)


def test_otel_absent_is_fine(monkeypatch: pytest.MonkeyPatch, offline: None) -> None:
    monkeypatch.setattr(pipeline_module, "_otel", False)  # as when opentelemetry is not installed
    assert _pipeline().run(_request(), Budget(total=700)).request.messages
