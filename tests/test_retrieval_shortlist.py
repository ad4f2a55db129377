"""The dense work of a request bounded by construction (``dense_windows``, or ``max_windows``
when a request holds more windows than that): every window is scored by BM25, each document's
first window is embedded, and of the later windows only BM25's best are (with more documents
than ``max_windows``, BM25's best windows of any document); the rest score by their terms
alone, at the low end of the dense scale."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptslim.errors import ConfigError
from promptslim.pipeline import Pipeline
from promptslim.stages.retrieval import RetrievalStage
from promptslim.stages.windows import Window, later_windows, split_windows
from tests.test_retrieval_windows import (
    ANSWER,
    DISTRACTORS,
    HISTORY,
    OVERVIEW,
    QUESTION,
    knowledge_base,
    request_of,
)

SAMPLE = Path(__file__).parent / "data" / "nq20-dev.jsonl.gz"
WINDOW_CHARS = 200  # the history cut into many windows, the other documents one each


def _run(stage: RetrievalStage, request_vectors: bool = False) -> tuple[dict[str, str], dict]:  # type: ignore[type-arg]
    request = _with_vectors() if request_vectors else request_of(knowledge_base())
    # the model that embeds beside a store's vectors: the float one only with store_float
    float32 = request_vectors and stage.store_float
    service = stage.get_scorer().service(float32=float32)  # type: ignore[attr-defined]
    service.clear_cache()  # a cold request: what is embedded is what the model computes
    result = Pipeline([stage]).run(request)
    details = dict(result.report.stages[0].details)
    details["computed"] = service.cache_info()["size"]
    return {d.id: d.text for d in result.request.documents}, details


def _with_vectors():  # type: ignore[no-untyped-def]
    from promptslim.backends.embeddings import EmbeddingService

    service = EmbeddingService.get()
    docs = knowledge_base()
    vectors = service.embed([d.text for d in docs] + [QUESTION])
    docs = [d.model_copy(update={"embedding": v.tolist()}) for d, v in zip(docs, vectors)]
    return request_of(docs).replace(query_embedding=vectors[-1].tolist())


def _windows() -> list[Window]:
    texts = [d.text for d in knowledge_base()]
    return split_windows(
        texts, [None] * len(texts), window_chars=WINDOW_CHARS, overlap=1, max_windows=32
    ).windows


def test_later_windows_are_those_past_each_documents_first() -> None:
    texts = [d.text for d in knowledge_base()]
    windowed = split_windows(
        texts, [None] * len(texts), window_chars=WINDOW_CHARS, overlap=1, max_windows=32
    )
    owners = later_windows(windowed)
    assert owners is not None
    assert owners == [w.doc if w.first > 0 else None for w in windowed.windows]
    assert owners.count(None) == len(texts)  # one first window per document
    one_each = split_windows(["short."], [None], window_chars=200, overlap=1, max_windows=32)
    assert later_windows(one_each) is None


@pytest.mark.slow
@pytest.mark.parametrize("budget", [0, 2])
def test_dense_work_is_bounded_by_documents_plus_the_shortlist(budget: int) -> None:
    stage = RetrievalStage(window_chars=WINDOW_CHARS, dense_windows=budget, dense_windows_each=0)
    _, details = _run(stage)
    later = details["windows"] - len(knowledge_base())
    assert later > budget  # the history has more later windows than the shortlist holds
    # the query, each document's first window (the overview and its copy share theirs: one
    # text, embedded once), and BM25's best `budget` later windows
    firsts = len({w.text for w in _windows() if w.first == 0})
    assert details["texts_embedded"] == 1 + firsts + budget
    assert details["computed"] == 1 + firsts + budget
    assert details["shortlist_left_out"] == later - budget


@pytest.mark.slow
def test_each_long_document_has_its_best_later_part_embedded() -> None:
    # near-duplicates (the overview and its copy) hold BM25's top later windows: a global
    # shortlist alone would leave the history's answer unread by the model
    kept, details = _run(RetrievalStage(window_chars=WINDOW_CHARS, dense_windows=0))
    windows = _windows()
    firsts = len({w.text for w in windows if w.first == 0})
    long_docs = len({w.doc for w in windows if w.first > 0})
    assert details["texts_embedded"] == 1 + firsts + long_docs
    assert ANSWER in kept.get("history", "")


@pytest.mark.slow
def test_without_a_shortlist_every_window_is_embedded() -> None:
    kept, details = _run(RetrievalStage(window_chars=WINDOW_CHARS, dense_windows=None))
    assert details["texts_embedded"] == 1 + len({w.text for w in _windows()})
    assert details["computed"] == details["texts_embedded"]
    assert "shortlist_left_out" not in details
    assert ANSWER in kept.get("history", "")


@pytest.mark.slow
@pytest.mark.parametrize("max_windows", [2, 3])
def test_more_documents_than_the_model_reads_get_bm25s_best_windows_read(max_windows: int) -> None:
    stage = RetrievalStage(window_chars=WINDOW_CHARS, max_windows=max_windows)
    kept, details = _run(stage)
    assert len(knowledge_base()) > max_windows  # not every document can have a window read
    # BM25's best max_windows windows and the query, whatever the number of documents
    assert details["texts_embedded"] == max_windows + 1 == details["computed"]
    # every other window is left out, but for a copy of a text the model read (its twin)
    twins = len(_windows()) - len({w.text for w in _windows()})
    left_out = details["windows"] - max_windows
    assert left_out - twins <= details["shortlist_left_out"] <= left_out
    assert ANSWER in kept.get("history", "")


@pytest.mark.slow
@pytest.mark.parametrize("store_float", [True, False])
def test_with_store_vectors_only_the_shortlist_is_embedded(store_float: bool) -> None:
    stage = RetrievalStage(window_chars=WINDOW_CHARS, dense_windows=0, store_float=store_float)
    kept, details = _run(stage, request_vectors=True)
    # the store gave every first window's vector and the query's: each long document's best
    # later window is embedded (by int8 or, under store_float, the float model), and no
    # query: the store's meets them all (torch's int8 drifts further: it embeds its own)
    long_docs = len({w.doc for w in _windows() if w.first > 0})
    service = stage.get_scorer().service(float32=store_float)  # type: ignore[attr-defined]
    query = 0 if service.near_float else 1
    if store_float:  # the float model, as a store's vectors are
        assert details["int8"] is False
    assert details["embeddings_reused"] == len(knowledge_base())
    assert details["texts_embedded"] == long_docs + query == details["computed"]
    assert ANSWER in kept.get("history", "")


@pytest.mark.slow
def test_store_windows_lexical_keeps_store_documents_out_of_the_shortlist() -> None:
    stage = RetrievalStage(window_chars=WINDOW_CHARS, dense_windows=2, store_windows="lexical")
    _, details = _run(stage, request_vectors=True)
    assert details["texts_embedded"] == 0 and details["computed"] == 0
    assert details["lexical_only"] == details["windows"] - len(knowledge_base())


@pytest.mark.slow
def test_left_out_texts_score_at_the_low_end_of_the_dense_scale() -> None:
    from promptslim.backends.lexical import BM25Scorer
    from promptslim.backends.scorers import HybridScorer, minmax

    texts = [OVERVIEW, HISTORY[:300], HISTORY[-300:], *DISTRACTORS]
    lexical = minmax(BM25Scorer().score(QUESTION, texts).scores)
    listed = [None, 0, 0, None, None, None]  # two parts of one document, one embedded
    scorer = HybridScorer()
    scored = scorer.score(QUESTION, texts, shortlist=listed, shortlist_size=1)
    best, other = (1, 2) if lexical[1] >= lexical[2] else (2, 1)
    assert scored.vectors is not None
    assert scored.vectors[best].any() and not scored.vectors[other].any()
    # not embedded: the lowest dense score of those embedded, so its fused score is its
    # BM25 share alone (no paraphrase credit it was never checked for)
    assert scored.scores[other] == pytest.approx((1 - scorer.dense_weight) * lexical[other])
    assert scored.details["shortlist_left_out"] == 1
    assert scored.details["texts_embedded"] == 1 + 5  # the query and the embedded texts


def test_bm25_ignores_the_shortlist() -> None:
    stage = RetrievalStage(scorer="bm25", window_chars=WINDOW_CHARS, dense_windows=1)
    result = Pipeline([stage]).run(request_of(knowledge_base()))
    assert ANSWER in {d.id: d.text for d in result.request.documents}.get("history", "")


@pytest.mark.parametrize(
    ("option", "value"),
    [("dense_windows", -1), ("dense_windows_each", -1), ("store_float", "no")],
)
def test_bad_shortlist_options_name_the_field(option: str, value: object) -> None:
    with pytest.raises(ConfigError) as info:
        RetrievalStage(**{option: value})  # type: ignore[arg-type]
    assert info.value.field == option


@pytest.mark.slow
def test_store_float_false_embeds_later_windows_with_the_int8_model_and_its_own_query() -> None:
    stage = RetrievalStage(window_chars=WINDOW_CHARS, store_float=False)
    scorer = stage.get_scorer()
    own, float32 = scorer.service(), scorer.service(float32=True)  # type: ignore[attr-defined]
    if not own.int8:
        pytest.skip("the scorer's own model is float here (a GPU): nothing to compare")
    own.clear_cache()
    float32.clear_cache()
    result = Pipeline([stage]).run(_with_vectors())
    details = result.report.stages[0].details
    later = len({w.text for w in _windows() if w.first > 0})
    # the later windows on the int8 model, met by the store's query (by int8's own where
    # int8 drifts from float: torch's); the float model reads nothing
    query = 0 if own.near_float else 1
    assert details["int8"] is True and details["texts_embedded"] == later + query
    assert own.cache_info()["size"] == later + query and float32.cache_info()["size"] == 0
    assert ANSWER in {d.id: d.text for d in result.request.documents}.get("history", "")


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["onnx", "torch"])
def test_int8_windows_meet_the_store_s_query_vector_where_int8_stays_near_float(
    backend: str,
) -> None:
    from promptslim.backends.scorers import DenseScorer

    if backend == "onnx":
        pytest.importorskip("onnxruntime", reason="the onnx extra is not installed")
    texts = [OVERVIEW, HISTORY[-300:], *DISTRACTORS]
    scorer = DenseScorer(store_float=False, backend=backend)  # type: ignore[arg-type]
    own = scorer.service()
    if not own.int8:
        pytest.skip("the scorer's own model is float here (a GPU): nothing to compare")
    store = scorer.service(float32=True)
    first, query = store.embed([OVERVIEW, QUESTION])
    given = [first.tolist()] + [None] * (len(texts) - 1)
    scored = scorer.score(QUESTION, texts, embeddings=given, query_embedding=query.tolist())
    fresh = own.embed(texts[1:])
    int8_query = own.embed_one(QUESTION)
    # the store's vector against the store's query, always
    assert scored.scores[0] == pytest.approx(float(first @ query), abs=1e-5)
    assert own.near_float is (backend == "onnx")
    if own.near_float:  # ONNX's int8 points where float does: the store's query meets it
        assert scored.scores[1:] == pytest.approx((fresh @ query).tolist(), abs=1e-5)
        assert scored.scores[1:] != pytest.approx((fresh @ int8_query).tolist(), abs=1e-5)
        assert scored.details["texts_embedded"] == len(texts) - 1  # no query of its own
    else:  # torch's int8 drifts further: each fresh vector meets int8's own query
        assert scored.scores[1:] == pytest.approx((fresh @ int8_query).tolist(), abs=1e-5)
        assert scored.details["texts_embedded"] == len(texts)


# ---------------------------------------------------------------- past max_windows


@pytest.mark.slow
def test_past_max_windows_windows_keep_their_size_and_the_model_reads_max_windows() -> None:
    windows = _windows()
    cap = len({w.text for w in windows}) - 3  # fewer texts than the request's windows hold
    kept, details = _run(RetrievalStage(window_chars=WINDOW_CHARS, max_windows=cap))
    assert details["windows"] == len(windows)  # cut at window_chars, not grown to fit cap
    # the query and `cap` windows: each document's best by BM25, then BM25's best others
    assert details["texts_embedded"] == 1 + cap == details["computed"]
    assert details["shortlist_left_out"] >= 3
    assert ANSWER in kept.get("history", "")


@pytest.mark.slow
def test_a_scorer_that_embeds_every_window_gets_max_windows_windows() -> None:
    cap = len(_windows()) - 3
    stage = RetrievalStage(scorer="dense", window_chars=WINDOW_CHARS, max_windows=cap)
    _, details = _run(stage)
    assert details["windows"] <= cap  # the windows grew: the model reads each of them
    assert details["texts_embedded"] <= 1 + cap


def test_bm25_reads_windows_past_max_windows() -> None:
    stage = RetrievalStage(scorer="bm25", window_chars=WINDOW_CHARS, max_windows=4)
    result = Pipeline([stage]).run(request_of(knowledge_base()))
    assert result.report.stages[0].details["windows"] == len(_windows())
    assert ANSWER in {d.id: d.text for d in result.request.documents}.get("history", "")


@pytest.mark.slow
def test_a_request_four_times_the_usual_size_keeps_the_answer_in_windows_read_whole() -> None:
    # about 8,400 tokens in ten chunks of 8 passages (the shape suite's pooled8): more windows
    # than the model reads. Grown to fit max_windows, each window was read by its head only
    # and kept whole: 15 of 16 answers at 0.20 of the tokens; kept at window_chars and
    # shortlisted by BM25, 16 of 16 at 0.10
    import shapes_data

    from promptslim.bench.datasets import load_dataset
    from promptslim.bench.metrics import evidence_retention
    from promptslim.tokens import count_documents, get_counter

    items = load_dataset(f"nq:{SAMPLE}", limit=16).items
    counter = get_counter(None)
    run = Pipeline([RetrievalStage()]).run
    found, ratios = 0, []
    for n in range(len(items)):
        shaped = shapes_data.pooled(items, n)
        out = run(shaped.request).request.documents
        found += evidence_retention("\n".join(d.text for d in out), shaped.answers) > 0
        given = count_documents(shaped.request.documents, counter)
        ratios.append(count_documents(out, counter) / given)
    assert found >= 15
    assert sum(ratios) / len(ratios) <= 0.15
