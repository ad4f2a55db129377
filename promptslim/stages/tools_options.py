"""The tools stage's options as one pydantic model: what ``ToolsStage(...)`` validates its
keyword arguments with, so a bad value is a ``ConfigError`` naming its key, the same way from
a constructor call as from a config file or the bench shorthand. Compressor names and their
options are checked by the stage when it builds the compressors (``compressors[i]``,
``options.NAME``); the store spec by ``tool_store_from_spec``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator

from .options import parse_options

__all__ = ["DEFAULT_TOOL_COMPRESSORS", "ToolsOptions"]

#: the tool-result compressors used by default, in the order the router tries them
DEFAULT_TOOL_COMPRESSORS: tuple[str, ...] = ("json", "log", "code", "text")


class ToolsOptions(BaseModel):
    """Every ``ToolsStage`` setting, validated (see ``ToolsStage`` for what each does)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_chars: int = Field(default=1500, ge=0, strict=True)
    compressors: tuple[str, ...] = DEFAULT_TOOL_COMPRESSORS
    options: dict[str, dict[str, Any]] | None = None
    store: Any = "memory"
    namespace: str = Field(default="default", min_length=1, strict=True)
    expand_tool: bool = Field(default=False, strict=True)
    memo_chars: int = Field(default=32_000_000, ge=1, strict=True)
    documents: StrictBool | dict[str, Any] = True

    @field_validator("compressors", mode="before")
    @classmethod
    def _a_list(cls, value: Any) -> Any:
        if isinstance(value, str) or not isinstance(value, (list, tuple)):
            # a ValueError, not a TypeError: pydantic reports only those as the field's error
            raise ValueError(f"expected a list of compressor names, got {value!r}")  # noqa: TRY004
        return value

    @classmethod
    def parse(cls, **options: Any) -> ToolsOptions:
        """The options, or ``ConfigError`` naming the first bad key."""
        return parse_options(cls, options)
