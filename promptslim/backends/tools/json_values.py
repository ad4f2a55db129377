"""JSON values as the tool-result compressors read and write them: numbers as the input spelled
them, objects as their (key, value) pairs (order and duplicate keys kept), written compactly.

``load_json`` is the standard library's C parser with hooks; ``dump_json`` and ``leaves`` are
plain recursive functions that build lists and join them, since a generator per level (``yield
from`` down a tree) or an ``append`` per token cost twice as much on API responses.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

__all__ = [
    "MAX_DEPTH",
    "Num",
    "Obj",
    "TooDeep",
    "dump_json",
    "items_leaves",
    "leaves",
    "load_json",
]

#: deeper values are not walked: the result goes on as text (each level is a Python frame)
MAX_DEPTH = 96

Encoder = Callable[[str], str]
_encode_str: Encoder = json.encoder.encode_basestring
_encode_ascii: Encoder = json.encoder.encode_basestring_ascii


class Num(str):
    """A JSON number (or NaN/Infinity) as the input spelled it."""

    __slots__ = ()


class Obj(list[tuple[str, Any]]):
    """A JSON object as its (key, value) pairs: order and duplicate keys kept."""

    __slots__ = ()


class TooDeep(Exception):
    """A value nested deeper than ``MAX_DEPTH``."""


def load_json(text: str) -> Any:
    """Parse ``text`` keeping number spellings and duplicate keys; raises ValueError."""
    return json.loads(
        text, object_pairs_hook=Obj, parse_float=Num, parse_int=Num, parse_constant=Num
    )


def encoder(ascii_only: bool) -> Encoder:
    """The string encoder ``dump_json`` uses."""
    return _encode_ascii if ascii_only else _encode_str


def dump_json(value: Any, *, ascii_only: bool = False) -> str:
    """Compact JSON for a value from ``load_json`` (or plain Python data)."""
    return to_text(value, encoder(ascii_only))


def to_text(value: Any, enc: Encoder) -> str:
    """``dump_json`` with the string encoder given."""
    kind = type(value)
    if kind is str:
        return enc(value)
    if kind is Num:
        return str.__str__(value)
    # a member that is a string or a number (most are) is written in place, without a call of
    # its own: a Num is a str whose text is its spelling, so ``+`` and ``join`` take it as it is
    if kind is Obj:
        return (
            "{"
            + ",".join(
                [
                    enc(k)
                    + ":"
                    + (enc(v) if type(v) is str else v if type(v) is Num else to_text(v, enc))
                    for k, v in value
                ]
            )
            + "}"
        )
    if kind is list:
        return (
            "["
            + ",".join(
                [
                    enc(v) if type(v) is str else v if type(v) is Num else to_text(v, enc)
                    for v in value
                ]
            )
            + "]"
        )
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    return _other(value, enc)


def _other(value: Any, enc: Encoder) -> str:
    """Subclasses and plain Python data from callers (dicts, tuples, ints, floats)."""
    if isinstance(value, Num):
        return str.__str__(value)
    if isinstance(value, str):
        return enc(value)
    if isinstance(value, Obj):
        return to_text(Obj(value), enc)
    if isinstance(value, dict):
        return to_text(Obj(value.items()), enc)
    if isinstance(value, (list, tuple)):
        return to_text(list(value), enc)
    return json.dumps(value)


def leaves(value: Any, depth: int) -> list[tuple[str, Any]]:
    """(key path, scalar) for every scalar under ``value``; array indexes become ``[]``.

    Raises ``TooDeep`` for a scalar deeper than ``MAX_DEPTH`` (counting from ``depth``)."""
    return items_leaves([value], depth)[0]


def items_leaves(items: list[Any], depth: int) -> list[list[tuple[str, Any]]]:
    """``leaves`` of each item of one array. The items of an array mostly share their key
    paths, so each path is one string for all of them (built once, its hash computed once
    for every later set and dict it goes through), not a new one per leaf."""
    names: dict[str, dict[str, str]] = {}
    top = names.setdefault("", {})
    result: list[list[tuple[str, Any]]] = []
    for value in items:
        out: list[tuple[str, Any]] = []
        if type(value) is Obj and depth + 1 <= MAX_DEPTH:  # the common item: one level inline
            append = out.append
            for k, v in value:
                p = top.get(k)
                if p is None:
                    p = top[k] = "." + k
                if isinstance(v, list):
                    _collect(v, p, depth + 1, out, names)
                else:
                    append((p, v))
        else:
            _collect(value, "", depth, out, names)
        result.append(out)
    return result


def _collect(
    value: Any,
    path: str,
    depth: int,
    out: list[tuple[str, Any]],
    names: dict[str, dict[str, str]],
) -> None:
    if depth > MAX_DEPTH:
        raise TooDeep
    if isinstance(value, list):  # Obj is a list too
        # a member one level down is too deep whatever it is (a container raises on entry),
        # so the test is made once here, not once per member
        if value and depth + 1 > MAX_DEPTH:
            raise TooDeep
        append = out.append
        if isinstance(value, Obj):
            known = names.get(path)
            if known is None:
                known = names[path] = {}
            for k, v in value:
                p = known.get(k)
                if p is None:
                    p = known[k] = f"{path}.{k}"
                if isinstance(v, list):
                    _collect(v, p, depth + 1, out, names)
                else:
                    append((p, v))
        else:
            inner = path + "[]"
            for v in value:
                if isinstance(v, list):
                    _collect(v, inner, depth + 1, out, names)
                else:
                    append((inner, v))
    else:
        out.append((path, value))
