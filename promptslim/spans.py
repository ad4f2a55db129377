"""``Span``: a half-open range of a text with the kind of thing found there."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Span"]


@dataclass(frozen=True, order=True)
class Span:
    """``text[start:end]``, with the kind of thing it is (``sentence``, ``uuid``, ``code``...)."""

    start: int
    end: int
    kind: str = ""

    def of(self, text: str) -> str:
        return text[self.start : self.end]
