"""JSON's ``\\u`` escapes read as their characters: ``promptslim.escapes`` and the retrieval
stage on documents written with them (Python's ``json.dumps`` default)."""

from __future__ import annotations

import json

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
def test_text_without_escapes_is_read_as_it_is(text: str) -> None:
    written = json.dumps(text, ensure_ascii=False)
    assert unescaped(written) is written


def test_what_no_character_stands_for_stays_written() -> None:
    assert unescaped("\\ud83d\\ude00") == "\U0001f600"  # a surrogate pair: one character
    assert unescaped("lone \\ud83d half") == "lone \\ud83d half"  # no encoder takes it
    assert unescaped("a\\\\u00e9") == "a\\\\u00e9"  # the backslash is the text's own
    assert unescaped("a\\u0000b\\u000ac") == "a b\nc"  # a control character reads as a space
    assert unescaped("\\usepackage{amsmath} \\u00E9") == "\\usepackage{amsmath} \u00e9"


def _jsonl(passages: list[str], ensure_ascii: bool) -> str:
    return "\n".join(
        json.dumps({"id": f"p{i}", "text": p}, ensure_ascii=ensure_ascii)
        for i, p in enumerate(passages)
    )


WAREHOUSES = [f"第{i}号仓库位于城市的东边，里面存放着许多旧的书籍和地图。" for i in range(30)]


def test_escaped_chinese_windows_are_the_windows_of_its_characters() -> None:
    """Six characters of an escape say what one character says: windows of ``window_chars``
    escaped characters would hold a sixth of the text's."""
    cut = {}
    for ascii_only in (False, True):
        text = _jsonl(WAREHOUSES, ascii_only)
        windowed = split_windows([text], [None], window_chars=600, overlap=0, max_windows=64)
        cut[ascii_only] = [w.text for w in windowed.windows]
    assert cut[True] == cut[False]


def test_escaped_chinese_lines_are_ranked_in_their_language() -> None:
    """A Chinese question of documents written by ``json.dumps``: read as hex, the documents
    look English, the question is "in another language" and every document is kept."""
    facts = list(WAREHOUSES)
    facts[17] = "青云图书馆的徽标是靛蓝色的，这是它建馆时就定下的颜色。"
    chunks = [facts[c : c + 6] for c in range(0, len(facts), 6)]
    kept = {}
    for ascii_only in (False, True):
        request = Request(
            messages=[Message(role="user", content="青云图书馆的徽标是什么颜色？")],
            documents=[
                Document(id=f"c{c}", text=_jsonl(chunk, ascii_only))
                for c, chunk in enumerate(chunks)
            ],
        )
        result = Pipeline([RetrievalStage()]).run(request)
        assert "languages" not in result.report.stages[0].details
        kept[ascii_only] = result.request.documents
    assert [d.id for d in kept[True]] == [d.id for d in kept[False]] == ["c2"]
    text = kept[True][0].text
    assert json.dumps("靛蓝色")[1:-1] in text  # the answer, kept as it was written
    assert len(text) < len(_jsonl(chunks[2], True))  # cut inside the chunk too
    # the same lines as when written in UTF-8, whole: each still reads as JSON
    read = {a: [json.loads(line) for line in kept[a][0].text.splitlines()] for a in kept}
    assert read[True] == read[False]


def test_an_accented_word_written_as_escapes_is_matched() -> None:
    """Read as written, "M\\u00fcllabfuhr" is the words "m" and "u00fcllabfuhr" to BM25: the
    question's "Müllabfuhr" matches nothing, and the document sharing "kommt" wins."""
    docs = [
        "Die M\\u00fcllabfuhr f\\u00e4hrt in der Altstadt jeden Dienstag.",
        "Der Bus kommt am Bahnhof jede halbe Stunde.",
        "Die Stadtbibliothek \\u00f6ffnet samstags um neun Uhr.",
    ]
    request = Request(
        messages=[Message(role="user", content="Wann kommt die Müllabfuhr?")],
        documents=[Document(id=f"d{i}", text=t) for i, t in enumerate(docs)],
    )
    stage = RetrievalStage(scorer="bm25", max_k=1, order="original")
    kept = Pipeline([stage]).run(request).request.documents
    assert [d.id for d in kept] == ["d0"]
    assert kept[0].text == docs[0]  # the bytes as sent


def test_the_extractive_compressor_keeps_the_escaped_line_that_answers() -> None:
    """Under a budget the compressor ranks a document's lines by the question's terms; read
    as hex, no line of escaped Chinese holds one, and the answer's line goes with the rest."""
    facts = list(WAREHOUSES)
    facts[17] = "青云图书馆的徽标是靛蓝色的，这是它建馆时就定下的颜色。"
    request = Request(
        messages=[Message(role="user", content="青云图书馆的徽标是什么颜色？")],
        documents=[Document(id="d0", text=_jsonl(facts, True))],
    )
    counter = get_counter()
    budget = count_document(request.documents[0], counter) // 4
    result = CompressStage(compressor="extractive").run(request, Budget(documents=budget))
    out = result.documents[0].text
    assert count_document(result.documents[0], counter) <= budget
    assert json.dumps(facts[17])[1:-1] in out


def test_only_json_escapes_are_read() -> None:
    """JSON writes ``\\u`` in lower case; Python's ``\\U0001F600`` and ``\\N{...}`` are none."""
    assert unescaped("\\U0001F600 \\u00e9 \\u00E9") == "\\U0001F600 \u00e9 \u00e9"
    assert unescaped("\\uD83D\\uDE00") == "\U0001f600"
