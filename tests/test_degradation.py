"""Degradation (invariant 11 of docs/architecture.md): a backend that is missing, raises, or runs
past its time limit makes its stage fall back to the cheaper path with a warning in the Report;
``strict=True`` raises. The request is never lost."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from typing import Any

import pytest

from promptslim.backends.compress import COMPRESSORS, Compressor, Item
from promptslim.backends.summarisers import LRUSummaryCache, Summariser
from promptslim.errors import BackendError, BackendUnavailable, StageTimeout
from promptslim.pipeline import Pipeline
from promptslim.stages.base import StageLog, run_with_fallback
from promptslim.stages.compress import CompressStage
from promptslim.stages.history import HistoryStage
from promptslim.stages.prefix import PrefixStage
from promptslim.stages.retrieval import RetrievalStage
from promptslim.stages.tools import ToolsStage
from promptslim.tokens import TokenCounter, get_counter
from promptslim.types import Budget, Message, Request

LIMIT_MS = 150.0
SLOW_S = 2.0


# ---------------------------------------------------------------- seams


class Boom(Compressor):
    name = "boom"

    def compress(self, items: Sequence[Item], *, query: str, budget: int, counter: TokenCounter) -> list[str]:
        raise RuntimeError("the model fell over")


class Sleepy(Compressor):
    name = "sleepy"

    def compress(self, items: Sequence[Item], *, query: str, budget: int, counter: TokenCounter) -> list[str]:
        time.sleep(SLOW_S)
        return [it.text for it in items]


class Missing(Compressor):
    name = "missing"

    def compress(self, items: Sequence[Item], *, query: str, budget: int, counter: TokenCounter) -> list[str]:
        import promptslim_extra_that_is_not_installed  # noqa: F401

        return []


class BoomSummariser(Summariser):
    name = "boom"

    def __init__(self) -> None:
        pass

    def summarise(self, messages: Sequence[Message], *, max_tokens: int, counter: TokenCounter, previous: str | None = None) -> str:
        raise ValueError("summariser crashed")


class SleepySummariser(Summariser):
    name = "sleepy"

    def __init__(self) -> None:
        pass

    def summarise(self, messages: Sequence[Message], *, max_tokens: int, counter: TokenCounter, previous: str | None = None) -> str:
        time.sleep(SLOW_S)
        return "late"


@pytest.fixture
def compressors(monkeypatch: pytest.MonkeyPatch) -> None:
    for cls in (Boom, Sleepy, Missing):
        monkeypatch.setitem(COMPRESSORS._loaded, cls.name, cls)


@pytest.fixture
def no_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ``lm`` extra is not installed: importing torch or transformers fails. No embedding
    service an earlier test loaded is shared either: without the extra none could have loaded
    (an ONNX model already in memory would embed without importing torch)."""
    from promptslim.backends import embeddings

    for name in ("torch", "transformers", "sentence_transformers", "llmlingua"):
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setattr(embeddings, "_services", {})


def rag_request() -> Request:
    docs = [
        {"id": f"d{i}", "text": f"Passage {i} says the capital of country {i} is city {i * 7}. " * 12}
        for i in range(6)
    ]
    return Request.from_openai(
        {
            "messages": [
                {"role": "system", "content": "Answer from the passages."},
                {"role": "user", "content": "What is the capital of country 3?"},
            ],
            "documents": docs,
        }
    )


def chat_request(turns: int = 30) -> Request:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are helpful."}]
    for i in range(turns):
        messages.append({"role": "user", "content": f"Question {i}: what about item {i}? " * 5})
        messages.append({"role": "assistant", "content": f"Item {i} costs {i * 3} dollars. " * 5})
    messages.append({"role": "user", "content": "And the total?"})
    return Request.from_openai({"messages": messages})


# ---------------------------------------------------------------- the shared mechanism


def test_run_with_fallback_records_and_strict_raises() -> None:
    log = StageLog(get_counter())

    def fail() -> str:
        raise OSError("disk gone")

    assert run_with_fallback(fail, lambda: "cheap", backend="x", fallback_name="y", log=log) == "cheap"
    assert log.details["fallback"] == {"backend": "x", "used": "y", "error": "BackendError"}
    assert "x failed" in log.warnings[0] and "used y" in log.warnings[0]
    with pytest.raises(BackendError) as info:
        run_with_fallback(fail, lambda: "cheap", backend="x", fallback_name="y", log=log, strict=True)
    assert isinstance(info.value.__cause__, OSError)


def test_run_with_fallback_time_limit_returns_promptly() -> None:
    log = StageLog(get_counter())
    start = time.perf_counter()
    out = run_with_fallback(
        lambda: time.sleep(SLOW_S) or "late", lambda: "cheap", backend="x", fallback_name="y", log=log, time_limit_ms=LIMIT_MS
    )
    assert out == "cheap"
    assert time.perf_counter() - start < SLOW_S / 2
    assert log.details["fallback"]["error"] == "StageTimeout"


# ---------------------------------------------------------------- compress: lm -> extractive


@pytest.mark.parametrize(("compressor", "error"), [("boom", "BackendError"), ("missing", "BackendUnavailable"), ("sleepy", "StageTimeout")])
def test_compress_falls_back_to_extractive(compressors: None, compressor: str, error: str) -> None:
    request = rag_request()
    expected = CompressStage(rate=0.3).run(request)
    start = time.perf_counter()
    result = CompressStage(compressor=compressor, rate=0.3, time_limit_ms=LIMIT_MS).run(request)
    assert time.perf_counter() - start < SLOW_S  # the slow backend was not waited for
    assert result.request.documents == expected.request.documents  # exactly the extractive output
    details = result.report.stages[0].details
    assert details["fallback"] == {"backend": f"compressor {compressor!r}", "used": "extractive", "error": error}
    assert any("used extractive" in w for w in result.report.warnings)


@pytest.mark.parametrize(("compressor", "error"), [("boom", BackendError), ("missing", BackendUnavailable), ("sleepy", StageTimeout)])
def test_compress_strict_raises(compressors: None, compressor: str, error: type[Exception]) -> None:
    with pytest.raises(error):
        CompressStage(compressor=compressor, rate=0.3, strict=True, time_limit_ms=LIMIT_MS).run(rag_request())


def test_compress_lm_without_the_extra_falls_back(no_torch: None) -> None:
    result = CompressStage(compressor="lm", rate=0.3).run(rag_request())
    assert result.report.stages[0].details["fallback"]["error"] == "BackendUnavailable"
    assert "promptslim[lm]" in result.report.warnings[0]
    with pytest.raises(BackendUnavailable):
        CompressStage(compressor="lm", rate=0.3, strict=True).run(rag_request())


def test_time_limit_is_a_config_option() -> None:
    stage = CompressStage(strict=True, time_limit_ms=50)
    assert Pipeline.from_config({"stages": [{"name": "compress", **stage.get_params()}]}).stages[0] == stage


# ---------------------------------------------------------------- history: LLM summary -> extractive


@pytest.mark.parametrize(("summariser", "error"), [(BoomSummariser(), "BackendError"), (SleepySummariser(), "StageTimeout")])
def test_history_summary_falls_back(summariser: Summariser, error: str) -> None:
    budget = Budget(total=400)
    expected = HistoryStage(summary_cache=LRUSummaryCache()).run(chat_request(), budget)
    start = time.perf_counter()
    stage = HistoryStage(summariser=summariser, time_limit_ms=LIMIT_MS, summary_cache=LRUSummaryCache())
    result = stage.run(chat_request(), budget)
    assert time.perf_counter() - start < SLOW_S * 2
    assert result.report.stages[0].details["summary_fallback"] == error
    assert result.request.messages == expected.request.messages  # the extractive summary
    assert any("used extractive" in w for w in result.report.warnings)


def test_history_lm_without_the_extra_falls_back(no_torch: None) -> None:
    stage = HistoryStage(summariser="lm", summary_cache=LRUSummaryCache())
    result = stage.run(chat_request(), Budget(total=400))
    assert result.report.stages[0].details["summary_fallback"] == "BackendUnavailable"
    with pytest.raises(BackendUnavailable):
        HistoryStage(summariser="lm", strict=True, summary_cache=LRUSummaryCache()).run(chat_request(), Budget(total=400))


def test_history_strict_raises() -> None:
    stage = HistoryStage(summariser=BoomSummariser(), strict=True, summary_cache=LRUSummaryCache())
    with pytest.raises(BackendError):
        stage.run(chat_request(), Budget(total=400))


# ---------------------------------------------------------------- the whole request survives


def test_pipeline_with_every_backend_broken_still_answers(compressors: None, no_torch: None) -> None:
    pipeline = Pipeline(
        [
            PrefixStage(),
            HistoryStage(summariser="lm", summary_cache=LRUSummaryCache()),
            RetrievalStage(scorer="bm25"),
            CompressStage(compressor="boom", rate=0.5),
        ]
    )
    request = rag_request()
    result = pipeline.run(request, Budget(total=900))
    assert result.request.messages[-1] == request.messages[-1]
    assert result.request.documents  # the context is still there, compressed extractively
    assert any("used extractive" in w for w in result.report.warnings)


# ---------------------------------------------------------------- retrieval: hybrid/dense -> bm25


@pytest.mark.parametrize("scorer", ["hybrid", "dense"])
def test_retrieval_without_the_extra_falls_back_to_bm25(no_torch: None, scorer: str) -> None:
    request = rag_request()
    expected = RetrievalStage(scorer="bm25").run(request)
    result = RetrievalStage(scorer=scorer).run(request)
    details = result.report.stages[0].details
    assert details["fallback"]["used"] == "bm25"
    assert details["scorer"] == "bm25"
    assert [d.id for d in result.request.documents] == [d.id for d in expected.request.documents]
    with pytest.raises(BackendUnavailable):
        RetrievalStage(scorer=scorer, strict=True).run(request)


def test_retrieval_slow_scorer_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    from promptslim.backends.scorers import HybridScorer

    def slow(self: Any, query: str, texts: Sequence[str], *, embeddings: Any = None) -> Any:
        time.sleep(SLOW_S)
        raise AssertionError("never used")

    monkeypatch.setattr(HybridScorer, "score", slow)
    start = time.perf_counter()
    result = RetrievalStage(time_limit_ms=LIMIT_MS).run(rag_request())
    assert time.perf_counter() - start < SLOW_S
    assert result.report.stages[0].details["fallback"]["error"] == "StageTimeout"
    with pytest.raises(StageTimeout):
        RetrievalStage(time_limit_ms=LIMIT_MS, strict=True).run(rag_request())


def test_tool_search_results_without_the_extra_fall_back_to_bm25(no_torch: None) -> None:
    """A search's passages in a tool message are ranked by BM25 when the model cannot load,
    and the tools stage's report says so."""
    hits = [
        {"title": f"Country {i}", "snippet": f"Passage {i} says the capital of country {i} is city {i * 7}. " * 6}
        for i in range(6)
    ]
    call = {"id": "c0", "type": "function", "function": {"name": "search", "arguments": "{}"}}
    request = Request.from_openai(
        {
            "messages": [
                {"role": "user", "content": "What is the capital of country 3?"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c0", "content": json.dumps(hits)},
            ]
        }
    )
    result = ToolsStage().run(request)
    report = result.report.stages[0]
    assert any("used bm25" in w for w in report.warnings), report.warnings
    assert report.changes[0].reason.startswith("tools/documents")
    assert "city 21" in result.request.messages[-1].text
