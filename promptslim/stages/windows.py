"""Sentence-aligned windows of long documents: scored as parts, selected as parts.

A retrieved chunk of 300-1,000 tokens is about many things; the answer may be in any of its
sentences. Scored as one text, its relevance is that of its head (an embedder reads a few dozen
word pieces) or a blur of everything in it (BM25 over all of it). So the retrieval stage cuts
each long document into windows of whole sentences, about ``window_chars`` characters each
(cut by characters, before any tokenizer runs: the cost of cutting is a scan of the text),
consecutive windows sharing ``overlap`` sentences so that a sentence and the one before it are
read together somewhere. A document no longer than about one window is one window: its whole
text, scored exactly as before; so is a paragraph no longer than about one window (a passage
in a chunk of several is not cut into a window and a stub).

The windows of a request are bounded (``max_windows``): past it, the window size grows for
that request, so a request of any length costs at most that many model inputs; each window's
scoring text is cut to ``SCORING_CHARS_PER_WINDOW`` times the window size as well.

Units are sentences (``split_units``: a protected span crossing a sentence boundary merges the
sentences), and a sentence longer than a window is cut at spaces outside protected spans, so
what the selection keeps is always whole units, byte-exact, protected spans never split.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..backends.compress.extractive import join_units, split_units
from ..layout import line_layout
from ..text import Span, find_protected_spans

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "Selection",
    "Window",
    "Windowed",
    "document_scores",
    "document_vectors",
    "later_windows",
    "lexical_windows",
    "paragraph_heads",
    "select_parts",
    "select_units",
    "selected_text",
    "split_windows",
    "whole_documents",
    "window_embeddings",
]

#: a window's scoring text is cut to this many times the window size (a huge protected unit)
SCORING_CHARS_PER_WINDOW = 3
# a document (or a paragraph of one) up to this much longer than one window stays
# one window: a 10 % longer passage is not worth two model inputs, nor a stub scored
# without the head of its paragraph
_SLACK = 1.25
_SPACE = re.compile(r"\s+")
# a window at least this full ends at a paragraph break rather than run into the next one
_MIN_FILL = 0.4


@dataclass(frozen=True)
class Window:
    """Units ``first`` to ``last`` (exclusive) of document ``doc``, and what the scorers read."""

    doc: int
    first: int
    last: int
    text: str


@dataclass(frozen=True)
class Windowed:
    """The units of each document and the windows over them, in document order."""

    units: list[list[Span]]
    windows: list[Window]
    window_chars: int

    def of_document(self, doc: int) -> list[int]:
        """Indexes (into ``windows``) of document ``doc``'s windows."""
        return [w for w, window in enumerate(self.windows) if window.doc == doc]


def _cut_long(text: str, unit: Span, limit: int, protected: Sequence[Span]) -> list[Span]:
    """``unit`` cut at spaces into pieces of about ``limit`` characters, never inside a
    protected span (a unit without a usable space stays whole)."""
    if unit.end - unit.start <= limit:
        return [unit]
    inside = [(p.start, p.end) for p in protected if p.start < unit.end and p.end > unit.start]
    pieces: list[Span] = []
    start = unit.start
    for match in _SPACE.finditer(text, unit.start, unit.end):
        cut = match.end()
        if cut - start < limit or cut >= unit.end:
            continue
        if any(a < cut < b for a, b in inside):
            continue
        pieces.append(Span(start, cut, "sentence"))
        start = cut
    pieces.append(Span(start, unit.end, "sentence"))
    return pieces


def document_units(text: str, protected: Sequence[Span], limit: int) -> list[Span]:
    """Sentence units of ``text`` (protected spans whole), none much over ``limit`` chars."""
    units: list[Span] = []
    for unit in split_units(text, protected):
        units.extend(_cut_long(text, unit, limit, protected))
    return units or [Span(0, len(text), "sentence")]


def paragraph_heads(text: str, units: Sequence[Span]) -> list[int]:
    """Each unit's paragraph, as the index of its first unit. Where paragraphs start depends
    on the text's line layout (``promptslim.layout``): at a blank line; in text of one
    paragraph a line, at each line break but the one after a heading; in hard-wrapped prose,
    after a sentence's end where the writer, not the wrapping, broke the line."""
    layout = line_layout(text)
    heads = [0] * len(units)
    for u in range(1, len(units)):
        starts = layout.starts_paragraph(units[u - 1].end, units[u].start)
        heads[u] = u if starts else heads[u - 1]
    return heads


def _windows_of(
    doc: int,
    text: str,
    title: str | None,
    units: list[Span],
    size: int,
    overlap: int,
    whole_paragraphs: bool = True,
) -> list[Window]:
    head = f"{title}\n" if title else ""
    limit = SCORING_CHARS_PER_WINDOW * size
    if len(text) <= _SLACK * size or len(units) == 1:
        return [Window(doc, 0, len(units), (head + text)[:limit])]
    # a paragraph starts a topic (see paragraph_heads): a window that is already a fair part of
    # its size ends there, and the next starts there without overlap (a paragraph is a topic;
    # a window across two scores as neither)
    para = [head == u for u, head in enumerate(paragraph_heads(text, units))]
    ends = _paragraph_ends(para)
    out: list[Window] = []
    first = 0
    while first < len(units):
        last = first + 1
        whole = units[ends[first] - 1].end - units[first].start <= _SLACK * size
        if whole_paragraphs and para[first] and whole:
            last = ends[first]  # a paragraph of about one window: not cut
        while last < len(units) and units[last].end - units[first].start <= size:
            if para[last] and units[last - 1].end - units[first].start >= _MIN_FILL * size:
                break
            last += 1
        body = text[units[first].start : units[last - 1].end]
        out.append(Window(doc, first, last, (head + body)[:limit]))
        if last >= len(units):
            break
        first = last if para[last] else max(first + 1, last - overlap)
    return out


def _paragraph_ends(para: Sequence[bool]) -> list[int]:
    """For each unit, the index one past the last unit of its paragraph."""
    ends = [len(para)] * len(para)
    for u in range(len(para) - 2, -1, -1):
        ends[u] = u + 1 if para[u + 1] else ends[u + 1]
    return ends


def split_windows(
    texts: Sequence[str],
    titles: Sequence[str | None],
    *,
    window_chars: int,
    overlap: int,
    max_windows: int,
    protect: Sequence[str] = (),
    whole_paragraphs: Sequence[bool] | None = None,
) -> Windowed:
    """Windows of every document, at most ``max_windows`` in all (the size grows past it;
    a request with more documents than that gets one window per document). ``protect``: the
    request's own protected literals, on top of ``find_protected_spans``'s kinds.
    ``whole_paragraphs``: per document, whether a paragraph about one window long stays one
    window (None: every document's does)."""
    whole = list(whole_paragraphs) if whole_paragraphs is not None else [True] * len(texts)
    size = max(window_chars, math.ceil(sum(len(t) for t in texts) / max(1, max_windows)))
    # a document of about one window needs no sentence split (nor protected spans) at all
    units = [
        document_units(t, find_protected_spans(t, extra=protect), size)
        if len(t) > _SLACK * size
        else [Span(0, len(t), "sentence")]
        for t in texts
    ]
    for _ in range(8):  # overlap can push the count past the cap: grow and cut again
        windows = [
            w
            for d, (t, title, u) in enumerate(zip(texts, titles, units))
            for w in _windows_of(d, t, title, u, size, overlap, whole[d])
        ]
        if len(windows) <= max(max_windows, len(texts)):
            break
        size = math.ceil(size * len(windows) / max(1, max_windows)) + 1
    return Windowed(units=units, windows=windows, window_chars=size)


def document_scores(windowed: Windowed, scores: np.ndarray, n_docs: int) -> np.ndarray:
    """Each document's relevance: its best window's score (its answer may be in any part)."""
    import numpy as np

    out = np.full(n_docs, -np.inf, dtype=np.float64)
    owners = np.fromiter((w.doc for w in windowed.windows), dtype=np.int64)
    np.maximum.at(out, owners, np.asarray(scores, dtype=np.float64))
    return out


def document_vectors(
    windowed: Windowed, vectors: np.ndarray | None, n_docs: int
) -> np.ndarray | None:
    """One unit vector per document for near-duplicate checks and MMR: the normalised mean of
    its windows' vectors (a one-window document's own vector)."""
    import numpy as np

    if vectors is None:
        return None
    if len(windowed.windows) == n_docs:
        return vectors
    out = np.zeros((n_docs, vectors.shape[1]), dtype=np.float32)
    owners = np.fromiter((w.doc for w in windowed.windows), dtype=np.int64)
    np.add.at(out, owners, vectors)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(out / norms, dtype=np.float32)


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
) -> list[bool] | None:
    """Which units of document ``doc`` to keep: those of its windows scoring at least
    ``threshold`` (its best window always), the ``context`` units before each, and the first
    unit of each one's paragraph when ``first`` (what the part is about, when the document has
    no title). Given the document's ``text``, that context stays inside the kept window's
    paragraph: in a chunk of several passages (a splitter's, or passages joined) the sentence
    before a paragraph, or the chunk's first line, belongs to another passage and tells the
    reader nothing. None: the document is one window, kept whole."""
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
    heads = paragraph_heads(text, units) if text is not None else [0] * len(units)
    for w in sorted(chosen):
        window = windowed.windows[w]
        head = heads[window.first]
        for u in range(max(head, window.first - context), min(len(keep), window.last + after)):
            keep[u] = True
        if first:
            keep[head] = True
    return keep


def selected_text(text: str, units: Sequence[Span], keep: Sequence[bool]) -> str:
    """The kept units of ``text`` in their order, joined as the extractive compressor joins
    them (separators kept between neighbours, squeezed across a dropped stretch)."""
    return join_units(text, units, keep)


# ---------------------------------------------------------------- the stage's side


def whole_documents(texts: Sequence[str], scoring_texts: Sequence[str]) -> Windowed:
    """One window per document, its whole text (windows turned off)."""
    return Windowed(
        units=[[Span(0, len(t), "sentence")] for t in texts],
        windows=[Window(i, 0, 1, t) for i, t in enumerate(scoring_texts)],
        window_chars=0,
    )


def window_embeddings(given: Sequence[Any], windowed: Windowed) -> list[Any] | None:
    """A vector store's embedding per window: a document's own stands for its first window
    (the head a store's embedder reads); its later windows have none."""
    if not any(given):
        return None
    return [given[w.doc] if w.first == 0 else None for w in windowed.windows]


def lexical_windows(given: Sequence[Any], windowed: Windowed) -> list[bool] | None:
    """The windows a hybrid scorer scores by BM25 alone under ``store_windows="lexical"``: the
    later windows of a document whose vector a store gave. Embedding them costs what the
    store's vector saved (a chunk of four passages is several model calls); leaving them
    unscored would blind the stage to the document's later parts (the store's vector reads the
    head). Scored by their terms, they compete where their BM25 puts them. None: none."""
    flags = [given[w.doc] is not None and w.first > 0 for w in windowed.windows]
    return flags if any(flags) else None


def later_windows(windowed: Windowed) -> list[int | None] | None:
    """The document of each window past its document's first (None for a first window): what
    ``dense_windows`` shortlists (a document's first window is always embedded, or takes a
    store's vector, so every document has a dense score of its own). None: every document is
    one window."""
    owners = [w.doc if w.first > 0 else None for w in windowed.windows]
    return owners if any(o is not None for o in owners) else None


@dataclass(frozen=True)
class Selection:
    """How much of a kept long document stays: windows at least ``fraction`` of the way from
    the request's worst window to its best, neighbours of those at ``neighbour_fraction``
    (None: no neighbour rule), ``before`` sentences before each and ``after`` after."""

    fraction: float
    neighbour_fraction: float | None
    before: int
    after: int


def select_parts(
    windowed: Windowed,
    scores: np.ndarray,
    doc: int,
    text: str,
    rule: Selection,
    *,
    first: bool,
) -> tuple[str, list[list[int]], str] | None:
    """Document ``doc``'s kept text, the character spans kept, and a summary (``kept
    sentences 1, 4-6 of 12``); None when it stays whole."""
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
