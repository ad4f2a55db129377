"""The piece after a kept one (``promptslim.stages.retrieval_pieces``): where metadata places
the documents in the source a splitter cut them from, the piece that goes on from the best kept
one stays, though the question's words are not in it."""

from __future__ import annotations

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from langchain_text_splitters import RecursiveCharacterTextSplitter

from promptslim.counters import get_counter
from promptslim.errors import ConfigError
from promptslim.stages.base import StageLog
from promptslim.stages.retrieval import RetrievalStage
from promptslim.stages.retrieval_pieces import CUT_OFF, _drop_record, next_piece_of
from promptslim.types import Document, Request

QUESTION = "When was the film Cool Hand Luke released?"
ANSWER = "November 1, 1967"

# one article cut in two: its subject is named in the first piece, the answer is in the second
FIRST = (
    "Cool Hand Luke\n\nCool Hand Luke is an American prison drama film directed by Stuart "
    "Rosenberg and starring Paul Newman, with George Kennedy in a supporting role. The film "
    "was shot in the San Joaquin River delta, standing in for the American South."
)
SECOND = (
    f"Warner Bros. opened it in cinemas across the United States on {ANSWER}. Critics praised "
    "Newman, and Kennedy won the Academy Award for his supporting role."
)
OTHERS = [
    (
        "luke",
        "Luke Skywalker is the hero of the original Star Wars trilogy, a farm boy turned Jedi.",
    ),
    ("hand", "Cool Hand is a 2009 album by a Swedish jazz trio, released on a small label."),
    ("film", "A prison film is a genre of film about prisoners and their attempts to escape."),
    ("newman", "Paul Newman founded a food company that gives all its profits to charity."),
    ("river", "The San Joaquin River drains the southern half of California's Central Valley."),
    ("drama", "Drama films tell serious stories about realistic characters and conflicts."),
]


def pieces(*, placed: bool = True, second: str = SECOND) -> list[Document]:
    """The article's two pieces as LangChain's splitter hands them over (``add_start_index``),
    and pieces of other sources."""
    meta = [{"source": "cool-hand-luke.txt", "start_index": s} for s in (0, len(FIRST) + 2)]
    docs = [
        Document(id="first", text=FIRST, metadata=meta[0] if placed else {}),
        Document(id="second", text=second, metadata=meta[1] if placed else {}),
    ]
    for n, (name, text) in enumerate(OTHERS):
        docs.append(
            Document(id=name, text=text, metadata={"source": f"{name}.txt", "start_index": 0})
        )
        docs.append(
            Document(
                id=f"{name}-2",
                text=text + " It has more.",
                metadata={"source": f"{name}.txt", "start_index": len(text) + n},
            )
        )
    return docs


def run(stage: RetrievalStage, docs: list[Document]) -> tuple[list[str], list[str], dict]:
    result = stage.run(Request(messages=[{"role": "user", "content": QUESTION}], documents=docs))
    (report,) = result.report.stages
    kept = [d.id for d in result.request.documents]
    dropped = [c.target for c in report.changes if c.kind == "dropped"]
    return kept, dropped, report.details


@pytest.mark.parametrize("scorer", ["hybrid", "bm25"])
def test_the_piece_after_the_best_one_is_kept_though_it_never_names_the_subject(
    scorer: str,
) -> None:
    kept, dropped, details = run(RetrievalStage(scorer=scorer, next_pieces=0), pieces())
    assert "first" in kept and "second" not in kept  # the cut-off drops it on its own
    assert "document:second" in dropped
    kept, dropped, details = run(RetrievalStage(scorer=scorer), pieces())
    assert kept[0] == "first" and "second" in kept
    assert "document:second" not in dropped  # its drop record gone: it was kept
    assert details["next_pieces"] == [{"id": "second", "after": "document:first"}]
    assert set(kept) | {t.removeprefix("document:") for t in dropped} == {d.id for d in pieces()}


def test_without_metadata_that_places_them_nothing_changes() -> None:
    kept, _, details = run(RetrievalStage(), pieces(placed=False))
    assert "second" not in kept and "next_pieces" not in details


def test_a_long_next_piece_keeps_its_opening() -> None:
    tail = " ".join(f"Its run in city number {i} lasted {i + 3} weeks." for i in range(40))
    stage = RetrievalStage(window_chars=200)
    result = stage.run(
        Request(
            messages=[{"role": "user", "content": QUESTION}],
            documents=pieces(second=f"{SECOND} {tail}"),
        )
    )
    second = next(d for d in result.request.documents if d.id == "second")
    assert second.text.startswith(SECOND[:100]) and ANSWER in second.text
    assert len(second.text) < len(SECOND) + 200  # its opening, not its 40 more sentences
    (report,) = result.report.stages
    (change,) = [c for c in report.changes if c.target == "document:second"]
    assert change.kind == "compressed" and "next piece of document:first" in change.reason


def test_the_hard_cap_and_the_other_drop_reasons_hold() -> None:
    kept, _, _ = run(RetrievalStage(max_k=1), pieces())
    assert kept == ["first"]
    log = StageLog(get_counter())
    log.change("dropped", "document:a", reason="near-duplicate of document:b (embedding 0.97)")
    log.change("dropped", "document:c", reason=f"{CUT_OFF} (fraction)")
    assert _drop_record(log, "document:a") is None  # a copy stays out
    assert _drop_record(log, "document:c") == 1
    assert _drop_record(log, "document:z") is None


def doc(i: str, text: str, source: object, start: object) -> Document:
    return Document(id=i, text=text, metadata={"source": source, "start_index": start})


def test_next_piece_of_follows_the_source_and_the_start() -> None:
    docs = [
        doc("c", "third piece.", "s", 40),
        doc("a", "first piece of the text.", "s", 0),
        doc("b", "second piece", "s", 26),  # two characters of whitespace stripped between
        doc("far", "a later section", "s", 400),  # not where "c" ends: not its next piece
        doc("x", "other source", "t", 26),
        doc("flag", "a bool is no position", "s", True),
        Document(id="bare", text="no metadata"),
    ]
    following = next_piece_of(docs, range(len(docs)), ("source", "start_index"))
    ids = {docs[i].id: docs[j].id for i, j in following.items()}
    assert ids == {"a": "b", "b": "c"}


def test_an_overlapping_splitters_pieces_follow_each_other() -> None:
    text = " ".join(f"Sentence {i} of the report says something about part {i}." for i in range(30))
    splitter = RecursiveCharacterTextSplitter(
        chunk_size=200, chunk_overlap=40, add_start_index=True
    )
    cut = splitter.create_documents([text], metadatas=[{"source": "report.txt"}])
    docs = [
        Document(id=f"p{i}", text=d.page_content, metadata=d.metadata) for i, d in enumerate(cut)
    ]
    following = next_piece_of(docs, range(len(docs)), ("source", "start_index"))
    assert following == {i: i + 1 for i in range(len(docs) - 1)}


def test_piece_keys_are_validated() -> None:
    with pytest.raises(ConfigError, match="piece_keys"):
        RetrievalStage(piece_keys=("source", ""))
    with pytest.raises(ConfigError, match="next_pieces"):
        RetrievalStage(next_pieces=-1)


WORDS = ["film", "river", "luke", "newman", "prison", "opened", "cinema", "album", "jazz", "delta"]


@st.composite
def placed_requests(draw: st.DrawFn) -> tuple[Request, int | None]:
    """Pieces of up to three sources, placed by metadata (most of them), in any order, one of
    them naming the question's subject, and the question."""
    docs: list[Document] = []
    for s in range(draw(st.integers(1, 3))):
        start = 0
        for p in range(draw(st.integers(2, 5))):
            sentences = draw(
                st.lists(
                    st.lists(st.sampled_from(WORDS), min_size=2, max_size=8), min_size=1, max_size=4
                )
            )
            text = " ".join(" ".join(w).capitalize() + "." for w in sentences)
            meta: dict[str, object] = {"source": f"s{s}", "start_index": start}
            placed = draw(st.integers(0, 3)) > 0
            docs.append(Document(id=f"s{s}p{p}", text=text, metadata=meta if placed else {}))
            start += len(text) + draw(st.sampled_from([0, 1, 2, 40]))  # 40: not the next piece
    named = draw(st.integers(0, len(docs) - 1))
    docs[named] = docs[named].model_copy(update={"text": f"Zephyr is here. {docs[named].text}"})
    order = draw(st.permutations(range(len(docs))))
    query = " ".join(["zephyr", *draw(st.lists(st.sampled_from(WORDS), max_size=1))])
    request = Request(
        messages=[{"role": "user", "content": query}], documents=[docs[i] for i in order]
    )
    return request, draw(st.sampled_from([None, None, 1, 2, 5]))


@settings(max_examples=150, deadline=None)
@given(placed_requests())
def test_every_document_is_kept_or_reported_and_next_pieces_are_kept_ones(
    case: tuple[Request, int | None],
) -> None:
    request, max_k = case
    stage = RetrievalStage(scorer="bm25", max_k=max_k, window_chars=60)
    result = stage.run(request)
    again = stage.run(request)
    assert [(d.id, d.text) for d in again.request.documents] == [
        (d.id, d.text) for d in result.request.documents
    ]
    (report,) = result.report.stages
    kept = {d.id: d.text for d in result.request.documents}
    dropped = [c.target.removeprefix("document:") for c in report.changes if c.kind == "dropped"]
    assert sorted([*kept, *dropped]) == sorted(d.id for d in request.documents)
    assert max_k is None or len(kept) <= max_k
    given_words = {d.id: set(d.text.split()) for d in request.documents}
    for doc_id, text in kept.items():
        assert set(text.split()) <= given_words[doc_id]  # whole sentences, never rewritten
    event("a next piece kept" if report.details.get("next_pieces") else "none kept")
    for added in report.details.get("next_pieces", []):
        assert added["id"] in kept and added["after"].removeprefix("document:") in kept


@pytest.mark.parametrize("scorer", ["hybrid", "bm25"])
def test_at_max_k_the_next_piece_takes_the_last_place(scorer: str) -> None:
    alone, _, _ = run(RetrievalStage(scorer=scorer, next_pieces=0, max_k=2), pieces())
    assert len(alone) == 2 and "second" not in alone
    kept, dropped, details = run(RetrievalStage(scorer=scorer, max_k=2), pieces())
    assert len(kept) == 2 and "first" in kept and "second" in kept  # max_k stays a hard cap
    (displaced,) = set(alone) - set(kept)
    assert f"document:{displaced}" in dropped and "document:second" not in dropped
    result = RetrievalStage(scorer=scorer, max_k=2).run(
        Request(messages=[{"role": "user", "content": QUESTION}], documents=pieces())
    )
    (change,) = [c for c in result.report.stages[0].changes if c.target.endswith(displaced)]
    assert change.kind == "dropped"
    assert (
        change.reason
        == "beyond the hard cap max_k=2: its place went to the next piece of document:first"
    )
    assert details["next_pieces"] == [{"id": "second", "after": "document:first"}]


def test_a_next_piece_never_displaces_the_piece_it_follows() -> None:
    kept, _, details = run(RetrievalStage(max_k=1), pieces())
    assert kept == ["first"] and "next_pieces" not in details


# the same article as a Markdown section too long for one piece: the splitter cuts its heading
# off on its own, and the piece after it holds the answer without naming the subject
SECTION = (
    f"## Cool Hand Luke\n\n{SECOND} The score was written by Lalo Schifrin, and the film "
    "earned four Academy Award nominations in all, for its screenplay and its score among them."
)


def split_section(*, placed: bool = False) -> list[Document]:
    """The section cut by LangChain's splitter, in the source's order, and the other sources'
    pieces after them (as a request sends pieces it did not rank); ``placed``: each piece with
    metadata that makes it a source of its own."""
    splitter = RecursiveCharacterTextSplitter(chunk_size=200, chunk_overlap=0)
    cut = splitter.split_text(SECTION)
    assert cut[0] == "## Cool Hand Luke" and ANSWER in cut[1]  # the shape the rule is for
    docs = [
        Document(id=f"luke-{i}", text=t, metadata={"source": i, "start_index": 0} if placed else {})
        for i, t in enumerate(cut)
    ]
    return docs + [Document(id=name, text=text) for name, text in OTHERS]


@pytest.mark.parametrize("scorer", ["hybrid", "bm25"])
def test_a_heading_cut_off_alone_goes_on_in_the_document_after_it(scorer: str) -> None:
    kept, dropped, _ = run(RetrievalStage(scorer=scorer, next_pieces=0), split_section())
    assert kept[0] == "luke-0" and "document:luke-1" in dropped  # the heading alone is kept
    kept, dropped, details = run(RetrievalStage(scorer=scorer), split_section())
    assert kept[0] == "luke-0" and "luke-1" in kept and "document:luke-1" not in dropped
    assert details["next_pieces"] == [{"id": "luke-1", "after": "document:luke-0"}]


def test_placed_pieces_follow_their_metadata_not_a_heading() -> None:
    # the metadata says the piece after the heading is another source's: it is not kept
    kept, _, details = run(RetrievalStage(), split_section(placed=True))
    assert "luke-1" not in kept and "next_pieces" not in details


def test_next_piece_of_reads_a_heading_only_where_nothing_places_it() -> None:
    docs = [
        Document(id="head", text="## Cool Hand Luke"),
        Document(id="body", text=SECOND),
        doc("placed-head", "Daylight saving time", "s", 0),
        doc("placed-body", "It began in 1918.", "t", 0),  # another source: not its piece
        Document(id="head-2", text="Joe's Garage"),
        doc("placed-after", "A single by Frank Zappa.", "u", 0),
        doc("placed-head-2", "Slasher (TV series)", "v", 0),
        Document(id="loose", text="It was filmed in Sudbury."),  # the metadata says no piece
        Document(id="last", text="Slasher (TV series)"),
    ]
    keys = ("source", "start_index")
    heads = [0, 2, 4, 6, 8]
    assert next_piece_of(docs, range(len(docs)), keys) == {}
    assert next_piece_of(docs, range(len(docs)), keys, heads) == {0: 1}
    assert next_piece_of(docs, [0, *range(2, 9)], keys, heads) == {}  # "body" is not valid
