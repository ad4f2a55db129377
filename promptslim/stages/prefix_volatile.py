"""What in a prefix text is volatile: the PATTERNS kinds chosen, the caller's variables and
templates; and a text analysed once into its stable segments around those spans."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import ConfigError
from ..text import PATTERNS, Span, merge_spans

__all__ = ["Analysed", "VolatileFinder"]


@dataclass(frozen=True)
class Analysed:
    """One prefix text, canonicalised and cut at its volatile spans (memoised per text)."""

    canonical: str
    segments: tuple[str, ...]  # stable text around the spans: len(spans) + 1 pieces
    spans: tuple[Span, ...]  # positions in ``canonical``


class VolatileFinder:
    """Finds the volatile spans of prefix texts for one configuration."""

    def __init__(
        self, volatile_kinds: Sequence[str], variables: Sequence[str], templates: Sequence[str]
    ) -> None:
        self._template_res = [_compile_template(t) for t in templates]
        self._patterns = [(k, PATTERNS[k]) for k in volatile_kinds]
        # longest first, so "Ann Lee" wins over "Ann"
        self._variables_re = (
            re.compile(
                "|".join(re.escape(v) for v in sorted(set(variables), key=len, reverse=True))
            )
            if variables
            else None
        )

    def spans(self, text: str) -> list[Span]:
        """The volatile spans of ``text``, merged and sorted."""
        spans: list[Span] = []
        # a pattern only runs on the lines that hold one of its trigger strings: a pattern
        # anchored on \\b tries every position, ~1-4 ms each over a 4,000-token prompt
        windows: dict[tuple[str, ...], list[tuple[int, int]]] = {}
        for kind, rx in self._patterns:
            needles = _TRIGGERS.get(kind)
            if needles is None:
                ranges = [(0, len(text))]
            else:
                ranges = windows.get(needles) or windows.setdefault(
                    needles, _lines_with(text, needles)
                )
            for start, end in ranges:
                spans.extend(Span(m.start(), m.end(), kind) for m in rx.finditer(text, start, end))
        if self._variables_re is not None:
            spans.extend(
                Span(m.start(), m.end(), "variable") for m in self._variables_re.finditer(text)
            )
        for rx in self._template_res:
            for m in rx.finditer(text):
                spans.extend(
                    Span(m.start(g), m.end(g), "variable")
                    for g in range(1, (rx.groups or 0) + 1)
                    if m.end(g) > m.start(g)
                )
        return merge_spans(spans)


_DIGITS = tuple("0123456789")
#: strings one of which is on every line a pattern can match (patterns not listed run everywhere)
_TRIGGERS: dict[str, tuple[str, ...]] = {
    "iso_datetime": _DIGITS,
    "date": (*_DIGITS, "day"),
    "time": _DIGITS,
    "time_ampm": _DIGITS,
    "unix_timestamp": _DIGITS,
    "uuid": _DIGITS,
    "hex_id": _DIGITS,
    "code_id": _DIGITS,
    "email": ("@",),
    "jwt": ("eyJ",),
    "api_key": ("sk-", "sk_", "pk-", "pk_", "rk-", "rk_", "ghp_", "gho_", "xox", "AKIA"),
}


def _lines_with(text: str, needles: tuple[str, ...]) -> list[tuple[int, int]]:
    """``(start, end)`` of each line holding one of ``needles`` (str.find: no regex)."""
    lines: set[tuple[int, int]] = set()
    for needle in needles:
        pos = text.find(needle)
        while pos != -1:
            start = text.rfind("\n", 0, pos) + 1
            end = text.find("\n", pos)
            end = len(text) if end == -1 else end
            lines.add((start, end))
            pos = text.find(needle, end)
    return sorted(lines)


def _compile_template(template: str) -> re.Pattern[str]:
    """``"The user's name is {name}."`` matches the literal text, each ``{...}`` a value."""
    if not isinstance(template, str) or not re.search(r"\{[^{}]*\}", template):
        raise ConfigError("a template needs a {placeholder}", field="templates")
    parts = re.split(r"\{[^{}]*\}", template)
    pattern = ""
    for k, literal in enumerate(parts):
        pattern += re.escape(literal)
        if k < len(parts) - 1:
            # up to the next literal on the same line; to the line's end when nothing follows
            pattern += r"([^\n]+?)" if parts[k + 1] else r"([^\n]+)"
    return re.compile(pattern)
