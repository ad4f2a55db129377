"""Which compressor a tool result goes to, by its content (and the path its call named).

JSON when it parses as JSON (tried by the JSON compressor itself: bad or truncated JSON comes
back as None and goes on as text); code when the call named a source file or most lines look
like code; a log when it has many short lines, or lines that repeat once numbers are masked;
plain text otherwise. A compressor that declines (None) hands the result to the next
candidate, ending with ``text``.
"""

from __future__ import annotations

from collections.abc import Mapping

from . import Compressed, ToolCompressor, ToolContext
from .code import looks_like_code

__all__ = ["candidates", "route"]


def _looks_like_log(text: str) -> bool:
    lines = text.count("\n") + 1
    if lines < 12:
        return False
    # sentences run long and end with punctuation; log lines are short and rarely do
    return len(text) / lines < 160 and text.count(". ") < lines / 2


def candidates(text: str, context: ToolContext) -> tuple[str, ...]:
    """The compressor names to try, in order."""
    head = text.lstrip()[:1]
    order: list[str] = []
    if head in ("{", "["):
        order.append("json")
    if looks_like_code(text, context.path):
        order.append("code")
    elif _looks_like_log(text):
        order.append("log")
    order.append("text")
    return tuple(order)


def route(
    text: str, context: ToolContext, compressors: Mapping[str, ToolCompressor]
) -> Compressed | None:
    """The first candidate's result that shrinks the text (None: send it unchanged)."""
    for name in candidates(text, context):
        compressor = compressors.get(name)
        if compressor is None:
            continue
        out = compressor.compress(text, context)
        if out is not None:
            return out
        if name == "json" and _is_json(text):
            return None  # valid JSON with nothing to crush stays as it is, not text-compressed
    return None


def _is_json(text: str) -> bool:
    import json

    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True
