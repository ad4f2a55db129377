"""The one bounded-cache type of the library: a memo bounded by entries *and* by size.

Every memo on a request's path (token counts, lexical terms, message hashes, summary keys...)
is a ``BoundedCache``. A memo bounded only by entries keeps whatever its keys hold alive: a
16,384-entry memo of token counts keyed by text keeps 16,384 documents, however long each is.
So each entry is charged a size (what it keeps alive: the characters of a text key) and the
cache holds at most ``max_size`` of it as well as at most ``max_entries`` entries
(docs/architecture.md, invariant 10).

It is a ``dict`` whose writes go through ``put``, for speed where it matters: memos here are
read on every message of every request, and a hit is then one C-level dict lookup with no lock
and no reordering. Eviction is therefore oldest-inserted first (an entry still in use that is
evicted is recomputed once). Given ``compute``, a cache is also the memoised function: calling
it with a key is a lookup, and a miss computes, stores and returns (``dict.__missing__``).
Writes take a lock, so threads may share a cache.

``clear_memos`` empties every memo of the process at once, as a process that never saw any
request's text: what measuring a cold request needs (a memo left filled by an earlier config on
the same item makes a later one look cheaper than a new request is). Caches that are not memos
of request text opt out (``clears=False``): a store, whose entries are data, and a memo of a
language's words, which a serving process has all but filled.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Hashable
from typing import Any, NamedTuple, TypeVar

__all__ = ["BoundedCache", "CacheInfo", "clear_memos", "text_size"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class CacheInfo(NamedTuple):
    """As ``functools.lru_cache``'s, plus the size bound and the size held. ``hits`` is None:
    a hit is a bare dict lookup, which counts nothing."""

    hits: int | None
    misses: int
    maxsize: int
    currsize: int
    max_size: int
    size: int


def text_size(key: object, value: object) -> int:
    """An entry's size for a memo keyed by a string: its characters, plus one (the entry)."""
    return len(key) + 1 if isinstance(key, str) else 1


#: every cache ``clear_memos`` empties, held weakly (an instance's memo goes with it); stages
#: made on several threads at once add theirs, so the set is read and written under a lock
_memos: weakref.WeakSet[BoundedCache[Any, Any]] = weakref.WeakSet()
_memos_lock = threading.Lock()


def clear_memos() -> None:
    """Empty every ``BoundedCache`` made without ``clears=False``."""
    with _memos_lock:
        caches = list(_memos)
    for cache in caches:
        cache.clear()


class BoundedCache(dict[K, V]):
    """At most ``max_entries`` entries whose sizes sum to at most ``max_size``.

    ``put(key, value, size)`` stores an entry charged ``size``; one larger than ``max_size`` on
    its own is not kept. Read with ``get`` or ``in`` as a dict; never write it as one (that
    would bypass the bounds). With ``compute``, ``cache(key)`` and ``cache[key]`` return
    ``compute(key)``, memoised, each new entry charged ``sizeof(key, value)``. ``clears``:
    whether ``clear_memos`` empties it.
    """

    __call__ = dict.__getitem__  # with compute: the memoised function (a C-level call on a hit)

    def __init__(
        self,
        *,
        max_entries: int,
        max_size: int,
        compute: Callable[[K], V] | None = None,
        sizeof: Callable[[K, V], int] = text_size,
        clears: bool = True,
    ) -> None:
        super().__init__()
        if max_entries < 1 or max_size < 1:
            raise ValueError("max_entries and max_size must be >= 1")
        self.max_entries = max_entries
        self.max_size = max_size
        self.compute = compute
        self.sizeof = sizeof
        self.misses = 0
        self._sizes: dict[K, int] = {}
        self._size = 0
        # re-entrant: a weak reference's callback may discard an entry from inside a write
        self._lock = threading.RLock()
        if clears:
            with _memos_lock:
                _memos.add(self)

    def __missing__(self, key: K) -> V:
        if self.compute is None:
            raise KeyError(key)
        self.misses += 1
        value = self.compute(key)
        self.put(key, value, self.sizeof(key, value))
        return value

    def put(self, key: K, value: V, size: int) -> None:
        if size > self.max_size:
            return
        sizes = self._sizes
        with self._lock:
            if key in sizes:
                self._drop(key)
            while sizes and (len(sizes) >= self.max_entries or self._size + size > self.max_size):
                self._drop(next(iter(sizes)))
            dict.__setitem__(self, key, value)
            sizes[key] = size
            self._size += size

    def discard(self, key: K, value: V) -> None:
        """Remove ``key``'s entry if it still holds ``value`` (the very object)."""
        with self._lock:
            if key in self._sizes and dict.get(self, key) is value:
                self._drop(key)

    def _drop(self, key: K) -> None:  # under the lock
        dict.__delitem__(self, key)
        self._size -= self._sizes.pop(key)

    def clear(self) -> None:
        with self._lock:
            dict.clear(self)
            self._sizes.clear()
            self._size = 0
            self.misses = 0

    def cache_clear(self) -> None:
        """``clear``, as ``functools.lru_cache`` calls it."""
        self.clear()

    def cache_info(self) -> CacheInfo:
        return CacheInfo(None, self.misses, self.max_entries, len(self), self.max_size, self._size)

    @property
    def size(self) -> int:
        """The sizes of the entries held, summed."""
        return self._size

    # a cache is compared and hashed as the object it is, not as the dict it holds
    __hash__ = object.__hash__  # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        return self is other

    def __repr__(self) -> str:
        return (
            f"BoundedCache({len(self)}/{self.max_entries} entries, "
            f"size {self._size}/{self.max_size})"
        )
