"""What every stage's options model shares: one way from pydantic's ``ValidationError`` to a
``ConfigError`` naming the bad key, so a constructor call, ``Pipeline.from_config`` and the
bench shorthand report a mistake the same way (the pipeline prefixes ``stages[i].``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ..errors import ConfigError
from ..validation import invalid_from_validation

__all__ = ["parse_options"]

_Model = TypeVar("_Model", bound=BaseModel)


def parse_options(model: type[_Model], options: Mapping[str, Any]) -> _Model:
    """``options`` validated by ``model``, or ``ConfigError`` naming the first bad key.

    A ``ConfigError`` raised by one of the model's own validators (an unknown registry name,
    two options that disagree) comes out as it was raised, type and field included."""
    try:
        return model.model_validate(options)
    except ValidationError as exc:
        inner = exc.errors()[0].get("ctx", {}).get("error")
        if isinstance(inner, ConfigError):
            raise inner from exc
        err = invalid_from_validation(exc)
        first = exc.errors()[0]
        reason = err.reason
        if first["type"] != "missing" and first["loc"]:  # say what was given, as a file has it
            reason += f", got {_short(first['input'])}"
        raise ConfigError(reason, field=err.field) from exc


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
