"""``RetrievalStage.index``: a store's ingest embeds each document's windows ahead of time, so a
request carrying those documents embeds its query alone (nothing, when it brings the store's
query vector too), and its result is the one it would have been without the index. Across
processes the vectors travel through a real redis-server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from promptslim.backends.embeddings import EmbeddingService, configure_embedding_cache
from promptslim.backends.shared_stats import STORE_STATS
from promptslim.errors import InvalidRequest
from promptslim.pipeline import Pipeline
from promptslim.stages.retrieval import RetrievalStage
from promptslim.stages.retrieval_options import DEFAULT_MAX_WINDOWS, WINDOWS_PER_MODEL_INPUT
from promptslim.types import Document, Request
from tests.redis_server import RedisServer, redis_server_available
from tests.test_retrieval_windows import QUESTION, knowledge_base, request_of

WINDOW_CHARS = 200  # the history cut into several windows, the other documents one each


def _computed() -> int:
    return int(STORE_STATS.counts.get("computed_embedding", 0))


def _run(stage: RetrievalStage, request: Request) -> tuple[list[tuple[str, str]], int]:
    """The documents kept (id, text) and the embeddings the model computed for them."""
    before = _computed()
    result = Pipeline([stage]).run(request)
    return [(d.id, d.text) for d in result.request.documents], _computed() - before


def _cold_baseline(request: Request) -> tuple[list[tuple[str, str]], int]:
    EmbeddingService.clear_all_caches()
    return _run(RetrievalStage(window_chars=WINDOW_CHARS), request)


def test_an_indexed_request_embeds_its_query_alone_and_keeps_its_result() -> None:
    request = request_of(knowledge_base())
    kept, computed = _cold_baseline(request)
    assert any(doc_id == "history" for doc_id, _ in kept)  # the answer's document

    EmbeddingService.clear_all_caches()
    stage = RetrievalStage(window_chars=WINDOW_CHARS)
    indexed = stage.index(request.documents)
    assert indexed == computed - 1  # every window the request embedded, less the query
    again, computed_now = _run(stage, request)
    assert computed_now == 1  # the query
    assert again == kept


def test_a_document_list_is_indexed_by_its_passages() -> None:
    # a request ranks the passages of a JSON document list, so the ingest indexes them
    hits = [{"title": d.id, "content": d.text} for d in knowledge_base()]
    request = request_of([Document(id="search", text=json.dumps({"results": hits}))])
    kept, computed = _cold_baseline(request)
    assert computed > 1
    EmbeddingService.clear_all_caches()
    stage = RetrievalStage(window_chars=WINDOW_CHARS)
    assert stage.index(request.documents) == computed - 1
    assert _run(stage, request) == (kept, 1)  # the query alone


def test_a_store_document_s_first_window_and_unembedded_windows_are_not_indexed() -> None:
    from promptslim.stages.windows import split_windows

    docs = knowledge_base()
    service = EmbeddingService.get()
    with_vectors = [
        d.model_copy(update={"embedding": service.embed_one(d.text).tolist()}) for d in docs
    ]
    stage = RetrievalStage(window_chars=WINDOW_CHARS)
    windows = split_windows(
        [d.text for d in docs], [None] * len(docs), window_chars=WINDOW_CHARS, overlap=1,
        max_windows=DEFAULT_MAX_WINDOWS * WINDOWS_PER_MODEL_INPUT,
    ).windows  # fmt: skip
    later = {w.text for w in windows if w.later}
    assert later  # the history has later windows
    assert stage.index(with_vectors) == len(later)
    lexical = RetrievalStage(window_chars=WINDOW_CHARS, store_windows="lexical")
    assert lexical.index(with_vectors) == 0  # the first windows take the store's, BM25 the rest
    assert lexical.index(docs) == len({w.text for w in windows})  # no store vectors: all
    static = RetrievalStage(window_chars=WINDOW_CHARS, store_windows="static")
    assert static.index(with_vectors) == 0  # the later windows are read by static vectors
    assert static.index(docs) == len({w.text for w in windows})


def test_a_request_with_store_vectors_embeds_nothing_once_indexed() -> None:
    # the store's query vector meets every window: the request has no text of its own to embed
    service = EmbeddingService.get()
    docs = knowledge_base()
    vectors = service.embed([d.text for d in docs] + [QUESTION])
    docs = [d.model_copy(update={"embedding": v.tolist()}) for d, v in zip(docs, vectors)]
    request = request_of(docs).replace(query_embedding=vectors[-1].tolist())
    kept, computed = _cold_baseline(request)
    assert computed > 1
    EmbeddingService.clear_all_caches()
    stage = RetrievalStage(window_chars=WINDOW_CHARS)
    stage.index(request.documents)
    again, computed_now = _run(stage, request)
    # (torch's int8 drifts from the float vectors: it embeds a query of its own to meet them)
    query = 0 if stage.get_scorer().service().near_float else 1  # type: ignore[attr-defined]
    assert (again, computed_now) == (kept, query)


def test_scorers_with_nothing_to_compute_ahead_index_nothing() -> None:
    docs = knowledge_base()
    assert RetrievalStage(scorer="bm25").index(docs) == 0
    # the English default model does not read Chinese: such a request is scored by BM25
    chinese = [Document(id="zh", text="马洛港大桥于1932年3月19日通车。" * 20)]
    assert RetrievalStage().index(chinese) == 0
    assert RetrievalStage().index([]) == 0


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ([{"id": "a", "text": "fine"}, {"id": "b"}], "documents[1].text"),
        ([42], "documents[0]"),
        ([{"id": "a", "text": "x", "embedding": ["not a number"]}], "documents[0].embedding[0]"),
    ],
)
def test_bad_documents_name_their_index_and_field(bad: list, field: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        RetrievalStage().index(bad)
    assert caught.value.field == field


# ---------------------------------------------------------------- across processes


@pytest.fixture
def redis_url() -> Iterator[str]:
    if not redis_server_available():
        pytest.skip("redis-server is not installed (scripts/setup.sh installs it)")
    pytest.importorskip("redis", reason="redis-py missing: pip install 'promptslim[redis]'")
    with RedisServer() as server:
        try:
            yield server.url
        finally:
            configure_embedding_cache(None)


def test_an_ingest_process_s_index_serves_another_process_s_requests(redis_url: str) -> None:
    request = request_of(knowledge_base())
    configure_embedding_cache(None)
    kept, _ = _cold_baseline(request)  # the vectors now sit in this process's own cache

    configure_embedding_cache(redis_url)
    # the ingest writes every vector to Redis, those its own cache held too
    RetrievalStage(window_chars=WINDOW_CHARS).index(request.documents)
    EmbeddingService.clear_all_caches()  # a serving process that never saw these documents
    again, computed = _run(RetrievalStage(window_chars=WINDOW_CHARS), request)
    assert (again, computed) == (kept, 1)  # the query alone


# ---------------------------------------------------------------- the command


def _write_documents(path: Path, docs: list[Document]) -> None:
    path.write_text("".join(d.model_dump_json() + "\n" for d in docs), encoding="utf-8")


def test_the_index_command_serves_the_default_pipeline_s_requests(
    redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from promptslim.cli import main

    docs = knowledge_base()
    _write_documents(tmp_path / "docs.jsonl", docs)
    assert (
        main(["index", str(tmp_path / "docs.jsonl"), "--embedding-cache", redis_url, "--json"]) == 0
    )
    counts = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert counts["documents"] == len(docs) and counts["texts"] >= len(docs)

    configure_embedding_cache(redis_url)  # a serving host on the same Redis
    EmbeddingService.clear_all_caches()
    before = _computed()
    Pipeline.default().run(request_of(docs))
    assert _computed() - before == 1  # the query alone


def test_the_index_command_names_a_bad_line_and_a_missing_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from promptslim.backends.embeddings import EMBEDDING_CACHE_ENV
    from promptslim.cli import main

    path = tmp_path / "docs.jsonl"
    path.write_text('{"id": "a", "text": "fine"}\n{"id": "b", "text": 7}\n', encoding="utf-8")
    assert main(["index", str(path), "--embedding-cache", "redis://127.0.0.1:1/0"]) == 2
    err = capsys.readouterr().err
    assert f"{path}:2" in err and "text" in err
    # a cache that is away: the command fails rather than report vectors it did not store
    path.write_text('{"id": "a", "text": "fine"}\n', encoding="utf-8")
    assert main(["index", str(path), "--embedding-cache", "redis://127.0.0.1:1/0"]) == 1
    assert "not all stored" in capsys.readouterr().err
    monkeypatch.delenv(EMBEDDING_CACHE_ENV, raising=False)
    assert main(["index", str(path)]) == 2
    assert "--embedding-cache" in capsys.readouterr().err


def test_the_index_command_says_when_the_pipeline_has_nothing_to_index(
    redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from promptslim.cli import main

    _write_documents(tmp_path / "docs.jsonl", knowledge_base())
    config = tmp_path / "bm25.json"
    config.write_text('{"stages": [{"name": "retrieval", "scorer": "bm25"}]}', encoding="utf-8")
    args = ["index", str(tmp_path / "docs.jsonl"), "--config", str(config), "--json"]
    assert main([*args, "--embedding-cache", redis_url]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out.strip())["texts"] == 0 and "nothing to index" in err


# ---------------------------------------------------------------- pipelines and adapters


def test_a_pipeline_indexes_through_its_stages_nested_ones_too() -> None:
    from promptslim import HistoryStage, PrefixStage

    docs = knowledge_base()
    alone = RetrievalStage(window_chars=WINDOW_CHARS).index(docs)
    nested = Pipeline([PrefixStage(), Pipeline([RetrievalStage(window_chars=WINDOW_CHARS)])])
    assert alone > 0
    assert nested.index(iter(docs)) == alone  # any iterable, read once
    assert Pipeline([HistoryStage()]).index(docs) == 0  # nothing to compute ahead


def _titled() -> list[Document]:
    """The knowledge base with a title on each document: the windows read it, so an adapter
    must index the documents exactly as it hands them to the stage."""
    return [
        d.model_copy(update={"metadata": {"title": f"Marlow {d.id}"}}) for d in knowledge_base()
    ]


def test_the_langchain_compressor_indexes_documents_as_it_reads_them() -> None:
    documents = pytest.importorskip("langchain_core.documents")
    from promptslim.integrations.langchain import PromptSlimCompressor

    docs = [
        documents.Document(page_content=d.text, metadata=d.metadata, id=d.id) for d in _titled()
    ]
    compressor = PromptSlimCompressor(stage=RetrievalStage(window_chars=WINDOW_CHARS))
    EmbeddingService.clear_all_caches()
    assert compressor.index(docs) > len(docs)  # the history's windows, the titles read
    before = _computed()
    kept = compressor.compress_documents(docs, QUESTION)
    assert _computed() - before == 1  # the query
    assert any("1932" in d.page_content for d in kept)


def test_the_llamaindex_postprocessor_indexes_nodes_as_it_reads_them() -> None:
    schema = pytest.importorskip("llama_index.core.schema")
    from promptslim.integrations.llamaindex import PromptSlimPostprocessor

    nodes = [schema.TextNode(id_=d.id, text=d.text, metadata=d.metadata) for d in _titled()]
    post = PromptSlimPostprocessor(stage=RetrievalStage(window_chars=WINDOW_CHARS))
    EmbeddingService.clear_all_caches()
    assert post.index(nodes) > len(nodes)
    before = _computed()
    kept = post.postprocess_nodes(
        [schema.NodeWithScore(node=n, score=0.5) for n in nodes],
        query_bundle=schema.QueryBundle(QUESTION),
    )
    assert _computed() - before == 1
    assert any("1932" in n.node.get_content() for n in kept)
