"""BM25 over a request's candidate documents (rank-bm25 with the shared analyser).

Documents recur across requests, so each text's analysed terms are kept in a small LRU keyed by
a hash of the text: a warm request costs the BM25 arithmetic and nothing else. rank-bm25 is
imported when a scorer first runs, never at ``import promptslim``.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import BackendUnavailable, ConfigError
from ..text import analyse
from .scorers import Scored, Scorer

if TYPE_CHECKING:
    import numpy as np

__all__ = ["BM25Scorer", "bm25_scores"]

_TERMS_CACHE_SIZE = 20_000
_terms: OrderedDict[bytes, list[str]] = OrderedDict()
_terms_lock = threading.Lock()


def _analysed(text: str) -> list[str]:
    """``analyse(text)``, memoised by content hash (the terms list is shared: never mutate it)."""
    key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    with _terms_lock:
        found = _terms.get(key)
        if found is not None:
            _terms.move_to_end(key)
            return found
    terms = analyse(text)
    with _terms_lock:
        _terms[key] = terms
        if len(_terms) > _TERMS_CACHE_SIZE:
            _terms.popitem(last=False)
    return terms


_bm25_class: Any = None


def _bm25() -> Any:
    """rank-bm25's Okapi BM25 with Lucene's IDF, ``log(1 + (N - n + 0.5) / (n + 0.5))``.

    rank-bm25's own IDF goes negative for a term in more than half the documents, and with a
    request's 5-20 candidates that is common: a document matching the query would then score
    below one matching nothing. Lucene's form is always positive and is what search engines use.
    """
    global _bm25_class
    if _bm25_class is None:
        import math

        try:
            from rank_bm25 import BM25Okapi
        except ImportError as exc:
            raise BackendUnavailable("rank-bm25 (BM25 scoring)", extra="retrieval") from exc

        class LuceneBM25(BM25Okapi):  # type: ignore[misc]
            def _calc_idf(self, nd: dict[str, int]) -> None:
                n = self.corpus_size
                self.idf = {w: math.log(1.0 + (n - f + 0.5) / (f + 0.5)) for w, f in nd.items()}

        _bm25_class = LuceneBM25
    return _bm25_class


def bm25_scores(
    query: str, texts: Sequence[str], *, k1: float = 1.5, b: float = 0.75
) -> np.ndarray:
    """Okapi BM25 of each text for ``query``, with IDF computed over ``texts`` themselves."""
    import numpy as np

    cls = _bm25()
    corpus = [_analysed(t) for t in texts]
    query_terms = analyse(query)
    if not texts or not query_terms or not any(corpus):
        return np.zeros(len(texts), dtype=np.float64)
    # rank-bm25 divides by the average length: a corpus of empty texts is handled above, and
    # an empty text among others simply scores 0
    bm25 = cls(corpus, k1=k1, b=b)
    return np.asarray(bm25.get_scores(query_terms), dtype=np.float64)


class BM25Scorer(Scorer):
    """Lexical relevance: Okapi BM25 over the candidates (lowercased, stopwords removed, lightly
    stemmed; CJK as character bigrams). Scores are unbounded and comparable within a request."""

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
    ) -> Scored:
        return Scored(scores=bm25_scores(query, texts, k1=self.k1, b=self.b))
