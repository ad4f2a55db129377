"""Selection inside a kept long document (coarse to fine): the windows (``windows``) that
carry the query, with the context a reader needs, kept as whole units, byte-exact."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from ..backends.compress.extractive import join_units
from ..layout import line_layout
from ..text import Span
from .windows import Windowed, paragraph_ends, paragraph_heads

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "Paragraphs",
    "Selection",
    "paragraphs_of",
    "select_parts",
    "select_units",
    "selected_text",
]


@dataclass(frozen=True)
class Selection:
    """How much of a kept long document stays: windows at least ``fraction`` of the way from
    the request's worst window to its best, neighbours of those at ``neighbour_fraction``
    (None: no neighbour rule), ``before`` sentences before each and ``after`` after, and,
    with ``records``, the rest of the indented record each ends in (``_record_rest``)."""

    fraction: float
    neighbour_fraction: float | None
    before: int
    after: int
    records: bool = True


class Paragraphs(NamedTuple):
    """Where a document's paragraphs start (``heads``: each unit's paragraph's first unit) and
    end (``ends``) among its units, and its soft line breaks (wrapping prose): what every
    selection in the document reads."""

    heads: list[int]
    ends: list[int]
    soft: frozenset[int]


def paragraphs_of(text: str | None, units: Sequence[Span]) -> Paragraphs:
    """The paragraphs of a document of ``units`` (``text`` None: one paragraph, no text to
    read them from)."""
    heads = paragraph_heads(text, units) if text is not None else [0] * len(units)
    ends = paragraph_ends([heads[u] == u for u in range(len(units))])
    soft = frozenset(line_layout(text).soft) if text is not None else frozenset()
    return Paragraphs(heads, ends, soft)


def select_parts(
    windowed: Windowed,
    scores: np.ndarray,
    doc: int,
    text: str,
    rule: Selection,
    *,
    first: bool,
    paragraphs: Paragraphs | None = None,
) -> tuple[str, list[list[int]], str] | None:
    """Document ``doc``'s kept text, the character spans kept, and a summary (``kept
    sentences 1, 4-6 of 12``); None when it stays whole. ``paragraphs``: the document's, when
    several selections read them (``paragraphs_of``)."""
    top, low = float(scores.max()), float(scores.min())
    threshold = low + rule.fraction * (top - low) - 1e-12
    neighbour = None
    if rule.neighbour_fraction is not None:
        neighbour = low + rule.neighbour_fraction * (top - low) - 1e-12
    keep = select_units(
        windowed,
        doc,
        scores.tolist(),
        threshold,
        context=rule.before,
        after=rule.after,
        first=first,
        neighbour_threshold=neighbour,
        text=text,
        paragraphs=paragraphs,
        records=rule.records,
    )
    if keep is None or all(keep):
        return None
    units = windowed.units[doc]
    spans = [[units[u].start, units[u].end] for u in range(len(keep)) if keep[u]]
    return selected_text(text, units, keep), spans, f"{_ranges(keep)} of {len(units)}"


def _ranges(keep: Sequence[bool]) -> str:
    """``1, 4-6``: the kept positions (from 1) as ranges."""
    out: list[str] = []
    i = 0
    while i < len(keep):
        if keep[i]:
            j = i
            while j + 1 < len(keep) and keep[j + 1]:
                j += 1
            out.append(f"{i + 1}" if i == j else f"{i + 1}-{j + 1}")
            i = j
        i += 1
    return ", ".join(out)


def select_units(
    windowed: Windowed,
    doc: int,
    scores: Sequence[float],
    threshold: float,
    *,
    context: int,
    first: bool,
    after: int = 0,
    neighbour_threshold: float | None = None,
    text: str | None = None,
    paragraphs: Paragraphs | None = None,
    records: bool = True,
) -> list[bool] | None:
    """Which units of document ``doc`` to keep: those of its windows scoring at least
    ``threshold`` (its best window always), the ``context`` units before each and up to
    ``after`` after it (``_after``), and the first unit of each one's paragraph when ``first``
    (what the part is about, when the document has no title). Given the document's ``text``,
    that context stays inside the kept window's paragraph: in a chunk of several passages (a
    splitter's, or passages joined) the sentence before a paragraph, or the chunk's first
    line, belongs to another passage and tells the reader nothing; and with ``records``, a
    window that ends inside an indented record keeps the record's rest (``_record_rest``).
    None: the document is one window, kept whole."""
    ids = windowed.of_document(doc)
    if len(ids) <= 1:
        return None
    best = max(ids, key=lambda w: (scores[w], -w))
    keep = [False] * len(windowed.units[doc])
    chosen = {w for w in ids if w == best or scores[w] >= threshold}
    if neighbour_threshold is not None:
        # the answer often sits just after (or before) the part that names the question's
        # subject: a neighbour of a kept window needs a lower score to stay
        chosen |= {w for w in ids if scores[w] >= neighbour_threshold and ({w - 1, w + 1} & chosen)}
    units = windowed.units[doc]
    heads, ends, soft = paragraphs or paragraphs_of(text, units)
    for w in sorted(chosen):
        window = windowed.windows[w]
        head = heads[window.first]
        limit = min(ends[window.last - 1], window.last + after)
        stop = _after(text, units, window.last, limit, soft)
        if text is not None and records:
            stop = _record_rest(text, units, window.first, stop, windowed.window_chars)
        for u in range(max(head, window.first - context), stop):
            keep[u] = True
        if first:
            keep[head] = True
    return keep


def _after(
    text: str | None, units: Sequence[Span], last: int, limit: int, soft: frozenset[int]
) -> int:
    """Where the units kept after a window end (exclusive), the window's own ending before
    unit ``last``: the units up to ``limit`` (at most the paragraph's end) that go on the same
    line as the one before them (a line break in ``soft``, wrapping prose, counts as none).
    In prose the sentence after the one naming the question's subject often states the
    answer; the next line of a table, a log or a list is another record."""
    if text is None:
        return limit
    stop = last
    while stop < limit:
        start = units[stop - 1].end
        gap = text[start : units[stop].start]
        if any(c == "\n" and start + i not in soft for i, c in enumerate(gap)):
            break  # a line of its own
        stop += 1
    return stop


def _record_rest(text: str, units: Sequence[Span], first: int, stop: int, limit: int) -> int:
    """Where the units kept after a window end (exclusive, from ``stop``) when its last line
    is inside an indented record: a service in a compose file, a Kubernetes manifest, a
    function, a nested list, a stack trace. The line that answers is often a few lines below
    the one naming the question's subject, in the same record, and a window may end between
    them. The records the last line is in are its parents' blocks (``_enclosing``): the
    rest of the outermost one that ends within ``limit`` characters is kept, so a record
    stays whole; where none does, the innermost one's, cut at ``limit``. A record ends at a
    line indented no deeper than its head, or at a blank line, or at the document's end,
    but for the document's first line (``services:``): its block is the document, not one
    record among others. The next row of a table or a log, at the same indent, is no part of
    any record."""
    if stop >= len(units) or "\n" not in text[units[stop - 1].end : units[stop].start]:
        return stop  # the window ends the document, or the next unit goes on the same line
    # the heads are looked for in the window, and no further back than a few limits: a window
    # over one huge unit (a JSON document) is not read line by line
    top = text.rfind("\n", 0, max(units[first].start, units[stop - 1].end - 4 * limit)) + 1
    heads = _enclosing(text, top, units[stop - 1].end, units[stop].start)
    cap = units[stop - 1].end + limit
    ends: dict[int, int] = {}  # a head's line: where its record ends
    u = stop
    while u < len(units) and len(ends) < len(heads):
        gap = units[u - 1].end
        breaks = text.count("\n", gap, units[u].start)
        if breaks > 1:
            break  # a blank line
        if units[u].end > cap:
            return max(ends.values(), default=u)  # the records left run past the limit
        if breaks:
            indent = _indent(text, text.rfind("\n", gap, units[u].start) + 1)
            ends.update((h, u) for h, own in heads.items() if own >= indent and h not in ends)
        u += 1
    # a blank line ends them all; the document's end all but the block its first line opens
    root = text.rfind("\n", 0, len(text) - len(text.lstrip())) + 1 if u == len(units) else -1
    ends.update((h, u) for h in heads if h not in ends and h != root)
    return max(ends.values(), default=stop)


def _enclosing(text: str, top: int, end: int, following: int) -> dict[int, int]:
    """The lines (by their start) the line ending at ``end`` is inside, and their indents:
    itself where the next line (starting after ``end``, at or before ``following``) is
    deeper, then each line above it, back to ``top``, indented less than the one before."""
    line = text.rfind("\n", 0, end) + 1
    indent = _indent(text, line)
    deeper = _indent(text, text.rfind("\n", end, following) + 1) > indent
    heads = {line: indent} if deeper else {}
    while line > top and indent > 0:
        line = text.rfind("\n", 0, line - 1) + 1
        own = _indent(text, line)
        if own < indent and text[line + own : line + own + 1] not in ("\n", "\r", ""):
            heads[line] = indent = own
    return heads


def _indent(text: str, line: int) -> int:
    """The width of the white space that starts the line starting at ``line``."""
    end = line
    while end < len(text) and text[end] in " \t":
        end += 1
    return end - line


def selected_text(text: str, units: Sequence[Span], keep: Sequence[bool]) -> str:
    """The kept units of ``text`` in their order, joined as the extractive compressor joins
    them (separators kept between neighbours, squeezed across a dropped stretch)."""
    return join_units(text, units, keep)
