"""Repeated subtrees in a JSON tool result: the second and later copies become markers.

API responses repeat whole objects: the same user as author, assignee and milestone creator
of every issue; a fork's ``parent`` and ``source`` repositories; ``owner`` and
``organization``. After the crusher has chosen what to keep, every object whose compact
text is at least ``min_chars`` long and equal to one seen earlier (in document order) is
replaced by a marker naming the path of the first copy, and the copy goes to the store like
any elision. Texts are built bottom-up once, so the pass costs about one serialisation.
"""

from __future__ import annotations

import json
from typing import Any

from . import Elision, elision_id, marker
from .json_crusher import _Num, _Obj

__all__ = ["dedup_subtrees"]


def dedup_subtrees(value: Any, *, min_chars: int, ascii_only: bool) -> tuple[Any, list[Elision]]:
    """``value`` with repeated objects of ``min_chars``+ characters replaced by markers."""
    enc = json.encoder.encode_basestring_ascii if ascii_only else json.encoder.encode_basestring
    texts: dict[int, str] = {}

    def text_of(v: Any) -> str:
        if isinstance(v, _Obj):
            t = "{" + ",".join(f"{enc(k)}:{text_of(x)}" for k, x in v) + "}"
            texts[id(v)] = t
            return t
        if isinstance(v, list):
            return "[" + ",".join(text_of(x) for x in v) + "]"
        if isinstance(v, _Num):
            return str.__str__(v)
        if isinstance(v, str):
            return str(enc(v))
        return "true" if v is True else "false" if v is False else "null"

    text_of(value)
    seen: dict[str, str] = {}
    elisions: list[Elision] = []

    def walk(v: Any, path: str) -> Any:
        if isinstance(v, _Obj):
            t = texts[id(v)]
            if len(t) >= min_chars:
                first = seen.get(t)
                if first is not None:
                    ident = elision_id(t)
                    note = f"same as {first}"
                    elisions.append(Elision(ident, "chars", len(t), path, t, note))
                    return marker(len(t), "chars", ident, note)
                seen[t] = path
            return _Obj((k, walk(x, f"{path}.{k}")) for k, x in v)
        if isinstance(v, list):
            return [walk(x, f"{path}[{i}]") for i, x in enumerate(v)]
        return v

    return walk(value, "$"), elisions
