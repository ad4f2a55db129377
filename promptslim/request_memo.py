"""Memos about one request object that live exactly as long as it does.

Every stage of a pipeline counts the request it is given, and a stage that changes nothing
hands the same object on; so figures about a request (its messages' token counts, whether any
history message is pinned) are looked up by the request object. The table is keyed by
``id(request)`` and holds a weak reference to it: an entry is dropped when its request is
garbage-collected (nothing here keeps a request or its messages alive past its own life), a
reused id is told apart by the reference, and the table is bounded by entries besides.

Each slot's value carries what it was computed from (the message list as it was, ...), which
its reader compares: a list field edited in place makes the entry stale, not wrong.
"""

from __future__ import annotations

import weakref
from typing import Any

from .memo import BoundedCache

__all__ = ["get", "put", "size"]

_Entry = tuple["weakref.ref[Any]", dict[str, Any]]

#: live requests with memos; more than this many at once is unusual (one per request in flight)
_TABLE: BoundedCache[int, _Entry] = BoundedCache(max_entries=4096, max_size=4096)
_table_get = _TABLE.get


def get(request: object, slot: str) -> Any:
    """What ``put`` stored for ``request`` under ``slot``, or None."""
    hit = _table_get(id(request))
    if hit is None:
        return None
    ref, slots = hit
    if ref() is not request:
        return None
    return slots.get(slot)


def put(request: object, slot: str, value: Any) -> None:
    key = id(request)
    hit = _table_get(key)
    if hit is not None and hit[0]() is request:
        hit[1][slot] = value
        return
    entry: _Entry = (weakref.ref(request, lambda ref: _forget(key, ref)), {slot: value})
    _TABLE.put(key, entry, 1)


def _forget(key: int, ref: weakref.ref[Any]) -> None:
    # the request was collected: drop its entry (unless its id has a new entry by now). The
    # cache's lock is re-entrant, so this may run wherever the collector does
    hit = _table_get(key)
    if hit is not None and hit[0] is ref:
        _TABLE.discard(key, hit)


def size() -> int:
    """Requests with memos held now (dead ones not yet dropped included)."""
    return len(_TABLE)
