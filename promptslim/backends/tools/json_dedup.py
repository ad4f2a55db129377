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

# what the texts pass keeps: containers' texts by id (the tree keeps them all alive), long
# containers' stretches of ``long`` by id, and ``long``: the texts of objects of ``min_chars``
# or more, the only ones a marker replaces
_Found = tuple[dict[int, str], dict[int, tuple[int, int]], list[str]]


def dedup_subtrees(value: Any, *, min_chars: int, ascii_only: bool) -> tuple[str, list[Elision]]:
    """The compact text of ``value`` with repeated objects of ``min_chars``+ characters
    replaced by markers, and an elision per marker (``min_chars`` 0: no replacement)."""
    enc = encoder(ascii_only)
    if not min_chars:
        return to_text(value, enc), []
    found: _Found = ({}, {}, [])
    whole = _texts(value, enc, found, min_chars)
    long = found[2]
    counts = Counter(long)
    if len(counts) == len(long):
        return whole, []  # no object repeats: the writing pass would give the same text
    writer = _Writer(enc, min_chars, found, counts)
    return writer.write(value, "$"), writer.elisions


class _Writer:
    """The writing pass once some object repeats: the first copy of a repeated text is
    written, later ones become markers (in document order)."""

    def __init__(self, enc: Encoder, min_chars: int, found: _Found, counts: Counter[str]) -> None:
        self.enc = enc
        self.min_chars = min_chars
        self.texts, self.spans, long = found
        # how many repeated texts ``long`` holds before each index: a container with none in
        # its stretch (itself and everything under it) is written as its text, not walked
        self.repeats = [0, *accumulate(counts[t] > 1 for t in long)]
        self.seen: dict[str, str] = {}
        self.elisions: list[Elision] = []

    def write(self, v: Any, path: str) -> str:
        # strings and numbers are written in place by the caller (as in ``_texts``)
        enc, kind = self.enc, type(v)
        if kind is not Obj and kind is not list:
            return to_text(v, enc)
        t = self.texts[id(v)]
        if len(t) < self.min_chars:
            return t
        start, end = self.spans[id(v)]
        if self.repeats[end] == self.repeats[start]:
            return t
        write = self.write
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
        first = self.seen.get(t)
        if first is not None:
            ident = elision_id(t)
            note = f"same as {first}"
            self.elisions.append(Elision(ident, "chars", len(t), path, t, note))
            return enc(marker(len(t), "chars", ident, note))
        self.seen[t] = path
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
