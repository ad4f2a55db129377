"""pydantic's ``ValidationError`` as promptslim's typed errors, naming the field's path."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError

from .errors import InvalidRequest

__all__ = ["field_path", "invalid_from_validation"]


def field_path(loc: Sequence[str | int], root: str = "") -> str:
    """A pydantic location as a path: ``("messages", 3, "role")`` -> ``messages[3].role``."""
    path = root
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


def invalid_from_validation(exc: ValidationError, *, root: str = "") -> InvalidRequest:
    """The first error of a pydantic ``ValidationError`` as an ``InvalidRequest`` naming the field."""
    err = exc.errors()[0]
    # pydantic puts the union member tried ("str", "list[ContentPart]") in loc; drop those.
    loc = [p for p in err["loc"] if isinstance(p, int) or not _is_type_tag(p)]
    msg = err["msg"]
    inner = err.get("ctx", {}).get("error")
    if isinstance(inner, InvalidRequest):  # ours, raised inside validation (a nested Budget)
        msg = inner.reason
        loc += [inner.field] if inner.field else []
    more = len(exc.errors()) - 1
    msg += f" (and {more} more error{'s' if more > 1 else ''})" if more else ""
    return InvalidRequest(msg, field=field_path(loc, root) or root or None)


def _is_type_tag(part: str) -> bool:
    return part in {"str", "int", "float", "bool", "none"} or "[" in part or part[:1].isupper()
