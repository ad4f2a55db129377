"""Asks for the documents as a whole (``query.asks_for_whole``): a summary, a translation,
every one of something in them. Ranked against such an ask, the documents scored by noise and
the retrieval stage dropped most of them (0.22-0.36 of the tokens kept on chunks of four)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promptslim import asks_for_whole
from promptslim.bench.datasets import BenchItem, load_dataset
from promptslim.stages.retrieval import RetrievalStage
from promptslim.tokens import count_document, get_counter
from promptslim.types import Budget, Document, Message, Request

WHOLE = [
    "Summarize the documents above.",
    "Please write a short summary of the passages.",
    "Summarize in 3 bullet points.",
    "Summarize it.",
    "TL;DR",
    "What are these documents about?",
    "What is this about?",
    "Give me an overview of the context.",
    "Key points?",
    "Translate the documents into French.",
    "Rewrite the text in plain English.",
    "Compare the sources.",
    "Explain this.",
    "List every person mentioned in the documents.",
    "Extract all the dates from these files.",
    "请总结一下这些文档",
    "把上文翻译成英文",
]
QUESTIONS = [
    "who played the joker in the dark knight",
    "Summarize what the documents say about refunds.",
    "What is the summary judgment procedure in Texas?",
    "List the causes of World War 1.",
    "Explain how photosynthesis works.",
    "Translate 'good morning' into French.",
    "who sings all i want for christmas is you",
    "How many episodes are in every season of friends",
    "Read all of the passages below and answer: who wrote Hamlet?",
    (
        "Using only the documents provided, answer the question below. Question: when was the "
        "eiffel tower built"
    ),
    "谁发明了电话？",
]


#: documents that hold none of the words of any ask or question above
HARBOUR = [
    Document(id="h1", text="The harbour grew around a fish market, and its quay was rebuilt."),
    Document(id="h2", text="Ferries leave for the islands every hour in summer."),
]


def _asking(text: str, *earlier: str) -> Request:
    turns = [Message(role="user", content=t) for t in (*earlier, text)]
    system = Message(role="system", content="You help.")
    return Request(messages=[system, *turns], documents=HARBOUR)


@pytest.mark.parametrize("text", WHOLE)
def test_asks_for_the_documents_as_a_whole(text: str) -> None:
    assert asks_for_whole(_asking(text))
    assert asks_for_whole(Request(messages=[], query=text, documents=HARBOUR))  # a query alike


@pytest.mark.parametrize("text", QUESTIONS)
def test_questions_with_a_topic_the_documents_hold_are_not(text: str) -> None:
    # the documents were retrieved for the question: they hold its words
    about = Document(id="q", text=f"A passage that holds the words of the question: {text}")
    assert not asks_for_whole(_asking(text).replace(documents=[*HARBOUR, about]))


def test_an_ask_whose_words_no_document_holds_is_one() -> None:
    assert asks_for_whole(_asking("Make this shorter."))
    assert asks_for_whole(_asking("Put the passages into Spanish."))
    assert not asks_for_whole(_asking("When was the quay rebuilt?"))  # "quay" is in h1
    # a question the documents do not word is ranked all the same: the model reads its meaning
    assert not asks_for_whole(_asking("When was the cathedral consecrated?"))
    assert asks_for_whole(_asking("Tell me about the cathedral's consecration."))
    assert not asks_for_whole(_asking("Make this shorter.").replace(documents=[]))


def test_a_follow_up_reads_the_topic_of_the_turn_before() -> None:
    question = "who played the joker in the dark knight"
    joker = Document(id="j", text="Heath Ledger played the Joker in The Dark Knight.")
    follow_up = _asking("Can you check again?", question).replace(documents=[*HARBOUR, joker])
    assert not asks_for_whole(follow_up)
    assert asks_for_whole(_asking("Now summarize the documents.", question))
    no_ask = Request(messages=[Message(role="system", content="hi")], documents=HARBOUR)
    assert not asks_for_whole(no_ask)  # the retriever's order, as before


@pytest.fixture(scope="module")
def nq(eval_data: Path) -> list[BenchItem]:
    return load_dataset(f"nq:{eval_data / 'nq20-dev.jsonl.gz'}").items


def test_no_question_of_the_evaluation_set_is_one(nq: list[BenchItem]) -> None:
    # a false alarm costs the request every token the stage would have saved
    flagged = [it.request.query for it in nq if asks_for_whole(it.request)]
    assert len(nq) >= 20 and flagged == []


def _chunks(item: BenchItem, k: int = 4) -> list[Document]:
    docs = item.request.documents
    return [
        Document(id=f"c{c}", text="\n\n".join(f"{d.title}\n{d.text}" for d in docs[c : c + k]))
        for c in range(0, len(docs), k)
    ]


def test_a_whole_ask_keeps_every_document_in_its_order(nq: list[BenchItem]) -> None:
    docs = _chunks(nq[0])
    request = _asking("Summarize the documents above.").replace(documents=docs)
    out, report = RetrievalStage().run_report(request)
    assert [(d.id, d.text) for d in out.documents] == [(d.id, d.text) for d in docs]
    assert report.details["whole_ask"] is True and report.details["kept"] == len(docs)
    ranked, _ = RetrievalStage(whole_asks=False).run_report(request)
    assert len(ranked.documents) < len(docs)  # ranked against the ask's words, most went


def test_a_whole_ask_keeps_what_fits_the_budget_in_order(nq: list[BenchItem]) -> None:
    docs = _chunks(nq[1])
    counter = get_counter()
    cap = sum(count_document(d, counter) for d in docs[:2]) + 1
    request = _asking("Translate the documents into French.").replace(documents=docs)
    out, report = RetrievalStage().run_report(request, Budget(documents=cap))
    # the first two fit together, the third no longer does, nor any after it
    assert [d.id for d in out.documents] == [d.id for d in docs[:2]]
    assert report.details["tokens_kept"] <= cap


def test_a_whole_ask_leaves_a_document_list_whole() -> None:
    quay = "The quay was rebuilt after the storm of 1703, stone by stone, by the town. " * 3
    ferry = "Ferries leave for the islands every hour in summer, and twice a day in winter. " * 3
    text = json.dumps([{"title": "A", "text": quay}, {"title": "B", "text": ferry}])
    request = _asking("Summarize the search results.").replace(
        documents=[Document(id="d", text=text)]
    )
    out, report = RetrievalStage(scorer="bm25").run_report(request)
    assert [d.text for d in out.documents] == [text]
    assert "document_lists" not in report.details


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.text(min_size=1, max_size=200), min_size=1, max_size=12),
    st.sampled_from(WHOLE),
)
def test_property_a_whole_ask_sends_every_document_with_text(texts: list[str], ask: str) -> None:
    docs = [Document(id=str(i), text=t) for i, t in enumerate(texts)]
    out, _ = RetrievalStage(scorer="bm25").run_report(_asking(ask).replace(documents=docs))
    assert [d.id for d in out.documents] == [d.id for d in docs if d.text.strip()]
