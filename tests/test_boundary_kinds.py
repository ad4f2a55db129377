"""``BOUNDARY_FREE_KINDS``: protected kinds whose spans never hold a place where a sentence
ends or a long sentence is cut. Sentence splitting and a retrieval document's units skip
scanning for them (a cold request's time); these properties check that doing so changes no
sentence and no unit, against the scans with every kind, on text full of the cases that
matter: enders inside URLs and quotes, an ellipsis, CJK enders without a space, full-width
forms, ids next to sentence ends."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from promptslim.protected import BOUNDARY_FREE_KINDS, PATTERNS, PROTECTED_KINDS
from promptslim.stages.windows import UNIT_KINDS, document_units
from promptslim.text import _bounds_outside, find_protected_spans, sentence_bounds

#: the guard ``sentence_bounds`` scanned for before ``BOUNDARY_FREE_KINDS`` were left out
_ALL_GUARD_KINDS = ("code_block", "url", "email", "uuid", "quoted")

_FRAGMENTS = [
    "The cat sat.", "Dr. Smith", "e.g.", "3.5 GB", "v2.3.1", "db-4471", "parse_config",
    "https://x.cn/a?b=1", "http://x.com/a…b", "https://x.com/a.", "see http://a.b/c!",
    "ops@example.com", "a.b@c.de", "ｏｐｓ＠ｅｘａｍｐｌｅ．ｃｏｍ",
    "123e4567-e89b-12d3-a456-426614174000", "１２３ｅ４５６７－ｅ８９ｂ－１２ｄ３－ａ４５６－４２６６１４１７４０００",
    "eyJhbGciOi.eyJzdWIiOi.SflKxwRJSM", "sk-abcdefghijklmnop", "AKIAABCDEFGHIJKLMNOP",
    "deadbeef12345678", "0x1F", "1700000000", "2026-12-05 10:00", "Dec. 5, 2026",
    "3 p.m.", "12:30 UTC", "5 ms", "$1,200", '"Quoted. Text!"', "“引用。文本”", "「ある。」",
    "中文句子。", "第二句！", "问题？", "好的；", "……", "…", "Wait…what", "한국어 문장.",
    "ไทย ภาษา", "```code. block```", "`x. y`", '{"a": "b. c"}', "[1, 2]", "(see above.)",
    "！", "？", "．", "Ａ", "　", "Mr.", "U.S.", "No.", "रामः। ", "؟",
]  # fmt: skip
_GAPS = ["", " ", "  ", "\n", "\n\n", " \n", "\t"]


@st.composite
def _texts(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.sampled_from(_FRAGMENTS), min_size=1, max_size=24))
    gaps = draw(st.lists(st.sampled_from(_GAPS), min_size=len(parts), max_size=len(parts)))
    return "".join(p + g for p, g in zip(parts, gaps))


@settings(max_examples=400, deadline=None)
@given(_texts())
def test_sentences_are_the_same_without_scanning_for_boundary_free_kinds(text: str) -> None:
    full = _bounds_outside(text, find_protected_spans(text, kinds=_ALL_GUARD_KINDS))
    assert sentence_bounds(text) == full


@settings(max_examples=400, deadline=None)
@given(_texts(), st.integers(min_value=10, max_value=400))
def test_units_are_the_same_without_scanning_for_boundary_free_kinds(text: str, limit: int) -> None:
    every = document_units(text, find_protected_spans(text), limit)
    assert document_units(text, find_protected_spans(text, kinds=UNIT_KINDS), limit) == every


@settings(max_examples=300, deadline=None)
@given(_texts())
def test_boundary_free_spans_hold_no_place_a_sentence_ends(text: str) -> None:
    """What makes skipping them safe, checked on the patterns themselves: their spans hold no
    white space, no ellipsis, no CJK character or ender (so a later edit of a pattern that
    breaks it fails here, not in a split sentence)."""
    spans = [
        span
        for kind in sorted(BOUNDARY_FREE_KINDS)
        for span in find_protected_spans(text, kinds=(kind,))
        if span.kind == kind  # not the JSON spans every scan adds
    ]
    for span in spans:
        piece = text[span.start : span.end]
        assert not any(c.isspace() for c in piece), piece
        assert all(c.isascii() or 0xFF01 <= ord(c) <= 0xFF5E for c in piece), piece


def test_the_skipped_kinds_are_real_and_the_unit_kinds_hold_the_rest() -> None:
    assert BOUNDARY_FREE_KINDS <= set(PATTERNS)
    assert set(UNIT_KINDS) | (BOUNDARY_FREE_KINDS & set(PROTECTED_KINDS)) == set(PROTECTED_KINDS)
    assert not set(UNIT_KINDS) & BOUNDARY_FREE_KINDS
    # and the skipped kinds are found where compression protects them
    text = "Mail ops@example.com about 123e4567-e89b-12d3-a456-426614174000. Then stop."
    kinds = {s.kind for s in find_protected_spans(text)}
    assert {"email", "uuid"} <= kinds
