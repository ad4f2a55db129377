"""Long documents scored by their parts and trimmed to them (``promptslim.stages.windows``)."""

from __future__ import annotations

import json
import re
import textwrap

import pytest

from promptslim.errors import ConfigError
from promptslim.pipeline import Pipeline
from promptslim.stages.retrieval import DEFAULT_MAX_WINDOWS, RetrievalStage
from promptslim.stages.window_select import select_units, selected_text
from promptslim.stages.windows import split_windows
from promptslim.types import Document, Message, Request

QUESTION = "When did the Marlow Harbour Bridge open to traffic?"
ANSWER = "19 March 1932"

# the town's history: the bridge's opening date only in its last sentence
HISTORY = " ".join(
    [
        "Marlow grew from a fishing village on the northern shore of the estuary.",
        "Its first market charter was granted by the crown in the thirteenth century.",
        "The parish church of Saint Peter was rebuilt in stone after a fire in 1402.",
        "Wool merchants built the guildhall and the long warehouses along the quay.",
        "During the civil war the town changed hands twice and its walls were slighted.",
        "The canal to the inland mills was dug in the 1790s and carried coal and grain.",
        "Shipyards on the eastern bank launched clippers and later iron steamers.",
        "A railway station opened on the western side of the town in 1847.",
        "The grammar school, founded by a merchant's bequest, moved to new buildings.",
        "Population doubled in the Victorian era as the docks and foundries expanded.",
        "Trams ran along the high street from 1901 until buses replaced them.",
        "The town hall, with its clock tower, was completed in the Edwardian style.",
        "Ferries were the only link across the estuary for most of the town's history.",
        "Engineers proposed a crossing several times before work finally began in 1924.",
        f"After eight years of construction the Marlow Harbour Bridge was opened to traffic on {ANSWER}.",
    ]
)
OVERVIEW = (
    "The Marlow Harbour Bridge is a steel through arch bridge across the harbour of Marlow. "
    "The Marlow Harbour Bridge carries rail, vehicle, bicycle and pedestrian traffic between "
    "the town centre and the northern shore. The bridge is nicknamed the Coathanger."
)
# a near-duplicate of the overview (a second crawl of the same page)
OVERVIEW_COPY = OVERVIEW.replace("The bridge is nicknamed", "Locals call the bridge")
DISTRACTORS = [
    "The Tamar Bridge is a suspension bridge carrying road traffic over the River Tamar.",
    "Marlow Harbour hosts a sailing regatta every summer with boats from the whole coast.",
    "Harbour bridges need regular repainting; the work on a large arch takes ten years.",
]


def knowledge_base() -> list[Document]:
    docs = [
        Document(id="overview", text=OVERVIEW),
        Document(id="overview-copy", text=OVERVIEW_COPY),
        Document(id="history", text=HISTORY),
    ]
    docs += [Document(id=f"other-{i}", text=t) for i, t in enumerate(DISTRACTORS)]
    return docs


def request_of(docs: list[Document], question: str = QUESTION) -> Request:
    return Request(
        messages=[
            Message(role="system", content="Answer from the documents."),
            Message(role="user", content=question),
        ],
        documents=docs,
    )


# ---------------------------------------------------------------- windows


def test_windows_are_sentence_aligned_and_overlap() -> None:
    windowed = split_windows([HISTORY], [None], window_chars=300, overlap=1, max_windows=64)
    assert len(windowed.windows) > 3
    units = windowed.units[0]
    starts = {u.start for u in units}
    for a, b in zip(windowed.windows, windowed.windows[1:]):
        assert units[a.first].start in starts
        assert b.first == a.last - 1  # one sentence shared with the window before
    assert windowed.windows[-1].last == len(units)


def test_short_document_is_one_window_read_as_before() -> None:
    windowed = split_windows([OVERVIEW], ["Title"], window_chars=600, overlap=1, max_windows=64)
    assert [w.text for w in windowed.windows] == [f"Title\n{OVERVIEW}"]


def test_windows_are_bounded_per_request() -> None:
    huge = "This sentence is about nothing in particular at all. " * 4000  # ~220 KB
    windowed = split_windows(
        [huge, HISTORY], [None, None], window_chars=300, overlap=1, max_windows=16
    )
    assert len(windowed.windows) <= 16
    assert all(len(w.text) <= 3 * windowed.window_chars for w in windowed.windows)


def test_unpunctuated_text_is_cut_at_spaces_outside_protected_spans() -> None:
    url = "https://example.com/" + "a" * 500
    text = ("word " * 200) + url + (" word" * 200)
    windowed = split_windows([text], [None], window_chars=200, overlap=0, max_windows=64)
    pieces = [u.of(text) for u in windowed.units[0]]
    assert "".join(pieces) == text
    assert any(url in p for p in pieces)  # the URL is one unit's, never cut


def test_select_units_keeps_best_window_and_its_context() -> None:
    windowed = split_windows([HISTORY], [None], window_chars=300, overlap=0, max_windows=64)
    n = len(windowed.windows)
    scores = [0.0] * n
    scores[-1] = 1.0
    keep = select_units(windowed, 0, scores, 0.5, context=1, first=True)
    assert keep is not None
    last = windowed.windows[-1]
    assert keep[0] and all(keep[last.first - 1 : last.last])
    assert not all(keep)


# passages joined into one chunk, as splitters and RAG stores send them: each a paragraph,
# its title on the first line; the bridge's opening date in the last one
CHUNK = "\n\n".join(
    [
        (
            "Marlow Grammar School\nThe grammar school was founded by a merchant's bequest in "
            "1561. It moved to new buildings on the hill in 1880. Its library holds early printed "
            "books. The school admitted girls for the first time in 1976. Its choir sings at the "
            "cathedral each Christmas, and its rowing crews race on the river every spring."
        ),
        (
            "Marlow Railway Station\nA railway station opened on the western side of the town "
            "in 1847. The line was doubled in 1890 and electrified in 1967. Trains run to the "
            "capital every half hour, and a branch line serves the mills upstream. The station "
            "building, of yellow brick, was listed in 1984 and restored by volunteers."
        ),
        (
            "Marlow Harbour Bridge\nEngineers proposed a crossing several times before work "
            "began in 1924. The steel arch was built out from both shores. The arch rises 130 "
            "metres above the water and its deck carries eight lanes. After eight years of "
            f"construction the Marlow Harbour Bridge was opened to traffic on {ANSWER}."
        ),
    ]
)


def test_context_of_a_kept_part_stays_in_its_paragraph() -> None:
    windowed = split_windows([CHUNK], [None], window_chars=150, overlap=1, max_windows=64)
    units = windowed.units[0]
    last = windowed.windows[-1]
    scores = [0.0] * len(windowed.windows)
    scores[-1] = 1.0
    keep = select_units(windowed, 0, scores, 0.5, context=1, first=True, text=CHUNK)
    assert keep is not None
    kept = selected_text(CHUNK, units, keep)
    assert kept.startswith("Marlow Harbour Bridge\n") and ANSWER in kept  # its first line
    assert "Grammar School" not in kept and "branch line" not in kept  # other passages'
    # without the text, the document's first unit and the unit before, as before
    old = select_units(windowed, 0, scores, 0.5, context=1, first=True)
    assert old is not None and old[0] and old[last.first - 1]


# CHUNK as a loader that collapsed its whitespace sends it: the station's first keeper named
# only in the sentence after the one the question matches
FLAT = " ".join(
    CHUNK.replace(
        "in 1847. The line",
        "in 1847. Edwin Hale, a former coachman from the farms on the hill, ran it for its "
        "first thirty years. The line",
    ).split()
)


@pytest.mark.parametrize("scorer", ["bm25", "hybrid"])
def test_flat_prose_keeps_the_sentence_after_the_part_that_matches(scorer: str) -> None:
    question = "Who was in charge of the railway station of Marlow when it opened in 1847?"
    request = Request(
        messages=[Message(role="user", content=question)],
        documents=[Document(id="d", text=FLAT)],
    )

    def kept(**options: int) -> str:
        stage = RetrievalStage(scorer=scorer, window_chars=150, **options)
        return Pipeline([stage]).run(request).request.documents[0].text

    assert "Edwin Hale" in kept()  # the default keeps the sentence after
    assert "Edwin Hale" not in kept(context_after=0)  # the window alone ends before it
    assert "Grammar School" in kept() and "Harbour Bridge" not in kept()


def test_the_sentence_after_stays_in_its_paragraph_and_line() -> None:
    # a paragraph's end: the next passage's title line is not "the sentence after"
    windowed = split_windows([CHUNK], [None], window_chars=150, overlap=1, max_windows=64)
    units = windowed.units[0]
    closing = [
        w for w, window in enumerate(windowed.windows) if "restored by volunteers" in window.text
    ]
    scores = [0.0] * len(windowed.windows)
    scores[closing[0]] = 1.0
    keep = select_units(windowed, 0, scores, 0.5, context=0, first=False, after=1, text=CHUNK)
    assert keep is not None and "Harbour Bridge" not in selected_text(CHUNK, units, keep)
    # a table's rows, each on a line of its own: the next row is another record
    table = "".join(f"host-{i:02d} runs in eu-west-{i % 3} on port 80{i:02d}.\n" for i in range(12))
    windowed = split_windows([table], [None], window_chars=100, overlap=0, max_windows=64)
    units = windowed.units[0]
    scores = [0.0] * len(windowed.windows)
    scores[1] = 1.0
    keep = select_units(windowed, 0, scores, 0.5, context=0, first=False, after=1, text=table)
    assert keep is not None
    assert sum(keep) == windowed.windows[1].last - windowed.windows[1].first
    # the same rows as prose on one line: the sentence after stays
    prose = table.replace("\n", " ")
    windowed = split_windows([prose], [None], window_chars=100, overlap=0, max_windows=64)
    scores = [0.0] * len(windowed.windows)
    scores[1] = 1.0
    keep = select_units(windowed, 0, scores, 0.5, context=0, first=False, after=1, text=prose)
    assert keep is not None
    assert sum(keep) == windowed.windows[1].last - windowed.windows[1].first + 1


def test_a_paragraph_about_one_window_long_is_not_cut() -> None:
    # each passage of the chunk is a little longer than a window: one window each, its title
    # line in it, not a window and a stub
    paragraphs = CHUNK.split("\n\n")
    assert all(300 < len(p) <= 1.25 * 300 for p in paragraphs)
    windowed = split_windows([CHUNK], [None], window_chars=300, overlap=1, max_windows=64)
    assert [w.text for w in windowed.windows] == paragraphs
    # a paragraph well past a window is still cut, never across a paragraph break
    windowed = split_windows([CHUNK], [None], window_chars=200, overlap=1, max_windows=64)
    assert len(windowed.windows) > len(paragraphs)
    assert not any("\n\n" in w.text for w in windowed.windows)


def test_lexical_store_windows_keep_the_shorter_windows() -> None:
    # a store's document read past its head by BM25 alone (store_windows="lexical") is cut
    # as before; without a store's vector, or under "embed", its paragraphs stay whole
    from promptslim.stages.retrieval_options import RetrievalOptions
    from promptslim.stages.retrieval_scoring import _windows

    paragraphs = CHUNK.split("\n\n")
    stored = Document(id="chunk", text=CHUNK, embedding=[0.1] * 384)
    plain = Document(id="chunk", text=CHUNK)
    lexical = RetrievalOptions.parse(window_chars=300, store_windows="lexical")
    embed = RetrievalOptions.parse(window_chars=300)
    assert len(_windows(lexical, [stored], (), 32).windows) > len(paragraphs)
    assert [w.text for w in _windows(lexical, [plain], (), 32).windows] == paragraphs
    assert [w.text for w in _windows(embed, [stored], (), 32).windows] == paragraphs


@pytest.mark.slow
def test_a_chunk_keeps_the_answering_passage_with_its_title_line_only() -> None:
    docs = [Document(id="chunk", text=CHUNK)] + [
        Document(id=f"other-{i}", text=t) for i, t in enumerate(DISTRACTORS)
    ]
    result = Pipeline([RetrievalStage()]).run(request_of(docs))
    kept = next(d.text for d in result.request.documents if d.id == "chunk")
    assert kept.startswith("Marlow Harbour Bridge\n") and ANSWER in kept
    assert "Grammar School" not in kept


# the same chunk as loaders also send it: one paragraph a line, or hard-wrapped at 60 columns
CHUNK_LINES = CHUNK.replace("\n\n", "\n")
CHUNK_WRAPPED = "\n".join(
    "\n".join([title, textwrap.fill(body, 60)])
    for title, body in (p.split("\n", 1) for p in CHUNK.split("\n\n"))
)


def test_paragraphs_are_found_without_blank_lines() -> None:
    """One paragraph a line, or wrapped prose: each passage is still one window, its title in
    it (a window does not run from one passage into the next)."""
    for text in (CHUNK_LINES, CHUNK_WRAPPED):
        windowed = split_windows([text], [None], window_chars=300, overlap=1, max_windows=64)
        heads = [" ".join(w.text.split())[:30] for w in windowed.windows]
        assert heads == [" ".join(p.split())[:30] for p in CHUNK.split("\n\n")], text


@pytest.mark.slow
@pytest.mark.parametrize("text", [CHUNK_LINES, CHUNK_WRAPPED], ids=["lines", "wrapped"])
def test_a_chunk_without_blank_lines_keeps_the_answering_passage_only(text: str) -> None:
    kept = kept_of_chunk(text)
    assert kept.startswith("Marlow Harbour Bridge\n") and ANSWER in " ".join(kept.split())
    assert "Grammar School" not in kept and "Railway" not in kept


def test_windows_per_request_are_capped_by_default() -> None:
    long_docs = [Document(id=f"d{i}", text=HISTORY) for i in range(6)]  # ~6,500 characters
    stage = RetrievalStage(scorer="bm25")
    result = Pipeline([stage]).run(request_of(long_docs))
    assert result.report.stages[0].details["windows"] <= DEFAULT_MAX_WINDOWS


# ---------------------------------------------------------------- the stage


@pytest.mark.slow
def test_answer_late_in_a_long_document_is_kept() -> None:
    result = Pipeline([RetrievalStage()]).run(request_of(knowledge_base()))
    kept = {d.id: d.text for d in result.request.documents}
    assert "history" in kept
    assert ANSWER in kept["history"]
    assert len(kept["history"]) < len(HISTORY) / 2  # trimmed to the part that answers


@pytest.mark.slow
def test_near_duplicates_do_not_push_out_the_document_holding_the_answer() -> None:
    result = Pipeline([RetrievalStage()]).run(request_of(knowledge_base()))
    ids = [d.id for d in result.request.documents]
    assert "history" in ids
    assert not {"overview", "overview-copy"} <= set(ids)  # one twin goes, as a duplicate
    reasons = [c.reason for c in result.report.stages[0].changes if c.kind == "dropped"]
    assert any("near-duplicate" in r for r in reasons)


@pytest.mark.slow
def test_the_report_lists_what_was_kept_of_each_document() -> None:
    result = Pipeline([RetrievalStage()]).run(request_of(knowledge_base()))
    stage = result.report.stages[0]
    compressed = [c for c in stage.changes if c.kind == "compressed"]
    assert [c.target for c in compressed] == ["document:history"]
    assert compressed[0].reason.startswith("kept sentences ") and compressed[0].tokens > 0
    (parts,) = stage.details["kept_parts"]
    kept_text = next(d.text for d in result.request.documents if d.id == "history")
    for start, end in parts["spans"]:
        assert HISTORY[start:end] in kept_text  # byte-exact sentences of the original


@pytest.mark.slow
def test_protected_spans_survive_selection_byte_exact() -> None:
    blob = json.dumps({"bridge": "Marlow", "opened": ANSWER, "id": "c0ffee-42"})
    text = HISTORY.replace("The town hall", f"Records: {blob}. The town hall")
    docs = [Document(id="history", text=text), Document(id="o", text=OVERVIEW)]
    result = Pipeline([RetrievalStage(window_chars=200)]).run(
        request_of(docs, "bridge records json")
    )
    kept = next(d.text for d in result.request.documents if d.id == "history")
    assert blob in kept  # kept whole, byte for byte, though windows are shorter than it
    assert len(kept) < len(text)  # and the rest of the document was trimmed


def _with_store_vectors() -> Request:
    from promptslim.backends.embeddings import EmbeddingService

    service = EmbeddingService.get()
    docs = knowledge_base()
    # the store's vectors (whole-document, as a store indexes them), the query's too
    vectors = service.embed([d.text for d in docs] + [QUESTION])
    docs = [d.model_copy(update={"embedding": v.tolist()}) for d, v in zip(docs, vectors)]
    return request_of(docs).replace(query_embedding=vectors[-1].tolist())


@pytest.mark.slow
@pytest.mark.parametrize("store_windows", ["embed", "lexical"])
def test_a_vector_store_embedding_does_not_blind_the_stage_to_later_parts(
    store_windows: str,
) -> None:
    request = _with_store_vectors()
    stage = RetrievalStage(store_windows=store_windows)  # type: ignore[arg-type]
    # the model that embeds the later windows: the float one with store_float, else the
    # scorer's own (int8 on a CPU); the store's query vector meets them, unless int8 drifts
    # from float (torch's): then it embeds a query of its own
    store = stage.get_scorer().service(float32=stage.store_float)  # type: ignore[attr-defined]
    store.clear_cache()
    query_too = 0 if store.near_float else 1
    result = Pipeline([stage]).run(request)
    kept = {d.id: d.text for d in result.request.documents}
    assert ANSWER in kept.get("history", "")  # the answer, in the history's last window
    details = result.report.stages[0].details
    n_docs, later = len(request.documents), details["windows"] - len(request.documents)
    assert later > 0 and details["embeddings_reused"] == n_docs  # the first windows
    if store_windows == "embed":  # the later windows embedded, none scored lexically only
        assert store.cache_info()["size"] == later + query_too
        assert "lexical_only" not in details
    else:  # scored by their terms: nothing embedded at all
        assert store.cache_info()["size"] == 0 and details["lexical_only"] == later


@pytest.mark.slow
def test_lexical_only_windows_score_as_their_bm25_standing() -> None:
    from promptslim.backends.lexical import BM25Scorer
    from promptslim.backends.scorers import HybridScorer, minmax

    texts = [OVERVIEW, HISTORY[:300], HISTORY[-300:], *DISTRACTORS]
    scorer = HybridScorer()
    flags = [False, False, True, False, False, False]
    scored = scorer.score(QUESTION, texts, lexical_only=flags)
    lexical = minmax(BM25Scorer().score(QUESTION, texts).scores)
    # the lexical-only text's fused score is its normalised BM25 score, and it has no vector
    assert scored.scores[2] == pytest.approx(lexical[2])
    assert scored.vectors is not None and not scored.vectors[2].any()
    assert scored.details["lexical_only"] == 1


def test_whole_documents_when_windows_are_off() -> None:
    stage = RetrievalStage(scorer="bm25", window_chars=None)
    result = Pipeline([stage]).run(request_of(knowledge_base()))
    assert all(c.kind != "compressed" for c in result.report.stages[0].changes)
    assert "windows" not in result.report.stages[0].details


def test_selection_inside_can_be_turned_off() -> None:
    stage = RetrievalStage(scorer="bm25", window_chars=300, select_within=False)
    result = Pipeline([stage]).run(request_of(knowledge_base()))
    texts = {d.id: d.text for d in result.request.documents}
    assert texts.get("history") == HISTORY


@pytest.mark.parametrize(
    ("option", "value"),
    [("window_chars", 10), ("window_overlap", -1), ("max_windows", 0),
     ("select_fraction", 1.5), ("context_sentences", -1), ("store_windows", "skip")],
)  # fmt: skip
def test_bad_window_options_name_the_field(option: str, value: object) -> None:
    with pytest.raises(ConfigError) as info:
        RetrievalStage(**{option: value})
    assert info.value.field == option


def test_chinese_windows_hold_about_as_many_sentences_as_english_ones() -> None:
    """A CJK character says about what three Latin letters say: a window of ``window_chars``
    Chinese characters would hold three times the sentences of an English one, and selection
    inside a chunk could not cut it."""
    chinese = "".join(
        f"第{i}号仓库位于城市的东边，里面存放着许多旧的书籍和地图。" for i in range(40)
    )
    english = " ".join(
        f"Warehouse {i} lies east of the city and holds old books." for i in range(40)
    )
    sizes = {}
    for name, text in (("zh", chinese), ("en", english)):
        windowed = split_windows([text], [None], window_chars=600, overlap=0, max_windows=64)
        units = windowed.units[0]
        sizes[name] = sum(w.last - w.first for w in windowed.windows) / len(windowed.windows)
        assert all(units[w.last - 1].end - units[w.first].start <= 600 for w in windowed.windows)
    assert sizes["zh"] <= 1.5 * sizes["en"]  # 600 characters held 20 Chinese sentences, 10 English


def test_a_chinese_chunk_keeps_the_answering_passage_and_drops_the_rest() -> None:
    facts = [f"第{i}号仓库位于城市的东边，里面存放着许多旧的书籍和地图。" for i in range(40)]
    facts[27] = "青云图书馆的徽标是靛蓝色的，这是它建馆时就定下的颜色。"
    request = Request(
        messages=[Message(role="user", content="青云图书馆的徽标是什么颜色？")],
        documents=[Document(id="d0", text="".join(facts))],
    )
    kept = Pipeline([RetrievalStage(scorer="bm25")]).run(request).request.documents
    assert "靛蓝色" in kept[0].text
    # with the sentence after the window: 0.35 (a window of 600 characters kept 0.55)
    assert len(kept[0].text) < 0.4 * len("".join(facts))


# ---------------------------------------------------------------- what the model reads

# a splitter's piece of about 500 characters whose head is about something else: what answers
# the question starts past its first 64 word pieces
FERRY = (
    "The market square fills every Saturday with stalls selling fish, cheese, wool and "
    "vegetables from the farms around the bay, and the cafes along its north side stay open "
    "late through the summer. The library, the post office and the old courthouse face the "
    "square, and a bronze statue of a fisherman stands beside the fountain at its centre. "
    "From the pier below the square the ferry to Inishmore leaves every two hours, and the "
    "crossing takes forty minutes in calm weather. Timetables hang in the harbour office."
)
ISLAND_PIECES = [
    (
        "The largest of the islands in the bay has three villages, a lighthouse and a school "
        "of forty pupils. Most families fish or keep sheep on the stony fields."
    ),
    (
        "The lifeboat station on the pier was founded in 1890, and its crews have rescued "
        "fishermen and sailors caught by storms off the islands ever since."
    ),
    (
        "Winter gales close the coast road several times a year, and the islands are cut off "
        "from the mainland until the sea calms down."
    ),
]


@pytest.mark.slow
def test_the_model_reads_past_the_head_of_a_piece() -> None:
    from promptslim.backends.dense import DEFAULT_MAX_SEQ_LENGTH, DenseScorer

    question = "How long is the boat trip out to Inishmore?"
    texts = [*ISLAND_PIECES, FERRY]
    scorer = DenseScorer()
    pieces = len(scorer.service().load().tokenizer(FERRY)["input_ids"])
    assert 100 <= pieces and DEFAULT_MAX_SEQ_LENGTH < pieces  # longer than what is read
    ranked = [int(i) for i in (-scorer.score(question, texts).scores).argsort()]
    assert ranked[0] == len(texts) - 1
    # read only as far as its first 64 word pieces, the piece is about the market
    head = DenseScorer(max_seq_length=64).score(question, texts).scores
    assert int(head.argmax()) != len(texts) - 1


# the bridge's passage with the date at the end of a long sentence that names the bridge
BRIDGE = (
    "Engineers proposed a crossing several times before work began in 1924. The steel arch "
    "was built out from both shores, and its deck carries eight lanes. The Marlow Harbour "
    "Bridge was opened to traffic after eight years of construction, with a ceremony that "
    f"the mayor and the engineers who had designed its steel arch attended, on {ANSWER}."
)


def kept_of_chunk(text: str) -> str:
    """What the default retrieval stage keeps of chunk ``text`` among ``DISTRACTORS``."""
    docs = [Document(id="chunk", text=text)] + [
        Document(id=f"other-{i}", text=t) for i, t in enumerate(DISTRACTORS)
    ]
    result = Pipeline([RetrievalStage()]).run(request_of(docs))
    return next(d.text for d in result.request.documents if d.id == "chunk")


def paged_chunk() -> str:
    """``CHUNK_WRAPPED`` as a PDF's text: the bridge's passage (``BRIDGE``) runs onto a second
    page, its last sentence cut by the first page's foot and the second page's head, the
    subject above the break and the date below it."""
    lines = textwrap.fill(BRIDGE, 60).split("\n")
    cut = next(i for i, line in enumerate(lines) if "traffic" in line) + 1
    top = CHUNK_WRAPPED.split("\nMarlow Harbour Bridge\n")[0]
    pages = [
        [top, "Marlow Harbour Bridge", *lines[:cut]],
        lines[cut:],
    ]
    return "\n\n".join(
        "\n".join(["MARLOW GAZETTEER", *page, f"Page {n}"]) for n, page in enumerate(pages, 1)
    )


@pytest.mark.slow
def test_a_sentence_cut_by_a_page_break_keeps_its_second_half() -> None:
    """Text extracted from a PDF: the sentence that names the bridge goes on past the page's
    foot and the next page's head, and the date it opened is on the next page."""
    text = paged_chunk()
    assert ANSWER not in text.split("Page 1")[0] and "traffic" in text.split("Page 1")[0]
    kept = kept_of_chunk(text)
    assert ANSWER in " ".join(kept.split())
    assert "Grammar School" not in kept and "Railway" not in kept


# ``BRIDGE`` inside a longer passage: its sentence that names the bridge and the date is
# longer than a line, and crosses from one window into the next
BRIDGE_LONG = (
    "The arch was painted grey in its first years and green after the war. Its approach roads "
    f"cross the old quay on brick viaducts of eleven spans. {BRIDGE} A toll was charged until "
    "the construction loans were paid off in 1988. The pylons at either end hold no load and "
    "were added for the look of it. Pedestrians cross on a walkway on the eastern side."
)


def quoted_chunk() -> str:
    """``CHUNK``'s passages as an e-mail thread, each a message's quoted text (wrapped behind
    ``> ``), the bridge's passage ``BRIDGE_LONG``: the date is lines below the bridge's name."""
    messages = []
    for n, passage in enumerate(CHUNK.split("\n\n")):
        title, body = passage.split("\n", 1)
        body = BRIDGE_LONG if title == "Marlow Harbour Bridge" else body
        quoted = [f"> {line}" for line in textwrap.wrap(body, 58)]
        head = [f"From: clerk{n}@example.com", f"Subject: Re: {title}", "", "See below.", ""]
        messages.append("\n".join([*head, f"On Sunday, clerk{n + 1} wrote:", *quoted]))
    return "\n\n".join(messages)


@pytest.mark.slow
def test_a_quoted_sentence_keeps_its_lines_together() -> None:
    """In a message's quoted text, the sentence that names the bridge goes on over the quoted
    lines to the date it opened: the lines behind ``> `` are wrapped prose."""
    text = quoted_chunk()
    assert "\n> " in text.split(ANSWER)[0].split("Harbour")[-1]  # the date lines below the name
    kept = kept_of_chunk(text)
    assert ANSWER in " ".join(kept.replace("\n> ", " ").split())
    assert "Grammar School" not in kept and "Railway" not in kept


def captioned_chunk() -> str:
    """``CHUNK``'s passages as caption files (WebVTT), each under its name, the bridge's passage
    ``BRIDGE_LONG``: lines of 42 characters, two to a timed cue, so the sentence that names
    the bridge runs over cues to the date it opened."""
    files = []
    for passage in CHUNK.split("\n\n"):
        title, body = passage.split("\n", 1)
        body = BRIDGE_LONG if title == "Marlow Harbour Bridge" else body
        lines = textwrap.wrap(body, 42)
        cues = [
            f"00:00:{3 * n:02d}.000 --> 00:00:{3 * n + 2:02d}.500\n" + "\n".join(pair)
            for n, pair in enumerate(zip(lines[::2], [*lines[1::2], ""]))
        ]
        files.append(f"{title}.vtt\n\nWEBVTT\n\n" + "\n\n".join(c.rstrip() for c in cues))
    return "\n\n".join(files)


@pytest.mark.slow
def test_a_sentence_across_caption_cues_keeps_its_cues_together() -> None:
    """In caption files, the sentence that names the bridge goes on over cues to the date it
    opened: a cue's end is no sentence's, its id and timing line inside the sentence."""
    text = captioned_chunk()
    assert " --> " in text.split(ANSWER)[0].split("Harbour")[-1]  # the date cues below the name
    kept = kept_of_chunk(text)
    assert ANSWER in " ".join(re.sub(r"\n\n.* --> .*\n", " ", kept).split())
    assert "Grammar School" not in kept and "Railway" not in kept


#: the bridge's passage with its name two sentences before the date it opened
BRIDGE_NAMED_EARLY = (
    "The arch was painted grey in its first years and green after the war. Engineers proposed "
    "the Marlow Harbour Bridge several times before work began in 1924. The steel arch was "
    "built out from both shores, and its deck carries eight lanes. The mayor and the engineers "
    f"who had designed it attended the ceremony. It was opened to traffic on {ANSWER}. A toll "
    "was charged until the construction loans were paid off in 1988. The pylons at either end "
    "hold no load and were added for the look of it."
)
SPEAKERS = ("Dana Whitfield", "Marco Ruiz", "Priya Natarajan")


def meeting_chunk() -> str:
    """``CHUNK``'s passages as a meeting tool's WebVTT transcripts, eight words to a cue after
    its speaker's name, the bridge's passage ``BRIDGE_NAMED_EARLY``."""
    files = []
    for k, passage in enumerate(CHUNK.split("\n\n")):
        title, body = passage.split("\n", 1)
        words = (BRIDGE_NAMED_EARLY if title == "Marlow Harbour Bridge" else body).split()
        cues = [
            f"{n + 1}\n00:00:{3 * n:02d}.000 --> 00:00:{3 * n + 2:02d}.500\n"
            f"{SPEAKERS[k % 3]}: " + " ".join(words[i : i + 8])
            for n, i in enumerate(range(0, len(words), 8))
        ]
        files.append(f"{title}.vtt\n\nWEBVTT\n\n" + "\n\n".join(cues))
    return "\n\n".join(files)


@pytest.mark.slow
def test_a_meeting_transcript_keeps_the_sentences_after_the_subject() -> None:
    """In a meeting's transcript the cues' ids and timing lines take near half the
    characters: a window still holds a prose window's words, so the date two sentences after
    the bridge's name stays with it."""
    kept = kept_of_chunk(meeting_chunk())
    assert ANSWER in " ".join(re.sub(r"\n\n\d+\n.* --> .*\n[\w ]+: ", " ", kept).split())
    assert "Grammar School" not in kept and "Railway" not in kept
