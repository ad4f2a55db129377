"""How the retrieval stage chooses among the scored documents that pass the relevance cut-off
(``retrieval_cutoff``): the walk down the ranking (hard cap, ``min_k``, near-duplicates), MMR,
and the order the kept ones go in (what of each is sent, and the documents budget:
``retrieval_fit``). Pure functions of the options and the scores; every dropped document is
recorded in the stage's log with its reason."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from ..types import Budget, Document, Request
from .base import StageLog
from .retrieval_fit import fit_budget
from .retrieval_options import (
    DEFAULT_COSINE_THRESHOLD,
    DEFAULT_SHINGLE_THRESHOLD,
    Order,
    RetrievalOptions,
)
from .retrieval_targets import CUT_OFF, HARD_CAP, Documents, document_target, drop

if TYPE_CHECKING:
    import numpy as np


__all__ = [
    "Documents",
    "choose",
    "document_target",
    "drop",
    "keep_whole",
    "mmr",
    "order_kept",
    "walk",
]

_SHINGLE = 5
# an embedding near-duplicate must also share this much of its word shingles with the one kept:
# embeddings read what a text is about, not its values, so JSON records, log chunks or tables
# of one layout embed alike though every id and number differs, while a copy (a second crawl,
# a syndicated page) keeps its words
_COPY_JACCARD = 0.5
# a CJK character is a shingle token of its own: Chinese text has no spaces between words
_CJK_CHARS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_WORDS = re.compile(f"[{_CJK_CHARS}]|[^\\W{_CJK_CHARS}]+")


def _edges(items: list[int]) -> list[int]:
    """Best first, second best last, third second, fourth second to last...: the middle of the
    context gets the least relevant documents."""
    front: list[int] = []
    back: list[int] = []
    for i, item in enumerate(items):
        (front if i % 2 == 0 else back).append(item)
    return front + back[::-1]


@lru_cache(maxsize=8192)  # documents recur across requests
def _shingles(text: str) -> frozenset[str]:
    words = _WORDS.findall(text.lower())
    if len(words) <= _SHINGLE:
        return frozenset([" ".join(words)])
    return frozenset(" ".join(words[i : i + _SHINGLE]) for i in range(len(words) - _SHINGLE + 1))


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def choose(
    options: RetrievalOptions,
    ranked: list[int],
    k_rel: int,
    documents: Sequence[Document],
    vectors: np.ndarray | None,
    valid: list[int],
    score_of: dict[int, float],
    tokens: list[int],
    log: StageLog,
) -> list[int]:
    """The documents kept before the budget: the walk down the ranking, then MMR when on."""
    cap = options.max_k or len(ranked)
    if options.mmr_lambda is None:
        return walk(options, ranked, k_rel, cap, documents, vectors, valid, score_of, tokens, log)
    pool = walk(
        options, ranked, k_rel, len(ranked), documents, vectors, valid, score_of, tokens, log
    )
    lam = options.mmr_lambda
    selected = mmr(lam, pool, min(cap, len(pool)), vectors, valid, score_of, documents)
    for i in pool:
        if i not in selected:
            drop(log, documents, i, tokens[i], score_of[i], "not selected by MMR")
    return selected


def walk(
    options: RetrievalOptions,
    ranked: list[int],
    k_rel: int,
    cap: int,
    documents: Sequence[Document],
    vectors: np.ndarray | None,
    valid: list[int],
    score_of: dict[int, float],
    tokens: list[int],
    log: StageLog,
) -> list[int]:
    """Walk the ranking best first: keep up to ``cap`` documents that pass the cut-off (or
    are needed for ``min_k``) and are not near-duplicates of one already kept. Documents
    past the cap or the cut-off are not compared at all."""
    threshold = options.dedup_threshold or (
        DEFAULT_COSINE_THRESHOLD
        if _dedup_method(options, vectors) == "embedding"
        else DEFAULT_SHINGLE_THRESHOLD
    )
    similar = _similarity(options, documents, vectors, valid, threshold)
    kept: list[int] = []
    for rank, i in enumerate(ranked):
        if len(kept) >= cap or (rank >= k_rel and len(kept) >= options.min_k):
            reason = (
                f"{CUT_OFF} ({options.cutoff})"
                if rank >= k_rel
                else f"{HARD_CAP} max_k={options.max_k}"
            )
            drop(log, documents, i, tokens[i], score_of[i], reason)
            continue
        best, twin = similar(i, kept) if similar is not None and kept else (0.0, -1)
        if twin >= 0 and best >= threshold:
            method = _dedup_method(options, vectors)
            drop(
                log,
                documents,
                i,
                tokens[i],
                score_of[i],
                f"near-duplicate of {document_target(documents, twin)} ({method} {best:.2f})",
            )
        else:
            kept.append(i)
    return kept


def _dedup_method(options: RetrievalOptions, vectors: np.ndarray | None) -> str:
    if options.dedup in ("auto", "embedding"):
        # without embeddings from the scorer, compare words instead
        return "embedding" if vectors is not None else "shingle"
    return options.dedup


def _similarity(
    options: RetrievalOptions,
    documents: Sequence[Document],
    vectors: np.ndarray | None,
    valid: list[int],
    threshold: float,
) -> Any:
    """``similar(i, kept) -> (best similarity, most similar kept document)``, or None. By
    embedding, a kept document at ``threshold`` or above counts only if it is also a copy in
    words (``_COPY_JACCARD``); when none is, the answer is ``(0.0, -1)``."""
    method = _dedup_method(options, vectors)
    if method == "none":
        return None
    if method == "shingle":

        def by_shingles(i: int, kept: list[int]) -> tuple[float, int]:
            mine = _shingles(documents[i].text)
            values = [_jaccard(mine, _shingles(documents[j].text)) for j in kept]
            at = max(range(len(values)), key=values.__getitem__)
            return values[at], kept[at]

        return by_shingles
    assert vectors is not None
    row = {i: j for j, i in enumerate(valid)}

    def by_cosine(i: int, kept: list[int]) -> tuple[float, int]:
        values = (vectors[[row[j] for j in kept]] @ vectors[row[i]]).tolist()
        close = sorted(((v, j) for v, j in zip(values, kept) if v >= threshold), reverse=True)
        mine = _shingles(documents[i].text) if close else frozenset()
        for value, j in close:
            if _jaccard(mine, _shingles(documents[j].text)) >= _COPY_JACCARD:
                return float(value), j
        return 0.0, -1

    return by_cosine


def mmr(
    lam: float,
    pool: list[int],
    k: int,
    vectors: np.ndarray | None,
    valid: list[int],
    score_of: dict[int, float],
    documents: Sequence[Document],
) -> list[int]:
    """Maximal marginal relevance (Carbonell & Goldstein 1998) on min-max relevance and
    cosine (or shingle) similarity: pick ``k`` of ``pool``, one at a time."""
    from ..backends.scorers import minmax

    relevance = dict(zip(pool, minmax([score_of[i] for i in pool]).tolist()))
    row = {i: j for j, i in enumerate(valid)}
    shingles = {} if vectors is not None else {i: _shingles(documents[i].text) for i in pool}

    def similarity(a: int, b: int) -> float:
        if vectors is not None:
            return float(vectors[row[a]] @ vectors[row[b]])
        return _jaccard(shingles[a], shingles[b])

    selected: list[int] = []
    remaining = list(pool)
    while remaining and len(selected) < k:
        best_i, best_value = remaining[0], float("-inf")
        for i in remaining:
            redundancy = max((similarity(i, j) for j in selected), default=0.0)
            value = lam * relevance[i] - (1.0 - lam) * redundancy
            if value > best_value:
                best_i, best_value = i, value
        selected.append(best_i)
        remaining.remove(best_i)
    return selected


def keep_whole(
    options: RetrievalOptions,
    request: Request,
    budget: Budget,
    documents: Sequence[Document],
    valid: list[int],
    tokens: list[int],
    log: StageLog,
    whole: bool = True,
) -> Request:
    """What a request that asks for its documents as a whole keeps (``query.asks_for_whole``:
    a summary, a translation, every one of something in them), or one whose documents nothing
    ranks (``whole=False``: a question in another language): every document, unscored, in
    its order, as many as fit the documents budget."""
    kept = fit_budget(options, request, budget, valid, documents, tokens, {}, log)
    log.details.update(
        whole_ask=whole,
        candidates=len(documents),
        kept=len(kept),
        tokens_kept=sum(tokens[i] for i in kept),
        tokens_given=sum(tokens),
    )
    return request.replace(documents=[documents[i] for i in kept])


def order_kept(order: Order, kept: list[int]) -> list[int]:
    if order == "original":
        return sorted(kept)
    if order == "edges":
        return _edges(kept)
    return kept
