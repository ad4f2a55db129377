"""A cross-encoder scorer: a sentence-transformers ``CrossEncoder`` reads each (query, text)
pair together. Registered in ``SCORERS`` as ``cross_encoder``; none ships with promptslim."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, ClassVar

from ..errors import BackendError, ConfigError
from .scorer_base import Scored, Scorer

__all__ = ["CrossEncoderScorer"]


class CrossEncoderScorer(Scorer):
    """A sentence-transformers ``CrossEncoder`` (local path or cached name) scoring each
    (query, text) pair: slower than dense, usually more accurate. None ships with promptslim."""

    name: ClassVar[str] = "cross_encoder"
    _lock = threading.Lock()  # fast tokenizers are not re-entrant

    def __init__(
        self, *, model: str | None = None, batch_size: int = 32, device: str | None = None
    ) -> None:
        if not model:
            raise ConfigError("the cross-encoder scorer needs a model path or name", field="model")
        if batch_size < 1:
            raise ConfigError("must be at least 1", field="batch_size")
        self.model = model
        self.batch_size = batch_size
        self.device = device

    def score(
        self,
        query: str,
        texts: Sequence[str],
        *,
        embeddings: Sequence[Any] | None = None,
        query_embedding: Sequence[float] | None = None,
    ) -> Scored:
        import numpy as np

        from .embedding_parts import model_text
        from .models import load_cross_encoder

        encoder = load_cross_encoder(str(self.model), device=self.device)
        if not texts:
            return Scored(scores=np.zeros(0, dtype=np.float64))
        with self._lock:
            try:
                pairs = [(model_text(query), model_text(t)) for t in texts]
                out = encoder.predict(pairs, batch_size=self.batch_size, show_progress_bar=False)
            except (RuntimeError, ValueError) as exc:
                raise BackendError(f"scoring failed: {exc}", backend="cross_encoder") from exc
        scores = np.asarray(out, dtype=np.float64)
        return Scored(scores=scores.reshape(len(texts), -1)[:, -1])
