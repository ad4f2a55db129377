"""The embedding service: sentence embeddings as normalised float32 vectors, cached and shared.

Every part of promptslim that needs sentence embeddings (dense retrieval, near-duplicate
detection, MMR, sentence similarity in compression) goes through this module, which loads its
model through :func:`promptslim.backends.models.load_embedder` (the one model loader)::

    from promptslim.backends.embeddings import EmbeddingService

    service = EmbeddingService.get()              # all-MiniLM-L6-v2, shared by every caller
    vectors = service.embed(["a passage", "another passage"])   # (2, 384) float32, unit rows
    query = service.embed_one("a question")                     # (384,) float32, unit norm
    similarity = vectors @ query                                # cosine similarities

``EmbeddingService.get(model, backend=..., device=..., max_seq_length=...)`` returns one shared
service per configuration. A service is thread-safe: the model is used under a per-model lock
(fast tokenizers are not re-entrant) and the cache under its own lock.

Why each part is here:

- **Cache keyed by content hash.** Retrieved documents recur across requests (the same
  passages answer many questions), and on CPU embedding them is the dominant cost. The cache is
  an in-memory LRU bounded by entry count, keyed by a BLAKE2b digest of the text, per service
  (so per model and truncation length).
- **Truncation** (``max_seq_length``, in the model's word pieces): scoring needs the head of a
  passage, not all of it, and encoder cost grows with length. ``None`` keeps the model's own.
- **Precomputed vectors**: vector stores already hold an embedding for each passage;
  :func:`normalise` turns them into the same unit float32 rows so they can be used as they are.
- **ONNX** (``backend="onnx"``, extra ``onnx``): the same model exported once to ONNX and run
  by onnxruntime on the CPU (:mod:`promptslim.backends.onnx_encoder`); float32 gives the torch
  vectors (to 1e-6) in about the torch time for passages and under half of it for one query;
  with ``quantize=True`` the int8 graph is 1.4-1.6x faster than torch's float model on 20
  passages (``bench_retrieval.py --cold-options``). ``BackendUnavailable``
  without onnxruntime; ``backend="auto"`` takes ONNX when onnxruntime is installed and the
  model runs on the CPU, torch otherwise.
- **Batching**: texts not in the cache are encoded in batches of ``batch_size``, sorted by
  length (sentence-transformers sorts them), so each batch pads to a length close to its own
  texts'. On CPU the default is 8: 20 passages of 50-330 word pieces padded as one batch of 32
  spent about 20 % more CPU time than in batches of 8, which still fill the matrix units. The
  ONNX backend runs each text alone instead, texts in parallel (see ``onnx_encoder``).
- **Threads**: a short input (one query) is encoded on one torch thread. Its matrices are too
  small to gain from a second thread, and on a shared CPU an OpenMP thread that waits for one
  descheduled by another process made one query embedding 10x slower (1.9 s instead of 0.16 s
  on the 2-core development machine under load). Longer inputs use torch's own setting unless
  ``threads`` says otherwise.
- **int8** (``quantize=True``; ``None``: int8 when the model runs on the CPU, float on a GPU;
  the service's own default is float, the retrieval scorers' is ``None``): torch's Linear
  layers dynamically quantised, or ONNX's graph quantised (through
  :func:`promptslim.backends.models.load_embedder`). About 1.4x less CPU time at 128 word
  pieces, but the vectors move (cosine 0.94 on average to the float ones): on 100 nq20-dev
  questions the gold passage ranked lower in 4 and higher in none, while the default retrieval
  policy kept it in the same 0.99. Its vectors must not be mixed with a vector store's float
  ones, so it has its own cache, and the dense scorer embeds with the float model whenever a
  request brings vectors of its own, unless the request brings the query's as well: then
  int8 embeds the texts without a vector and the store's query vector meets them, where
  the int8 vectors stay close to the float ones (ONNX's: :attr:`EmbeddingService.near_float`);
  torch's int8 embeds the query too, and each vector meets its own model's query
  (:attr:`EmbeddingService.int8` tells which it is).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from ..errors import BackendError, ConfigError
from .embedding_parts import (  # re-exported under the old names: tests, benchmarks, scorers
    EMBEDDING_CACHE_ENV,
    VectorLRU,
    configure_embedding_cache,
    model_text,
    normalise,
    resolve_backend,
    shared_cache,
    text_key,
    torch_threads,
)
from .models import check_quantize
from .shared_stats import note_computed

if TYPE_CHECKING:
    import numpy as np

# the old private names, for code written against them (tests of the cache, benchmarks)
_VectorLRU = VectorLRU
_shared_cache = shared_cache
_model_text = model_text

__all__ = [
    "DEFAULT_CACHE_SIZE",
    "EMBEDDING_CACHE_ENV",
    "EmbeddingBackend",
    "EmbeddingService",
    "configure_embedding_cache",
    "normalise",
]

EmbeddingBackend = Literal["torch", "onnx", "auto"]
DEFAULT_CACHE_SIZE = 50_000  # vectors; at 384 float32 each, about 77 MB when full
#: texts per model call on CPU when ``batch_size`` is None (elsewhere: 64)
CPU_BATCH_SIZE = 8
#: uncached input of at most this many characters (about one query) is encoded on one thread
SMALL_INPUT_CHARS = 1_000
_services: dict[tuple[Any, ...], EmbeddingService] = {}
_services_lock = threading.Lock()
# one lock per loaded model object: services with different truncation share a model
_model_locks: dict[int, threading.Lock] = {}


class EmbeddingService:
    """Embeds texts with one sentence-transformers model; cached, batched, thread-safe.

    Use :meth:`get` to share one service per configuration; construct directly only for a
    private cache. ``model`` is None (the packaged all-MiniLM-L6-v2), a local path or a name in
    the local Hugging Face cache.
    """

    def __init__(
        self,
        *,
        model: str | None = None,
        backend: EmbeddingBackend = "torch",
        device: str | None = None,
        max_seq_length: int | None = None,
        batch_size: int | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
        threads: int | None = None,
        quantize: bool | None = False,
    ) -> None:
        if max_seq_length is not None and max_seq_length < 1:
            raise ConfigError("must be a positive number of word pieces", field="max_seq_length")
        if batch_size is not None and batch_size < 1:
            raise ConfigError("must be at least 1 (None: by device)", field="batch_size")
        if cache_size < 0:
            raise ConfigError("must be 0 (no cache) or more", field="cache_size")
        if threads is not None and threads < 1:
            raise ConfigError("must be at least 1 (None: by input size)", field="threads")
        check_quantize(quantize)
        self.model = model
        self.backend = backend
        self.device = device
        self.max_seq_length = max_seq_length
        self.batch_size = batch_size
        self.cache_size = cache_size
        self.threads = threads
        self.quantize = quantize
        self._resolved_backend = resolve_backend(backend)
        self._cache = VectorLRU(cache_size)
        self._st: Any = None
        self._dim: int | None = None
        self._int8: bool | None = quantize
        self._load_lock = threading.Lock()

    # ---- sharing

    @classmethod
    def get(
        cls,
        model: str | None = None,
        *,
        backend: EmbeddingBackend = "torch",
        device: str | None = None,
        max_seq_length: int | None = None,
        quantize: bool | None = False,
    ) -> EmbeddingService:
        """The shared service for this configuration (created on first use; the model itself
        loads on the first ``embed``)."""
        key = (model, backend, device, max_seq_length, quantize)
        found = _services.get(key)
        if found is not None:
            return found
        with _services_lock:
            found = _services.get(key)
            if found is None:
                found = cls(
                    model=model,
                    backend=backend,
                    device=device,
                    max_seq_length=max_seq_length,
                    quantize=quantize,
                )
                _services[key] = found
        return found

    # ---- the model

    def load(self) -> Any:
        """The underlying ``SentenceTransformer`` (loaded once, through ``load_embedder``)."""
        if self._st is None:
            with self._load_lock:
                if self._st is None:
                    from .models import load_embedder

                    # "auto" is decided by the loader (ONNX when it can run it, on a CPU)
                    st = load_embedder(
                        self.model,
                        device=self.device,
                        backend=self._resolved_backend,
                        quantize=self.quantize,
                    )
                    with _services_lock:
                        _model_locks.setdefault(id(st), threading.Lock())
                    # renamed in sentence-transformers 5.x; older releases have only the old name
                    get_dim = (
                        getattr(st, "get_embedding_dimension", None)
                        or st.get_sentence_embedding_dimension
                    )
                    dim = get_dim()
                    self._dim = int(dim) if dim else None
                    if self._int8 is None:  # as the loader decided it: int8 on the CPU
                        self._int8 = str(st.device).startswith("cpu")
                    self._st = st
        return self._st

    @property
    def dim(self) -> int:
        """The embedding dimension (loads the model)."""
        self.load()
        if self._dim is None:
            self._dim = int(self.embed(["dimension probe"]).shape[1])
        return self._dim

    @property
    def int8(self) -> bool:
        """Whether this service's vectors come from the int8 model (loads the model when
        ``quantize`` is None: the device decides)."""
        if self._int8 is None:
            self.load()
        return bool(self._int8)

    @property
    def near_float(self) -> bool:
        """Whether this service's vectors point where the float model's do, so a float query
        may meet them: the float model itself, or ONNX's int8 (weights quantised per channel:
        cosine 0.98-0.99 to the float vectors). torch's dynamic int8 moves them further (0.94
        on average), so its vectors meet only its own queries. Loads the model."""
        from .onnx_encoder import OnnxSentenceEncoder

        return not self.int8 or isinstance(self.load(), OnnxSentenceEncoder)

    @property
    def loaded(self) -> bool:
        return self._st is not None

    # ---- embedding

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), dim)`` float32 rows of unit norm, in order. Cached texts cost a lookup."""
        import numpy as np

        if not texts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        keys = [text_key(t) for t in texts]
        found = self._cache.get_many(keys)
        missing: dict[bytes, int] = {}
        for i, (key, vector) in enumerate(zip(keys, found)):
            if vector is None and key not in missing:
                missing[key] = i
        if missing:
            shared = shared_cache()
            computed = self._from_shared(shared, missing) if shared is not None else {}
            todo = [k for k in missing if k not in computed]
            if todo:
                fresh = self._encode([model_text(texts[missing[k]]) for k in todo])
                for key in todo:
                    note_computed("embedding", key)
                new = list(zip(todo, fresh))
                self._cache.put_many(new)
                computed.update(new)
                if shared is not None:
                    shared.put_many(self._space(), [(k, v.tobytes()) for k, v in new])
            found = [v if v is not None else computed[k] for k, v in zip(keys, found)]
        return np.stack(found)  # type: ignore[arg-type]

    def index(self, texts: Sequence[str]) -> None:
        """Embed ``texts`` (cached ones taken from the cache) and write every vector to the
        shared tier, when there is one, even those this process held already: what an ingest
        does so that requests on any host find them (a write also renews an entry's TTL)."""
        vectors = self.embed(texts)
        shared = shared_cache()
        if shared is not None and len(texts):
            rows = {text_key(t): v.tobytes() for t, v in zip(texts, vectors)}
            shared.put_many(self._space(), list(rows.items()))

    def _from_shared(self, shared: Any, missing: dict[bytes, int]) -> dict[bytes, np.ndarray]:
        """The vectors of ``missing`` that the shared store holds (also put in this LRU)."""
        import numpy as np

        wanted = list(missing)
        got: dict[bytes, np.ndarray] = {}
        for key, data in zip(wanted, shared.get_many(self._space(), wanted)):
            if data is not None and len(data) % 4 == 0 and (self._dim in (None, len(data) // 4)):
                got[key] = np.frombuffer(data, dtype=np.float32).copy()
        if got:
            self._cache.put_many(list(got.items()))
        return got

    def _space(self) -> str:
        """What a vector depends on besides its text: the model as loaded, its device and
        truncation, int8 or not (the shared store's key space for this service)."""
        st = self.load()
        return f"{self.model}|{type(st).__name__}|{st.device}|{self.max_seq_length}|{self.int8}"

    def embed_one(self, text: str) -> np.ndarray:
        """One text as a ``(dim,)`` unit vector."""
        vector: np.ndarray = self.embed([text])[0]
        return vector

    def _encode(self, texts: list[str]) -> np.ndarray:
        st = self.load()
        lock = _model_locks[id(st)]
        with lock:
            # the model object is shared by every service of this model: set the truncation
            # for this call only, and put the model's own back afterwards
            previous = st.max_seq_length
            if self.max_seq_length is not None:
                st.max_seq_length = self.max_seq_length
            try:
                with torch_threads(self._threads_for(texts)):
                    out = st.encode(
                        texts,
                        batch_size=self._batch_size(st),
                        convert_to_numpy=True,
                        normalize_embeddings=True,
                        show_progress_bar=False,
                    )
            except (RuntimeError, ValueError) as exc:
                raise BackendError(f"embedding failed: {exc}", backend="embeddings") from exc
            finally:
                st.max_seq_length = previous
        return normalise(out)

    def _threads_for(self, texts: Sequence[str]) -> int | None:
        if self.threads is not None:
            return self.threads
        return 1 if sum(len(t) for t in texts) <= SMALL_INPUT_CHARS else None

    def _batch_size(self, st: Any) -> int:
        if self.batch_size is not None:
            return self.batch_size
        return CPU_BATCH_SIZE if str(st.device).startswith("cpu") else 64

    # ---- cache

    def cache_info(self) -> dict[str, int]:
        """Entries, capacity, hits and misses of this service's cache."""
        c = self._cache
        return {"size": len(c), "maxsize": c.maxsize, "hits": c.hits, "misses": c.misses}

    def clear_cache(self) -> None:
        self._cache.clear()

    @staticmethod
    def clear_all_caches() -> None:
        """Empty every shared service's embedding cache (benchmarks measuring cold cost)."""
        with _services_lock:
            services = list(_services.values())
        for service in services:
            service.clear_cache()

    def __repr__(self) -> str:
        return (
            f"EmbeddingService(model={self.model!r}, backend={self.backend!r}, "
            f"max_seq_length={self.max_seq_length!r}, quantize={self.quantize!r})"
        )
