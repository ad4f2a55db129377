"""Where summaries are kept: the ``SummaryCache`` protocol (``get``/``set`` of strings by key)
and the in-memory default, ``LRUSummaryCache``; ``SqliteSummaryCache`` (``summary_store``)
shares one file between the processes of a host."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..errors import ConfigError
from ..memo import BoundedCache

__all__ = ["LRUSummaryCache", "SummaryCache"]


@runtime_checkable
class SummaryCache(Protocol):
    """Where summaries are kept, by key. A shared store (Redis...) needs only these two."""

    def get(self, key: str) -> str | None: ...

    def set(self, key: str, value: str) -> None: ...


class LRUSummaryCache:
    """A bounded, thread-safe in-memory LRU of summaries (the default cache): at most
    ``maxsize`` summaries and ``max_chars`` characters of them (a ``BoundedCache``; a hit moves
    the summary to the newest end, so a conversation's current steps stay)."""

    def __init__(self, *, maxsize: int = 4096, max_chars: int = 8_000_000) -> None:
        if maxsize < 1:
            raise ConfigError("must be >= 1", field="maxsize")
        if max_chars < 1:
            raise ConfigError("must be >= 1", field="max_chars")
        self.maxsize = maxsize
        self.max_chars = max_chars
        self._data: BoundedCache[str, str] = BoundedCache(max_entries=maxsize, max_size=max_chars)

    def get(self, key: str) -> str | None:
        value = self._data.get(key)
        if value is not None:
            self._data.put(key, value, len(key) + len(value))  # newest again: LRU order
        return value

    def set(self, key: str, value: str) -> None:
        self._data.put(key, value, len(key) + len(value))

    def clear(self) -> None:
        self._data.clear()

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"LRUSummaryCache(maxsize={self.maxsize}, max_chars={self.max_chars})"
