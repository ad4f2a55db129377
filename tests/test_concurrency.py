"""Concurrency (invariants 6 and 10 of docs/architecture.md): 500 concurrent calls on one shared
Pipeline, through threads and through ``arun``, give byte-identical results to serial calls,
without deadlock (bounded waits); models load once; every cache is bounded."""

from __future__ import annotations

import asyncio
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

from promptslim.backends import models
from promptslim.backends.embeddings import _VectorLRU
from promptslim.backends.summarisers import LRUSummaryCache
from promptslim.pipeline import Pipeline
from promptslim.stages.compress import CompressStage
from promptslim.stages.history import DEFAULT_SUMMARY_CACHE, HistoryStage
from promptslim.stages.prefix import PrefixStage
from promptslim.stages.retrieval import RetrievalStage
from promptslim.tokens import get_counter
from promptslim.types import Budget, Request, Result

N = 500
TIMEOUT_S = 240  # a deadlock fails the test instead of hanging CI


def _body(i: int) -> dict[str, Any]:
    """Varied requests: 25 conversations, each at several lengths, with documents."""
    conv, turns = i % 25, 2 + i % 7
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": f"You are assistant {conv % 3}. Today is 2024-05-{1 + conv % 28:02d}."}
    ]
    for t in range(turns):
        messages.append({"role": "user", "content": f"Conversation {conv}, question {t}: what about part {t * 11}?"})
        messages.append({"role": "assistant", "content": f"Part {t * 11} weighs {t * 3 + conv} kg. " * 4})
    messages.append({"role": "user", "content": f"Which part is heaviest in conversation {conv}?"})
    documents = [
        {"id": f"c{conv}d{k}", "text": f"Document {k}: part {k * 11} of conversation {conv} weighs {k + conv} kg. " * 6}
        for k in range(6)
    ]
    return {"model": "m", "messages": messages, "documents": documents}


def _pipeline() -> Pipeline:
    return Pipeline(
        [PrefixStage(), HistoryStage(summary_cache=LRUSummaryCache()), RetrievalStage(scorer="bm25"), CompressStage()],
        budget=Budget(total=600),
    )


def _wire(result: Result) -> str:
    return json.dumps(result.to_openai(), sort_keys=True, ensure_ascii=False)


@pytest.fixture(scope="module")
def serial() -> list[str]:
    pipeline = _pipeline()
    return [_wire(pipeline.run(Request.from_openai(_body(i)))) for i in range(N)]


def test_threads_match_serial(serial: list[str]) -> None:
    pipeline = _pipeline()  # one shared pipeline, cold caches: the race is on first use
    requests = [Request.from_openai(_body(i)) for i in range(N)]
    with ThreadPoolExecutor(max_workers=64) as pool:
        futures = [pool.submit(pipeline.run, r) for r in requests]
        out = [_wire(f.result(timeout=TIMEOUT_S)) for f in futures]
    assert out == serial


def test_arun_matches_serial(serial: list[str]) -> None:
    pipeline = _pipeline()

    async def main() -> list[Result]:
        requests = [Request.from_openai(_body(i)) for i in range(N)]
        return await asyncio.wait_for(asyncio.gather(*(pipeline.arun(r) for r in requests)), TIMEOUT_S)

    assert [_wire(r) for r in asyncio.run(main())] == serial


def test_model_loads_once_under_contention(monkeypatch: pytest.MonkeyPatch) -> None:
    """``models._once``: 500 threads asking at once for one key load it exactly once."""
    calls: list[int] = []
    gate = threading.Event()

    def load() -> object:
        gate.wait(5)  # hold every caller at the lock
        calls.append(1)
        return object()

    monkeypatch.setattr(models, "_loaded", {})
    monkeypatch.setattr(models, "_locks", {})
    with ThreadPoolExecutor(max_workers=64) as pool:
        futures = [pool.submit(models._once, ("test-model",), load) for _ in range(N)]
        gate.set()
        found = {id(f.result(timeout=TIMEOUT_S)) for f in futures}
    assert len(calls) == 1 and len(found) == 1


def test_caches_are_bounded() -> None:
    counter = get_counter()
    info = counter.cache_info()  # type: ignore[attr-defined]
    assert info.maxsize is not None and 0 < info.maxsize <= 1_000_000
    for i in range(info.maxsize + 100):
        counter.count(f"distinct text {i}")
    assert counter.cache_info().currsize <= info.maxsize  # type: ignore[attr-defined]

    summaries = LRUSummaryCache(maxsize=8)
    for i in range(100):
        summaries.set(str(i), "s")
    assert len(summaries) == 8
    assert len(DEFAULT_SUMMARY_CACHE) <= DEFAULT_SUMMARY_CACHE.maxsize  # type: ignore[attr-defined]

    prefix = PrefixStage(cache_size=16)
    for i in range(200):
        prefix.run(Request.from_openai({"messages": [{"role": "system", "content": f"Prompt {i} on 2024-01-02."}, {"role": "user", "content": "q"}]}))
    for memo in (prefix._memo, prefix._message_memo, prefix._fingerprint_memo, prefix._tools_memo):
        assert len(memo) <= 16

    lru = _VectorLRU(32)  # the embedding service's cache, alone: no model needed
    lru.put_many([(str(i).encode(), np.zeros(3)) for i in range(500)])
    assert len(lru) == 32
