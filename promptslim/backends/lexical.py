"""BM25 over a request's candidate documents, with the shared analyser.

The scoring is Okapi BM25 exactly as rank-bm25's ``BM25Okapi`` computes it, with one change:
Lucene's IDF, ``log(1 + (N - n + 0.5) / (n + 0.5))``. rank-bm25's own IDF goes negative for a
term found in more than half the documents, and with a request's 5-20 candidates that is
common: a document matching the query would then score below one matching nothing.

It is computed here rather than by building a ``BM25Okapi`` per request because a request's
candidates change every time while the documents themselves recur: each text's term counts
are memoised by a hash of the text, so a warm request costs a few dictionary lookups per
query term (rank-bm25 re-counts every document: several milliseconds for 20).
The tests check the scores against rank-bm25's.

A query term no candidate holds is matched to the candidates' terms within an edit of it
(``fuzzy``, on by default), as search engines' fuzzy queries do: people misspell what they ask
("gettsyburg"), documents seldom do, and a misspelt name would otherwise count for nothing.
rapidfuzz (a core dependency) measures the edits.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import ConfigError
from ..memo import BoundedCache, CacheInfo
from ..text import analyse
from .scorer_base import Scored, Scorer

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "FUZZY_MAX_TERMS",
    "FUZZY_MIN_CHARS",
    "FUZZY_TWO_EDITS_CHARS",
    "BM25Scorer",
    "bm25_scores",
    "close_terms",
]

#: a query term this long or longer that no candidate holds is read as the candidates' terms
#: one edit from it (optimal string alignment: two neighbouring letters swapped are one edit);
#: from ``FUZZY_TWO_EDITS_CHARS`` on, two edits. A shorter word is left alone: one edit turns
#: most short words into other words ("sang", "song"). Only letters: a number or an
#: identifier one digit off is another record, not a typo
FUZZY_MIN_CHARS = 5
FUZZY_TWO_EDITS_CHARS = 9
#: distinct missing terms of one query looked up so: each is a scan of the candidates' terms,
#: and a question has a handful (a pasted page as the query would have thousands)
FUZZY_MAX_TERMS = 16

#: each text's term counts and length, by a digest of the text. Bounded by entries and by the
#: distinct terms held, each entry charged its count of them: a long document's counts are a
#: large dict, so entries alone would not bound the memory (about 20,000 passages fit)
_TERM_STATS: BoundedCache[bytes, tuple[dict[str, int], int]] = BoundedCache(
    max_entries=20_000, max_size=2_000_000
)


def _term_stats(text: str) -> tuple[dict[str, int], int]:
    """Term counts and length of ``analyse(text)``, memoised by content hash (shared: never
    mutate the dict)."""
    key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    found = _TERM_STATS.get(key)
    if found is not None:
        return found
    terms = analyse(text)
    counts = dict(Counter(terms))
    stats = (counts, len(terms))
    _TERM_STATS.put(key, stats, len(counts) + 1)
    return stats


def bm25_scores(
    query: str, texts: Sequence[str], *, k1: float = 1.5, b: float = 0.75, fuzzy: bool = True
) -> np.ndarray:
    """Okapi BM25 (Lucene IDF) of each text for ``query``, IDF computed over ``texts``.
    ``fuzzy``: a query term no text holds counts as the texts' terms closest to it
    (``close_terms``), sharing its weight."""
    import numpy as np

    n = len(texts)
    scores = [0.0] * n
    stats = [_term_stats(t) for t in texts]
    total = sum(length for _, length in stats)
    if not n or not total:
        return np.zeros(n, dtype=np.float64)
    avgdl = total / n
    norms = [k1 * (1.0 - b + b * length / avgdl) for _, length in stats]
    # every occurrence of a query term counts, as in rank-bm25's get_scores
    for term, weight in _query_terms(query, [tf for tf, _ in stats], fuzzy):
        df = sum(1 for tf, _ in stats if term in tf)
        if not df:
            continue
        idf = weight * math.log(1.0 + (n - df + 0.5) / (df + 0.5))
        for i, (tf, _) in enumerate(stats):
            f = tf.get(term)
            if f:
                scores[i] += idf * f * (k1 + 1.0) / (f + norms[i])
    return np.asarray(scores, dtype=np.float64)


def _query_terms(
    query: str, counts: Sequence[dict[str, int]], fuzzy: bool
) -> list[tuple[str, float]]:
    """The query's terms, each weighing 1; under ``fuzzy``, a term no text holds gives way to
    the texts' terms closest to it, which share its weight (the first ``FUZZY_MAX_TERMS``
    distinct such terms; the others stay as they are)."""
    terms = analyse(query)
    if not fuzzy:
        return [(t, 1.0) for t in terms]
    vocabulary: list[str] | None = None  # built once, and only when a term is missing
    found: dict[str, list[str]] = {}  # each distinct term's close terms (none: itself)
    looked = 0
    out: list[tuple[str, float]] = []
    for term in terms:
        if term not in found:
            found[term] = []
            fuzzable = len(term) >= FUZZY_MIN_CHARS and term.isalpha()
            if fuzzable and looked < FUZZY_MAX_TERMS and not any(term in c for c in counts):
                looked += 1
                if vocabulary is None:  # any order: close_terms sorts what it finds
                    vocabulary = list({t for c in counts for t in c})
                found[term] = close_terms(term, vocabulary)
        close = found[term]
        out += [(t, 1.0 / len(close)) for t in close] or [(term, 1.0)]
    return out


def close_terms(term: str, vocabulary: Sequence[str]) -> list[str]:
    """The terms of ``vocabulary`` fewest edits from ``term`` (optimal string alignment), at
    most one edit away (two from ``FUZZY_TWO_EDITS_CHARS`` characters), in sorted order;
    none when ``term`` is shorter than ``FUZZY_MIN_CHARS`` or is not all letters."""
    if len(term) < FUZZY_MIN_CHARS or not term.isalpha():
        return []
    from rapidfuzz import process
    from rapidfuzz.distance import OSA

    edits = 2 if len(term) >= FUZZY_TWO_EDITS_CHARS else 1
    found = process.extract(term, vocabulary, scorer=OSA.distance, score_cutoff=edits, limit=None)
    fewest = min((d for _, d, _ in found), default=0)
    return sorted(t for t, d, _ in found if d == fewest)


class BM25Scorer(Scorer):
    """Lexical relevance: Okapi BM25 over the candidates, with :func:`promptslim.text.analyse`'s
    terms (lowercased, stopwords removed, lightly stemmed, an identifier such as ``db-4471``
    whole as well as its words; Chinese by jieba or bigrams). Scores are unbounded and
    comparable within a request. ``fuzzy`` (on): a query term no candidate holds counts as
    their terms an edit from it (``close_terms``: a misspelt word of the question)."""

    name: ClassVar[str] = "bm25"
    lexical: ClassVar[bool] = True

    def __init__(self, *, k1: float = 1.5, b: float = 0.75, fuzzy: bool = True) -> None:
        if k1 < 0:
            raise ConfigError("must be 0 or more", field="k1")
        if not 0.0 <= b <= 1.0:
            raise ConfigError("must be between 0 and 1", field="b")
        if not isinstance(fuzzy, bool):
            raise ConfigError(f"must be a bool, got {fuzzy!r}", field="fuzzy")
        self.k1 = k1
        self.b = b
        self.fuzzy = fuzzy

    def score(
        self,
        query: str,
        texts: Sequence[str],
        *,
        embeddings: Sequence[Any] | None = None,
        query_embedding: Sequence[float] | None = None,
    ) -> Scored:
        return Scored(scores=bm25_scores(query, texts, k1=self.k1, b=self.b, fuzzy=self.fuzzy))

    @staticmethod
    def cache_info() -> CacheInfo:
        """The term-count memo every BM25 scorer shares: entries, and distinct terms held
        (``size``) against their bound (``max_size``)."""
        return _TERM_STATS.cache_info()

    @staticmethod
    def clear_cache() -> None:
        """Forget every text's term counts, as a process that never saw them (benchmarks
        measuring cold cost)."""
        _TERM_STATS.clear()
