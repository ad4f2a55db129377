"""The embedding service's parts that need no model: the text as the tokenizer takes it and
its cache key, unit-norm rows, the bounded vector LRU, the optional Redis tier shared between
processes, the torch thread count for one call, and which backend ``auto`` means here. See
``promptslim.backends.embeddings`` for why each is as it is."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..errors import BackendUnavailable, ConfigError

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "BACKENDS",
    "EMBEDDING_CACHE_ENV",
    "VectorLRU",
    "configure_embedding_cache",
    "model_text",
    "normalise",
    "resolve_backend",
    "shared_cache",
    "text_key",
    "torch_threads",
]

BACKENDS = ("torch", "onnx", "auto")
# a surrogate code point in a Python str is always a lone one (pairs are decoded into one)
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def model_text(text: str) -> str:
    """``text`` as the tokenizer can take it: a lone surrogate (valid in a JSON escape, not in
    UTF-8) read as U+FFFD, as a UTF-8 decoder reads a broken byte. Only what the model scores
    changes; the document's text and the cache key are the caller's."""
    return text if text.isascii() else _LONE_SURROGATE.sub("\ufffd", text)


#: a ``redis://`` URL here shares every service's vectors between processes and hosts
EMBEDDING_CACHE_ENV = "PROMPTSLIM_EMBEDDING_CACHE"
_shared: list[Any] = []  # [store or None] once decided
_shared_lock = threading.Lock()


def configure_embedding_cache(spec: str | None) -> None:
    """Share every service's vectors through Redis (``"redis://..."``, a ``RedisVectorCache``,
    behind each service's own LRU) or not (None). The default is what
    ``PROMPTSLIM_EMBEDDING_CACHE`` says, read on first use."""
    store = None
    if spec:
        from .redis_store import RedisVectorCache

        store = RedisVectorCache(spec)
    with _shared_lock:
        _shared[:] = [store]


def shared_cache() -> Any:
    if not _shared:
        configure_embedding_cache(os.environ.get(EMBEDDING_CACHE_ENV) or None)
    return _shared[0]


def text_key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def normalise(vectors: Any) -> np.ndarray:
    """Rows as unit-norm float32 (a zero row stays zero). Accepts lists or arrays, 1-D or 2-D."""
    import numpy as np

    array = np.asarray(vectors, dtype=np.float32)
    if array.ndim == 1:
        norm = float(np.linalg.norm(array))
        return array / norm if norm > 0 else array
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(array / norms, dtype=np.float32)


@contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """torch's intra-op thread count set to ``threads`` for the block (None: unchanged)."""
    if threads is None:
        yield
        return
    import torch

    before = torch.get_num_threads()
    if before == threads:
        yield
        return
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def resolve_backend(backend: str) -> str:
    """``torch`` or ``onnx``; ``auto`` stays ``auto`` (decided at load: ONNX on a CPU)."""
    if backend not in BACKENDS:
        raise ConfigError(
            f"expected one of {', '.join(BACKENDS)}, got {backend!r}", field="backend"
        )
    has_onnx = importlib.util.find_spec("onnxruntime") is not None
    if backend == "onnx" and not has_onnx:
        raise BackendUnavailable("onnxruntime (the ONNX embedding backend)", extra="onnx")
    if backend == "auto" and not has_onnx:
        return "torch"
    return backend


class VectorLRU:
    """A bounded, thread-safe LRU of vectors keyed by text digest."""

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self._data: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get_many(self, keys: Sequence[bytes]) -> list[np.ndarray | None]:
        with self._lock:
            out: list[np.ndarray | None] = []
            for key in keys:
                value = self._data.get(key)
                if value is not None:
                    self._data.move_to_end(key)
                    self.hits += 1
                else:
                    self.misses += 1
                out.append(value)
            return out

    def put_many(self, items: Sequence[tuple[bytes, np.ndarray]]) -> None:
        if self.maxsize <= 0:
            return
        with self._lock:
            for key, value in items:
                self._data[key] = value
                self._data.move_to_end(key)
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._data)
