"""The history stage's options as one pydantic model: what ``HistoryStage(...)`` validates its
keyword arguments with, so a bad value is a ``ConfigError`` naming its key, the same way from
a constructor call as from a config file or the bench shorthand. The summariser itself is
built (and its own options checked) by ``history_summary.build_summariser``."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..backends.summarisers import SummaryCache
from .options import parse_options

__all__ = ["MIN_SUMMARY_TOKENS", "STRATEGIES", "HistoryOptions", "Strategy"]

STRATEGIES: tuple[str, ...] = ("cache_aware", "last", "summarize")
Strategy = Literal["cache_aware", "last", "summarize"]
#: the smallest summary worth writing
MIN_SUMMARY_TOKENS = 16


class HistoryOptions(BaseModel):
    """Every ``HistoryStage`` setting, validated (see ``HistoryStage`` for what each does).

    Numbers and flags are strict (``"no"`` is not false, ``True`` is not 1)."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    strategy: Strategy = "cache_aware"
    summariser: Any = "extractive"
    summariser_options: dict[str, Any] | None = None
    summary_tokens: int = Field(default=256, ge=MIN_SUMMARY_TOKENS, strict=True)
    fold_fraction: float = Field(default=0.5, gt=0.0, lt=1.0, strict=True, allow_inf_nan=False)
    fold_tokens: int | None = Field(default=None, ge=1, strict=True)
    pin_first_user: bool = Field(default=False, strict=True)
    start_on: Literal["user", "any"] = "user"
    summary_role: Literal["system", "user", "assistant"] = "system"
    summary_cache: Any = None
    strict: bool = Field(default=False, strict=True)
    time_limit_ms: float | None = Field(default=None, gt=0.0, strict=True)

    @field_validator("summary_cache")
    @classmethod
    def _a_cache(cls, value: Any) -> Any:
        # a str is a config's name for one ("memory", "sqlite:PATH"), opened by the stage
        if value is None or isinstance(value, (str, SummaryCache)):
            return value
        raise ValueError("must have get(key) and set(key, value)")

    @classmethod
    def parse(cls, **options: Any) -> HistoryOptions:
        """The options, or ``ConfigError`` naming the first bad key."""
        return parse_options(cls, options)
