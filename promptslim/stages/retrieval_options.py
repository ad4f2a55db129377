"""The retrieval stage's options as one pydantic model: what ``RetrievalStage(...)`` validates
its keyword arguments with, so a bad value is a ``ConfigError`` naming its key path, the same
way from a constructor call as from a config file or the bench shorthand."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..backends.scorer_base import DENSE_MIN_SPREAD
from ..backends.scorers import DEFAULT_MAX_SEQ_LENGTH, Scorer
from ..errors import ConfigError
from .options import parse_options

__all__ = [
    "DEFAULT_COSINE_THRESHOLD",
    "DEFAULT_MAX_WINDOWS",
    "DEFAULT_SHINGLE_THRESHOLD",
    "DEFAULT_WINDOW_CHARS",
    "Cutoff",
    "Dedup",
    "OnOverflow",
    "Order",
    "RetrievalOptions",
    "StoreWindows",
]

Cutoff = Literal["gap", "fraction", "none"]
Order = Literal["score", "original", "edges"]
Dedup = Literal["auto", "embedding", "shingle", "none"]
OnOverflow = Literal["keep_best", "drop", "raise"]
StoreWindows = Literal["embed", "lexical", "static"]

#: characters per scoring window of a long document, and the most windows of one request
#: the model reads. Each is one model input of up to ``max_seq_length`` word pieces (a few ms
#: of int8 MiniLM on one core), so the cap bounds a cold request's cost: 32 windows is about
#: 2,300 tokens of chunks cut at 600 characters, and on the shape suite (200 held-out nq20-dev
#: questions) 32 kept the same evidence as 64 on every shape of that size
DEFAULT_WINDOW_CHARS = 600
DEFAULT_MAX_WINDOWS = 32
#: windows of a request in all, per window the model may read: a larger request keeps its
#: windows at ``window_chars`` and BM25 picks the ``max_windows`` the model reads (windows
#: grown to fit the cap would be read by their heads and kept whole: docs/architecture.md,
#: "A request larger than the model reads"); past this many times as many, the windows grow,
#: so BM25's work is bounded
WINDOWS_PER_MODEL_INPUT = 8
#: default near-duplicate thresholds: cosine of unit embeddings, Jaccard of word 5-shingles
DEFAULT_COSINE_THRESHOLD = 0.95
DEFAULT_SHINGLE_THRESHOLD = 0.8


def _unit(default: float | None) -> Any:
    """A number between 0 and 1, inclusive."""
    return Field(default=default, ge=0.0, le=1.0, strict=True, allow_inf_nan=False)


class RetrievalOptions(BaseModel):
    """Every ``RetrievalStage`` setting, validated (see ``RetrievalStage`` for what each does).

    Numbers are strict (``True`` or ``"1"`` is a mistake to name, not 1)."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    scorer: str | Scorer = "hybrid"
    model: str | None = None
    max_seq_length: int | None = Field(default=DEFAULT_MAX_SEQ_LENGTH, ge=1, strict=True)
    backend: Literal["torch", "onnx", "auto"] = "auto"
    quantize: bool | None = Field(default=None, strict=True)
    fusion: Literal["weighted", "rrf"] = "weighted"
    dense_weight: float = _unit(0.5)
    dense_min_spread: float = Field(default=DENSE_MIN_SPREAD, ge=0.0, le=2.0, strict=True)
    dense_candidates: int | None = Field(default=None, ge=1, strict=True)
    fuzzy: bool = Field(default=True, strict=True)
    max_k: int | None = Field(default=10, ge=1, strict=True)
    min_k: int = Field(default=1, ge=0, strict=True)
    cutoff: Cutoff = "fraction"
    cutoff_fraction: float = _unit(0.5)
    heading_share: float = _unit(0.5)
    dedup: Dedup = "auto"
    dedup_threshold: float | None = Field(
        default=None, gt=0.0, le=1.0, strict=True, allow_inf_nan=False
    )
    mmr_lambda: float | None = _unit(None)
    order: Order = "edges"
    on_overflow: OnOverflow = "keep_best"
    strict: bool = Field(default=False, strict=True)
    time_limit_ms: float | None = Field(default=None, gt=0.0, strict=True)
    window_chars: int | None = Field(default=DEFAULT_WINDOW_CHARS, ge=50, strict=True)
    window_overlap: int = Field(default=1, ge=0, strict=True)
    max_windows: int = Field(default=DEFAULT_MAX_WINDOWS, ge=1, strict=True)
    select_within: bool = Field(default=True, strict=True)
    select_fraction: float | None = _unit(None)
    context_sentences: int = Field(default=1, ge=0, strict=True)
    context_after: int = Field(default=1, ge=0, strict=True)
    neighbour_fraction: float | None = _unit(None)
    fit_parts: bool = Field(default=True, strict=True)
    record_rest: bool = Field(default=True, strict=True)
    store_windows: StoreWindows = "embed"
    dense_windows: int | None = Field(default=None, ge=0, strict=True)
    dense_windows_each: int = Field(default=1, ge=0, strict=True)
    store_float: bool = Field(default=False, strict=True)
    next_pieces: int = Field(default=1, ge=0, strict=True)
    # under 1: a pull of 1 would make an item and its neighbour one score, ranking neither
    item_pull: float = Field(default=0.5, ge=0.0, lt=1.0, strict=True, allow_inf_nan=False)
    piece_keys: tuple[str, str] = ("source", "start_index")
    document_lists: bool = Field(default=True, strict=True)
    whole_asks: bool = Field(default=True, strict=True)
    each_question: bool = Field(default=True, strict=True)
    keep_across_languages: bool = Field(default=True, strict=True)
    inline_context: bool = Field(default=False, strict=True)

    @field_validator("scorer", mode="before")
    @classmethod
    def _known_scorer(cls, value: Any) -> Any:
        from ..backends.scorers import SCORERS

        if isinstance(value, str):
            SCORERS.get(value, field="scorer")  # unknown names fail here, listing known ones
        elif not isinstance(value, Scorer):
            # a ValueError, not a TypeError: pydantic reports only those as the field's error
            raise ValueError("expected a scorer name or a Scorer")  # noqa: TRY004
        return value

    @field_validator("piece_keys")
    @classmethod
    def _named_keys(cls, value: tuple[str, str]) -> tuple[str, str]:
        if not all(value):
            raise ValueError("expected two metadata keys: the source and the start")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> RetrievalOptions:
        if self.max_k is not None and self.min_k > self.max_k:
            raise ConfigError("must not exceed max_k", field="min_k")
        if self.scorer == "cross_encoder" and not self.model:
            raise ConfigError("scorer='cross_encoder' needs a model path or name", field="model")
        return self

    @classmethod
    def parse(cls, **options: Any) -> RetrievalOptions:
        """The options, or ``ConfigError`` naming the first bad key."""
        return parse_options(cls, options)
