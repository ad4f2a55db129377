"""Request documents that are JSON document lists (``stages.retrieval_lists``): a search API's
answer put in a request as one document was kept or dropped whole; its passages now compete
as candidates, and the JSON sent holds the ones kept."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promptslim.bench.datasets import BenchItem, load_dataset
from promptslim.bench.metrics import evidence_retention
from promptslim.errors import ConfigError
from promptslim.pipeline import Pipeline
from promptslim.stages.compress import CompressStage
from promptslim.stages.retrieval import RetrievalStage
from promptslim.stages.retrieval_lists import expand_lists
from promptslim.tokens import count_document, get_counter
from promptslim.types import Budget, Document, Request

PASSAGE = (
    "The harbour town grew around a fish market in the twelfth century, and its stone quay was "
    "rebuilt twice after storms. Ferries now leave for the islands every hour in summer."
)


@pytest.fixture(scope="module")
def nq(eval_data: Path) -> list[BenchItem]:
    return load_dataset(f"nq:{eval_data / 'nq20-dev.jsonl.gz'}", limit=20).items


def _results(item: BenchItem) -> dict[str, Any]:
    """``item``'s passages as a search API answers: titles, bodies, links and scores."""
    hits = [
        {"title": d.title, "url": f"https://example.org/{i}", "content": d.text, "score": i}
        for i, d in enumerate(item.request.documents)
    ]
    return {"query": item.request.query, "results": hits}


def _as_list(item: BenchItem, **dumps: Any) -> Request:
    text = json.dumps(_results(item), **dumps)
    doc = Document(id="search", text=text, metadata={"source": "api"})
    return item.request.replace(documents=[doc])


def _run(request: Request, **options: Any) -> tuple[Request, dict[str, Any]]:
    out, report = RetrievalStage(**options).run_report(request)
    return out, report.details


def test_the_passages_of_a_list_compete_and_the_answer_stays(nq: list[BenchItem]) -> None:
    # before: the one document went whole (every token of 20 passages) or not at all
    counter = get_counter()
    kept = given = sent = 0
    for item in nq:
        request = _as_list(item)
        out, details = _run(request)
        assert details["document_lists"] == 1
        kept += evidence_retention(" ".join(d.text for d in out.documents), item.answers) > 0
        given += count_document(request.documents[0], counter)
        sent += sum(count_document(d, counter) for d in out.documents)
    assert kept >= 19
    assert sent < 0.3 * given


def test_what_is_sent_is_the_json_with_the_kept_items_in_order(nq: list[BenchItem]) -> None:
    item = nq[0]
    request = _as_list(item, indent=2)
    out, _ = _run(request)
    [doc] = out.documents
    assert (doc.id, doc.metadata) == ("search", {"source": "api"})
    assert doc.score is not None
    sent = json.loads(doc.text)
    given = _results(item)
    assert sent["query"] == given["query"]
    positions = [hit["score"] for hit in sent["results"]]
    assert positions == sorted(positions) and 0 < len(positions) < len(given["results"])
    for hit in sent["results"]:
        original = given["results"][hit["score"]]
        assert {k: v for k, v in hit.items() if k != "content"} == {
            k: v for k, v in original.items() if k != "content"
        }
        assert hit["content"] == original["content"] or len(hit["content"]) < len(
            original["content"]
        )


def test_a_list_kept_whole_goes_byte_for_byte() -> None:
    hits = [{"title": f"Town {i}", "text": f"Town {i}. {PASSAGE}"} for i in range(3)]
    text = json.dumps(hits, indent=2)
    request = Request(
        messages=[{"role": "user", "content": "When was the quay rebuilt?"}],
        documents=[Document(id="d", text=text)],
    )
    out, details = _run(request, scorer="bm25", cutoff="none", dedup="none", select_within=False)
    assert details["document_lists"] == 1
    assert [d.text for d in out.documents] == [text]


def test_a_single_page_is_cut_inside_its_body() -> None:
    body = " ".join(
        f"Section {i} describes the town's {topic} at length, with dates and names."
        for i, topic in enumerate(["market", "quay", "ferries", "church", "school", "mill"] * 4)
    )
    page = {"url": "https://example.org/town", "title": "The town", "content": body}
    request = Request(
        messages=[{"role": "user", "content": "What does the text say about the ferries?"}],
        documents=[Document(id="page", text=json.dumps(page))],
    )
    out, details = _run(request, scorer="bm25")
    assert details["document_lists"] == 1
    [doc] = out.documents
    sent = json.loads(doc.text)
    assert (sent["url"], sent["title"]) == (page["url"], page["title"])
    assert "ferries" in sent["content"] and len(sent["content"]) < len(body)


def test_items_without_a_body_go_with_the_list() -> None:
    hits: list[dict[str, Any]] = [{"title": f"Town {i}", "text": PASSAGE} for i in range(6)]
    hits[3] = {"title": "An ad", "banner": True}
    hits[5]["text"] = "The quay was rebuilt in 1703 after the great storm. " + PASSAGE
    request = Request(
        messages=[{"role": "user", "content": "When was the quay rebuilt after the storm?"}],
        documents=[Document(id="d", text=json.dumps(hits))],
    )
    out, _ = _run(request, scorer="bm25", max_k=1, min_k=1)
    sent = json.loads(out.documents[0].text)
    assert {"title": "An ad", "banner": True} in sent
    assert any("1703" in hit.get("text", "") for hit in sent)


@pytest.mark.parametrize(
    "value",
    [
        # records: ids and numbers, no prose
        [{"id": f"acct-{i}", "plan": "pro", "seats": i, "region": "eu-west-1"} for i in range(8)],
        # Chroma's columns: an item left out would misalign ids and documents
        {"ids": [["a", "b", "c"]], "documents": [[PASSAGE, PASSAGE + " Two.", PASSAGE]]},
    ],
)
def test_records_and_aligned_columns_stay_one_candidate(value: Any) -> None:
    doc = Document(id="d", text=json.dumps(value))
    assert expand_lists([doc]) is None


def test_under_a_documents_budget_the_list_stays_one_candidate(nq: list[BenchItem]) -> None:
    # the JSON around the passages is not counted by their tokens, and a budget holds exactly:
    # the list goes on whole and the compress stage cuts it along its structure
    request = _as_list(nq[1])
    pipeline = Pipeline([RetrievalStage(), CompressStage()])
    result = pipeline.run(request, Budget(documents=300))
    retrieval = next(s for s in result.report.stages if s.stage == "retrieval")
    assert "document_lists" not in retrieval.details
    counter = get_counter()
    assert 0 < sum(count_document(d, counter) for d in result.request.documents) <= 300
    unbounded = pipeline.run(request)
    assert (
        next(s for s in unbounded.report.stages if s.stage == "retrieval").details["document_lists"]
        == 1
    )


def test_other_documents_are_sent_as_before(nq: list[BenchItem]) -> None:
    item = nq[2]
    prose = [Document(id=f"p{i}", text=f"Town {i}. {PASSAGE}") for i in range(3)]
    request = _as_list(item).replace(documents=[*prose, *_as_list(item).documents])
    out, details = _run(request)
    assert details["candidates"] == 3 + len(item.request.documents)
    for doc in out.documents:
        if doc.id != "search":
            assert doc.text == next(p.text for p in prose if p.id == doc.id)


_word = st.sampled_from(["quay", "storm", "ferry", "market", "town", "island", "stone", "fish"])
_sentence = st.lists(_word, min_size=6, max_size=14).map(lambda w: " ".join(w).capitalize() + ".")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(_sentence, min_size=3, max_size=8), min_size=1, max_size=12))
def test_property_sent_items_come_from_the_list_in_order(bodies: list[list[str]]) -> None:
    hits = [{"title": f"Hit {i}", "text": " ".join(s)} for i, s in enumerate(bodies)]
    request = Request(
        messages=[{"role": "user", "content": "Which ferry leaves after the storm?"}],
        documents=[Document(id="d", text=json.dumps(hits))],
    )
    out, _ = _run(request, scorer="bm25")
    assert len(out.documents) <= 1
    for doc in out.documents:
        sent = json.loads(doc.text)
        titles = [hit["title"] for hit in sent]
        given = [hit["title"] for hit in hits]
        assert titles == [t for t in given if t in titles]
        for hit in sent:
            original = hits[given.index(hit["title"])]["text"]
            # a kept body is the original's sentences, some left out
            assert all(s + "." in original or s in original for s in hit["text"].split(". "))
    again, _ = _run(request, scorer="bm25")
    assert [d.text for d in again.documents] == [d.text for d in out.documents]


def test_document_lists_false_keeps_a_list_one_candidate(nq: list[BenchItem]) -> None:
    request = _as_list(nq[3])
    out, details = _run(request, document_lists=False)
    assert "document_lists" not in details
    assert [d.text for d in out.documents] == [request.documents[0].text]
    with pytest.raises(ConfigError, match="document_lists"):
        RetrievalStage(document_lists="no")  # type: ignore[arg-type]


def test_the_candidates_lists_make_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from promptslim.stages import retrieval_lists

    monkeypatch.setattr(retrieval_lists, "MAX_CANDIDATES", 12)
    hits = json.dumps([{"title": f"Town {i}", "text": PASSAGE} for i in range(5)])
    docs = [Document(id=f"d{i}", text=hits) for i in range(4)]
    listed = expand_lists(docs)
    assert listed is not None
    # 4 documents; two lists of 5 make 2 + 10 = 12 candidates, a third would make 16
    assert sorted(listed.lists) == [0, 1] and len(listed.documents) == 12
