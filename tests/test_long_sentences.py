"""Text without sentence ends (a transcript, a run-on line) is cut into units of about
``UNIT_CHARS`` for the extractive compressor and the retrieval stage's selection, never inside
a protected span; punctuated prose keeps its sentences whole."""

from __future__ import annotations

import random
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promptslim.backends.compress import Item
from promptslim.backends.compress.extractive import (
    UNIT_CHARS,
    ExtractiveCompressor,
    split_units,
)
from promptslim.errors import ConfigError
from promptslim.stages.retrieval import RetrievalStage
from promptslim.stages.windows import split_windows
from promptslim.text import find_protected_spans
from promptslim.tokens import get_counter
from promptslim.types import Budget, Request

WORDS = ("so", "the", "team", "talked", "about", "the", "plan", "and", "then", "we", "looked")
ANSWER = "the launch moved to the ninth of march because the vendor was late"


def _transcript(seed: int, words: int, answer_at: float | None = None) -> str:
    """Lower-case words with no punctuation, as speech-to-text writes them."""
    rng = random.Random(seed)
    out = [rng.choice(WORDS) for _ in range(words)]
    if answer_at is not None:
        out.insert(int(answer_at * words), ANSWER)
    return " ".join(out)


def test_a_transcript_under_a_tight_budget_keeps_the_part_that_answers() -> None:
    text = _transcript(0, 600, answer_at=0.6)  # about 3,000 characters, one "sentence"
    item = Item(text=text)
    counter = get_counter()
    query = "when did the launch move and why"
    (out,) = ExtractiveCompressor().compress([item], query=query, budget=120, counter=counter)
    assert "ninth of march" in out and 0 < counter.count(out) <= 120
    # one unit of 3,000 characters does not fit 120 tokens: without the cut nothing is kept
    whole = ExtractiveCompressor(max_unit_chars=None)
    assert whole.compress([item], query=query, budget=120, counter=counter) == [""]


def test_punctuated_prose_keeps_its_sentences_whole() -> None:
    text = " ".join(
        f"Sentence {i} has a few words about the plan and the numbers." for i in range(40)
    )
    item = Item(text=text)
    assert ExtractiveCompressor().units(item) == split_units(text)


def test_a_protected_span_is_never_cut_and_pieces_are_about_the_limit() -> None:
    url = "https://example.com/" + "a" * 300 + "/report"
    text = _transcript(1, 200) + " see " + url + " " + _transcript(2, 200)
    item = Item(text=text, protected=tuple(find_protected_spans(text)))
    units = ExtractiveCompressor(max_unit_chars=120).units(item)
    assert any(url in u.of(text) for u in units)
    longest_word = max(len(w) for w in text.split() if w != url)
    for u in units:
        if url not in u.of(text):
            assert u.end - u.start <= 120 + longest_word
        assert u.of(text) == u.of(text).strip()
    assert [u.start for u in units] == sorted(u.start for u in units)


@pytest.mark.parametrize("bad", [True, 39, 1.5, "400"])
def test_max_unit_chars_is_checked(bad: object) -> None:
    with pytest.raises(ConfigError) as err:
        ExtractiveCompressor(max_unit_chars=bad)  # type: ignore[arg-type]
    assert err.value.field == "max_unit_chars"


def test_retrieval_selects_a_transcript_in_parts_about_a_long_sentence_long() -> None:
    text = _transcript(3, 700, answer_at=0.5)
    windowed = split_windows([text], [None], window_chars=600, overlap=1, max_windows=32)
    longest_word = max(len(w) for w in text.split())
    assert len(windowed.units[0]) > 1
    assert all(u.end - u.start <= UNIT_CHARS + longest_word for u in windowed.units[0])

    others = [_transcript(10 + k, 700) for k in range(3)]
    request = Request.from_openai(
        {
            "model": "m",
            "messages": [{"role": "user", "content": "when did the launch move and why"}],
            "documents": [text, *others],
        }
    )
    out = RetrievalStage(scorer="bm25").run(request, Budget()).request.documents
    kept = "\n".join(d.text for d in out)
    assert ANSWER in kept
    assert len(kept) < 0.5 * len(text)  # the parts around the answer, not the transcript


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    words=st.integers(1, 400),
    limit=st.integers(40, 600),
    literal=st.sampled_from(["", "db-4471", "v2.3.1", "550e8400-e29b-41d4-a716-446655440000"]),
)
def test_property_units_cover_the_text_in_order_and_never_split_a_span(
    seed: int, words: int, limit: int, literal: str
) -> None:
    text = _transcript(seed, words)
    if literal:
        at = random.Random(seed).randrange(len(text) + 1)
        at = text.rfind(" ", 0, at) + 1
        text = f"{text[:at]}{literal} {text[at:]}"
    spans = tuple(find_protected_spans(text))
    units = ExtractiveCompressor(max_unit_chars=limit).units(Item(text=text, protected=spans))
    assert "".join(u.of(text) for u in units).replace(" ", "") == text.replace(" ", "")
    assert all(a.end <= b.start for a, b in pairwise(units))
    for span in spans:
        assert any(u.start <= span.start and span.end <= u.end for u in units), span
