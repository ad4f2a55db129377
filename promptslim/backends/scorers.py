"""Relevance scorers for retrieved documents, behind one interface, and score fusion.

A scorer turns ``(query, texts)`` into one score per text, higher meaning more relevant::

    from promptslim.backends.scorers import SCORERS

    scorer = SCORERS.get("hybrid")()             # BM25 + MiniLM, weighted normalised fusion
    scored = scorer.score("who won?", ["text one", "text two"])
    scored.scores                                 # float64 array, one per text
    scored.vectors                                # unit document embeddings, when computed

Built-in names in ``SCORERS``: ``bm25`` (rank-bm25), ``dense`` (sentence-transformers through
the shared :class:`~promptslim.backends.embeddings.EmbeddingService`), ``cross_encoder`` (any
local sentence-transformers ``CrossEncoder``; none ships) and ``hybrid`` (BM25 + dense, fused by
weighted normalised scores or reciprocal rank fusion). Register your own with
``SCORERS.register("name", MyScorer)``. Nothing heavy is imported until a scorer runs; the BM25
scorer never imports torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from ..errors import ConfigError
from ..registry import Registry
from .cross_encoder import CrossEncoderScorer
from .dense import DEFAULT_MAX_SEQ_LENGTH, DenseScorer
from .lexical import BM25Scorer
from .scorer_base import (
    DENSE_MIN_SPREAD,
    Scored,
    Scorer,
    left_out,
    minmax,
    reciprocal_rank_fusion,
    similarities,
    view_weights,
    weighted_fusion,
)

if TYPE_CHECKING:
    import numpy as np

    from .static_vectors import StaticVectors

__all__ = [
    "DEFAULT_MAX_SEQ_LENGTH",
    "SCORERS",
    "CrossEncoderScorer",
    "DenseScorer",
    "Fusion",
    "HybridScorer",
    "Scored",
    "Scorer",
    "left_out",
    "minmax",
    "reciprocal_rank_fusion",
    "similarities",
    "weighted_fusion",
]

Fusion = Literal["weighted", "rrf"]


# ---------------------------------------------------------------- hybrid


class HybridScorer(Scorer):
    """BM25 and dense scores fused: ``weighted`` (default; ``dense_weight`` on the dense side
    of min-max normalised scores) or ``rrf`` (reciprocal rank fusion, constant ``rrf_k``).

    Lexical matching catches names and rare terms that embeddings blur; embeddings catch
    paraphrase that term overlap misses. Equal weights are the default: neither is assumed
    better in general. ``dense_min_spread``: dense scores spread less than this are scaled as
    if spread this far (``DENSE_MIN_SPREAD``: near-equal similarities are noise, not signal).
    ``fuzzy``: BM25's (``BM25Scorer``), a misspelt query term matched to the texts' terms.

    ``dense_candidates`` (a cascade; None: off): embed only BM25's best this many texts (and
    any with a precomputed embedding, which cost nothing); the others take the lowest dense
    score of those embedded and no vector. It cuts the cold cost in proportion, but the gold
    document must then be in BM25's top candidates: on nq20-dev BM25's top 10 hold it for
    0.965 of the questions, against 0.99 for the full hybrid, so it is off by default.
    """

    name: ClassVar[str] = "hybrid"

    def __init__(
        self,
        *,
        model: str | None = None,
        max_seq_length: int | None = DEFAULT_MAX_SEQ_LENGTH,
        backend: Literal["torch", "onnx", "auto"] = "auto",
        device: str | None = None,
        quantize: bool | None = None,
        fusion: Fusion = "weighted",
        dense_weight: float = 0.5,
        rrf_k: int = 60,
        dense_candidates: int | None = None,
        store_float: bool = False,
        dense_min_spread: float = DENSE_MIN_SPREAD,
        fuzzy: bool = True,
    ) -> None:
        if not 0.0 <= dense_min_spread <= 2.0:
            raise ConfigError("must be a cosine spread, 0 to 2", field="dense_min_spread")
        if fusion not in ("weighted", "rrf"):
            raise ConfigError(f"expected 'weighted' or 'rrf', got {fusion!r}", field="fusion")
        if not 0.0 <= dense_weight <= 1.0:
            raise ConfigError("must be between 0 and 1", field="dense_weight")
        if rrf_k < 1:
            raise ConfigError("must be at least 1", field="rrf_k")
        if dense_candidates is not None and dense_candidates < 1:
            raise ConfigError("must be at least 1 (None: embed all)", field="dense_candidates")
        self.model = model
        self.max_seq_length = max_seq_length
        self.backend = backend
        self.device = device
        self.quantize = quantize
        self.fusion = fusion
        self.dense_weight = dense_weight
        self.rrf_k = rrf_k
        self.dense_candidates = dense_candidates
        self.store_float = store_float
        self.dense_min_spread = dense_min_spread
        self._bm25 = BM25Scorer(fuzzy=fuzzy)
        self.fuzzy = fuzzy
        self._dense = DenseScorer(
            model=model,
            max_seq_length=max_seq_length,
            backend=backend,
            device=device,
            quantize=quantize,
            store_float=store_float,
        )
        self._static: StaticVectors | None = None  # looked up once, not per request

    def service(self, *, float32: bool = False) -> Any:
        """The embedding service of the dense side (``float32``: its float model's)."""
        return self._dense.service(float32=float32)

    def static_vectors(self) -> StaticVectors:
        """The static vectors of the dense side's model (``store_windows="static"``), loaded
        (or distilled and cached) on first use."""
        if self._static is None:
            from .models import load_static_vectors

            self._static = load_static_vectors(self.model)
        return self._static

    def index(self, texts: Sequence[str]) -> int:
        """The dense side's (``DenseScorer.index``): BM25 has nothing to compute ahead."""
        return self._dense.index(texts)

    def score(
        self,
        query: str,
        texts: Sequence[str],
        *,
        embeddings: Sequence[Any] | None = None,
        query_embedding: Sequence[float] | None = None,
        lexical_only: Sequence[bool] | None = None,
        static_only: Sequence[bool] | None = None,  # both flags: lexical
        shortlist: Sequence[int | None] | None = None,
        shortlist_size: int = 0,
        shortlist_each: int = 0,
        views: Sequence[str] = (),
    ) -> Scored:
        """``lexical_only`` and ``static_only``: texts never embedded (the later windows of a
        document whose vector a store gave), whose dense score is imputed from their BM25
        standing (their fused score is their normalised BM25 score), or is their static
        vectors' similarity (``_static_scores``). ``shortlist``: the document of each text,
        embedded only when among BM25's best (``shortlist_each`` a document, ``shortlist_size``
        more; the rest take the lowest dense score embedded). ``views``: the dense side's."""
        lexical = self._bm25.score(query, texts)
        skip = {i for i, flag in enumerate(lexical_only or ()) if flag}
        static = {i for i, flag in enumerate(static_only or ()) if flag} - skip
        not_embedded = skip | static
        unlisted: set[int] = set()
        if shortlist is not None:
            unlisted = left_out(
                lexical.scores,
                texts,
                not_embedded,
                shortlist,
                shortlist_size,
                each=shortlist_each,
                embeddings=embeddings,
            )
        dense, real = self._dense_scores(
            lexical.scores, query, texts, embeddings, query_embedding, not_embedded, unlisted, views
        )
        if static and real.any():
            self._static_scores(dense, real, query, texts, static, query_embedding)
        ways = [query, *views]
        way_weights, details = dense.view_weights, dict(dense.details)
        found: list[np.ndarray] | None = None
        if len(ways) > 1 and way_weights is None and details.get("query_embedding_reused"):
            assert query_embedding is not None  # the store's vector scored
            way_weights, found = self._store_weights(
                ways, texts, (lexical.scores, dense.scores), real, query_embedding, details
            )
        lexical_scores = lexical.scores
        if way_weights is not None:  # BM25 trusts each way of asking as far as its weight
            lexical_scores = self._asked_lexical(lexical.scores, ways, way_weights, texts, found)
        runs = [lexical_scores, dense.scores]
        weights = [1.0 - self.dense_weight, self.dense_weight]
        if self.fusion == "rrf":
            fused = reciprocal_rank_fusion(runs, weights, k=self.rrf_k)
        else:
            fused = weighted_fusion(runs, weights, (0.0, self.dense_min_spread))
        return Scored(
            scores=fused, vectors=dense.vectors, details=details, view_weights=way_weights
        )

    def _static_scores(
        self,
        dense: Scored,
        real: np.ndarray,
        query: str,
        texts: Sequence[str],
        static: set[int],
        query_embedding: Sequence[float] | None,
    ) -> None:
        """The dense scores of the ``static`` texts, in place: their static vectors' similarity
        to the query's vector (the store's, else the float model's, whose table it is: a cache
        hit where the dense side embedded the query with it), calibrated on the texts with a
        real dense score (``real``), which the static texts then count among."""
        import numpy as np

        from .embeddings import normalise
        from .static_vectors import calibrated

        table = self.static_vectors()
        known = np.flatnonzero(real).tolist()
        at = sorted(static)
        dim = table.table.shape[1]
        if query_embedding is not None and len(query_embedding) == dim:
            vector = normalise(query_embedding)
        else:
            vector = self._dense.service(float32=True).embed([query])[0]
        similar = table.embed([texts[i] for i in known + at]) @ vector
        scale = np.concatenate([dense.scores[known], np.zeros(len(at))])
        dense.scores[at] = calibrated(similar, scale, range(len(known)))[len(known) :]
        real[at] = True
        lexical_only = dense.details.pop("lexical_only", 0) - len(at)
        if lexical_only:
            dense.details["lexical_only"] = lexical_only
        dense.details["static_only"] = len(at)

    def _store_weights(
        self,
        ways: Sequence[str],
        texts: Sequence[str],
        scores: tuple[np.ndarray, np.ndarray],
        real: np.ndarray,
        query_embedding: Sequence[float],
        details: dict[str, Any],
    ) -> tuple[np.ndarray | None, list[np.ndarray] | None]:
        """The ways of asking weighed beside a store's query vector, and each way's BM25
        scores when they were computed for it (``scores``: the query's BM25 and dense scores):
        read off the texts (``_found_by_store``) when every text has a dense score of its own
        (``real``); else (windows BM25 alone scored have no similarity to read a way's worth
        off) by closeness to the store's vector. ``details`` gets the weights and the work."""
        found: list[np.ndarray] | None = None
        if real.all():
            found = [scores[0], *(self._bm25.score(v, texts).scores for v in ways[1:])]
            weights = _found_by_store(found, scores[1])
        else:
            weights = self._dense.closeness(ways, query_embedding)
            details["texts_embedded"] = details.get("texts_embedded", 0) + len(ways)
        if weights is not None:
            details["view_weights"] = [round(float(w), 3) for w in weights]
        return weights, found

    def _asked_lexical(
        self,
        first: np.ndarray,
        asked: Sequence[str],
        weights: np.ndarray,
        texts: Sequence[str],
        found: Sequence[np.ndarray] | None = None,
    ) -> np.ndarray:
        """BM25 of each way of asking (``first``: the query's, already computed; ``found``:
        every way's, when computed), each on its own best text's scale, mixed by
        ``weights``."""
        import numpy as np

        out = np.zeros(len(texts), dtype=np.float64)
        for i, (text, weight) in enumerate(zip(asked, weights)):
            if weight < 1e-3:
                continue  # the documents do not answer it: its words would be noise
            if found is not None:
                scores = found[i]
            else:
                scores = first if i == 0 else self._bm25.score(text, texts).scores
            top = float(scores.max()) if len(scores) else 0.0
            if top > 0:
                out += weight * scores / top
        return out

    def _dense_scores(
        self,
        lexical: np.ndarray,
        query: str,
        texts: Sequence[str],
        embeddings: Sequence[Any] | None,
        query_embedding: Sequence[float] | None,
        skip: set[int] | None = None,
        unlisted: set[int] | None = None,
        views: Sequence[str] = (),
    ) -> tuple[Scored, np.ndarray]:
        """Dense scores of every text, or with ``dense_candidates`` of BM25's best only, never
        of ``skip`` (lexical-only) or ``unlisted`` texts (left out of the shortlist); and
        which texts have a dense score of their own (the others' is imputed)."""
        import numpy as np

        n = self.dense_candidates
        skip = set(skip or ())
        unlisted = set(unlisted or ())
        if (n is None or len(texts) <= n) and not skip and not unlisted:
            scored = self._dense.score(
                query, texts, embeddings=embeddings, query_embedding=query_embedding, views=views
            )
            return scored, np.ones(len(texts), dtype=bool)
        given = embeddings or [None] * len(texts)
        best = range(len(texts)) if n is None else np.argsort(-lexical, kind="stable")[:n].tolist()
        chosen = sorted(
            (set(best) | {i for i, e in enumerate(given) if e is not None}) - skip - unlisted
        )
        part = self._dense.score(
            query,
            [texts[i] for i in chosen],
            embeddings=[given[i] for i in chosen],
            query_embedding=query_embedding,
            views=views,
        )
        low = float(part.scores.min()) if chosen else 0.0
        scores = np.full(len(texts), low, dtype=np.float64)
        scores[chosen] = part.scores
        if skip and chosen:  # on the dense scale where BM25 puts them: fused, their BM25 score
            high = float(part.scores.max())
            at = sorted(skip)
            scores[at] = low + minmax(lexical)[at] * (high - low)
        # left out of the shortlist: ``low``, its fused score its BM25 share alone (its BM25
        # standing, as for lexical-only windows, kept more: chunks of 8, 3 items, 0.25 vs 0.18)
        vectors = None
        if part.vectors is not None:  # texts not embedded get a zero row: similar to nothing
            vectors = np.zeros((len(texts), part.vectors.shape[1]), dtype=np.float32)
            vectors[chosen] = part.vectors
        details = dict(part.details)
        reported = [("dense_candidates", n is not None, len(chosen))]
        reported += [("lexical_only", bool(skip), len(skip))]
        reported += [("shortlist_left_out", bool(unlisted), len(unlisted))]
        details.update((key, count) for key, on, count in reported if on)
        real = np.isin(np.arange(len(texts)), chosen)
        return Scored(scores, vectors, details, view_weights=part.view_weights), real


def _found_by_store(found: Sequence[np.ndarray], dense: np.ndarray) -> np.ndarray | None:
    """``view_weights`` of the ways of asking beside a store's query vector, read off the
    texts rather than embedded: each way's best text by BM25 (``found``: each way's scores)
    and that text's similarity to the store's vector (``dense``). The store searched with
    what the user means, so the way whose words find what its vector finds is that one: the
    question, not the instructions around it or a follow-up that names nothing. A way whose
    words no text holds weighs nothing; None when no way's words are in any text. Embedding
    the ways instead cost a templated question more than the rest of its request."""
    import numpy as np

    best = np.full(len(found), -np.inf)
    for k, scores in enumerate(found):
        top = int(np.argmax(scores)) if len(scores) else 0
        if len(scores) and scores[top] > 0:
            best[k] = dense[top]
    if not np.isfinite(best).any():
        return None
    return view_weights(best)


#: Scorer classes by name; ``RetrievalStage(scorer=...)`` looks names up here.
SCORERS: Registry[type[Scorer]] = Registry(
    "scorer",
    {
        "bm25": "promptslim.backends.lexical:BM25Scorer",
        "dense": "promptslim.backends.dense:DenseScorer",
        "cross_encoder": "promptslim.backends.cross_encoder:CrossEncoderScorer",
        "hybrid": "promptslim.backends.scorers:HybridScorer",
    },
)
