"""The retrieval stage's relevance cut-off: how many of the ranked documents are relevant
enough to keep, by a rule invariant to shifting and scaling the scores, so it means the same
for BM25, cosine and fused scores."""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from .retrieval_options import Cutoff, RetrievalOptions

if TYPE_CHECKING:
    from .base import StageLog
    from .retrieval_scoring import Parts

__all__ = ["headings", "relevance_cutoff", "relevance_k", "unranked"]

# a sentence's end: its mark, any closing quotes or brackets, then a space or the text's end
_SENTENCE_END = re.compile(
    "[.!?\u2026]+[\"')\\]\u2019\u201d]*(?:\\s|$)|[\u3002\uff01\uff1f]"  # CJK: no space after
)


def relevance_cutoff(
    scores: Sequence[float], *, rule: Cutoff, fraction: float, window: int | None = None
) -> int:
    """How many of ``scores`` (sorted best first) pass the relevance cut-off.

    Both rules are invariant to shifting and scaling the scores, so they mean the same for
    BM25, cosine and fused scores. ``gap``: cut at the largest drop between neighbours among
    the first ``window + 1`` scores. ``fraction``: keep scores at least ``fraction`` of the way
    from the worst candidate to the best. ``none``: keep all.
    """
    n = len(scores)
    if n <= 1 or rule == "none":
        return n
    top, low = float(scores[0]), float(min(scores))
    if top - low <= 1e-12:  # nothing tells the candidates apart
        return n
    if rule == "fraction":
        threshold = low + fraction * (top - low)
        return sum(1 for s in scores if s >= threshold - 1e-12)
    m = n if window is None else min(n, window + 1)
    gaps = [float(scores[i]) - float(scores[i + 1]) for i in range(m - 1)]
    if not gaps:
        return min(n, window or n)
    return 1 + max(range(len(gaps)), key=lambda i: (gaps[i], -i))


def unranked(
    options: RetrievalOptions, score_of: dict[int, float], log: StageLog
) -> RetrievalOptions:
    """The options a request's documents are kept by: ``options``, unless no score tells two
    of them apart (a question that shares no term with them, under BM25). Then nothing ranks
    them, and the ``edges`` order and the selection inside documents would move and cut them
    by their position alone: they are kept in their order, whole, up to ``max_k`` (a hard cap
    holds), with a warning."""
    scores = list(score_of.values())
    if len(scores) < 2 or max(scores) - min(scores) > 1e-12:
        return options
    log.warning("no score tells the documents apart: kept in their order, whole, up to max_k")
    log.details["unranked"] = True
    return options.model_copy(update={"order": "original", "select_within": False})


def relevance_k(
    options: RetrievalOptions,
    ranked: list[int],
    score_of: dict[int, float],
    parts: Parts | None,
    headings: Collection[int] = (),
) -> int:
    """How many of ``ranked`` pass the relevance cut-off. It is taken on the ranking itself: a
    near-duplicate scores like its twin, so it moves neither the best-to-worst range nor the
    largest gap. ``headings``: the candidates that read as headings (:func:`headings`), which
    do not set the top of the fraction rule's scale."""
    if not ranked or options.cutoff != "fraction":
        return relevance_cutoff(
            [score_of[i] for i in ranked],
            rule=options.cutoff,
            fraction=options.cutoff_fraction,
            window=options.max_k,
        )
    scores = [score_of[i] for i in ranked]
    if parts is not None and len(parts[1]) > len(ranked):
        # long documents: the scale runs from the worst window to the best, as it would
        # were every window a passage of its own (a document's best window is its score)
        scores = [float(s) for s in parts[1]]
    # a heading a splitter cut off on its own matches the question's words more densely than
    # any piece that states the answer; as the top it would leave those pieces under the bar.
    # The best other candidate sets the top instead, and the heading, scoring above it, passes
    top = next((score_of[i] for i in ranked if i not in headings), score_of[ranked[0]])
    low = min(scores)
    if top - low <= 1e-12:  # nothing tells the candidates apart
        return len(ranked)
    threshold = low + options.cutoff_fraction * (top - low) - 1e-12
    return sum(1 for i in ranked if score_of[i] >= threshold)


def headings(
    texts: Sequence[str], tokens: Sequence[int], share: float, among: Sequence[int] | None = None
) -> frozenset[int]:
    """The indexes of ``texts`` (of those in ``among``; None: all) that read as a heading or a
    label: short beside the others (fewer tokens than ``share`` of the median one's) with no
    sentence end. A short sentence is not one: it may state the answer by itself."""
    among = range(len(texts)) if among is None else among
    if share <= 0 or len(among) < 2:
        return frozenset()
    lengths = sorted(tokens[i] for i in among)
    short = share * lengths[len(lengths) // 2]
    return frozenset(i for i in among if tokens[i] < short and not _SENTENCE_END.search(texts[i]))
