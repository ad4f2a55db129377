from __future__ import annotations

import gzip
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from promptslim.backends.scorers import SCORERS, Scored, Scorer
from promptslim.errors import BudgetInfeasible, ConfigError, UnknownName
from promptslim.pipeline import Pipeline
from promptslim.stages.retrieval import RetrievalStage, relevance_cutoff
from promptslim.tokens import count_document, count_request
from promptslim.types import Budget, Document, Message, Request

N_ROWS = 200


# ---------------------------------------------------------------- helpers


class FixedScorer(Scorer):
    """Scores each text by the number written in it (``score=0.7``): a seam for policy tests."""

    name: ClassVar[str] = "fixed"

    def score(self, query: str, texts: Sequence[str], *, embeddings: Sequence[Any] | None = None) -> Scored:
        return Scored(scores=np.array([float(t.split("score=")[1].split()[0]) for t in texts]))


def request_with(docs: list[Document], question: str = "who won the prize?") -> Request:
    return Request(
        messages=[Message(role="system", content="Answer from the documents."),
                  Message(role="user", content=question)],
        documents=docs,
    )


def scored_docs(*scores: float, words: int = 30) -> list[Document]:
    return [
        Document(id=f"d{i}", text=f"score={s} " + " ".join(f"w{i}x{j}" for j in range(words)),
                 metadata={"n": i})
        for i, s in enumerate(scores)
    ]


def load_rows(data: Path) -> list[dict[str, Any]]:
    with gzip.open(data / "nq20-dev.jsonl.gz", "rt", encoding="utf-8") as f:
        return [json.loads(line) for _, line in zip(range(N_ROWS), f)]


def to_request(row: dict[str, Any]) -> Request:
    docs = [
        Document(id=f"p{i}", text=c["text"], metadata={"title": c["title"], "gold": c["isgold"]})
        for i, c in enumerate(row["ctxs"])
    ]
    return request_with(docs, row["question"])


@pytest.fixture(scope="session")
def nq_requests(eval_data: Path) -> list[Request]:
    return [to_request(r) for r in load_rows(eval_data)]


@pytest.fixture(scope="session")
def warm_embeddings(nq_requests: list[Request]) -> None:
    """Embed the 200 x 20 passages and the questions once per session through the shared
    service the stage uses, so every later dense/hybrid run is a cache hit."""
    service = RetrievalStage().get_scorer().service()  # type: ignore[attr-defined]
    texts = [f"{d.title}\n{d.text}" for r in nq_requests for d in r.documents]
    service.embed(texts + [r.effective_query for r in nq_requests])


def gold_rank(scores: np.ndarray, request: Request) -> int:
    order = list(np.argsort(-scores, kind="stable"))
    gold = next(i for i, d in enumerate(request.documents) if d.metadata["gold"])
    return order.index(gold)


# ---------------------------------------------------------------- recall on real data


@pytest.mark.slow
def test_hybrid_recall_at_5_is_at_least_the_better_single_scorer(
    nq_requests: list[Request], warm_embeddings: None
) -> None:
    ranks: dict[str, list[int]] = {}
    for name in ("bm25", "dense", "hybrid"):
        scorer = RetrievalStage(scorer=name).get_scorer()
        ranks[name] = [
            gold_rank(scorer.score(r.effective_query, [f"{d.title}\n{d.text}" for d in r.documents]).scores, r)
            for r in nq_requests
        ]
    recall = {
        name: {k: float(np.mean([x < k for x in rs])) for k in (1, 3, 5)} for name, rs in ranks.items()
    }
    print(f"\nrecall@k on the first {len(nq_requests)} nq20-dev rows: {json.dumps(recall)}")
    best_single = max(recall["bm25"][5], recall["dense"][5])
    assert recall["hybrid"][5] >= best_single - 0.02
    assert recall["dense"][5] > recall["bm25"][1]  # the scorers are doing real work


@pytest.mark.slow
def test_default_policy_keeps_gold_with_few_tokens(
    nq_requests: list[Request], warm_embeddings: None
) -> None:
    stage = RetrievalStage()
    kept_gold, fractions = [], []
    for request in nq_requests:
        result = stage.run(request)
        kept_gold.append(any(d.metadata["gold"] for d in result.documents))
        given = sum(count_document(d) for d in request.documents)
        fractions.append(sum(count_document(d) for d in result.documents) / given)
    recall, fraction = float(np.mean(kept_gold)), float(np.mean(fractions))
    print(f"\ndefault policy: gold kept in {recall:.3f} of items, {fraction:.3f} of document tokens")
    assert recall >= 0.95
    assert fraction <= 0.25


# ---------------------------------------------------------------- behaviour


def test_bm25_stage_does_not_import_torch() -> None:
    code = (
        "import sys\n"
        "from promptslim.types import Request, Message, Document\n"
        "from promptslim.stages.retrieval import RetrievalStage\n"
        "r = Request(messages=[Message(role='user', content='nobel physics')],\n"
        "            documents=[Document(id='a', text='nobel prize physics'), Document(id='b', text='cats')])\n"
        "out = RetrievalStage(scorer='bm25').run(r)\n"
        "assert [d.id for d in out.documents] == ['a'], out.documents\n"
        "print(','.join(m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_planted_duplicates_are_removed_and_reported() -> None:
    base = "The first Nobel Prize in Physics was awarded in 1901 to Wilhelm Conrad Röntgen of Germany."
    docs = [
        Document(id="orig", text=base),
        Document(id="other", text="Cats are small carnivorous mammals kept as pets around the world."),
        Document(id="dup", text=base.replace("Germany.", "Germany!")),
    ]
    result = RetrievalStage(scorer="bm25", cutoff="none").run(
        request_with(docs, "who won the first nobel prize in physics")
    )
    assert "dup" not in [d.id for d in result.documents]
    change = next(c for c in result.report.stages[0].changes if c.target == "document:dup")
    assert change.kind == "dropped" and "near-duplicate of document:orig" in change.reason


@pytest.mark.slow
def test_planted_duplicates_are_removed_by_embedding_cosine(nq_requests: list[Request]) -> None:
    request = nq_requests[0]
    planted = request.documents[3].model_copy(update={"id": "planted", "text": request.documents[3].text + " "})
    out = RetrievalStage(scorer="dense", cutoff="none", max_k=None).run(
        request.replace(documents=[*request.documents, planted])
    )
    ids = [d.id for d in out.documents]
    assert ("planted" in ids) != ("p3" in ids)
    assert any("near-duplicate" in c.reason and "embedding" in c.reason for c in out.report.stages[0].changes)


def test_budget_holds_and_drops_are_reported() -> None:
    docs = scored_docs(0.9, 0.85, 0.8, 0.75, 0.7)
    one = count_document(docs[0])
    stage = RetrievalStage(scorer=FixedScorer(), cutoff="none")
    result = stage.run(request_with(docs), Budget(documents=2 * one + 1))
    assert sum(count_document(d) for d in result.documents) <= 2 * one + 1
    assert [d.id for d in result.documents] == ["d0", "d1"]
    reasons = {c.target: c.reason for c in result.report.stages[0].changes if c.kind == "dropped"}
    assert all("budget" in reasons[f"document:d{i}"] for i in (2, 3, 4))

    total = count_request(request_with(docs[:1])) + 5
    fitted = stage.run(request_with(docs), Budget(total=total))
    assert count_request(fitted.request) <= total


def test_infeasible_documents_budget_keeps_best_loudly_or_as_configured() -> None:
    docs = scored_docs(0.9, 0.2, words=60)
    request = request_with(docs)
    kept = RetrievalStage(scorer=FixedScorer()).run(request, Budget(documents=10))
    assert [d.id for d in kept.documents] == ["d0"]
    assert kept.report.stages[0].details["over_budget"] > 0
    assert any("exceeds the documents budget" in w for w in kept.report.warnings)

    dropped = RetrievalStage(scorer=FixedScorer(), on_overflow="drop").run(request, Budget(documents=10))
    assert dropped.documents == [] and dropped.report.warnings
    with pytest.raises(BudgetInfeasible):
        RetrievalStage(scorer=FixedScorer(), on_overflow="raise").run(request, Budget(documents=10))
    assert RetrievalStage(scorer=FixedScorer()).run(request, Budget(documents=0)).documents == []


def test_bad_documents_are_reported_not_fatal() -> None:
    body = {
        "messages": [{"role": "user", "content": "nobel prize physics"}],
        "documents": [{"id": "good", "text": "nobel prize in physics"}, {"id": "empty", "text": "   "},
                      {"id": "number", "text": 42}, "a plain string about cats"],
    }
    request = Request.from_openai(body)
    result = RetrievalStage(scorer="bm25").run(request)
    assert [d.id for d in result.documents] == ["good"]
    stage_report = result.report.stages[0]
    assert any(c.target == "document:empty" and c.reason == "empty text" for c in stage_report.changes)
    assert any("documents[2]" in w for w in request.warnings)  # non-string text: skipped by the parser


def test_ids_metadata_kept_and_score_set_deterministically() -> None:
    docs = scored_docs(0.3, 0.9, 0.8, 0.1)
    stage = RetrievalStage(scorer=FixedScorer(), order="score", cutoff="fraction")
    first, second = stage.run(request_with(docs)), stage.run(request_with(docs))
    assert first.to_openai() == second.to_openai()
    assert [d.id for d in first.documents] == ["d1", "d2"]
    for d in first.documents:
        original = next(o for o in docs if o.id == d.id)
        assert d.metadata == original.metadata and d.text == original.text
        assert d.score == pytest.approx(float(original.text.split("score=")[1].split()[0]))


@pytest.mark.slow
def test_real_hybrid_run_is_deterministic(nq_requests: list[Request], warm_embeddings: None) -> None:
    stage = RetrievalStage()
    runs = [stage.run(nq_requests[5]).to_openai() for _ in range(2)]
    assert runs[0] == runs[1]


def test_lone_surrogates_are_scored_by_the_dense_model_and_kept_byte_exact() -> None:
    # a lone surrogate (JSON's "\\ud800" read as is) cannot go through the model's tokenizer;
    # the hybrid scorer must still run, not fall back to bm25, and the text must come back whole
    odd = "Paris is the capital of France \ud800 and its largest city."
    request = Request(
        messages=[{"role": "user", "content": "What is the capital of France?"}],
        documents=[
            {"id": "a", "text": odd},
            {"id": "b", "text": "Bananas are rich in potassium and grow in the tropics."},
        ],
    )
    result = Pipeline([RetrievalStage(scorer="hybrid")]).run(request)
    details = result.report.stages[0].details
    assert details["scorer"] == "hybrid" and "fallback" not in details, details
    assert result.report.warnings == []
    assert {d.id: d.text for d in result.request.documents}["a"] == odd


@pytest.mark.parametrize(
    ("order", "expected"),
    [("score", ["d1", "d2", "d0", "d3"]), ("original", ["d0", "d1", "d2", "d3"]),
     ("edges", ["d1", "d0", "d3", "d2"])],
)
def test_order(order: str, expected: list[str]) -> None:
    docs = scored_docs(0.8, 0.95, 0.9, 0.7)
    out = RetrievalStage(scorer=FixedScorer(), cutoff="none", order=order).run(request_with(docs))  # type: ignore[arg-type]
    assert [d.id for d in out.documents] == expected


def test_hard_cap_and_never_zero() -> None:
    docs = scored_docs(0.9, 0.89, 0.88, 0.87, 0.1)
    out = RetrievalStage(scorer=FixedScorer(), max_k=2).run(request_with(docs))
    assert len(out.documents) == 2
    assert any("max_k=2" in c.reason for c in out.report.stages[0].changes)
    flat = scored_docs(0.5, 0.5, 0.5)
    assert len(RetrievalStage(scorer=FixedScorer(), max_k=1).run(request_with(flat)).documents) == 1


def test_mmr_prefers_a_diverse_document() -> None:
    same = "score={} nobel prize physics awarded röntgen germany 1901 first laureate"
    docs = [Document(id="a", text=same.format(0.9)), Document(id="b", text=same.format(0.85)),
            Document(id="c", text="score=0.8 cats dogs birds pets animals homes")]
    out = RetrievalStage(scorer=FixedScorer(), cutoff="none", max_k=2, dedup="none", mmr_lambda=0.3,
                         order="score").run(request_with(docs))
    assert [d.id for d in out.documents] == ["a", "c"]


def test_relevance_cutoff_rules() -> None:
    assert relevance_cutoff([1.0, 0.9, 0.2, 0.1], rule="gap", fraction=0.5) == 2
    assert relevance_cutoff([10.0, 9.0, 2.0, 1.0], rule="gap", fraction=0.5) == 2  # scale-free
    assert relevance_cutoff([1.0, 0.6, 0.4, 0.0], rule="fraction", fraction=0.5) == 2
    assert relevance_cutoff([0.5, 0.5], rule="gap", fraction=0.5) == 2
    assert relevance_cutoff([1.0, 0.1], rule="none", fraction=0.5) == 2


def test_empty_query_keeps_retriever_order_with_a_warning() -> None:
    docs = scored_docs(0.1, 0.2)
    request = Request(messages=[Message(role="system", content="hi")], documents=docs)
    out = RetrievalStage(scorer="bm25", cutoff="none").run(request)
    assert out.documents[0].id == "d0"
    assert any("no query" in w for w in out.report.warnings)


@pytest.mark.parametrize(
    ("option", "value"),
    [("max_k", 0), ("min_k", -1), ("cutoff", "median"), ("order", "random"), ("dedup", "minhash"),
     ("cutoff_fraction", 1.5), ("mmr_lambda", 2.0), ("dedup_threshold", 0.0), ("dense_weight", -0.1),
     ("on_overflow", "ignore"), ("fusion", "max"), ("max_seq_length", 0), ("backend", "tensorflow"),
     ("quantize", "yes")],
)
def test_bad_options_name_the_field(option: str, value: Any) -> None:
    with pytest.raises(ConfigError) as err:
        RetrievalStage(**{option: value})
    assert err.value.field == option


def test_unknown_scorer_lists_known_names() -> None:
    with pytest.raises(UnknownName) as err:
        RetrievalStage(scorer="splade")
    assert {"bm25", "dense", "hybrid", "cross_encoder"} <= set(err.value.known)
    with pytest.raises(ConfigError):
        RetrievalStage(scorer="cross_encoder")


def test_config_round_trip_through_the_pipeline() -> None:
    stage = RetrievalStage(scorer="bm25", max_k=4, order="score")
    pipeline = Pipeline.from_config({"stages": [{"name": "retrieval", "scorer": "bm25", "max_k": 4,
                                                 "order": "score"}]})
    assert pipeline.stages[0] == stage
    assert "bm25" in SCORERS


@pytest.mark.slow
def test_precomputed_embeddings_are_reused(nq_requests: list[Request], warm_embeddings: None) -> None:
    from promptslim.backends.embeddings import EmbeddingService

    request = nq_requests[1]
    service = EmbeddingService.get(max_seq_length=RetrievalStage().max_seq_length)
    vectors = service.embed([f"{d.title}\n{d.text}" for d in request.documents])
    with_vectors = request.replace(documents=[
        d.model_copy(update={"embedding": (v * 3.0).tolist()}) for d, v in zip(request.documents, vectors)
    ])
    stage = RetrievalStage(scorer="dense")
    # the vectors are the float model's, as a vector store's are: the stage's own float run
    # is what they must reproduce (its default on a CPU is the int8 model)
    plain = RetrievalStage(scorer="dense", quantize=False).run(request)
    reused = stage.run(with_vectors)
    assert reused.report.stages[0].details["embeddings_reused"] == 20
    assert reused.report.stages[0].details["int8"] is False
    assert [d.id for d in plain.documents] == [d.id for d in reused.documents]
    wrong = request.replace(documents=[d.model_copy(update={"embedding": [1.0, 0.0]}) for d in request.documents])
    out = stage.run(wrong)
    assert [d.id for d in out.documents] == [d.id for d in stage.run(request).documents]
    assert any("another dimension" in w for w in out.report.warnings)


@pytest.mark.slow
def test_default_embeds_int8_on_the_cpu_and_float_beside_a_vector_stores_vectors(
    nq_requests: list[Request], warm_embeddings: None
) -> None:
    from promptslim.backends.models import default_device

    stage = RetrievalStage()
    primary = stage.get_scorer().service()  # type: ignore[attr-defined]
    float_twin = stage.get_scorer()._dense.service(float32=True)  # type: ignore[attr-defined]
    on_cpu = default_device() == "cpu"
    assert primary.int8 is on_cpu and float_twin.int8 is False
    assert stage.max_seq_length == 96 and stage.backend == "auto" and stage.quantize is None
    request = nq_requests[3]
    assert stage.run(request).report.stages[0].details["int8"] is on_cpu
    # one passage brings a vector store's (float) vector: the query and the other 19 passages
    # must then come from the float model too, never a mix of the two models' vectors
    vector = float_twin.embed([f"{request.documents[0].title}\n{request.documents[0].text}"])[0]
    one_given = request.replace(documents=[
        request.documents[0].model_copy(update={"embedding": vector.tolist()}), *request.documents[1:]
    ])
    float_twin.clear_cache()
    details = stage.run(one_given).report.stages[0].details
    assert details["embeddings_reused"] == 1 and details["int8"] is False
    assert float_twin.cache_info()["size"] == 20  # the query and 19 passages, on the float model


def test_bm25_matches_rank_bm25_with_lucene_idf(nq_requests: list[Request]) -> None:
    import math

    rank_bm25 = pytest.importorskip("rank_bm25")
    from promptslim.backends.lexical import bm25_scores
    from promptslim.text import analyse

    class LuceneBM25(rank_bm25.BM25Okapi):  # type: ignore[misc,name-defined]
        def _calc_idf(self, nd: dict[str, int]) -> None:
            n = self.corpus_size
            self.idf = {w: math.log(1.0 + (n - f + 0.5) / (f + 0.5)) for w, f in nd.items()}

    for request in nq_requests[:20]:
        texts = [d.text for d in request.documents]
        reference = LuceneBM25([analyse(t) for t in texts]).get_scores(analyse(request.effective_query))
        assert np.allclose(bm25_scores(request.effective_query, texts, fuzzy=False), reference)


def test_cross_encoder_scorer_uses_the_shared_loader(monkeypatch: pytest.MonkeyPatch) -> None:
    from promptslim.backends import models

    class FakeCrossEncoder:
        def predict(self, pairs: list[tuple[str, str]], **_: Any) -> np.ndarray:
            return np.array([float("nobel" in text) for _, text in pairs])

    loaded: list[str] = []
    monkeypatch.setattr(models, "load_cross_encoder", lambda name, device=None: loaded.append(name) or FakeCrossEncoder())
    docs = [Document(id="a", text="cats"), Document(id="b", text="the nobel prize")]
    out = RetrievalStage(scorer="cross_encoder", model="/models/my-ce").run(request_with(docs, "nobel?"))
    assert [d.id for d in out.documents] == ["b"] and loaded == ["/models/my-ce"]


def test_fusion_functions() -> None:
    from promptslim.backends.scorers import reciprocal_rank_fusion, weighted_fusion

    a, b = np.array([3.0, 1.0, 2.0]), np.array([0.1, 0.9, 0.5])
    assert np.allclose(weighted_fusion([a, b], [0.5, 0.5]), [0.5, 0.5, 0.5 * 0.5 + 0.5 * 0.5])
    rrf = reciprocal_rank_fusion([a, b], k=60)
    assert rrf[2] == pytest.approx(2 / 62) and rrf[0] == pytest.approx(1 / 61 + 1 / 63)


def test_one_stage_serves_many_threads() -> None:
    from concurrent.futures import ThreadPoolExecutor

    stage = RetrievalStage(scorer="bm25")
    requests = [
        request_with([Document(id=f"{n}-{i}", text=f"topic {i} word{n} " * (i + 1)) for i in range(20)],
                     f"topic word{n}")
        for n in range(16)
    ]
    serial = [stage.run(r).to_openai() for r in requests]
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(lambda r: stage.run(r).to_openai(), requests)) == serial


# ---------------------------------------------------------------- the query's own embedding


def counting_dense_scorer(monkeypatch: pytest.MonkeyPatch, name: str = "dense") -> tuple[Scorer, list[list[str]]]:
    """A dense (or hybrid) scorer whose embedding service encodes with a 3-dimensional stand-in
    and records every model call: the seam is ``EmbeddingService._encode``."""
    from promptslim.backends.embeddings import EmbeddingService, normalise

    service = EmbeddingService(cache_size=100)
    service._st, service._dim = "stand-in model", 3  # no real model behind this service
    calls: list[list[str]] = []

    def encode(texts: list[str]) -> np.ndarray:
        calls.append(list(texts))
        return normalise([[1.0, float(len(t) % 5), 0.5] for t in texts])

    monkeypatch.setattr(service, "_encode", encode)
    scorer = SCORERS.get(name)()
    dense = scorer if name == "dense" else scorer._dense  # type: ignore[attr-defined]
    monkeypatch.setattr(dense, "service", lambda: service)
    return scorer, calls


@pytest.mark.parametrize("name", ["dense", "hybrid"])
def test_query_embedding_is_used_and_no_model_call_happens(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    scorer, calls = counting_dense_scorer(monkeypatch, name)
    vectors = {"a": [0.0, 1.0, 0.0], "b": [1.0, 0.0, 0.0], "c": [0.7, 0.7, 0.0]}
    docs = [Document(id=k, text=f"passage {k} about prizes", embedding=v) for k, v in vectors.items()]
    request = request_with(docs, "who won the prize?").replace(query_embedding=[0.0, 2.0, 0.0])
    out = RetrievalStage(scorer=scorer, cutoff="none", order="score", dedup="none").run(request)
    assert calls == []  # neither the passages nor the query went through the model
    assert [d.id for d in out.documents] == ["a", "c", "b"]  # cosine with the given query vector
    details = out.report.stages[0].details
    assert details["query_embedding_reused"] is True and details["embeddings_reused"] == 3
    # without the query's vector, the query (and only the query) is embedded
    RetrievalStage(scorer=scorer).run(request.replace(query_embedding=None))
    assert calls == [["who won the prize?"]]


def test_query_embedding_of_another_dimension_is_embedded_again(monkeypatch: pytest.MonkeyPatch) -> None:
    scorer, calls = counting_dense_scorer(monkeypatch)
    docs = [Document(id="a", text="one passage"), Document(id="b", text="another passage here")]
    request = request_with(docs, "which passage is longer?").replace(query_embedding=[0.1] * 384)
    out = RetrievalStage(scorer=scorer).run(request)
    # one model call
    assert calls == [["which passage is longer?", "one passage", "another passage here"]]
    assert out.report.stages[0].details["query_embedding_mismatched"] is True
    assert any("query_embedding has 384 values" in w for w in out.report.warnings)


def test_a_scorer_without_query_embedding_keeps_working() -> None:
    docs = scored_docs(0.9, 0.2)
    request = request_with(docs).replace(query_embedding=[1.0, 0.0])
    out = RetrievalStage(scorer=FixedScorer(), cutoff="none", order="score").run(request)
    assert [d.id for d in out.documents] == ["d0", "d1"] and not out.report.warnings


@pytest.mark.slow
def test_real_precomputed_query_and_passages_need_no_model_call(
    nq_requests: list[Request], monkeypatch: pytest.MonkeyPatch
) -> None:
    # whole documents: a long passage's later window has no vector of its own to reuse
    stage = RetrievalStage(window_chars=None)
    service = stage.get_scorer().service()  # type: ignore[attr-defined]
    request = nq_requests[2]
    vectors = service.embed([f"{d.title}\n{d.text}" for d in request.documents])
    query = service.embed_one(request.effective_query)
    given = request.replace(
        documents=[d.model_copy(update={"embedding": v.tolist()}) for d, v in zip(request.documents, vectors)],
        query_embedding=query.tolist(),
    )
    expected = [d.id for d in stage.run(request).documents]
    calls: list[int] = []
    encode = service._encode
    monkeypatch.setattr(service, "_encode", lambda texts: calls.append(len(texts)) or encode(texts))
    float_twin = stage.get_scorer().service(float32=True)  # type: ignore[attr-defined]
    encode_float = float_twin._encode
    monkeypatch.setattr(
        float_twin, "_encode", lambda texts: calls.append(len(texts)) or encode_float(texts)
    )
    service.clear_cache()
    float_twin.clear_cache()
    assert [d.id for d in stage.run(given).documents] == expected
    assert calls == []


def test_cascade_embeds_only_bm25s_best_candidates(monkeypatch: pytest.MonkeyPatch) -> None:
    scorer, calls = counting_dense_scorer(monkeypatch, "hybrid")
    scorer.dense_candidates = 2  # type: ignore[attr-defined]
    docs = [Document(id="nobel", text="the nobel prize in physics went to him"),
            Document(id="prize", text="a prize for physics"),
            Document(id="cats", text="cats sleep all day"),
            Document(id="dogs", text="dogs bark at night", embedding=[1.0, 0.0, 0.0])]
    out = RetrievalStage(scorer=scorer, cutoff="none", dedup="none", order="score").run(
        request_with(docs, "who won the nobel prize in physics?"))
    # the query and BM25's two best are embedded; "dogs" brought its own vector, "cats" is skipped
    assert calls == [["who won the nobel prize in physics?",
                      "the nobel prize in physics went to him", "a prize for physics"]]
    assert out.report.stages[0].details["dense_candidates"] == 3
    assert {d.id for d in out.documents} == {"nobel", "prize", "cats", "dogs"}


def test_stage_passes_quantize_and_cascade_to_the_scorer() -> None:
    scorer = RetrievalStage(quantize=True, dense_candidates=8).get_scorer()
    assert scorer.quantize is True and scorer.dense_candidates == 8  # type: ignore[attr-defined]
    assert scorer._dense.service().quantize is True  # type: ignore[attr-defined]
    with pytest.raises(ConfigError) as err:
        RetrievalStage(dense_candidates=0)
    assert err.value.field == "dense_candidates"


def test_keep_best_over_budget_leaves_a_namesakes_drop_reported() -> None:
    # document ids need not be unique: keeping the best one must not erase the other's record
    body = {
        "messages": [{"role": "user", "content": "refund policy annual plan"}],
        "documents": [
            {"id": "a", "text": "refund policy annual plan " * 40},
            {"id": "a", "text": "something else entirely " * 40},
        ],
    }
    stage = RetrievalStage(scorer="bm25", cutoff="none", dedup="none")
    result = stage.run(Request.from_openai(body), Budget(documents=20))
    assert len(result.request.documents) == 1
    drops = [c for c in result.report.stages[0].changes if c.kind == "dropped"]
    # the namesakes' targets carry their index in the request: the second one was dropped
    assert len(drops) == 1 and drops[0].target == "document:a#1"
    assert any("document:a#0" in w for w in result.report.warnings)


def test_report_targets_name_the_index_only_when_ids_collide() -> None:
    # unique ids keep the plain target; a shared id gets "#index" (its place in the request)
    body = {
        "messages": [{"role": "user", "content": "refund policy annual plan"}],
        "documents": [
            {"id": "x", "text": "refund policy annual plan details here"},
            {"id": "y", "text": "nothing about it at all"},
            {"id": "x", "text": "another text with no overlap whatsoever"},
            {"id": "z", "text": "   "},
        ],
    }
    stage = RetrievalStage(scorer="bm25", max_k=1, dedup="none")
    result = stage.run(Request.from_openai(body))
    targets = {c.target for c in result.report.stages[0].changes if c.kind == "dropped"}
    assert targets == {"document:y", "document:x#2", "document:z"}
    assert [d.id for d in result.request.documents] == ["x"]
