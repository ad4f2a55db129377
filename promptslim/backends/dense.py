"""The dense scorer: cosine similarity of sentence embeddings, through the shared, cached
:class:`~promptslim.backends.embeddings.EmbeddingService`; a query asked more than one way
(``views``) weighed by how well the texts answer each way. ``SCORERS`` names it ``dense``; the
hybrid scorer (``scorers``) uses it for its dense side."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from ..errors import ConfigError
from .models import check_quantize
from .scorer_base import Scored, Scorer, similarities, view_weights

if TYPE_CHECKING:
    import numpy as np

__all__ = ["DEFAULT_MAX_SEQ_LENGTH", "DenseScorer"]

#: word pieces of each text the embedder reads, by default (MiniLM's own limit is 256): about
#: three quarters of a 600-character window of English prose (``DEFAULT_WINDOW_CHARS``), where
#: 64 read less than half of it and left the rest to BM25 (docs/architecture.md, "How much of
#: a window the model reads")
DEFAULT_MAX_SEQ_LENGTH = 96


#: texts embedded per call when indexing (the vectors of one call are held at once)
_INDEX_BATCH = 512


class DenseScorer(Scorer):
    """Cosine similarity of sentence embeddings (default: the packaged all-MiniLM-L6-v2).

    Precomputed embeddings of the model's dimension are used as they are, and so is the
    query's (``query_embedding``); texts are embedded through the shared, cached
    :class:`EmbeddingService`, truncated to ``max_seq_length`` word pieces for scoring, with
    the query in the same model call. For large candidate sets the search goes through faiss.

    The defaults buy cold speed on a CPU, where embedding fresh passages is the whole cost:
    the head of each text (``DEFAULT_MAX_SEQ_LENGTH`` word pieces, not the model's 256), the
    ONNX backend where onnxruntime is installed (``auto``), and the int8 model on the CPU
    (``quantize=None``; float on a GPU). On nq20-dev (1,000 questions, the 2-core development
    VM), at 64 word pieces, those took the default retrieval policy's cold request from 399 to
    114 ms at the median, at the same 0.992 gold recall (``benchmarks/bench_retrieval.py
    --cold-options``), and running each text alone in the ONNX encoder (see ``onnx_encoder``)
    to about 80 ms; reading 96 costs a quarter to nearly a half more. Beside a vector store's float
    vectors and its query's (``store_float=False``, the default), the texts without a vector
    are embedded by the int8 model and the store's query vector meets them all: ONNX's int8
    vectors point where the float ones do (``EmbeddingService.near_float``), and the store
    searched with that vector, so the request embeds no query of its own, nor any view of the
    question (the hybrid scorer weighs those by the texts: ``HybridScorer``). torch's int8
    drifts further (cosine 0.94 to the float vectors), so there int8 embeds the query too and
    each text meets the query of its own model. Otherwise (``store_float=True``,
    or the store's vectors without its query's) the request is embedded with the float model
    (the same backend and truncation), which loads on the first such request (0.25 s here once
    the ONNX export exists). On the shape suite (60 nq20-dev items a shape, store vectors)
    int8 kept evidence and token ratio at 1.8-2.6x less time a cold request; the store's
    query meeting ONNX's int8 vectors left evidence unchanged on 700 items of seven shapes.
    """

    name: ClassVar[str] = "dense"

    def __init__(
        self,
        *,
        model: str | None = None,
        max_seq_length: int | None = DEFAULT_MAX_SEQ_LENGTH,
        backend: Literal["torch", "onnx", "auto"] = "auto",
        device: str | None = None,
        quantize: bool | None = None,
        store_float: bool = False,
    ) -> None:
        if max_seq_length is not None and max_seq_length < 1:
            raise ConfigError("must be a positive number of word pieces", field="max_seq_length")
        check_quantize(quantize)
        self.model = model
        self.max_seq_length = max_seq_length
        self.backend = backend
        self.device = device
        self.quantize = quantize
        self.store_float = store_float

    def service(self, *, float32: bool = False) -> Any:
        """The shared embedding service; ``float32``: the float model's, whatever ``quantize``
        says (for requests that bring a vector store's vectors)."""
        from .embeddings import EmbeddingService

        return EmbeddingService.get(
            self.model,
            backend=self.backend,
            device=self.device,
            max_seq_length=self.max_seq_length,
            quantize=False if float32 else self.quantize,
        )

    def score(
        self,
        query: str,
        texts: Sequence[str],
        *,
        embeddings: Sequence[Any] | None = None,
        query_embedding: Sequence[float] | None = None,
        views: Sequence[str] = (),
    ) -> Scored:
        """``views``: other ways the query may be put (a sentence of it, an earlier turn). Each
        text's similarity is then a mean over the query and its views, each weighted by how
        well the texts answer it (``view_weights``). Beside ``query_embedding`` the scores are
        that vector's (the store searched with it: it is the question) and the views are not
        embedded, unless int8's own query must meet the texts (``_embedder``): then the
        weights say how close each way of asking is to the store's vector."""
        import numpy as np

        from .embeddings import normalise

        dim = self.service().dim
        vectors, given_at, mismatched = _given_vectors(embeddings, len(texts), dim)
        reused = len(given_at)
        query_given = query_embedding is not None and len(query_embedding) == dim
        todo = sorted(set(range(len(texts))) - set(given_at))
        service, own = self._embedder(bool(reused), query_given, bool(todo))
        # the request's ways of asking, to score with, unless the store's query vector scores
        asked = [query, *views] if not query_given or own else []
        # whatever must be embedded goes to the model in one call: each call has a fixed cost
        fresh = service.embed(asked + [texts[i] for i in todo])
        fresh_query, fresh = fresh[: len(asked)], fresh[len(asked) :]
        if todo:
            vectors[todo] = fresh
        store_query = normalise(query_embedding) if query_given else None
        ways = [query, *views]
        scores, weights = self._scores(vectors, fresh_query, store_query, ways)
        if own:  # the texts int8 embedded meet int8's query: the ways of asking, as weighed
            mine = fresh_query[0] if weights is None else weights @ fresh_query
            scores[todo] = (fresh @ mine).astype(np.float64)
        details = {
            "embeddings_reused": reused,
            "embeddings_mismatched": mismatched,
            "query_embedding_reused": query_given,
            "query_embedding_mismatched": query_embedding is not None and not query_given,
            "int8": service.int8,
            # the dense work of this call: distinct texts handed to the model (the service
            # embeds a text once per call; cache hits included)
            "texts_embedded": len({texts[i] for i in todo} | set(asked)),
        }
        if weights is not None:  # how much each way of asking counted: the query's first
            details["view_weights"] = [round(float(w), 3) for w in weights]
        return Scored(scores=scores, vectors=vectors, details=details, view_weights=weights)

    def _embedder(self, reused: bool, query_given: bool, todo: bool) -> tuple[Any, bool]:
        """The service that embeds a request's texts, and whether int8's own query must meet
        them (``own``). Beside a store's query vector, the texts without one are embedded by
        int8 and met by that vector as the store's own are, where int8's vectors point where
        the float model's do (``near_float``), else by int8's own query; with a store's
        vectors but not its query's, the float model embeds the rest."""
        service = self.service()
        mixed = (reused or query_given) and service.int8
        quantised = mixed and not self.store_float and query_given and todo
        own = quantised and not service.near_float
        if mixed and not quantised:
            service = self.service(float32=True)  # compared with a store's float vectors
        return service, own

    def closeness(self, ways: Sequence[str], query_vector: Sequence[float]) -> np.ndarray:
        """``view_weights`` of ``ways`` (ways of asking one query) by their closeness to a
        store's query vector: the one it searched with wins. Embedded by int8 where its
        vectors point where the float model's do (close enough to tell the way searched with
        from the others, at half the float model's cost), else by the float model."""
        import numpy as np

        from .embeddings import normalise

        service = self.service()
        if not service.near_float:
            service = self.service(float32=True)
        rows = service.embed(list(ways))
        return view_weights(np.asarray(rows @ normalise(query_vector), dtype=np.float64))

    def index(self, texts: Sequence[str]) -> int:
        """Embed ``texts`` into the cache a request's scoring reads (the service's own, and the
        Redis tier ``PROMPTSLIM_EMBEDDING_CACHE`` names): the model this scorer embeds with
        for requests with no vectors of their own, and with a store's vectors and the query's
        (the float model's too under ``store_float``, which such requests use)."""
        distinct = list(dict.fromkeys(texts))
        services = [self.service()]
        if self.store_float and services[0].int8:
            services.append(self.service(float32=True))
        for service in services:
            for start in range(0, len(distinct), _INDEX_BATCH):  # bounded memory per call
                service.index(distinct[start : start + _INDEX_BATCH])
        return len(distinct)

    def _scores(
        self,
        vectors: np.ndarray,
        asked_vectors: np.ndarray,
        store_query: np.ndarray | None,
        ways: Sequence[str],
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Each text's similarity to the query, and the weights of the ways of asking it
        (``ways``: the query, then its views; None when there is one, or when the store's
        query vector scores and they were not embedded). ``asked_vectors``: the request's
        embeddings of them, ``store_query``: the store's query vector."""
        import numpy as np

        if store_query is None and len(ways) > 1:
            return _asked_views(vectors, asked_vectors)
        query = store_query if store_query is not None else asked_vectors[0]
        scores = similarities(vectors, query)
        if store_query is None or len(ways) == 1 or len(asked_vectors) < len(ways):
            return scores, None
        # int8's own query meets the texts: the ways weighed by closeness to the store's
        # vector (the one it searched with wins), as int8 embedded them
        return scores, view_weights(np.asarray(asked_vectors @ store_query, dtype=np.float64))


def _given_vectors(
    embeddings: Sequence[Any] | None, n: int, dim: int
) -> tuple[np.ndarray, list[int], int]:
    """The texts' unit vectors where ``embeddings`` gives one of the model's dimension (zero
    rows elsewhere), which texts those are, and how many given vectors were of another length
    (another model's: those texts are embedded instead)."""
    import numpy as np

    from .embeddings import normalise

    vectors = np.zeros((n, dim), dtype=np.float32)
    given = list(embeddings or ())
    at = [i for i, g in enumerate(given) if g is not None and len(g) == dim]
    if at:
        vectors[at] = normalise([given[i] for i in at])
    return vectors, at, sum(1 for g in given if g is not None) - len(at)


def _asked_views(vectors: np.ndarray, asked: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each text's similarity as the ``view_weights`` mean over the ways of asking (rows of
    ``asked``: the query, then its views), and those weights."""
    import numpy as np

    matrix = (vectors @ asked.T).astype(np.float64)  # one column per way of asking
    weights = view_weights(matrix.max(axis=0) if len(vectors) else np.zeros(len(asked)))
    return matrix @ weights, weights
