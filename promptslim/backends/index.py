"""Inner-product search over unit vectors: faiss for large candidate sets, numpy for small.

For a few dozen candidates a matrix-vector product is faster than building any index; past
``FAISS_MIN_CANDIDATES`` faiss's flat inner-product index (exact, multi-threaded) takes over.
:class:`InnerProductIndex` is the reusable form for a corpus that outlives one request.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from ..errors import BackendUnavailable, ConfigError

if TYPE_CHECKING:
    import numpy as np

__all__ = ["FAISS_MIN_CANDIDATES", "InnerProductIndex", "inner_product_top_k"]

#: below this many vectors a numpy product beats building a faiss index
FAISS_MIN_CANDIDATES = 2048


def _faiss() -> Any:
    try:
        import faiss
    except ImportError as exc:
        raise BackendUnavailable("faiss-cpu (the dense index)", extra="retrieval") from exc
    return faiss


class InnerProductIndex:
    """An exact inner-product index (faiss ``IndexFlatIP``); with unit vectors, cosine search.

    ``add`` appends rows; ``search`` returns ``(scores, ids)`` of the ``k`` best rows per query,
    best first (ids are row numbers in insertion order; -1 pads when fewer rows exist).
    Thread-safe: adds are serialised, searches may run concurrently with each other.
    """

    def __init__(self, dim: int) -> None:
        if dim < 1:
            raise ConfigError("must be at least 1", field="dim")
        self.dim = dim
        self._index = _faiss().IndexFlatIP(dim)
        self._lock = threading.Lock()

    def add(self, vectors: Any) -> None:
        import numpy as np

        array = np.ascontiguousarray(vectors, dtype=np.float32)
        if array.ndim != 2 or array.shape[1] != self.dim:
            raise ConfigError(f"expected rows of {self.dim} values, got {array.shape}", field="vectors")
        with self._lock:
            self._index.add(array)

    def search(self, queries: Any, k: int) -> tuple[np.ndarray, np.ndarray]:
        import numpy as np

        array = np.ascontiguousarray(queries, dtype=np.float32)
        if array.ndim == 1:
            array = array[None, :]
        scores, ids = self._index.search(array, k)
        return scores, ids

    def __len__(self) -> int:
        return int(self._index.ntotal)


def inner_product_top_k(query: Any, vectors: Any, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``(scores, ids)`` of the ``k`` rows of ``vectors`` with the largest inner product with
    ``query``, best first; ties broken by row order (deterministic)."""
    import numpy as np

    matrix = np.asarray(vectors, dtype=np.float32)
    n = matrix.shape[0]
    k = min(k, n)
    if k <= 0:
        return np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.int64)
    if n >= FAISS_MIN_CANDIDATES:
        index = InnerProductIndex(matrix.shape[1])
        index.add(matrix)
        scores, ids = index.search(query, k)
        return scores[0], ids[0].astype(np.int64)
    sims = matrix @ np.asarray(query, dtype=np.float32)
    order = np.argsort(-sims, kind="stable")[:k]
    return sims[order], order.astype(np.int64)
