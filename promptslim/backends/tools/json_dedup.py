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

from typing import Any

from . import Elision, elision_id, marker
from .json_values import Encoder, Obj, encoder, to_text

__all__ = ["dedup_subtrees"]


def dedup_subtrees(value: Any, *, min_chars: int, ascii_only: bool) -> tuple[str, list[Elision]]:
    """The compact text of ``value`` with repeated objects of ``min_chars``+ characters
    replaced by markers, and an elision per marker (``min_chars`` 0: no replacement)."""
    enc = encoder(ascii_only)
    if not min_chars:
        return to_text(value, enc), []
    texts: dict[int, str] = {}  # containers' texts by id: the tree keeps them all alive
    _texts(value, enc, texts)
    seen: dict[str, str] = {}
    elisions: list[Elision] = []

    def write(v: Any, path: str) -> str:
        kind = type(v)
        if kind is not Obj and kind is not list:
            return to_text(v, enc)
        t = texts[id(v)]
        if len(t) < min_chars:
            return t
        if kind is list:
            return "[" + ",".join([write(x, f"{path}[{i}]") for i, x in enumerate(v)]) + "]"
        first = seen.get(t)
        if first is not None:
            ident = elision_id(t)
            note = f"same as {first}"
            elisions.append(Elision(ident, "chars", len(t), path, t, note))
            return enc(marker(len(t), "chars", ident, note))
        seen[t] = path
        return "{" + ",".join([enc(k) + ":" + write(x, f"{path}.{k}") for k, x in v]) + "}"

    return write(value, "$"), elisions


def _texts(v: Any, enc: Encoder, texts: dict[int, str]) -> str:
    kind = type(v)
    if kind is Obj:
        t = "{" + ",".join([enc(k) + ":" + _texts(x, enc, texts) for k, x in v]) + "}"
    elif kind is list:
        t = "[" + ",".join([_texts(x, enc, texts) for x in v]) + "]"
    else:
        return to_text(v, enc)
    texts[id(v)] = t
    return t
