"""Repeated subtrees in a JSON tool result: the second and later copies become markers, in
the same pass that writes the result's text.

API responses repeat whole objects: the same user as author, assignee and milestone creator
of every issue; a fork's ``parent`` and ``source`` repositories; ``owner`` and
``organization``. After the crusher has chosen what to keep, every object whose compact
text is at least ``min_chars`` long and equal to one seen earlier (in document order) is
replaced by a marker naming the path of the first copy, and the copy goes to the store like
any elision. Texts are built bottom-up once; writing the result then reuses the text of every
value shorter than ``min_chars`` (nothing inside it can repeat), so the pass costs about one
serialisation.
"""

from __future__ import annotations

from collections import Counter
from itertools import accumulate
from typing import Any

from . import Elision, elision_id, marker
from .json_values import Encoder, Num, Obj, encoder, to_text

__all__ = ["dedup_subtrees"]


def dedup_subtrees(value: Any, *, min_chars: int, ascii_only: bool) -> tuple[str, list[Elision]]:
    """The compact text of ``value`` with repeated objects of ``min_chars``+ characters
    replaced by markers, and an elision per marker (``min_chars`` 0: no replacement)."""
    enc = encoder(ascii_only)
    if not min_chars:
        return to_text(value, enc), []
    texts: dict[int, str] = {}  # containers' texts by id: the tree keeps them all alive
    long: list[str] = []  # the texts of objects of min_chars or more, the only ones replaced
    spans: dict[int, tuple[int, int]] = {}  # a long container's stretch of ``long``
    whole = _texts(value, enc, (texts, spans, long), min_chars)
    counts = Counter(long)
    if len(counts) == len(long):
        return whole, []  # no object repeats: the writing pass would give the same text
    # how many repeated texts ``long`` holds before each index: a container with none in its
    # stretch (itself and everything under it) is written as its text, not walked
    repeats = [0, *accumulate(counts[t] > 1 for t in long)]
    seen: dict[str, str] = {}
    elisions: list[Elision] = []

    def write(v: Any, path: str) -> str:
        # strings and numbers are written in place by the caller (as in ``_texts``)
        kind = type(v)
        if kind is not Obj and kind is not list:
            return to_text(v, enc)
        t = texts[id(v)]
        if len(t) < min_chars:
            return t
        start, end = spans[id(v)]
        if repeats[end] == repeats[start]:
            return t
        if kind is list:
            return (
                "["
                + ",".join(
                    [
                        enc(x)
                        if type(x) is str
                        else x
                        if type(x) is Num
                        else write(x, f"{path}[{i}]")
                        for i, x in enumerate(v)
                    ]
                )
                + "]"
            )
        first = seen.get(t)
        if first is not None:
            ident = elision_id(t)
            note = f"same as {first}"
            elisions.append(Elision(ident, "chars", len(t), path, t, note))
            return enc(marker(len(t), "chars", ident, note))
        seen[t] = path
        return (
            "{"
            + ",".join(
                [
                    enc(k)
                    + ":"
                    + (
                        enc(x)
                        if type(x) is str
                        else x
                        if type(x) is Num
                        else write(x, f"{path}.{k}")
                    )
                    for k, x in v
                ]
            )
            + "}"
        )

    return write(value, "$"), elisions


_Found = tuple[dict[int, str], dict[int, tuple[int, int]], list[str]]


def _texts(v: Any, enc: Encoder, found: _Found, min_chars: int) -> str:
    """The compact text of ``v``. Kept in ``found``: every container's text (by id), every
    long object's text (in ``long``, children before parents) and, for each long container,
    the stretch of ``long`` its subtree added. Strings and numbers are written in place (a
    Num's text is its spelling), as ``to_text`` does: a call per scalar was a third of this
    pass."""
    texts, spans, long = found
    start = len(long)
    kind = type(v)
    if kind is Obj:
        t = (
            "{"
            + ",".join(
                [
                    enc(k)
                    + ":"
                    + (
                        enc(x)
                        if type(x) is str
                        else x
                        if type(x) is Num
                        else _texts(x, enc, found, min_chars)
                    )
                    for k, x in v
                ]
            )
            + "}"
        )
        if len(t) >= min_chars:
            long.append(t)
            spans[id(v)] = (start, len(long))
    elif kind is list:
        t = (
            "["
            + ",".join(
                [
                    enc(x)
                    if type(x) is str
                    else x
                    if type(x) is Num
                    else _texts(x, enc, found, min_chars)
                    for x in v
                ]
            )
            + "]"
        )
        if len(t) >= min_chars:
            spans[id(v)] = (start, len(long))
    else:
        return to_text(v, enc)
    texts[id(v)] = t
    return t
