"""Bounds on what one request may bring, checked before any stage runs.

Every stage's work grows with its input, so a request is bounded at the door, by construction:
its messages, its documents, the characters of all its text, how deeply its JSON nests, and the
size of its numbers. A request over a bound gets ``InvalidRequest`` naming the field, never a
minute of CPU, gigabytes of memory or a ``RecursionError`` from a stage further in. The
defaults sit far above any real prompt (two million tokens of text is past every model's
context window) and far below what takes a stage seconds; pass your own ``RequestLimits`` to
``Request.from_openai(body, limits=...)`` or check a body with ``check_body``.

The check walks the body once, iteratively (no recursion however deep the input), and also
refuses what JSON cannot carry back out: NaN and infinite floats, integers too long for Python
to print, and a text content part without its text.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .errors import InvalidRequest

__all__ = ["DEFAULT_LIMITS", "RequestLimits", "check_body"]

#: Python refuses to print an integer of more than 4,300 digits (``sys.int_info``), which is
#: about 14,284 bits: such a number could be read but never written back
_MAX_INT_BITS = 14_000
_CONTENT_PART = re.compile(r"messages\[\d+\]\.content\[\d+\]")


class RequestLimits(BaseModel):
    """The bounds ``check_body`` holds a request body to."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_messages: int = Field(default=10_000, ge=1, strict=True)
    max_documents: int = Field(default=5_000, ge=0, strict=True)
    #: characters of every string in the body together (text, arguments, schemas, metadata)
    max_chars: int = Field(default=8_000_000, ge=1, strict=True)
    #: nesting of objects and arrays, the body itself being depth 1
    max_depth: int = Field(default=64, ge=2, strict=True)


DEFAULT_LIMITS = RequestLimits()


def check_body(body: Mapping[str, Any], limits: RequestLimits = DEFAULT_LIMITS) -> None:
    """Raise ``InvalidRequest`` naming the first field that breaks a bound."""
    for key, bound in (("messages", limits.max_messages), ("documents", limits.max_documents)):
        items = body.get(key)
        if isinstance(items, list) and len(items) > bound:
            raise InvalidRequest(
                f"{len(items)} items; at most {bound} are accepted (RequestLimits.max_{key})",
                field=key,
            )
    chars = 0
    stack: list[tuple[str, Any, int]] = [("", body, 1)]
    while stack:
        path, value, depth = stack.pop()
        if isinstance(value, str):
            chars += len(value)
            if chars > limits.max_chars:
                raise InvalidRequest(
                    f"the body's text is over {limits.max_chars} characters "
                    "(RequestLimits.max_chars)",
                    field=path or "body",
                )
        elif isinstance(value, (dict, list)):
            _check_container(path, value, depth, limits, stack)
        elif isinstance(value, float) and not math.isfinite(value):
            raise InvalidRequest("NaN and infinity are not JSON numbers", field=path)
        elif isinstance(value, int) and value.bit_length() > _MAX_INT_BITS:
            raise InvalidRequest("integer too long to be written back as JSON", field=path)


def _check_container(
    path: str,
    value: dict[Any, Any] | list[Any],
    depth: int,
    limits: RequestLimits,
    stack: list[tuple[str, Any, int]],
) -> None:
    if depth > limits.max_depth:
        raise InvalidRequest(
            f"nested more than {limits.max_depth} levels deep (RequestLimits.max_depth)",
            field=path or "body",
        )
    if isinstance(value, list):
        stack.extend((f"{path}[{i}]", item, depth + 1) for i, item in enumerate(value))
        return
    if value.get("type") == "text" and "text" not in value and _CONTENT_PART.fullmatch(path):
        raise InvalidRequest("a text content part needs its text", field=f"{path}.text")
    for key, item in value.items():
        name = key if isinstance(key, str) else repr(key)
        stack.append((f"{path}.{name}" if path else name, item, depth + 1))
