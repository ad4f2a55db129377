"""Static vectors distilled from the embedding model (``promptslim.backends.static_vectors``),
and ``store_windows="static"``: a vector store's document read past its head without running
the model."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promptslim.backends.embeddings import EmbeddingService
from promptslim.backends.models import load_static_vectors
from promptslim.backends.scorers import HybridScorer
from promptslim.backends.static_vectors import (
    StaticVectors,
    calibrated,
    centred,
    static_table_path,
)
from promptslim.pipeline import Pipeline
from promptslim.stages.retrieval import RetrievalStage
from tests.test_retrieval_windows import ANSWER, QUESTION, _with_store_vectors

pytestmark = pytest.mark.slow


def test_the_table_is_the_model_s_vector_of_each_word_piece() -> None:
    table = load_static_vectors()
    stored = np.load(static_table_path(table.path))
    model = EmbeddingService.get(backend="torch", quantize=False, max_seq_length=None)
    words = ["bridge", "harbour", "1932"]
    ids = [table.tokenizer.token_to_id(w) for w in words]
    expected = model.embed(words)  # each one word piece between [CLS] and [SEP]
    np.testing.assert_allclose(stored[ids], expected, atol=2e-3)  # stored as float16
    # in use, less the direction every row shares
    np.testing.assert_allclose(table.table, centred(stored), atol=1e-6)
    assert np.abs(table.table.mean(axis=0)).max() < 1e-4


def test_the_table_is_read_back_from_the_cache_not_distilled_again() -> None:
    table = load_static_vectors()
    path = table.path
    assert static_table_path(path).exists()

    def distil_again() -> None:
        raise AssertionError("the cached table should have been read")

    again = StaticVectors.load(path, distil_again)
    np.testing.assert_array_equal(again.table, table.table)


def test_word_pieces_are_the_model_tokenizer_s_with_nothing_cut() -> None:
    from transformers import AutoTokenizer

    table = load_static_vectors()
    texts = ["Zürich's Ångström café", "東京タワー 1958", "harbour " * 700, ""]
    expected = AutoTokenizer.from_pretrained(table.path)(
        texts, add_special_tokens=False, truncation=False, verbose=False
    )["input_ids"]
    got = [e.ids for e in table.tokenizer.encode_batch_fast(texts, add_special_tokens=False)]
    assert got == expected and len(got[2]) == 700  # past the model's 512: no truncation


def test_texts_get_unit_rows_and_an_empty_text_a_zero_row() -> None:
    rows = load_static_vectors().embed(["The bridge opened in 1932.", "", "Harbour bridge"])
    assert rows.shape == (3, 384) and rows.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(rows[[0, 2]], axis=1), 1.0, atol=1e-5)
    assert not rows[1].any()


def test_calibrated_similarities_take_the_known_texts_scale() -> None:
    similar = np.array([0.6, 0.7, 0.8, 0.75, 0.65])
    scores = np.array([0.1, 0.3, 0.5, 0.0, 0.0])
    out = calibrated(similar, scores, [0, 1, 2])
    np.testing.assert_allclose(out[:3], scores[:3])  # the known texts land on their scores
    assert out[3] == pytest.approx(0.4) and out[4] == pytest.approx(0.2)
    # one known text: no spread to measure, so the similarities are shifted to meet it
    np.testing.assert_allclose(calibrated(similar, scores, [1]), similar - 0.4)
    np.testing.assert_allclose(calibrated(similar, scores, []), similar)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(-1, 1), min_size=3, max_size=12),
    st.lists(st.floats(-1, 1), min_size=3, max_size=12),
)
def test_calibration_keeps_the_static_order_and_the_known_mean(
    similar: list[float], scores: list[float]
) -> None:
    n = min(len(similar), len(scores))
    s, d = np.array(similar[:n]), np.array(scores[:n])
    known = list(range(n // 2 + 1))
    out = calibrated(s, d, known)
    assert np.all(np.isfinite(out))
    order = np.argsort(s, kind="stable")
    assert np.all(np.diff(out[order]) >= -1e-9)  # a monotone map: the static order is kept
    assert out[known].mean() == pytest.approx(d[known].mean(), abs=1e-9)


def test_static_windows_are_scored_by_their_word_pieces_not_by_bm25_alone() -> None:
    # two later windows that share no word with the question: BM25 gives both nothing, so
    # lexical_only scores them alike; their static vectors tell the bridge's from the other
    texts = [
        "The Marlow Harbour Bridge is a steel arch bridge across the harbour of Marlow.",
        "The Tamar Bridge is a suspension bridge over the River Tamar.",
        "Marlow Harbour hosts a sailing regatta every summer.",
        "Cars first crossed this new span in spring 1932, after eight years of building.",
        "Wool merchants kept warehouses along this quay in medieval times.",
    ]
    service = EmbeddingService.get(quantize=False, max_seq_length=None)
    vectors = service.embed(texts[:3] + [QUESTION])
    given_vectors = [v.tolist() for v in vectors[:3]] + [None, None]
    flags = [False, False, False, True, True]
    scorer = HybridScorer()
    kw = {"embeddings": given_vectors, "query_embedding": vectors[-1].tolist()}
    lexical = scorer.score(QUESTION, texts, lexical_only=flags, **kw)
    static = scorer.score(QUESTION, texts, static_only=flags, **kw)
    assert lexical.scores[3] == pytest.approx(lexical.scores[4])
    assert static.scores[3] > static.scores[4]
    assert static.details["static_only"] == 2 and "lexical_only" not in static.details
    assert static.details["texts_embedded"] == 0  # nothing ran through the model


def test_a_store_document_s_later_windows_are_read_without_the_model() -> None:
    request = _with_store_vectors()
    stage = RetrievalStage(store_windows="static")
    service = stage.get_scorer().service()  # type: ignore[attr-defined]
    service.clear_cache()
    result = Pipeline([stage]).run(request)
    kept = {d.id: d.text for d in result.request.documents}
    assert ANSWER in kept.get("history", "")  # in the history's last window
    details = result.report.stages[0].details
    later = details["windows"] - len(request.documents)
    assert later > 0 and details["static_only"] == later
    assert service.cache_info()["size"] == 0  # nothing embedded: not a window, not the query


def test_warm_up_loads_the_static_vectors() -> None:
    from promptslim.backends import models

    load_static_vectors()  # built once for the whole session (the table is cached on disk)
    key = next(k for k in models._loaded if k[0] == "static")
    table = models._loaded.pop(key)
    try:
        Pipeline([RetrievalStage(store_windows="static")]).warm_up()
        assert key in models._loaded
    finally:
        models._loaded[key] = table


def test_without_the_store_s_query_vector_the_query_alone_is_embedded() -> None:
    request = _with_store_vectors().replace(query_embedding=None)
    stage = RetrievalStage(store_windows="static")
    scorer = stage.get_scorer()
    float_model = scorer.service(float32=True)  # type: ignore[attr-defined]
    float_model.clear_cache()
    result = Pipeline([stage]).run(request)
    kept = {d.id: d.text for d in result.request.documents}
    assert ANSWER in kept.get("history", "")
    assert result.report.stages[0].details["static_only"] > 0
    assert float_model.cache_info()["size"] == 1  # the query, met by the store's vectors
