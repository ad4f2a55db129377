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

The windows of a request are bounded (``split_windows``' ``max_windows``): past it, the window
size grows for that request. The retrieval stage gives BM25, and the hybrid scorer, which lets
BM25 choose the windows the model reads, several windows per model input
(``WINDOWS_PER_MODEL_INPUT``), and any other scorer one: a request of any length costs at most
the stage's ``max_windows`` model inputs.

A unit that cannot be cut (a protected span: a JSON document, a code block) may run far past a
window. Its text is then scored in parts of about a window each (``Window.part``), all over the
same units, so a record deep inside a JSON document is read like any sentence, and selection
still keeps or drops the unit whole.

Units are sentences (``split_units``: a protected span crossing a sentence boundary merges the
sentences), and a sentence longer than ``UNIT_CHARS`` (or a window, where that is smaller) is
cut at spaces outside protected spans, so text without sentence ends (a transcript, a run-on
line) is selected in parts of about a long sentence, not a window's worth at a time. What the
selection keeps is always whole units, byte-exact, protected spans never split.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..backends.compress.extractive import UNIT_CHARS, cut_long, split_units
from ..escapes import unescaped
from ..layout import cue_free, line_layout
from ..protected import BOUNDARY_FREE_KINDS, PROTECTED_KINDS
from ..scripts import CJK_CHAR_WEIGHT, document_script
from ..text import Span, find_protected_spans

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "UNIT_KINDS",
    "Window",
    "Windowed",
    "document_scores",
    "document_vectors",
    "later_windows",
    "paragraph_ends",
    "paragraph_heads",
    "split_windows",
    "unembedded_windows",
    "whole_documents",
    "window_embeddings",
]

#: a window whose text runs past this many times the window size (a unit that cannot be cut)
#: is scored in parts of about one window each
SCORING_CHARS_PER_WINDOW = 3
# a document (or a paragraph of one) up to this much longer than one window stays
# one window: a 10 % longer passage is not worth two model inputs, nor a stub scored
# without the head of its paragraph
_SLACK = 1.25
# where a part of a huge unit's scoring text may end: white space, or after a separator
# (minified JSON has no space)
_PART_END = re.compile(r"\s+|[,;]")
# a window at least this full ends at a paragraph break rather than run into the next one
_MIN_FILL = 0.4
#: the protected kinds that can change a document's units: the others' spans never hold a
#: place where a unit ends or is cut (``BOUNDARY_FREE_KINDS``), so scanning a whole document
#: for them would cost a cold request its time and change nothing
UNIT_KINDS = tuple(k for k in PROTECTED_KINDS if k not in BOUNDARY_FREE_KINDS)


@dataclass(frozen=True)
class Window:
    """Units ``first`` to ``last`` (exclusive) of document ``doc``, and what the scorers read:
    the units' text, or its ``part``-th piece when that runs past a window many times over."""

    doc: int
    first: int
    last: int
    text: str
    part: int = 0

    @property
    def later(self) -> bool:
        """Past the document's head (what a store's vector of the document reads)."""
        return self.first > 0 or self.part > 0


@dataclass(frozen=True)
class Windowed:
    """The units of each document and the windows over them, in document order."""

    units: list[list[Span]]
    windows: list[Window]
    window_chars: int

    def of_document(self, doc: int) -> list[int]:
        """Indexes (into ``windows``) of document ``doc``'s windows."""
        return [w for w, window in enumerate(self.windows) if window.doc == doc]


def document_units(text: str, protected: Sequence[Span], limit: int) -> list[Span]:
    """Sentence units of ``text`` (protected spans whole), none much over ``limit`` chars."""
    units: list[Span] = []
    for unit in split_units(text, protected):
        units.extend(cut_long(text, unit, limit, protected))
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
    # subtitles are scored on their words, without the cues' ids and timing lines (a text
    # without an arrow is none: no layout to compute for it)
    cues = "-->" in text and line_layout(text).kind == "cues"
    # and escapes (JSON's \u, HTML's &#...;) as the characters they stand for
    read: Callable[[str], str] = (lambda part: unescaped(cue_free(part))) if cues else unescaped
    if len(text) <= _SLACK * size or len(units) == 1:
        return _scored(doc, 0, len(units), head, read(text), size)
    # a paragraph starts a topic (see paragraph_heads): a window that is already a fair part of
    # its size ends there, and the next starts there without overlap (a paragraph is a topic;
    # a window across two scores as neither)
    para = [head == u for u, head in enumerate(paragraph_heads(text, units))]
    ends = paragraph_ends(para)
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
        body = read(text[units[first].start : units[last - 1].end])
        out += _scored(doc, first, last, head, body, size)
        if last >= len(units):
            break
        first = last if para[last] else max(first + 1, last - overlap)
    return out


def _scored(doc: int, first: int, last: int, head: str, body: str, size: int) -> list[Window]:
    """The window over units ``first:last``; or, when its text runs past what one window
    reads, one window per piece of about ``size`` characters over the same units."""
    if len(head) + len(body) <= SCORING_CHARS_PER_WINDOW * size:
        return [Window(doc, first, last, head + body)]
    # scoring only: the parts may cut inside a protected span, the units stay whole
    cuts = cut_long(body, Span(0, len(body), "sentence"), size, (), _PART_END)
    # a stretch with no place to end a part (one long token) is cut where it runs out
    pieces = [
        c.of(body)[i : i + 2 * size] for c in cuts for i in range(0, c.end - c.start, 2 * size)
    ]
    return [Window(doc, first, last, head + p, k) for k, p in enumerate(pieces) if p.strip()]


def paragraph_ends(para: Sequence[bool]) -> list[int]:
    """For each unit, the index one past the last unit of its paragraph."""
    ends = [len(para)] * len(para)
    for u in range(len(para) - 2, -1, -1):
        ends[u] = u + 1 if para[u + 1] else ends[u + 1]
    return ends


def _dense_script(text: str) -> bool:
    """Whether ``text`` is mostly Chinese, Japanese or Korean, whose characters each say about
    what three letters say (a sentence of 20-40 characters): windows of ``window_chars``
    characters would hold several times the sentences, and tokens, of a Latin text's."""
    return document_script(text) == "cjk"


def _weight(text: str) -> tuple[int, int]:
    """The characters of ``text`` that say what a window's worth of Latin prose says, per
    that many of prose's, as a fraction: Chinese, Japanese or Korean text says it in fewer
    (``_dense_script``); subtitles in more, for their cues' ids and timing lines, which the
    scorer does not read (``cue_free``): a window as long in characters would hold about half
    a prose window's words, and cut the sentence after the one that names the question's
    subject away from it. Text written with escapes (JSON's ``\\u``, HTML's character
    references) is weighed as the text they stand for, each character in the six or eight of
    its escape."""
    readable = unescaped(text)
    if len(readable) < len(text):
        inner = _weight(readable)
        return inner[0] * len(text), inner[1] * len(readable)
    if _dense_script(text):
        return 1, CJK_CHAR_WEIGHT
    if "-->" in text and line_layout(text).kind == "cues":
        return len(text), max(1, len(cue_free(text)))
    return 1, 1


def _sized(size: int, weight: tuple[int, int]) -> int:
    """The window size in characters for a document of ``weight`` (``_weight``)."""
    return max(1, size * weight[0] // weight[1])


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
    weights = [_weight(t) for t in texts]
    # a document of about one window needs no sentence split (nor protected spans) at all
    units = [
        document_units(
            t,
            find_protected_spans(t, extra=protect, kinds=UNIT_KINDS),
            min(UNIT_CHARS, _sized(size, weights[d])),
        )
        if len(t) > _SLACK * _sized(size, weights[d])
        else [Span(0, len(t), "sentence")]
        for d, t in enumerate(texts)
    ]
    for _ in range(8):  # overlap can push the count past the cap: grow and cut again
        windows = [
            w
            for d, (t, title, u) in enumerate(zip(texts, titles, units))
            for w in _windows_of(d, t, title, u, _sized(size, weights[d]), overlap, whole[d])
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
    return [None if w.later else given[w.doc] for w in windowed.windows]


def unembedded_windows(given: Sequence[Any], windowed: Windowed) -> list[bool] | None:
    """The windows a hybrid scorer does not embed under ``store_windows="lexical"`` or
    ``"static"``: the later windows of a document whose vector a store gave. Embedding them
    costs what the store's vector saved (a chunk of four passages is several model calls);
    leaving them unscored would blind the stage to the document's later parts (the store's
    vector reads the head). Scored by their terms (``lexical``), or by their static vectors
    beside their terms (``static``), they compete where those scores put them. None: none."""
    flags = [given[w.doc] is not None and w.later for w in windowed.windows]
    return flags if any(flags) else None


def later_windows(windowed: Windowed) -> list[int | None] | None:
    """The document of each window past its document's first (None for a first window): what
    ``dense_windows`` shortlists (a document's first window is always embedded, or takes a
    store's vector, so every document has a dense score of its own). None: every document is
    one window."""
    owners = [w.doc if w.later else None for w in windowed.windows]
    return owners if any(o is not None for o in owners) else None
