"""The JSON compressor's and the code compressor's fast paths give what their plain
definitions give: repeated-object markers placed as a full walk of the tree places them (the
writing pass skips subtrees with no repeat), each item's leaves with shared path strings as
built one by one, line offsets summed in C, definitions found by ``startswith`` as the
multiline pattern found them, and words counted in a joined, lowered text as in each part."""

from __future__ import annotations

import re
from bisect import bisect_right
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from promptslim.backends.tools import elision_id, marker
from promptslim.backends.tools.code import definition_lines
from promptslim.backends.tools.json_dedup import dedup_subtrees
from promptslim.backends.tools.json_values import (
    Num,
    Obj,
    dump_json,
    encoder,
    items_leaves,
    load_json,
)
from promptslim.backends.tools.match import Matcher, line_starts

# few keys and values, so that objects repeat, nest and share paths
_SCALAR = st.one_of(
    st.sampled_from(["a", "bb", "é", "x\ny", ""]),
    st.integers(-3, 12).map(lambda i: Num(str(i))),
    st.sampled_from([True, False, None]),
)
_VALUE = st.recursive(
    _SCALAR,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(st.tuples(st.sampled_from(["k", "id", "user", "state"]), inner), max_size=4).map(
            Obj
        ),
    ),
    max_leaves=30,
)


def _reference_dedup(value: Any, min_chars: int, ascii_only: bool) -> tuple[str, list[str]]:
    """Every container walked in document order (what the writing pass did before it
    skipped subtrees): a repeat of an object of ``min_chars``+ becomes a marker."""
    enc = encoder(ascii_only)
    seen: dict[str, str] = {}
    ids: list[str] = []

    def write(v: Any, path: str) -> str:
        if type(v) is list:
            return "[" + ",".join(write(x, f"{path}[{i}]") for i, x in enumerate(v)) + "]"
        if type(v) is not Obj:
            return dump_json(v, ascii_only=ascii_only)
        t = dump_json(v, ascii_only=ascii_only)
        if len(t) >= min_chars:
            if t in seen:
                ident = elision_id(t)
                ids.append(ident)
                return enc(marker(len(t), "chars", ident, f"same as {seen[t]}"))
            seen[t] = path
        return "{" + ",".join(enc(k) + ":" + write(x, f"{path}.{k}") for k, x in v) + "}"

    return write(value, "$"), ids


@settings(max_examples=400, deadline=None)
@given(value=_VALUE, min_chars=st.integers(1, 40), ascii_only=st.booleans())
def test_dedup_places_markers_as_a_full_walk_does(
    value: Any, min_chars: int, ascii_only: bool
) -> None:
    text, elisions = dedup_subtrees(value, min_chars=min_chars, ascii_only=ascii_only)
    expected, ids = _reference_dedup(value, min_chars, ascii_only)
    assert text == expected
    assert [e.id for e in elisions] == ids


def test_dedup_marks_a_repeat_deep_inside_an_unrepeated_parent() -> None:
    user = '{"login":"octocat","id":1,"url":"https://api.github.com/users/octocat"}'
    text = f'[{{"n":1,"user":{user},"extra":"x"}},{{"n":2,"owner":{{"who":{user}}}}}]'
    out, elisions = dedup_subtrees(load_json(text), min_chars=40, ascii_only=False)
    assert len(elisions) == 1
    assert elisions[0].where == "$[1].owner.who"
    assert elisions[0].original == user
    assert out.count("octocat") == 2  # the first copy whole (its login and its url)


def _reference_leaves(value: Any, path: str = "") -> list[tuple[str, Any]]:
    if type(value) is Obj:
        return [leaf for k, v in value for leaf in _reference_leaves(v, f"{path}.{k}")]
    if type(value) is list:
        return [leaf for v in value for leaf in _reference_leaves(v, path + "[]")]
    return [(path, value)]


@settings(max_examples=300, deadline=None)
@given(items=st.lists(_VALUE, max_size=6))
def test_items_leaves_are_each_items_leaves(items: list[Any]) -> None:
    assert items_leaves(items, 0) == [_reference_leaves(v) for v in items]


def test_items_share_their_path_strings() -> None:
    first, second = items_leaves(load_json('[{"a":{"b":1}},{"a":{"b":2}}]'), 0)
    assert first[0][0] == ".a.b"
    assert first[0][0] is second[0][0]


@settings(max_examples=300, deadline=None)
@given(text=st.text(st.sampled_from("ab\n\r "), max_size=40))
def test_line_starts_are_after_each_newline(text: str) -> None:
    assert line_starts(text) == [0, *(i + 1 for i, c in enumerate(text) if c == "\n")]


_DEFINITION = re.compile(
    r"^[ \t]*(?:@|async def |def |class |export |function |func |pub |fn |struct |enum |trait |"
    r"impl |mod |interface |public |private |protected |static |internal |module |type )",
    re.MULTILINE,
)
_LINE = st.sampled_from(
    [
        "def f(x):",
        "    return x",
        "\t@dec",
        "class A:",
        "  type T = int",
        "x = 1",
        "",
        " \t fn a()",
        "defx",
        " \r def y",
        "  \t",
        "pub struct S",
        "@",
    ]
)


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(_LINE, max_size=30))
def test_definition_lines_are_the_multiline_patterns(lines: list[str]) -> None:
    text = "\n".join(lines)
    starts = line_starts(text)
    expected = sorted({bisect_right(starts, m.start()) - 1 for m in _DEFINITION.finditer(text)})
    assert definition_lines(text.split("\n")) == expected


@settings(max_examples=300, deadline=None)
@given(
    parts=st.lists(st.text(st.sampled_from("aBΣσς \x1eİi"), max_size=8), max_size=6),
    words=st.lists(st.sampled_from(["a", "b", "σ", "ς", "i̇", "ab"]), max_size=3),
)
def test_words_in_the_lowered_join_are_each_parts(parts: list[str], words: list[str]) -> None:
    m = Matcher((), words)
    literals, held = m.sets_per_part(parts)
    counts = [len(h) for h in held]
    assert counts == [m.word_hits(p) for p in parts]
    assert counts == m.word_hits_per_part(parts)
    assert literals == [set() for _ in parts]
