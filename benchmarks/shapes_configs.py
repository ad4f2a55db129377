"""``bench_shapes.py``'s configs: what each runs on a request, and what the caller's side does
before it, outside the timing (a vector store's embeddings; the ingest that indexed the
documents' windows into a Redis tier). What each config means is in ``bench_shapes``'
docstring."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from promptslim.bench.runner import build_config
from promptslim.pipeline import Pipeline
from promptslim.stages.retrieval import RetrievalStage

__all__ = ["LEXICAL", "STATIC", "Indexed", "Prepared", "configs", "dense_topk", "redis_tier"]

#: the full pipeline with a store's documents' later windows scored by BM25 alone
LEXICAL = "prefix+history+retrieval:store_windows=lexical+compress"
#: the same, those windows scored by static vectors distilled from the model beside BM25
STATIC = "prefix+history+retrieval:store_windows=static+compress"


def dense_topk() -> Callable[[Any], Any]:
    """Plain dense top-k (a vector store's answer): whole documents at the model's full length,
    k = a fifth of the candidates, no cut-off, no windows, no selection inside, no piece kept
    for following a kept one, a JSON list of passages one document as any other, an ask of
    several questions embedded as one text."""
    stages: dict[int, Pipeline] = {}

    def run(request: Any) -> Any:
        k = max(1, round(len(request.documents) / 5))
        if k not in stages:
            stage = RetrievalStage(
                scorer="dense", max_seq_length=None, quantize=False, max_k=k, min_k=k,
                cutoff="none", dedup="none", order="score", window_chars=None,
                select_within=False, next_pieces=0, document_lists=False, each_question=False,
            )  # fmt: skip
            stages[k] = Pipeline([stage])
        return stages[k].run(request)

    return run


@dataclass(frozen=True)
class Prepared:
    """A config whose requests first get, outside the timed call, what the caller's side adds
    (``prepare``, given the item): the vector store's embeddings for ``vectors``."""

    run: Callable[[Any], Any]
    prepare: Callable[[Any], Any]

    def __call__(self, request: Any) -> Any:
        return self.run(request)

    def ingested(self, request: Any) -> AbstractContextManager[None]:
        """What holds while the request runs (nothing here: see ``Indexed``)."""
        return nullcontext()


@dataclass(frozen=True)
class Indexed(Prepared):
    """``Prepared``, and the documents' windows indexed beforehand by ``RetrievalStage.index``
    (a vector store's ingest) into the Redis tier at ``url``; the tier is on only while this
    config's request runs, so no other config finds those vectors."""

    stage: RetrievalStage | None = None
    url: str = ""

    @contextmanager
    def ingested(self, request: Any) -> Iterator[None]:
        import redis

        from promptslim.backends.embeddings import configure_embedding_cache

        assert self.stage is not None
        redis.Redis.from_url(self.url).flushdb()  # this item's documents alone, as if new
        configure_embedding_cache(self.url)
        try:
            self.stage.index(request.documents)
            yield
        finally:
            configure_embedding_cache(None)


def store_vectors() -> Callable[[Any], Any]:
    """Each document's embedding as a vector store indexes it (MiniLM, float, at the model's
    full length: 256 word pieces of the whole chunk) and the query's, which searched it (the
    item's question where the conversation wraps it: a retriever searches with the question)."""
    from common import with_vectors

    from promptslim.backends.embeddings import EmbeddingService

    store = EmbeddingService(backend="auto", max_seq_length=None, cache_size=0)
    return lambda item: with_vectors(item.request, store, item.metadata.get("question"))


def configs(extra: list[str], redis_url: str | None = None) -> dict[str, Callable[[Any], Any]]:
    """Every config by label (``indexed`` only with a Redis server's ``redis_url``), then the
    ``--config LABEL=SPEC`` ones."""
    full = build_config("full").pipeline
    default = full.run
    store = store_vectors()  # one vector store: each item's vectors are computed once
    out: dict[str, Callable[[Any], Any]] = {
        "default": default,
        "vectors": Prepared(default, store),
        "vectors_lexical": Prepared(build_config(LEXICAL).pipeline.run, store),
        "vectors_static": Prepared(build_config(STATIC).pipeline.run, store),
        "bm25": build_config("retrieval:scorer=bm25").pipeline.run,
        "dense_topk": dense_topk(),
    }
    if redis_url is not None:
        stage = next(s for s in full.stages if isinstance(s, RetrievalStage))
        out["indexed"] = Indexed(default, store, stage=stage, url=redis_url)
    for spec in extra:
        label, _, body = spec.partition("=")
        out[label] = build_config(body).pipeline.run
    return out


@contextmanager
def redis_tier(wanted: bool) -> Iterator[tuple[str | None, str | None]]:
    """``(url, None)`` of a ``redis-server`` on 127.0.0.1 for the ``indexed`` config, stopped
    by its PID afterwards; or ``(None, why not)``."""
    from tests.redis_server import RedisServer, redis_server_available

    if not wanted:
        yield None, "not asked for (--only without indexed)"
    elif not redis_server_available():
        yield None, "no redis-server on this machine (scripts/setup.sh installs it)"
    else:
        with RedisServer() as server:
            yield server.url, None
