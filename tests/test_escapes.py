"""JSON's ``\\u`` escapes and HTML's character references read as their characters:
``promptslim.escapes``, and the retrieval stage and extractive compressor on documents written
with them (Python's ``json.dumps`` default, a page saved as ASCII by ``xmlcharrefreplace``)."""

from __future__ import annotations

import html
import json
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from promptslim.escapes import unescaped
from promptslim.pipeline import Pipeline
from promptslim.stages.compress import CompressStage
from promptslim.stages.retrieval import RetrievalStage
from promptslim.stages.windows import split_windows
from promptslim.tokens import count_document, get_counter
from promptslim.types import Budget, Document, Message, Request

# what json.dumps writes as itself or as a \u escape, not as \" \\ \n and the like
_TEXT = st.text(st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters='"\\'))


@given(_TEXT)
def test_an_escaped_string_reads_as_the_string(text: str) -> None:
    assert unescaped(json.dumps(text)[1:-1]) == text


@given(_TEXT)
def test_a_page_saved_as_ascii_reads_as_its_text(text: str) -> None:
    """``html.escape`` writes ``&amp;`` ``&lt;`` ``&quot;`` ``&#x27;``; ``xmlcharrefreplace``
    writes every character past ASCII as a decimal reference."""
    assert unescaped(html.escape(text).encode("ascii", "xmlcharrefreplace").decode()) == text


@given(_TEXT)
def test_text_without_escapes_is_read_as_it_is(text: str) -> None:
    written = json.dumps(text, ensure_ascii=False)
    assert unescaped(written) is written


def test_what_no_character_stands_for_stays_written() -> None:
    assert unescaped("\\ud83d\\ude00") == "\U0001f600"  # a surrogate pair: one character
    assert unescaped("lone \\ud83d half") == "lone \\ud83d half"  # no encoder takes it
    assert unescaped("a\\\\u00e9") == "a\\\\u00e9"  # the backslash is the text's own
    assert unescaped("a\\u0000b\\u000ac") == "a b\nc"  # a control character reads as a space
    assert unescaped("\\usepackage{amsmath} \\u00E9") == "\\usepackage{amsmath} \u00e9"


def test_a_reference_is_read_whole_and_with_its_semicolon() -> None:
    """HTML5 reads legacy names with no ";" (and the "&not" of "&notary;"): plain text and
    URLs hold such runs, so only a whole name with its ";" is read."""
    assert unescaped("?a=1&notify=2 R&D AT&amp;T") == "?a=1&notify=2 R&D AT&T"
    assert unescaped("&notary; &bogus; &#xZZ; &") == "&notary; &bogus; &#xZZ; &"
    assert unescaped("&amp;eacute; caf&eacute;") == "&eacute; caf\u00e9"  # read once
    assert unescaped("a&#10;b&#7;c&#0;d") == "a\nb c\ufffdd"  # a control code reads as a space
    assert unescaped("&#150; &#8230; &#x1F600;") == "\u2013 \u2026 \U0001f600"


def _jsonl(passages: list[str], ensure_ascii: bool) -> str:
    return "\n".join(
        json.dumps({"id": f"p{i}", "text": p}, ensure_ascii=ensure_ascii)
        for i, p in enumerate(passages)
    )


def _html(passages: list[str], ascii_only: bool) -> str:
    """The passages as paragraphs of a page, saved as ASCII by ``xmlcharrefreplace``: every
    character past ASCII a decimal reference."""
    page = "\n".join(f'<p id="p{i}">{html.escape(p)}</p>' for i, p in enumerate(passages))
    return page.encode("ascii", "xmlcharrefreplace").decode() if ascii_only else page


Writer = Callable[[list[str], bool], str]
WRITERS = pytest.mark.parametrize("write", [_jsonl, _html], ids=["json", "html"])


WAREHOUSES = [f"第{i}号仓库位于城市的东边，里面存放着许多旧的书籍和地图。" for i in range(30)]


@WRITERS
def test_escaped_chinese_windows_are_the_windows_of_its_characters(write: Writer) -> None:
    """Six to eight characters of an escape say what one character says: windows of
    ``window_chars`` escaped characters would hold a sixth of the text's."""
    cut = {}
    for ascii_only in (False, True):
        text = write(WAREHOUSES, ascii_only)
        windowed = split_windows([text], [None], window_chars=600, overlap=0, max_windows=64)
        cut[ascii_only] = [w.text for w in windowed.windows]
    assert cut[True] == cut[False]


@WRITERS
def test_escaped_chinese_lines_are_ranked_in_their_language(write: Writer) -> None:
    """A Chinese question of documents written as ASCII: read as hex or digits, the documents
    look English, the question is "in another language" and every document is kept."""
    facts = list(WAREHOUSES)
    facts[17] = "青云图书馆的徽标是靛蓝色的，这是它建馆时就定下的颜色。"
    chunks = [facts[c : c + 6] for c in range(0, len(facts), 6)]
    kept = {}
    for ascii_only in (False, True):
        request = Request(
            messages=[Message(role="user", content="青云图书馆的徽标是什么颜色？")],
            documents=[
                Document(id=f"c{c}", text=write(chunk, ascii_only))
                for c, chunk in enumerate(chunks)
            ],
        )
        result = Pipeline([RetrievalStage()]).run(request)
        assert "languages" not in result.report.stages[0].details
        kept[ascii_only] = result.request.documents
    assert [d.id for d in kept[True]] == [d.id for d in kept[False]] == ["c2"]
    text = kept[True][0].text
    assert text.isascii() and "靛蓝色" in unescaped(text)  # the answer, kept as it was written
    assert len(text) < len(write(chunks[2], True))  # cut inside the chunk too
    # whole lines (JSON objects, paragraphs), each read as the line written in UTF-8
    assert set(unescaped(text).splitlines()) <= set(write(chunks[2], False).splitlines())


@pytest.mark.parametrize(
    "fee",
    [
        "Die Geb\\u00fchr f\\u00fcr den Ausweis betr\\u00e4gt zehn Euro.",
        "Die Geb&uuml;hr f&uuml;r den Ausweis betr&auml;gt zehn Euro.",
        "Die Geb&#252;hr f&#252;r den Ausweis betr&#228;gt zehn Euro.",
    ],
    ids=["json", "html-named", "html-decimal"],
)
def test_an_accented_word_written_as_escapes_is_matched(fee: str) -> None:
    """Read as written, "Geb\\u00fchr" is the words "geb" and "u00fchr" to BM25 (and
    "Geb&uuml;hr" is "geb", "uuml" and "hr"): the question's "Gebühr" and "für" match
    nothing, and the document that shares "wie hoch ist" wins."""
    docs = [
        fee,
        "Wie hoch ist der Turm? Er misst fünfzig Meter.",
        "Die Stadtbibliothek \\u00f6ffnet samstags um neun Uhr.",
    ]
    request = Request(
        messages=[Message(role="user", content="Wie hoch ist die Gebühr für den Ausweis?")],
        documents=[Document(id=f"d{i}", text=t) for i, t in enumerate(docs)],
    )
    stage = RetrievalStage(scorer="bm25", max_k=1, order="original")
    kept = Pipeline([stage]).run(request).request.documents
    assert [d.id for d in kept] == ["d0"]
    assert kept[0].text == docs[0]  # the bytes as sent


@WRITERS
def test_the_extractive_compressor_keeps_the_escaped_line_that_answers(write: Writer) -> None:
    """Under a budget the compressor ranks a document's lines by the question's terms; read
    as hex or digits, no line of escaped Chinese holds one, and the answer's line goes with
    the rest."""
    facts = list(WAREHOUSES)
    facts[17] = "青云图书馆的徽标是靛蓝色的，这是它建馆时就定下的颜色。"
    request = Request(
        messages=[Message(role="user", content="青云图书馆的徽标是什么颜色？")],
        documents=[Document(id="d0", text=write(facts, True))],
    )
    counter = get_counter()
    budget = count_document(request.documents[0], counter) // 4
    result = CompressStage(compressor="extractive").run(request, Budget(documents=budget))
    out = result.documents[0].text
    assert count_document(result.documents[0], counter) <= budget
    assert out.isascii() and facts[17] in unescaped(out)


def test_only_json_escapes_are_read() -> None:
    """JSON writes ``\\u`` in lower case; Python's ``\\U0001F600`` and ``\\N{...}`` are none."""
    assert unescaped("\\U0001F600 \\u00e9 \\u00E9") == "\\U0001F600 \u00e9 \u00e9"
    assert unescaped("\\uD83D\\uDE00") == "\U0001f600"
