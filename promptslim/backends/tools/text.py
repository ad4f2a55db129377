"""Plain-text tool results (search snippets, pages, prose): the extractive compressor.

Sentences (one past ``UNIT_CHARS``, as in a transcript without punctuation, in parts of about
that size: ``ExtractiveCompressor.units``) are chosen by ``ExtractiveCompressor.select``
(query-aware BM25, protected spans never split) under ``keep_ratio`` of the text's tokens;
sentences holding the turn's literals are always kept. Each run of left-out sentences becomes
a marker with the id of its original. Token counts here are estimated from characters (4 per
token): exact counts cost more than the compression itself, and the ratio is a target, not a
budget.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...errors import ConfigError
from ...text import Span, find_protected_spans
from ..compress import Item
from ..compress.extractive import ExtractiveCompressor
from . import Compressed, Elision, ToolCompressor, ToolContext, elision_id, marker
from .match import matcher_for

__all__ = ["TextCompressor"]


class _CharCounter:
    """Tokens estimated as characters / 4: a TokenCounter for ``select``'s greedy budget."""

    name = "chars/4"

    def encode(self, text: str) -> list[int]:
        return [0] * self.count(text)

    def count(self, text: str) -> int:
        return (len(text) + 3) // 4

    def __hash__(self) -> int:
        return id(self)


_COUNTER = _CharCounter()


class TextCompressor(ToolCompressor):
    """Extractive compression with markers. ``keep_ratio``: share of the text to keep;
    ``min_sentences``: texts with fewer sentences are left alone."""

    name = "text"

    def __init__(self, *, keep_ratio: float = 0.3, min_sentences: int = 6) -> None:
        if (
            isinstance(keep_ratio, bool)
            or not isinstance(keep_ratio, (int, float))
            or not 0 < keep_ratio <= 1
        ):
            raise ConfigError(f"must be in (0, 1], got {keep_ratio!r}", field="keep_ratio")
        if (
            isinstance(min_sentences, bool)
            or not isinstance(min_sentences, int)
            or min_sentences < 1
        ):
            raise ConfigError(f"must be an int >= 1, got {min_sentences!r}", field="min_sentences")
        self.keep_ratio = keep_ratio
        self.min_sentences = min_sentences
        self._extractive = ExtractiveCompressor()

    def compress(self, text: str, context: ToolContext) -> Compressed | None:
        protected = tuple(find_protected_spans(text, extra=context.protect))
        item = Item(text=text, protected=protected)
        units = self._extractive.units(item)  # a run-on line in parts, as for documents
        if len(units) < self.min_sentences:
            return None
        budget = int(self.keep_ratio * _COUNTER.count(text))
        query = " ".join((context.query, *context.hints))
        keep = self._extractive.select(
            [item], [units], query=query, budget=budget, counter=_COUNTER
        )[0]
        matcher = matcher_for(context)
        for i, unit in enumerate(units):
            if not keep[i] and matcher.literal_hits(unit.of(text)):
                keep[i] = True
        return _render(text, units, keep)


def _render(text: str, units: Sequence[Span], keep: Sequence[bool]) -> Compressed | None:
    """Kept sentences with their own separators; each left-out run is one marker."""
    out: list[str] = []
    elisions: list[Elision] = []
    i, n = 0, len(units)
    cursor = 0  # where the text not yet written starts
    while i < n:
        if keep[i]:
            out.append(text[cursor : units[i].end])
            cursor = units[i].end
            i += 1
            continue
        j = i
        while j < n and not keep[j]:
            j += 1
        out.append(text[cursor : units[i].start])  # the separator before the run
        end = units[j - 1].end
        original = text[units[i].start : end]
        ident = elision_id(original)
        where = f"chars {units[i].start}-{end}"
        elisions.append(Elision(ident, "sentences", j - i, where, original))
        out.append(marker(j - i, "sentences" if j - i > 1 else "sentence", ident))
        cursor = end
        i = j
    out.append(text[cursor:])
    if not elisions:
        return None
    return Compressed("".join(out), tuple(elisions), "text")
