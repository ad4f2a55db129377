"""BM25 over a request's candidate documents, with the shared analyser.

The scoring is Okapi BM25 exactly as rank-bm25's ``BM25Okapi`` computes it, with one change:
Lucene's IDF, ``log(1 + (N - n + 0.5) / (n + 0.5))``. rank-bm25's own IDF goes negative for a
term found in more than half the documents, and with a request's 5-20 candidates that is
common: a document matching the query would then score below one matching nothing.

It is computed here rather than by building a ``BM25Okapi`` per request because a request's
candidates change every time while the documents themselves recur: each text's term counts
are memoised by a hash of the text, so a warm request costs a few dictionary lookups per
query term (rank-bm25 re-counts every document: several milliseconds for 20).
The tests check the scores against rank-bm25's. Pure Python: no optional dependency.
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

__all__ = ["BM25Scorer", "bm25_scores"]

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


def bm25_scores(query: str, texts: Sequence[str], *, k1: float = 1.5, b: float = 0.75) -> np.ndarray:
    """Okapi BM25 (Lucene IDF) of each text for ``query``, IDF computed over ``texts``."""
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
    for term in analyse(query):
        df = sum(1 for tf, _ in stats if term in tf)
        if not df:
            continue
        idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
        for i, (tf, _) in enumerate(stats):
            f = tf.get(term)
            if f:
                scores[i] += idf * f * (k1 + 1.0) / (f + norms[i])
    return np.asarray(scores, dtype=np.float64)


class BM25Scorer(Scorer):
    """Lexical relevance: Okapi BM25 over the candidates, with :func:`promptslim.text.analyse`'s
    terms (lowercased, stopwords removed, lightly stemmed, an identifier such as ``db-4471``
    whole as well as its words; Chinese by jieba or bigrams). Scores are unbounded and
    comparable within a request."""

    name: ClassVar[str] = "bm25"

    def __init__(self, *, k1: float = 1.5, b: float = 0.75) -> None:
        if k1 < 0:
            raise ConfigError("must be 0 or more", field="k1")
        if not 0.0 <= b <= 1.0:
            raise ConfigError("must be between 0 and 1", field="b")
        self.k1 = k1
        self.b = b

    def score(
        self,
        query: str,
        texts: Sequence[str],
        *,
        embeddings: Sequence[Any] | None = None,
        query_embedding: Sequence[float] | None = None,
    ) -> Scored:
        return Scored(scores=bm25_scores(query, texts, k1=self.k1, b=self.b))

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
