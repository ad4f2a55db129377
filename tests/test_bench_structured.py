"""The structured shapes (benchmarks/structured_data.py, bench_structured.py) hold what they
claim: one fact asked for among look-alikes, seeded, and the NQ passages re-laid intact."""

from __future__ import annotations

import random
import re
from html import escape
from itertools import pairwise
from pathlib import Path

import bench_structured
import inline_data
import pytest
import shapes_data
import structured_data
from caption_data import CAPTION_COLUMNS, MEETING_WORDS
from mail_data import QUOTE_COLUMNS, SENDERS

from promptslim.bench.datasets import BenchItem, load_dataset
from promptslim.bench.file_datasets import NQ_INSTRUCTION, qa_request
from promptslim.bench.metrics import evidence_retention
from promptslim.bench.runner import build_config
from promptslim.query import ask_of, questions_in
from promptslim.text import split_sentences
from promptslim.tokens import count_document, get_counter
from promptslim.types import Document

SAMPLE = Path(__file__).parent / "data" / "nq20-dev.jsonl.gz"


@pytest.fixture(scope="module")
def nq() -> list[BenchItem]:
    return load_dataset(f"nq:{SAMPLE}", limit=3).items


@pytest.mark.parametrize("name", sorted(structured_data.GENERATED))
def test_a_generated_item_holds_its_answer_once_in_one_document(name: str) -> None:
    make = structured_data.GENERATED[name]
    for i in range(5):
        item = make(random.Random(i), i)
        answer = item.answers[0]  # as the documents write it; any other is its compact form
        holding = [d for d in item.request.documents if answer in d.text]
        assert len(holding) == 1, (name, i)
        assert holding[0].text.count(answer) == 1
        assert all(a.replace(" ", "") == answer.replace(" ", "") for a in item.answers)
        assert len(item.request.documents) == structured_data.DOCUMENTS


def test_the_same_seed_builds_the_same_items(nq: list[BenchItem]) -> None:
    def texts(shapes: dict[str, list[BenchItem]]) -> list[str]:
        return [d.text for items in shapes.values() for it in items for d in it.request.documents]

    assert texts(structured_data.build(nq, 2, seed=3)) == texts(structured_data.build(nq, 2, 3))
    assert texts(structured_data.build(nq, 2, seed=3)) != texts(structured_data.build(nq, 2, 4))


#: the shapes that re-cut the joined passages (each piece a document): tested on their own
RESPLIT = ("langchain500", "langchain500_placed", "tokens256")


def test_the_prose_shapes_keep_every_passage_and_the_question(nq: list[BenchItem]) -> None:
    shapes = structured_data.build(nq, 1)
    for name in (
        set(structured_data.PROSE)
        - set(RESPLIT)
        - {"transcript4", "pages4", "mail4", "subtitles4", "meeting4", "markdown_sections"}
    ):
        laid = (lambda t: escape(t, quote=False)) if name == "html4" else (lambda t: t)
        for item, relaid in zip(nq, shapes[name]):
            joined = "\n".join(d.text for d in relaid.request.documents)
            assert all(laid(d.text) in joined for d in item.request.documents), name
            headed = [
                f"{d.title}\n{d.text}" in joined
                or f"## {d.title}\n\n{d.text}" in joined
                or f"<h2>{laid(d.title)}</h2>\n<p>{laid(d.text)}</p>" in joined
                for d in item.request.documents
                if d.title
            ]
            assert headed and all(headed) if name != "untitled4" else not any(headed), name
            assert item.request.query and item.request.query in ask_of(relaid.request).text
    assert len(shapes["long_document"][0].request.documents) == 1
    assert shapes["template_other4"][0].request.query is None  # the proxy's case


def test_pages_are_the_chunks_wrapped_under_a_running_head_and_over_their_number(
    nq: list[BenchItem],
) -> None:
    """``pages4``: the words of each titled chunk in their order, in lines of at most 80
    columns, pages of ``PAGE_LINES`` lines (more only where a page would end inside an answer)
    under the running head and over ``Page N``, the numbers going on from chunk to chunk; the
    answer whole on one page."""
    head, size = structured_data.RUNNING_HEAD, structured_data.PAGE_LINES
    for item, paged in zip(nq, structured_data.build(nq, 1)["pages4"]):
        numbers: list[int] = []
        chunks = structured_data._chunks(item, titled=True)
        assert len(paged.request.documents) == len(chunks)
        for chunk, doc in zip(chunks, paged.request.documents):
            pages = doc.text.split("\n\n")
            words: list[str] = []
            for page in pages:
                lines = page.split("\n")
                assert lines[0] == head and lines[-1].startswith("Page ")
                numbers.append(int(lines[-1].removeprefix("Page ")))
                assert all(len(line) <= 80 for line in lines[1:-1])
                assert len(lines) - 2 >= size or page is pages[-1]
                words += " ".join(lines[1:-1]).split()
            assert words == chunk.split()
        gold = "\n".join(d.text for d in item.request.documents if d.metadata.get("isgold"))
        if evidence_retention(gold, item.answers):
            pages = [p for d in paged.request.documents for p in d.text.split("\n\n")]
            assert any(evidence_retention(p, item.answers) for p in pages)
        assert numbers == list(range(1, len(numbers) + 1))


def test_a_thread_quotes_each_passage_under_its_title(nq: list[BenchItem]) -> None:
    """``mail4``: four messages to a chunk, each quoting one passage in order (its words, in
    lines of at most ``QUOTE_COLUMNS`` behind ``> ``) under a subject that is its title."""
    for item, mailed in zip(nq, structured_data.build(nq, 1)["mail4"]):
        docs = list(item.request.documents)
        chunks = [d.text for d in mailed.request.documents]
        assert len(chunks) == -(-len(docs) // 4)
        messages = [m for chunk in chunks for m in re.split(r"\n\n(?=From: )", chunk)]
        assert len(messages) == len(docs)
        for d, message in zip(docs, messages):
            lines = message.split("\n")
            quoted = [line for line in lines if line.startswith(">")]
            assert f"Subject: Re: {d.title}" in lines
            assert all(line.startswith("> ") and len(line) <= QUOTE_COLUMNS for line in quoted)
            assert " ".join(line[2:] for line in quoted).split() == d.text.split()
            assert lines[-len(quoted) :] == quoted


#: a cue's id and timing line (SRT's times with a comma, WebVTT's with a point)
CUE = re.compile(r"(\d+)\n(\d\d:\d\d:\d\d[,.]\d{3}) --> (\d\d:\d\d:\d\d[,.]\d{3})\n")


@pytest.mark.parametrize("shape", ["subtitles4", "meeting4"])
def test_timed_text_holds_each_passage_in_cues_under_its_title(
    nq: list[BenchItem], shape: str
) -> None:
    """``subtitles4`` and ``meeting4``: four files to a chunk, each one passage's words in
    order, under the passage's title: in numbered, timed cues (SRT and WebVTT in turn; a
    meeting's in WebVTT, a line a cue after its speaker's name), no cue ending in an answer."""
    for item, timed in zip(nq, structured_data.build(nq, 1)[shape]):
        docs = list(item.request.documents)
        chunks = [d.text for d in timed.request.documents]
        assert len(chunks) == -(-len(docs) // 4)
        files = [f for chunk in chunks for f in re.split(r"\n\n(?=[^\n]*\.(?:srt|vtt)\n)", chunk)]
        assert len(files) == len(docs)
        for n, (d, file) in enumerate(zip(docs, files)):
            srt = shape == "subtitles4" and n % 4 % 2 == 0
            head = f"{d.title}.{'srt' if srt else 'vtt'}" + ("" if srt else "\n\nWEBVTT")
            assert file.startswith(head + "\n\n1\n")
            cues = CUE.split(file[len(head) :])[1:]
            ids, texts = cues[0::4], [t.strip("\n") for t in cues[3::4]]
            assert ids == [str(i) for i in range(1, len(ids) + 1)]
            assert all(("," in t) == srt for t in cues[1::4])
            if shape == "subtitles4":
                assert all(len(line) <= CAPTION_COLUMNS for t in texts for line in t.split("\n"))
            else:
                speaker = f"{SENDERS[n % 4]}: "
                assert all(t.startswith(speaker) and "\n" not in t for t in texts)
                assert all(len(t.split()) - 2 >= MEETING_WORDS for t in texts[:-1])
                texts = [t[len(speaker) :] for t in texts]
            assert " ".join(texts).split() == d.text.split()
            assert not any(
                shapes_data.splits_answer(a, b, item.answers) for a, b in pairwise(texts)
            )


def test_a_page_does_not_end_inside_an_answer() -> None:
    words = ["lorem"] * 400  # 13 to a line of 80 columns
    at = 13 * structured_data.PAGE_LINES - 1  # the last word of a page's last line
    words[at : at + 2] = ["Frank", "Zappa"]
    text = structured_data._paged(" ".join(words), 1, ("Frank Zappa",))
    assert sum("Frank Zappa" in " ".join(p.split()) for p in text.split("\n\n")) == 1
    plain = structured_data._paged(" ".join(words), 1, ())
    assert not any("Frank Zappa" in " ".join(p.split()) for p in plain.split("\n\n"))


@pytest.mark.parametrize("name", RESPLIT)
def test_the_small_splitters_cut_the_joined_passages_into_pieces_of_their_size(
    nq: list[BenchItem], name: str
) -> None:
    item = nq[0]
    joined = shapes_data._joined(item)
    pieces = [d.text for d in structured_data.PROSE[name](item, random.Random(0)).request.documents]
    assert all(p in joined for p in pieces)  # cut out of the text, nothing rewritten
    if name.startswith("langchain500"):
        assert len(pieces) > len(item.request.documents)  # smaller than a passage, most
        assert max(map(len, pieces)) <= 500
        titled = [d.title for d in item.request.documents if d.title]
        assert sum(p.startswith(tuple(titled)) for p in pieces) < len(pieces) / 2
    else:
        counter = get_counter()
        assert max(counter.count(p) for p in pieces) <= 256
        assert len(pieces) >= counter.count(joined) / 256
        # the token splitter cuts inside sentences: some piece starts in the middle of one
        assert any(not p[:1].isupper() for p in pieces[1:])
    first, last = joined.split()[0], joined.split()[-1]
    assert pieces[0].startswith(first) and pieces[-1].endswith(last)


def test_the_placed_pieces_are_the_same_pieces_with_their_source_and_start(
    nq: list[BenchItem],
) -> None:
    item = nq[0]
    bare = structured_data.PROSE["langchain500"](item, random.Random(0)).request.documents
    placed = structured_data.PROSE["langchain500_placed"](item, random.Random(0)).request.documents
    assert [d.text for d in placed] == [d.text for d in bare]
    joined = shapes_data._joined(item)
    for d in placed:
        start = d.metadata["start_index"]
        assert d.metadata["source"] == str(item.id) and joined[start:].startswith(d.text)


def test_markdown_sections_hold_each_title_in_metadata_only(nq: list[BenchItem]) -> None:
    item = nq[0]
    docs = structured_data.PROSE["markdown_sections"](item, random.Random(0)).request.documents
    titles = [d.title for d in item.request.documents]
    assert [d.metadata["Header 1"] for d in docs][:1] == titles[:1]
    assert {d.metadata["Header 1"] for d in docs} == set(titles)
    for d in docs:
        assert "# " not in d.text and len(d.text) <= shapes_data.PIECE_CHARS
        assert d.title == d.metadata["Header 1"]  # what the retrieval stage reads as its title
    body = " ".join(" ".join(d.text.split()) for d in docs)
    for passage in item.request.documents:  # every passage's words, in pieces
        assert " ".join(passage.text.split()[:8]) in body


def test_html_pages_carry_the_markup_and_the_answer_as_the_page_writes_it() -> None:
    passages = [
        Document(id=f"p{i}", text=f"Text {i}.", metadata={"title": f"Title {i}"}) for i in range(6)
    ]
    passages[4] = Document(
        id="p4", text="AT&T was founded in 1885 <sic>.", metadata={"title": "AT&T"}
    )
    request = qa_request(NQ_INSTRUCTION, "when was at&t founded", passages)
    item = BenchItem("x", request, ("AT&T",))
    relaid = structured_data.html_pages(item, random.Random(0))
    pages = [d.text for d in relaid.request.documents]
    assert len(pages) == 2  # four passages to a chunk
    assert all(
        p.startswith(structured_data.NAV) and p.endswith(structured_data.FOOTER) for p in pages
    )
    assert (
        '<section id="at-t">\n<h2>AT&amp;T</h2>\n<p>AT&amp;T was founded in 1885 &lt;sic&gt;.</p>'
        in pages[1]
    )
    assert relaid.answers == ("AT&T", "AT&amp;T")


def test_the_headline_is_the_default_configs_worst_shape() -> None:
    def row(evidence: float, ratio: float, p99: float) -> dict:  # type: ignore[type-arg]
        return {"evidence": {"mean": evidence}, "token_ratio": ratio, "cold_p99_ms": p99}

    results = {
        "tables": {"default": row(1.0, 0.1, 30.0), "bm25": row(0.5, 0.9, 1.0)},
        "logs": {"default": row(0.96, 0.4, 20.0), "bm25": row(1.0, 0.05, 90.0)},
    }
    assert bench_structured.headline(results) == {
        "evidence_min": 0.96,
        "token_ratio_max": 0.4,
        "cold_p99_ms_max": 30.0,
    }
    results["whole_asks4"] = {"default": row(1.0, 1.0, 2.0)}  # everything meant to go on
    results["records_budget"] = {"default": row(0.5, 0.01, 99.0)}  # a budget's cut: apart
    assert bench_structured.headline(results) == {
        "evidence_min": 0.96,
        "token_ratio_max": 0.4,
        "cold_p99_ms_max": 30.0,
        "evidence_min_budget": 0.5,
    }
    assert bench_structured.headline({}) == {}


def test_the_records_budget_is_below_every_export_so_none_fits_whole() -> None:
    counter = get_counter()
    for i in range(5):
        item = structured_data.records(random.Random(i), i)
        sizes = [count_document(d, counter) for d in item.request.documents]
        assert min(sizes) > bench_structured.BUDGET_DOCUMENTS, sizes
    runs = bench_structured.under_budget(bench_structured.BUDGETED["records_budget"][1])
    assert sorted(runs) == ["default", "whole_json"]
    crush = {
        label: [getattr(s, "crush_json", None) for s in run.func.__self__.stages]  # type: ignore[attr-defined]
        for label, run in runs.items()
    }
    assert crush == {"default": [None, None, None, True], "whole_json": [None, None, None, False]}


def test_a_transcript_is_the_chunks_spoken_with_no_sentence_end(nq: list[BenchItem]) -> None:
    checked = 0
    for item, spoken in zip(nq, structured_data.build(nq, 1)["transcript4"]):
        texts = [d.text for d in spoken.request.documents]
        assert len(texts) == 5 and all(t == t.lower() and "\n" not in t for t in texts)
        assert all(len(split_sentences(t)) == 1 for t in texts)  # one run-on "sentence" each
        joined = " ".join(texts)
        for d in item.request.documents:
            assert structured_data.spoken(f"{d.title} {d.text}") in joined
        gold = "\n".join(d.text for d in item.request.documents if d.metadata.get("isgold"))
        if evidence_retention(gold, item.answers):  # the answer survives being spoken
            assert evidence_retention(joined, item.answers)
            checked += 1
    assert checked


def test_the_listed_shapes_are_json_lists_of_every_passage(nq: list[BenchItem]) -> None:
    from promptslim.stages.retrieval_lists import expand_lists

    shapes = structured_data.build(nq, 2)
    for name in structured_data.LISTED:
        for item, listed in zip(nq, shapes[name]):
            docs = listed.request.documents
            found = expand_lists(docs)
            assert found is not None and len(found.lists) == len(docs), name
            assert [d.text for d in found.documents] == [d.text for d in item.request.documents]
            assert listed.request.query == item.request.query
    assert len(shapes["list_document"][0].request.documents) == 1
    whole = build_config(bench_structured.LISTED_CONFIGS["whole_lists"]).pipeline
    assert [getattr(s, "document_lists", None) for s in whole.stages] == [None, None, False, None]


def test_the_whole_asks_shape_asks_for_the_chunks_as_a_whole(nq: list[BenchItem]) -> None:
    from promptslim.query import asks_for_whole

    shapes = structured_data.build(nq, 3)
    for asked, titled in zip(shapes["whole_asks4"], shapes["template_other4"]):
        assert asks_for_whole(asked.request) and not asks_for_whole(titled.request)
        assert asked.request.documents == titled.request.documents
        assert asked.request.messages[-1].text in structured_data.WHOLE_ASKS
    labels = {label: build_config(spec) for label, spec in bench_structured.ASKED_CONFIGS.items()}
    ranked = labels["ranked"].pipeline.stages[2]
    assert getattr(ranked, "whole_asks", None) is False


def test_the_inline_shapes_hold_every_passage_in_the_user_s_message(nq: list[BenchItem]) -> None:
    from bench_shapes import row

    from promptslim.stages.retrieval_inline import inline_context

    shapes = structured_data.build(nq, 2)
    for name in inline_data.INLINE:
        for item, inline in zip(nq, shapes[name]):
            request = inline.request
            assert not request.documents and request.query is None
            text = request.messages[-1].text
            assert (item.request.query or "") in text.rsplit("\n\n", 1)[-1]
            for d in item.request.documents:
                assert d.text in text
            found = inline_context(request)  # the block the stage ranks is all the passages
            assert found is not None, name
            sent = "\n".join(d.text for d in found.request.documents)
            assert all(d.text in sent for d in item.request.documents)
    ranked = build_config(bench_structured.INLINE_CONFIGS["inline_context"]).pipeline
    assert [getattr(s, "inline_context", None) for s in ranked.stages] == [None, None, True, None]
    # the ratio of a request without documents or tool messages: its last user message's
    item = shapes["inline_template4"][0]
    half = item.request.messages[-1].text[: len(item.request.messages[-1].text) // 2]
    sent = [{"role": "user", "content": half}]
    assert 0.4 < row(item, [], sent, 1.0)["ratio"] < 0.6
    # its evidence: looked for in that message, less the question
    whole = [{"role": "user", "content": item.request.messages[-1].text}]
    assert row(item, [], whole, 1.0)["evidence"] == 1.0
    answer = item.answers[0]
    asked = [{"role": "user", "content": f"{item.metadata['question']} {answer}"}]
    told = {**item.metadata, "question": asked[0]["content"]}
    assert (
        row(BenchItem(item.id, item.request, item.answers, told), [], asked, 1.0)["evidence"] == 0
    )


def test_the_variants_keep_every_passage_and_vary_what_they_say(nq: list[BenchItem]) -> None:
    shapes = structured_data.build(nq, 1)
    for n, item in enumerate(nq):
        passages = [f"{d.title}\n{d.text}" for d in item.request.documents]
        question = item.request.query or ""
        pool = shapes["candidates100"][n].request.documents
        others = [d for i, it in enumerate(nq) if i != n for d in it.request.documents]
        assert len(pool) == len(passages) + sum(not d.metadata.get("isgold") for d in others)
        assert sorted(d.text for d in item.request.documents) == sorted(
            d.text for d in pool if d.text in {p.text for p in item.request.documents}
        )
        assert sum(bool(d.metadata.get("isgold")) for d in pool) == 1
        assert len({d.id for d in pool}) == len(pool)
        chunks = ["\n\n".join(passages[c : c + 4]) for c in range(0, len(passages), 4)]
        twice = [d.text for d in shapes["duplicates4"][n].request.documents]
        assert sorted(twice) == sorted(chunks * 2)
        sourced = [d.text for d in shapes["sourced4"][n].request.documents]
        assert all(t.startswith("source: ") for t in sourced)
        assert [t.split("\n", 1)[1] for t in sourced] == chunks
        for name in ("keywords4", "typos4"):
            varied = shapes[name][n].request
            assert varied.query and varied.query != question
            assert [d.text for d in varied.documents] == chunks


def test_a_search_box_query_keeps_the_content_words_in_their_order() -> None:
    from variant_data import keywords, typos

    assert keywords("who sang the song in the film Top Gun?") == "sang song film Top Gun"
    assert keywords("what is it") == "what is it"  # nothing left: the question as it is
    rng = random.Random(0)
    asked = "where did the battle of gettysburg take place"
    typed = typos(asked, rng)
    changed = [(a, b) for a, b in zip(asked.split(), typed.split()) if a != b]
    assert len(typed) == len(asked) and len(changed) == 2
    assert all(sorted(a) == sorted(b) and a[0] == b[0] for a, b in changed)


def test_two_questions_pool_both_items_and_count_an_answer_to_each(nq: list[BenchItem]) -> None:
    from bench_shapes import row

    shapes = structured_data.build(nq, 1)
    for n, item in enumerate(nq):
        other = nq[(n + 1) % len(nq)]
        asked = shapes["questions2"][n]
        texts = "\n\n".join(d.text for d in asked.request.documents)
        for d in [*item.request.documents, *other.request.documents]:
            assert f"{d.title}\n{d.text}" in texts
        assert len(questions_in(asked.request.query or "")) == 2
        assert asked.metadata["also_answers"] == other.answers
        numbered = shapes["questions2_numbered"][n]  # the same, as a list without marks
        texts = "\n\n".join(d.text for d in numbered.request.documents)
        for d in [*item.request.documents, *other.request.documents]:
            assert f"{d.title}\n{d.text}" in texts
        assert numbered.request.query == f"1. {item.request.query}\n2. {other.request.query}"
        assert numbered.metadata["also_answers"] == other.answers
    # the evidence counts only when an answer of each set is kept
    asked = shapes["questions2"][0]
    first, second = asked.answers[0], asked.metadata["also_answers"][0]
    for context, evidence in ((f"{first} and {second}", 1.0), (first, 0.0), (second, 0.0)):
        sent = [{"role": "system", "content": context}, {"role": "user", "content": "q"}]
        assert row(asked, [], sent, 1.0)["evidence"] == evidence
