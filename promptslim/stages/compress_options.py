"""The compress stage's options as one pydantic model: what ``CompressStage(...)`` validates
its keyword arguments with, so a bad value is a ``ConfigError`` naming its key, the same way
from a constructor call as from a config file or the bench shorthand (``compress@0.5``)."""

from __future__ import annotations

import inspect
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..backends.compress import COMPRESSORS
from ..errors import ConfigError
from .options import parse_options

__all__ = ["CompressOptions"]


class CompressOptions(BaseModel):
    """Every ``CompressStage`` setting, validated (see ``CompressStage`` for what each does).

    ``options`` are the compressor's own keyword arguments: their names are checked here (an
    unknown one is ``options.NAME``), their values by the compressor when it is built."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    compressor: str = "extractive"
    options: dict[str, Any] | None = None
    rate: float | None = Field(default=None, gt=0.0, le=1.0, strict=True, allow_inf_nan=False)
    target_tokens: int | None = Field(default=None, ge=0, strict=True)
    compress_history: bool = Field(default=False, strict=True)
    strict: bool = Field(default=False, strict=True)
    time_limit_ms: float | None = Field(default=None, gt=0.0, strict=True)
    crush_json: bool = Field(default=True, strict=True)

    @field_validator("compressor", mode="before")
    @classmethod
    def _known_compressor(cls, value: Any) -> Any:
        if not isinstance(value, str) or value not in COMPRESSORS:
            raise ConfigError(
                f"unknown compressor {value!r}; known: {', '.join(COMPRESSORS.names())}",
                field="compressor",
            )
        return value

    @model_validator(mode="after")
    def _known_options(self) -> CompressOptions:
        """Option names the compressor does not take are an error now, not on the first
        request that needs compressing (the compressor, and its model, are built only then)."""
        if not self.options:
            return self
        params = inspect.signature(COMPRESSORS.get(self.compressor, field="compressor")).parameters
        if any(p.kind is p.VAR_KEYWORD for p in params.values()):
            return self
        for key in self.options:
            if key not in params:
                known = ", ".join(p for p in params if p != "self") or "none"
                raise ConfigError(f"unknown option; known: {known}", field=f"options.{key}")
        return self

    @classmethod
    def parse(cls, **options: Any) -> CompressOptions:
        """The options, or ``ConfigError`` naming the first bad key."""
        return parse_options(cls, options)
