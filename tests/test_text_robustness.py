"""Input the fuzzer found mishandled by text analysis and the extractive compressor: deeply
nested brackets (a RecursionError from the JSON decoder), long documents with many protected
spans (quadratic time), and JSON whose numbers canonicalisation rewrote (``1E400`` became
``Infinity``). Each fix keeps the output of ordinary input byte-identical: the properties
compare against the straightforward algorithms they replace."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from promptslim import CompressStage, PrefixStage, Request
from promptslim.backends.compress.extractive import split_units
from promptslim.stages.prefix import canonicalise_text
from promptslim.text import (
    _NEEDS,
    PATTERNS,
    Span,
    find_protected_spans,
    merge_spans,
    split_sentences,
)


def _json_spans(text: str) -> list[Span]:
    return find_protected_spans(text, kinds=())  # kinds=(): JSON spans only


# ---------------------------------------------------------------- deeply nested brackets


def test_deeply_nested_brackets_in_a_document_compress_without_crashing() -> None:
    body = {"messages": [{"role": "user", "content": "q"}], "documents": ["x " + "[" * 1000]}
    result = CompressStage(rate=0.5).run(Request.from_openai(body))
    assert len(result.documents) <= 1


def test_deeply_nested_json_in_a_system_prompt_does_not_crash_the_prefix_stage() -> None:
    system = '{"a":' * 1000
    body = {"messages": [{"role": "system", "content": system}, {"role": "user", "content": "q"}]}
    result = PrefixStage().run(Request.from_openai(body))
    assert result.messages[0].text == system  # not JSON: nothing to canonicalise


@pytest.mark.parametrize(
    "text", ["[" * 1000, "[" * 5000 + "]" * 5000, '{"a":' * 2000 + "1" + "}" * 2000, "[1," * 3000]
)
def test_json_nested_deeper_than_the_limit_is_not_a_json_span(text: str) -> None:
    spans = _json_spans(text)
    # an inner value within the limit may still be one; never the deep outer one
    assert all(s.end - s.start < len(text) for s in spans)
    assert all(s.of(text).count("[") + s.of(text).count("{") <= 128 for s in spans)


def test_json_nested_up_to_the_limit_is_still_a_json_span() -> None:
    value = "[" * 128 + "]" * 128
    text = f"data: {value} end, with {'[1] ' * 200}citations"
    assert Span(6, 6 + len(value), "json") in _json_spans(text)


def test_many_nested_brackets_are_rejected_in_linear_time() -> None:
    # one decoder attempt per bracket, each recursing ~1,000 levels before failing, took 36 s
    started = time.perf_counter()
    assert _json_spans("[" * 200_000) == []
    assert _json_spans('{"a": ' * 100_000) == []
    assert time.perf_counter() - started < 5.0


def _reference_json_spans(text: str) -> list[Span]:
    """The JSON span finder before the nesting limit: every opener, one decoder attempt."""
    spans: list[Span] = []
    decoder = json.JSONDecoder()
    pos = 0
    while True:
        starts = [i for i in (text.find("[", pos), text.find("{", pos)) if i >= 0]
        if not starts:
            return spans
        start = min(starts)
        try:
            _, end = decoder.raw_decode(text, start)
        except ValueError:
            pos = start + 1
            continue
        if end - start > 2:
            spans.append(Span(start, end, "json"))
        pos = end


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)
_FRAGMENTS = st.sampled_from(
    ["prose.", "[see note", "a [1] citation", '5" screen', "{", "]", "} {", '"[', "x]y", "\n"]
)


@st.composite
def _texts_with_json(draw: st.DrawFn) -> str:
    parts: list[str] = []
    for kind in draw(st.lists(st.integers(0, 2), max_size=12)):
        if kind == 0:
            parts.append(json.dumps(draw(_JSON_VALUES), indent=draw(st.sampled_from([None, 2]))))
        elif kind == 1:
            dumped = json.dumps(draw(_JSON_VALUES))
            parts.append(dumped[: draw(st.integers(0, len(dumped)))])  # cut short
        else:
            parts.append(draw(_FRAGMENTS))
    # more brackets than the nesting limit, so the nesting check runs
    parts.insert(draw(st.integers(0, len(parts))), "[1] " * 130)
    return " ".join(parts)


@given(_texts_with_json())
def test_json_spans_within_the_nesting_limit_are_found_as_before(text: str) -> None:
    assert _json_spans(text) == _reference_json_spans(text)


# ---------------------------------------------------------------- long documents


def _reference_split_units(text: str, protected: Sequence[Span]) -> list[Span]:
    """split_units before the sweep: every protected span checked at every boundary."""
    units = split_sentences(text)
    if not protected or len(units) < 2:
        return units
    merged: list[Span] = []
    for unit in units:
        if merged and any(p.start < merged[-1].end and p.end > unit.start for p in protected):
            merged[-1] = Span(merged[-1].start, unit.end, "sentence")
        else:
            merged.append(unit)
    return merged


_SENTENCES = st.sampled_from(
    [
        "The total was $1,250.50 for order 88231.",
        "See https://shop.example.com/o/12. for details!",
        'He said "it shipped. It arrived." on Tuesday.',
        "Ticket 3f2a9c1e-77b0-4c1d-9e2a-0b1c2d3e4f50 is open?",
        "```\ncode. more code.\n```",
        "Plain words here.",
        'Config: {"retries": 3, "note": "a. b."}.',
        "e.g. Dr. Smith left at 3 p.m. today.",
    ]
)


@given(
    st.lists(_SENTENCES, max_size=25).map(" ".join),
    st.lists(st.tuples(st.integers(0, 400), st.integers(0, 60)), max_size=8),
)
def test_split_units_matches_the_straightforward_merge(
    text: str, extra: list[tuple[int, int]]
) -> None:
    # the detected spans, plus arbitrary ones (unsorted, overlapping) a caller might pass
    protected = find_protected_spans(text) + [Span(a, a + n, "caller") for a, n in extra]
    random.Random(len(text)).shuffle(protected)
    assert split_units(text, protected) == _reference_split_units(text, protected)


def _orders(n: int) -> str:
    rng = random.Random(0)
    return " ".join(
        f"Order {rng.randint(10, 99999)} shipped to https://shop.example.com/o/{i} on "
        f"2026-03-{i % 28 + 1:02d}. The total was ${rng.randint(1, 999)}.{rng.randint(10, 99)}."
        for i in range(n)
    )


def test_splitting_a_long_document_with_many_protected_spans_is_not_quadratic() -> None:
    text = _orders(1500)  # ~150 KB, ~6,000 protected spans: ~10 s when it was quadratic
    protected = find_protected_spans(text)
    started = time.perf_counter()
    units = split_units(text, protected)
    assert time.perf_counter() - started < 2.0
    assert len(units) == 3000


# ---------------------------------------------------------------- canonical JSON numbers


def _exact(raw: str) -> Any:
    """JSON with every number as the text it was written as."""
    return json.loads(raw, parse_float=str, parse_int=str, parse_constant=str)


def _system_prompt(system: str) -> str:
    body = {"messages": [{"role": "system", "content": system}, {"role": "user", "content": "q"}]}
    return PrefixStage().run(Request.from_openai(body)).messages[0].text


def test_canonical_json_never_turns_a_number_into_another_value() -> None:
    block = '{"max": 1E400, "step": 0.10000000000000000555}'  # as floats: Infinity and 0.1
    for text in (canonicalise_text(f"Limits: {block}"), _system_prompt(f"Limits: {block}")):
        assert "Infinity" not in text
        assert _exact(text[len("Limits: ") :]) == _exact(block)
        assert canonicalise_text(text) == text


_LITERALS = [
    "1E400",
    "0.10000000000000000555",
    "-0",
    "1.50",
    "1e-5",
    "-0.0",
    "12345678901234567890123",
]


@pytest.mark.parametrize("literal", _LITERALS)
def test_canonical_json_keeps_every_numbers_value(literal: str) -> None:
    # the spelling may change (1.50 -> 1.5), the number may not: as exact decimals, equal;
    # -0 (0 once read, a different value in JavaScript) and what a float cannot hold stay
    # as written
    block = '{"z": 1, "k": ' + literal + "}"
    out = canonicalise_text(f"Settings: {block}")[len("Settings: ") :]
    assert canonicalise_text(out) == out
    assert json.loads(out, parse_float=Decimal, parse_int=Decimal) == json.loads(
        block, parse_float=Decimal, parse_int=Decimal
    )
    if literal in ("1E400", "0.10000000000000000555", "-0"):
        assert out == block


def test_tool_parameters_never_turn_a_number_into_infinity() -> None:
    parameters = '{"type": "number", "maximum": 1E400, "multipleOf": 0.10000000000000000555}'
    tool = {"type": "function", "function": {"name": "f", "parameters": parameters}}
    body = {"messages": [{"role": "user", "content": "q"}], "tools": [tool]}
    result = PrefixStage().run(Request.from_openai(body))
    assert result.request.tools is not None
    assert _exact(result.request.tools[0]["function"]["parameters"]) == _exact(parameters)


def test_deeply_nested_tool_parameters_are_kept_as_sent() -> None:
    tool = {"type": "function", "function": {"name": "f", "parameters": "[" * 3000}}
    body = {"messages": [{"role": "user", "content": "q"}], "tools": [tool]}
    result = PrefixStage().run(Request.from_openai(body))  # before: RecursionError
    assert result.request.tools == [tool]


# ---------------------------------------------------------------- sentence splitting shortcuts

# characters around sentence ends and protected regions, ASCII and not
_SPLIT_ALPHABET = st.sampled_from(
    list("aZ1 .!?\n\t\"')]`~:/@-{}[")
    + ["```", "://", "e.g.", "Dr.", "“", "」", "。", "…", "价", "＠", "https://x.io", "a@b.io",
       "1234abcd-1234-1234-1234-1234567890ab", '"q"', "“q”", "「q」"]
)  # fmt: skip


@given(st.lists(_SPLIT_ALPHABET, max_size=60).map("".join))
def test_plain_boundary_pattern_finds_what_its_alternation_found(text: str) -> None:
    import re

    from promptslim.text import _CLOSERS, _PLAIN_BOUNDARY

    alternation = re.compile(rf"[.!?][{_CLOSERS}]*\s+|\n\s*")
    assert [m.span() for m in _PLAIN_BOUNDARY.finditer(text)] == [
        m.span() for m in alternation.finditer(text)
    ]


_GUARDED_REGIONS = [
    "https://x.io/a", "a@b.io", "1234abcd-1234-1234-1234-1234567890ab", '"q"', "```x```",
    "~~~x~~~", '{"a": 1}', "[1, 2]", "“q”", "「q」", "『q』", "plain",
]  # fmt: skip


@given(
    st.lists(st.sampled_from(list("aZ1 .!?\n\t')]:/") + ["e.g.", "Dr.", "x.io"]), max_size=30),
    st.sampled_from(_GUARDED_REGIONS),
    st.integers(0, 30),
)
def test_guard_shortcut_skips_only_text_without_guarded_regions(
    parts: list[str], region: str, at: int
) -> None:
    # sentence_bounds skips the scan for ASCII text holding none of _GUARD_NEEDS: any region
    # of the guard kinds (and any JSON) must hold one of them, or a sentence could end inside
    from promptslim.text import _GUARD_KINDS, _GUARD_NEEDS, _NEEDS

    # a kind that a digit alone could enable would need more than these substrings
    assert not any(_NEEDS[kind][1] for kind in _GUARD_KINDS)
    parts.insert(at, f" {region} ")
    text = "".join(parts)
    if find_protected_spans(text, kinds=_GUARD_KINDS):
        assert not text.isascii() or any(n in text for n in _GUARD_NEEDS)


def _needle_texts() -> st.SearchStrategy[str]:
    pieces = sorted({n for needles, _ in _NEEDS.values() for n in needles})
    # needles, their halves (a needle cut in two is not the needle), digits and filler
    pieces += [n[: len(n) // 2] for n in pieces if len(n) > 1] + ["5", "a", " ", "\n"]
    return st.lists(st.sampled_from(pieces), max_size=12).map("".join)


@given(_needle_texts(), st.sampled_from(["missing_kind", *sorted(_NEEDS)]))
def test_may_match_and_the_guard_are_the_needles_formula(text: str, kind: str) -> None:
    # one regex per needle list stands in for an ``in`` per needle: same answer, any text
    from promptslim.text import _GUARD_FOUND, _GUARD_NEEDS, may_match

    needles, digit = _NEEDS.get(kind, (None, False))
    expected = needles is None or any(n in text for n in needles) or (
        digit and any(c in text for c in "0123456789")
    )
    assert may_match(kind, text) == expected
    assert (_GUARD_FOUND.search(text) is not None) == any(n in text for n in _GUARD_NEEDS)


_DATE_PIECES = ["2026", "11", "3", "年", "月", "日", "号", "/", ".", " ", "a", "十一", "二〇二六",
                "May", "Sept", "Monday", "th", ", "]  # fmt: skip
# whole dates too, each separator either way: pieces alone seldom line up into one
_DATES = st.builds(
    "{}{}{}{}{}".format,
    st.sampled_from(["2026", "826", "二〇二六"]),
    st.sampled_from(["/", ".", "年"]),
    st.sampled_from(["11", "1", "十一"]),
    st.sampled_from(["/", ".", "月"]),
    st.sampled_from(["30", "5", "日"]),
)


@given(st.lists(st.one_of(st.sampled_from(_DATE_PIECES), _DATES), max_size=10).map("".join))
def test_protected_spans_of_a_kind_are_its_patterns_matches(text: str) -> None:
    # a kind may be scanned with a smaller pattern where the text lacks what the rest of the
    # pattern needs (zh_date's Chinese forms without 月, date's named forms without a month or
    # weekday name): the spans stay the pattern's
    for kind in ("zh_date", "date", "number_unit"):
        found = PATTERNS[kind].finditer(text)
        expected = merge_spans(Span(m.start(), m.end(), kind) for m in found)
        assert find_protected_spans(text, kinds=(kind,)) == expected, kind


def test_a_slash_date_without_chinese_is_still_a_zh_date() -> None:
    text = "Released 2026/11/30 and 2026.1.5, build 12/3."
    found = [s.of(text) for s in find_protected_spans(text, kinds=("zh_date",))]
    assert found == ["2026/11/30", "2026.1.5"]


def test_sentences_never_end_inside_a_url_or_quote_found_by_the_guard() -> None:
    text = 'See https://x.io/a.b?c=1. She said "Stop. Now" and left! Then: done.'
    assert [text[s.start : s.end] for s in split_sentences(text)] == [
        "See https://x.io/a.b?c=1.",
        'She said "Stop. Now" and left!',
        "Then: done.",
    ]
