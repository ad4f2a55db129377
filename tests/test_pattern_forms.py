"""The digit-first forms of the protected patterns (``\\d(?<!\\w\\d)`` for ``\\b\\d``: ``re``
skips ahead to the next digit instead of trying every position) match exactly what the
``\\b`` forms they replace match, on text dense with digits, separators and word edges; and
the analyser's compounds, looked for only where a separator joins two word characters, are
what the scan of the whole text finds."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from promptslim.protected import _NO_LETTER, _REDUCED, PATTERNS
from promptslim.text import _BIGRAMMED, _COMPOUND, _compounds

_A = re.ASCII
_I = re.IGNORECASE
#: the ``\b`` forms, as they were written before
_WORD_EDGE_FORMS = {
    "iso_datetime": re.compile(
        r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\b", _A
    ),
    "time": re.compile(
        rf"\b\d{{1,2}}:\d{{2}}(?::\d{{2}})?\s*(?:(?:[ap]\.?m\.?|UTC|GMT|Z){_NO_LETTER})?(?![\w:])",
        _I | _A,
    ),
    "unix_timestamp": re.compile(r"\b1[5-9]\d{8}(?:\d{3})?\b", _A),
    "time_ampm": re.compile(rf"\b\d{{1,2}}\s?(?:[ap]\.m\.|[ap]m)(?!\w){_NO_LETTER}", _I | _A),
}
_REDUCED_EDGE_FORMS = {
    "zh_date": re.compile(r"\b\d{4}[/.]\d{1,2}[/.]\d{1,2}\b", _A),
    "date": re.compile(r"\b\d{1,2}/\d{1,2}/\d{2,4}\b", _A),
}
_ZH_DATE_EDGE_FORM = re.compile(
    PATTERNS["zh_date"].pattern.replace(r"\d(?<!\w\d)\d{3}", r"\b\d{4}"), _A
)

_TEXT = st.text(
    alphabet=st.sampled_from("0123456789157 -/.:_TZapmAPMUTCGé年月日x\n,+"), max_size=80
) | st.lists(
    st.sampled_from(
        ["2026-12-05", "10:00", "12:30:15", "3pm", "11 a.m.", "1700000000", "1700000000123",
         "12/05/2026", "2026/12/05", "2026.12.5", "x1", "_9", "a2026-01-01", " ", "Z", "é"]
    ),
    max_size=10,
).map("".join)  # fmt: skip


def _spans(pattern: re.Pattern[str], text: str) -> list[tuple[int, int]]:
    return [m.span() for m in pattern.finditer(text)]


@settings(max_examples=500, deadline=None)
@given(_TEXT)
def test_digit_first_patterns_match_as_the_word_edge_forms(text: str) -> None:
    for kind, edge_form in _WORD_EDGE_FORMS.items():
        assert _spans(PATTERNS[kind], text) == _spans(edge_form, text), kind
    for kind, edge_form in _REDUCED_EDGE_FORMS.items():
        assert _spans(_REDUCED[kind][1], text) == _spans(edge_form, text), kind
    assert _spans(PATTERNS["zh_date"], text) == _spans(_ZH_DATE_EDGE_FORM, text)


def test_the_edge_forms_are_the_ones_replaced() -> None:
    """The reference forms differ from today's only in how a match starts (so the property
    above compares like with like), and both find the usual cases."""
    for kind, edge_form in _WORD_EDGE_FORMS.items():
        assert edge_form.pattern != PATTERNS[kind].pattern
    text = "On 2026-12-05 at 10:00 UTC (1700000000), 3pm, 12/05/2026 or 2026/12/05."
    found = {kind for kind in _WORD_EDGE_FORMS if PATTERNS[kind].search(text)}
    assert found == set(_WORD_EDGE_FORMS)
    assert _ZH_DATE_EDGE_FORM.pattern != PATTERNS["zh_date"].pattern
    assert _spans(PATTERNS["iso_datetime"], "x2026-12-05 2026-12-05") == [(12, 22)]


def _compounds_scanned(text: str) -> list[str]:
    """``_compounds`` as it was: the compound pattern over the whole text."""
    return [
        m.group()
        for m in _COMPOUND.finditer(text)
        if ("_" in m.group() or any(c.isdigit() for c in m.group()))
        and not _BIGRAMMED.search(m.group())
    ]


_JOINED = ["db-4471", "v2.3.1", "parse_config", "well-known", "U.S.", "a..b", "__a_b", "x:1",
           " ", "中文-3", "a/b/2", "3.5", "."]  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(
    st.text(alphabet=st.sampled_from("ab1_-.:/ \n'²é中x9"), max_size=60)
    | st.lists(st.sampled_from(_JOINED), max_size=8).map("".join)
)
def test_compounds_are_what_the_whole_scan_finds(text: str) -> None:
    assert list(_compounds(text)) == _compounds_scanned(text)
    assert _compounds_scanned("see db-4471 and v2.3.1 now") == ["db-4471", "v2.3.1"]
