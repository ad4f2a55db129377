"""The prefix stage's options as one pydantic model: what ``PrefixStage(...)`` validates its
keyword arguments with, so a bad value is a ``ConfigError`` naming its key path, the same way
from a constructor call as from a config file."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..text import PATTERNS
from .options import parse_options

__all__ = ["CACHE_HINTS", "DEFAULT_VOLATILE_KINDS", "Placement", "Policy", "PrefixOptions"]

Policy = Literal["move", "flag"]
Placement = Literal["message", "first_user"]
#: the providers whose cache markers ``cache_hints`` can add
CACHE_HINTS = ("anthropic", "openai")

#: PATTERNS kinds treated as volatile by default
DEFAULT_VOLATILE_KINDS: tuple[str, ...] = (
    "iso_datetime",
    "date",
    "time",
    "time_ampm",
    "zh_date",  # 2026年11月30日, 11月30日
    "zh_time",  # 下午3点, 15点30分
    "zh_weekday",  # 星期一, 周一 (zh_relative_day, 今天..., is opt-in: the word itself is stable)
    "unix_timestamp",
    "uuid",
    "jwt",
    "api_key",
    "hex_id",
    "email",
)


class PrefixOptions(BaseModel):
    """Every ``PrefixStage`` setting, validated (see ``PrefixStage`` for what each does).

    Lists are given as lists or tuples of strings (a bare string is refused: it would be taken
    character by character) and kept as tuples; numbers are strict (``True`` or ``"1"`` is a
    mistake to name, not 1)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    policy: Policy = "move"
    placement: Placement = "message"
    volatile_kinds: tuple[str, ...] = DEFAULT_VOLATILE_KINDS
    variables: tuple[str, ...] = ()
    templates: tuple[str, ...] = ()
    canonicalise: bool = True
    sort_tools: bool = True
    tenant_salt: str | None = None
    align_to_block: bool = False
    block_size: int = Field(default=16, ge=1, strict=True)
    cache_hints: tuple[str, ...] = ()
    cache_size: int = Field(default=1024, ge=0, strict=True)
    min_gain: float = Field(default=0.0, ge=0.0, strict=True, allow_inf_nan=False)

    @field_validator("volatile_kinds", "variables", "templates", "cache_hints", mode="before")
    @classmethod
    def _a_list(cls, value: Any) -> Any:
        if isinstance(value, str) or not isinstance(value, (list, tuple)):
            # a ValueError, not a TypeError: pydantic reports only those as the field's error
            raise ValueError(f"expected a list of strings, got {value!r}")  # noqa: TRY004
        return value

    @field_validator("volatile_kinds")
    @classmethod
    def _known_kinds(cls, kinds: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [k for k in kinds if k not in PATTERNS]
        if unknown:
            raise ValueError(
                f"unknown pattern {unknown[0]!r}; known: {', '.join(sorted(PATTERNS))}"
            )
        return kinds

    @field_validator("variables")
    @classmethod
    def _non_empty(cls, variables: tuple[str, ...]) -> tuple[str, ...]:
        if any(not v for v in variables):
            raise ValueError("expected non-empty strings")
        return variables

    @field_validator("cache_hints")
    @classmethod
    def _known_hints(cls, hints: tuple[str, ...]) -> tuple[str, ...]:
        bad = [h for h in hints if h not in CACHE_HINTS]
        if bad:
            raise ValueError(f"unknown hint {bad[0]!r}; known: {', '.join(CACHE_HINTS)}")
        return hints

    @classmethod
    def parse(cls, **options: Any) -> PrefixOptions:
        """The options, or ``ConfigError`` naming the first bad key's path."""
        return parse_options(cls, options)
