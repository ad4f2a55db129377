"""Canonical forms for the stable prefix: text with normalised line endings and whitespace,
JSON blocks re-serialised canonically (equal as data, byte-stable), tool schemas in a
canonical key and tool order; and how many prefix tokens each provider's cache can reuse."""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from ..text import find_protected_spans

__all__ = ["cacheable_by_model", "canonicalise_json", "canonicalise_text", "canonicalise_tools"]


_LINE_ENDINGS = re.compile(r"\r\n?")
_TRAILING_CHARS = " \t\f\v\u00a0"
_HAS_TRAILING_WS = re.compile(r"[ \t\f\v\u00a0](?:\n|\Z)")
_BLANK_RUNS = re.compile(r"\n{3,}")


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ValueError("duplicate keys")  # re-serialising would drop one: leave the block as is
    return out


def canonicalise_json(value: Any) -> str:
    """JSON with sorted keys, ``,``/``:`` separators and UTF-8 characters kept."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _load_exact(raw: str) -> Any:
    """``json.loads`` for re-serialising: ValueError when writing the value back would change
    it (duplicate keys, a number a float cannot hold, ``-0``) or it nests too deep to read."""
    try:
        return json.loads(
            raw,
            object_pairs_hook=_reject_duplicates,
            parse_float=_exact_float,
            parse_int=_exact_int,
        )
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _exact_int(literal: str) -> int:
    if literal == "-0":  # read as 0, written back as 0: a different number in JavaScript
        raise ValueError("-0")
    return int(literal)


def _exact_float(literal: str) -> float:
    """A JSON number as a float, only when the float is that number exactly (``1.50``, ``1e5``):
    re-serialising ``1E400`` (infinity) or ``0.10000000000000000555`` (0.1) would change it,
    so the block is left as written."""
    value = float(literal)
    if not math.isfinite(value) or Decimal(repr(value)) != Decimal(literal):
        raise ValueError(f"{literal} is not exactly a float")
    return value


def _canonical_json_blocks(text: str) -> str:
    if "{" not in text:
        return text
    out: list[str] = []
    pos = 0
    for span in find_protected_spans(text, kinds=()):  # kinds=(): JSON spans only
        raw = span.of(text)
        if not raw.lstrip("[").startswith("{"):
            continue  # "[1, 2]" in prose is a citation more often than data: leave it
        try:
            value = _load_exact(raw)
            new = canonicalise_json(value)
            if json.loads(new) != value:  # e.g. NaN: not equal to itself, keep the original
                continue
        except ValueError:
            continue
        if not unicodedata.is_normalized("NFC", new):
            # a character NFC would change (written as an escape in the prompt): kept escaped,
            # or the next canonicalisation would normalise it and change the data
            new = json.dumps(value, sort_keys=True, separators=(",", ":"))
        out.append(text[pos : span.start])
        out.append(new)
        pos = span.end
    out.append(text[pos:])
    return "".join(out)


def canonicalise_text(text: str) -> str:
    """NFC, ``\\n`` line endings, no trailing whitespace, no runs of blank lines, no leading or
    trailing blank lines, JSON objects re-serialised canonically. Idempotent; keeps every word."""
    # each step is skipped when a cheap check shows it has nothing to do (re.sub over a long
    # prompt costs ~1 ms on its own)
    if not unicodedata.is_normalized("NFC", text):
        text = unicodedata.normalize("NFC", text)
    if "\r" in text:
        text = _LINE_ENDINGS.sub("\n", text)
    text = _canonical_json_blocks(text)
    if _HAS_TRAILING_WS.search(text) is not None:
        text = "\n".join([line.rstrip(_TRAILING_CHARS) for line in text.split("\n")])
    if "\n\n\n" in text:
        text = _BLANK_RUNS.sub("\n\n", text)
    return text.strip("\n")


def _sorted_value(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted_value(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted_value(v) for v in value]
    return value


def canonicalise_tools(
    tools: Sequence[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[str]]:
    """Tools with keys sorted at every level, in a stable order (type, then function name).

    A tool that cannot be serialised, or whose ``parameters`` is a string that is not JSON, is
    kept exactly as it is and named in the returned warnings."""
    out: list[dict[str, Any]] = []
    warnings: list[str] = []
    for i, tool in enumerate(tools):
        try:
            canonicalise_json(tool)  # raises on values JSON cannot hold
            params = tool.get("function", {}).get("parameters")
            if isinstance(params, str):
                parsed = _load_exact(params)
                tool = {
                    **tool,
                    "function": {**tool["function"], "parameters": canonicalise_json(parsed)},
                }
            out.append(_sorted_value(tool))
        except (TypeError, ValueError, AttributeError):
            warnings.append(f"tools[{i}]: not a valid JSON schema; left as is")
            out.append(tool)
    out.sort(key=_tool_order)
    return out, warnings


def _tool_order(tool: dict[str, Any]) -> tuple[str, str]:
    function = tool.get("function")
    name = function.get("name") if isinstance(function, dict) else tool.get("name")
    return (str(tool.get("type", "")), str(name or ""))


# ---------------------------------------------------------------- cache-model counts


def cacheable_by_model(tokens: int, *, block_size: int = 16) -> dict[str, int]:
    """Leading tokens of a stable prefix of ``tokens`` tokens each cache model would reuse:
    vLLM whole blocks, SGLang every token, OpenAI 1,024 + 128-token steps (0 below 1,024),
    Anthropic all of it with a breakpoint at its end (0 below 1,024)."""
    openai = 1024 + (tokens - 1024) // 128 * 128 if tokens >= 1024 else 0
    return {
        "vllm": tokens // block_size * block_size,
        "sglang": tokens,
        "openai": openai,
        "anthropic": tokens if tokens >= 1024 else 0,
    }
