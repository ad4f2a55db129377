"""Query-aware extractive compression: keep the sentences that matter, drop the rest.

Two levels, as in LongLLMLingua's coarse-then-fine scheme, but lexical and in pure Python:

1. **Documents** are ranked by BM25 of the query over title + text (a title match counts
   twice: a title naming the query's subject is strong evidence), fused with the upstream
   retrieval score when one is given, and, when enabled, MiniLM similarity.
2. **Sentences** are scored by BM25 against the query, plus half of their best neighbour's
   score (the answer often sits in the sentence after the one that repeats the question's
   words), plus their document's relevance. So a relevant document's sentences outrank a
   stray matching sentence in an irrelevant one, and the budget flows to the best documents
   first: documents are not equal.

Sentences are chosen greedily by that priority until the budget is spent, then written back
in their original order with their original separators. A sentence is the smallest unit:
a protected span (code, JSON, ids, numbers...) that crosses a sentence boundary merges those
sentences, so protected spans are never split or altered — kept whole or dropped whole. In
hard-wrapped text a sentence runs across its line breaks (``promptslim.layout``).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from ...errors import ConfigError
from ...escapes import unescaped
from ...layout import unwrap
from ...text import Span, analyse, find_protected_spans, split_sentences
from ...tokens import TokenCounter
from . import Compressor, Item

__all__ = ["UNIT_CHARS", "ExtractiveCompressor", "cut_long", "join_units", "split_units"]

# BM25 constants: the textbook values, not fitted to any data set
_K1 = 1.2
_B = 0.75
_SPACE = re.compile(r"\s+")
#: a sentence longer than this is cut at spaces into units of about this size: past 99.5 % of
#: encyclopaedia sentences, so punctuated prose keeps its sentences whole, while text without
#: sentence ends (a transcript, a run-on line) is not one unit kept or dropped whole
UNIT_CHARS = 400


# ---------------------------------------------------------------- units


def split_units(text: str, protected: Sequence[Span] = ()) -> list[Span]:
    """Sentence spans of ``text``, merged where a protected span crosses a boundary, so no
    protected span is ever split across units. In hard-wrapped prose a line break inside a
    sentence does not end it (``promptslim.layout``): a unit is a sentence, not a line."""
    units = split_sentences(unwrap(text))
    if not protected or len(units) < 2:
        return units
    # A span crosses the boundary before ``unit`` when it starts before the previous unit's
    # end and ends after ``unit`` starts. That end only moves forward, so one sweep over the
    # spans by start, keeping the furthest end seen so far, answers it for every boundary
    # (checking every span at every boundary took 30 s on a 400 KB document).
    spans = sorted((p.start, p.end) for p in protected)
    merged: list[Span] = []
    reach = -1  # the furthest end of the spans that start before the previous unit's end
    i = 0
    for unit in units:
        if merged:
            while i < len(spans) and spans[i][0] < merged[-1].end:
                reach = max(reach, spans[i][1])
                i += 1
            if reach > unit.start:
                merged[-1] = Span(merged[-1].start, unit.end, "sentence")
                continue
        merged.append(unit)
    return merged


def cut_long(
    text: str,
    unit: Span,
    limit: int,
    protected: Sequence[Span] = (),
    boundary: re.Pattern[str] = _SPACE,
) -> list[Span]:
    """``unit`` cut where ``boundary`` matches (spaces) into pieces of about ``limit``
    characters, never inside a protected span (a unit without a usable cut stays whole)."""
    if unit.end - unit.start <= limit:
        return [unit]
    inside = [(p.start, p.end) for p in protected if p.start < unit.end and p.end > unit.start]
    pieces: list[Span] = []
    start = unit.start
    for match in boundary.finditer(text, unit.start, unit.end):
        cut = match.end()
        if cut - start < limit or cut >= unit.end:
            continue
        if any(a < cut < b for a, b in inside):
            continue
        pieces.append(Span(start, cut, "sentence"))
        start = cut
    pieces.append(Span(start, unit.end, "sentence"))
    return pieces


def join_units(text: str, units: Sequence[Span], keep: Sequence[bool]) -> str:
    """The kept units in original order. Adjacent kept units keep the exact separator between
    them; across a dropped stretch the separator is squeezed to a newline (if the stretch had
    one: line structure is kept) or a space. Sentences that followed each other with no space
    (Chinese) are joined with none, unless that would run a protected span of one into the
    other (``https://x.cn/a?`` then ``b……``: a longer URL than either had): then a space."""
    parts: list[str] = []
    last: int | None = None
    for i, unit in enumerate(units):
        if not keep[i]:
            continue
        if last is not None:
            gap = text[units[last].end : unit.start]
            if last != i - 1:
                # Chinese sentences follow each other with no space: keep it that way
                after_last = text[units[last].end : units[last + 1].start]
                gap = "\n" if "\n" in gap else (" " if after_last else "")
                if not gap and _fuses(units[last].of(text), unit.of(text)):
                    gap = " "
            parts.append(gap)
        parts.append(unit.of(text))
        last = i
    return "".join(parts)


def _fuses(left: str, right: str) -> bool:
    """Whether ``left + right`` has a protected span that crosses the junction (a URL, an
    email, a number with its unit... made of the end of one and the start of the other)."""
    at = len(left)
    return any(s.start < at < s.end for s in find_protected_spans(left + right))


# ---------------------------------------------------------------- scoring


def bm25(query: Sequence[str], docs: Sequence[Sequence[str]]) -> list[float]:
    """Okapi BM25 of ``query`` terms over ``docs`` (IDF from ``docs`` themselves)."""
    n = len(docs)
    if not n or not query:
        return [0.0] * n
    lengths = [len(d) for d in docs]
    avg = (sum(lengths) / n) or 1.0
    df: Counter[str] = Counter()
    for d in docs:
        df.update(set(d))
    terms = set(query)
    idf = {t: math.log(1.0 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in terms if df[t]}
    scores = []
    for d, length in zip(docs, lengths):
        tf = Counter(t for t in d if t in idf)
        norm = _K1 * (1.0 - _B + _B * length / avg)
        scores.append(sum(idf[t] * f * (_K1 + 1.0) / (f + norm) for t, f in tf.items()))
    return scores


def _normalise(values: Sequence[float]) -> list[float]:
    top = max(values, default=0.0)
    low = min(values, default=0.0)
    if top <= low:
        return [1.0 if top > 0 else 0.0] * len(values)
    return [(v - low) / (top - low) for v in values]


@dataclass
class _Unit:
    item: int
    index: int
    tokens: int
    priority: float


class ExtractiveCompressor(Compressor):
    """Query-aware sentence selection (see the module docstring).

    ``neighbour_weight``: share of the best neighbour's score a sentence inherits.
    ``document_weight``: weight of the document's relevance in a sentence's priority.
    ``embeddings``: add MiniLM query-document similarity to the document ranking (needs the
    ``retrieval`` extra; off by default so the default path stays pure Python and fast).
    ``max_unit_chars``: a sentence longer than this is cut at spaces (never inside a protected
    span) into units of about this size (``UNIT_CHARS``); None keeps sentences whole.
    """

    name = "extractive"

    def __init__(
        self,
        *,
        neighbour_weight: float = 0.5,
        document_weight: float = 1.0,
        embeddings: bool = False,
        embedding_model: str | None = None,
        max_unit_chars: int | None = UNIT_CHARS,
    ) -> None:
        for field, value in (
            ("neighbour_weight", neighbour_weight),
            ("document_weight", document_weight),
        ):
            if not 0.0 <= value <= 10.0:
                raise ConfigError(f"must be between 0 and 10, got {value}", field=field)
        bad = isinstance(max_unit_chars, bool) or not isinstance(max_unit_chars, int)
        if max_unit_chars is not None and (bad or max_unit_chars < 40):
            raise ConfigError(
                f"must be an int >= 40 or None, got {max_unit_chars!r}", field="max_unit_chars"
            )
        self.max_unit_chars = max_unit_chars
        self.neighbour_weight = neighbour_weight
        self.document_weight = document_weight
        self.embeddings = embeddings
        self.embedding_model = embedding_model

    # ---- the interface

    def compress(
        self, items: Sequence[Item], *, query: str, budget: int, counter: TokenCounter
    ) -> list[str]:
        units = [self.units(it) for it in items]
        keep = self.select(items, units, query=query, budget=budget, counter=counter)
        return [join_units(it.text, u, k) for it, u, k in zip(items, units, keep)]

    def units(self, item: Item) -> list[Span]:
        """The item's sentences (``split_units``), each longer than ``max_unit_chars`` cut at
        spaces into pieces of about that size, without the whitespace at a piece's end."""
        units = split_units(item.text, item.protected)
        limit = self.max_unit_chars
        if limit is None or all(u.end - u.start <= limit for u in units):
            return units
        out: list[Span] = []
        for unit in units:
            for piece in cut_long(item.text, unit, limit, item.protected):
                end = piece.start + len(piece.of(item.text).rstrip())
                out.append(Span(piece.start, end, "sentence"))
        return out

    def select(
        self,
        items: Sequence[Item],
        units: Sequence[Sequence[Span]],
        *,
        query: str,
        budget: int,
        counter: TokenCounter,
    ) -> list[list[bool]]:
        """Which units of each item to keep (greedy by priority under the budget)."""
        ranked = self._rank_units(items, units, query=query, counter=counter)
        keep = [[False] * len(u) for u in units]
        opened = [False] * len(items)
        spent = 0
        for u in ranked:
            cost = u.tokens + (0 if opened[u.item] else items[u.item].overhead)
            if spent + cost > budget:
                continue  # a smaller unit further down may still fit
            keep[u.item][u.index] = True
            opened[u.item] = True
            spent += cost
        return keep

    def document_relevance(self, items: Sequence[Item], query: str) -> list[float]:
        """Each item's relevance to the query in [0, 1] (lexical, retrieval, embeddings)."""
        q = analyse(query)
        doc_terms = [analyse(it.title or "") * 2 + analyse(unescaped(it.text)) for it in items]
        return self._document_relevance(items, q, doc_terms, query)

    def _document_relevance(
        self, items: Sequence[Item], q: list[str], doc_terms: list[list[str]], query: str
    ) -> list[float]:
        signals = [_normalise(bm25(q, doc_terms))]
        scores = [it.score for it in items]
        if items and all(s is not None for s in scores):
            signals.append(_normalise([float(s) for s in scores]))  # type: ignore[arg-type]
        if self.embeddings and items:
            signals.append(_normalise(self._similarity(items, query)))
        return [sum(col) / len(signals) for col in zip(*signals)]

    # ---- private

    def _rank_units(
        self,
        items: Sequence[Item],
        units: Sequence[Sequence[Span]],
        *,
        query: str,
        counter: TokenCounter,
    ) -> list[_Unit]:
        q = analyse(query)
        # escapes (JSON's \u, HTML's &#...;) read as their characters (``promptslim.escapes``)
        terms = [[analyse(unescaped(s.of(it.text))) for s in us] for it, us in zip(items, units)]
        # a document's terms are its sentences' terms: analyse each text once
        doc_terms = [
            analyse(it.title or "") * 2 + [t for ts in tss for t in ts]
            for it, tss in zip(items, terms)
        ]
        doc_rel = self._document_relevance(items, q, doc_terms, query)
        sent = _normalise(bm25(q, [ts for tss in terms for ts in tss]))
        out: list[_Unit] = []
        pos = 0
        for i, (it, us) in enumerate(zip(items, units)):
            local = sent[pos : pos + len(us)]
            for j, span in enumerate(us):
                before = local[j - 1] if j > 0 else 0.0
                after = local[j + 1] if j + 1 < len(us) else 0.0
                priority = (
                    local[j]
                    + self.neighbour_weight * max(before, after)
                    + self.document_weight * doc_rel[i]
                )
                out.append(_Unit(i, j, counter.count(span.of(it.text)), priority))
            pos += len(us)
        # ties broken by position: deterministic, and earlier text first
        out.sort(key=lambda u: (-u.priority, u.item, u.index))
        return out

    def _similarity(self, items: Sequence[Item], query: str) -> list[float]:
        # the shared embedding service: its content-hash cache means a passage seen by the
        # retrieval stage (or an earlier request) is not embedded again
        from ..embeddings import EmbeddingService

        service = EmbeddingService.get(self.embedding_model)
        texts = [f"{it.title}. {it.text}" if it.title else it.text for it in items]
        return [float(v) for v in service.embed(texts) @ service.embed_one(query)]
