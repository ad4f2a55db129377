"""What a tool result should keep because the turn asked for it: literals (ids, names,
numbers from the query and the tool-call arguments) and query words, found in one regex pass
over the whole text (a per-line analyser costs tens of milliseconds on a 10k-token log; one
pass over the text costs well under one).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from functools import lru_cache

from ...text import find_protected_spans
from . import ToolContext

__all__ = ["Matcher", "line_starts", "matcher_for"]

# the words a question is made of that say nothing about which item it wants
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "in",
        "on",
        "at",
        "to",
        "for",
        "from",
        "by",
        "with",
        "and",
        "or",
        "not",
        "no",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "do",
        "does",
        "did",
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "when",
        "where",
        "why",
        "how",
        "that",
        "this",
        "these",
        "those",
        "it",
        "its",
        "as",
        "if",
        "than",
        "then",
        "there",
        "their",
        "them",
        "they",
        "he",
        "she",
        "his",
        "her",
        "we",
        "our",
        "you",
        "your",
        "i",
        "me",
        "my",
        "any",
        "all",
        "each",
        "some",
        "get",
        "got",
        "give",
        "find",
        "show",
        "list",
        "tell",
        "please",
        "can",
        "could",
        "would",
        "should",
        "will",
        "shall",
        "may",
        "might",
        "must",
        "value",
        "values",
        "number",
        "numbers",
        "name",
        "names",
        "one",
        "two",
        "first",
        "last",
        "latest",
        "new",
        "old",
        "about",
        "into",
        "out",
        "over",
        "under",
        "up",
        "down",
        "again",
        "more",
        "most",
        "other",
        "such",
        "only",
        "own",
        "same",
        "so",
        "too",
        "very",
        "just",
        "also",
        "use",
        "used",
        "using",
        "result",
        "results",
        "tool",
        "call",
        "calls",
        "output",
        "file",
        "files",
        "line",
        "lines",
        "item",
        "items",
    ]
)
# a word worth matching literally: has a digit, an inner capital, _ . / - or : inside it
_IDENTIFIER = re.compile(r"[A-Za-z0-9_][\w./:-]*[\w]", re.ASCII)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]{2,}", re.ASCII)
_IDENT_LIKE = re.compile(r"\d|[a-z][A-Z]|[_./:-]", re.ASCII)
# literals shorter than this match too much by accident (``1`` is in every number)
_MIN_LITERAL = 3
_MAX_LITERALS = 64


def _literals(context: ToolContext) -> tuple[str, ...]:
    found: list[str] = [h for h in context.hints if len(h) >= _MIN_LITERAL]
    found += [p for p in context.protect if p]
    query = context.query
    for span in find_protected_spans(query):
        value = span.of(query).strip("\"'“”「」`")
        if len(value) >= _MIN_LITERAL or value.isdigit():
            found.append(value)
    found += [w for w in _IDENTIFIER.findall(query) if _IDENT_LIKE.search(w)]
    # longest first so the alternation prefers the whole literal; dedupe keeping order
    unique = sorted(dict.fromkeys(f for f in found if f.strip()), key=lambda s: (-len(s), s))
    return tuple(unique[:_MAX_LITERALS])


def _words(query: str) -> tuple[str, ...]:
    words = {w.lower() for w in _WORD.findall(query)} - _STOPWORDS
    return tuple(sorted(words))


class Matcher:
    """Finds a turn's literals and query words in text. ``literal_hits(text)`` counts literal
    occurrences; ``lines_hit(text, starts)`` gives, per line, how many distinct literals and
    words it holds (literals weigh 2: an id named by the call is stronger than a word)."""

    def __init__(self, literals: Sequence[str], words: Sequence[str]) -> None:
        self.literals = tuple(literals)
        self.words = tuple(words)
        self._literal_re = _alternation(self.literals, word_bounded=False)
        self._word_re = _alternation(self.words, word_bounded=True)

    @property
    def empty(self) -> bool:
        return self._literal_re is None and self._word_re is None

    def literal_hits(self, text: str) -> int:
        if self._literal_re is None:
            return 0
        return sum(1 for _ in self._literal_re.finditer(text))

    def literals_in(self, text: str) -> set[str]:
        """The distinct literals found in ``text``."""
        if self._literal_re is None:
            return set()
        return {m.group(0) for m in self._literal_re.finditer(text)}

    def word_hits(self, text: str) -> int:
        """Distinct query words in ``text``."""
        if self._word_re is None:
            return 0
        return len({m.group(0).lower() for m in self._word_re.finditer(text)})

    def lines_hit(self, text: str, starts: Sequence[int]) -> dict[int, float]:
        """Line index -> relevance (2 per distinct literal, 1 per distinct query word)."""
        seen: dict[int, set[str]] = {}
        for pattern, weight in ((self._literal_re, "L"), (self._word_re, "W")):
            if pattern is None:
                continue
            for m in pattern.finditer(text):
                line = bisect_right(starts, m.start()) - 1
                seen.setdefault(line, set()).add(weight + m.group(0).lower())
        return {line: sum(2.0 if k[0] == "L" else 1.0 for k in keys) for line, keys in seen.items()}


def _alternation(needles: Sequence[str], *, word_bounded: bool) -> re.Pattern[str] | None:
    if not needles:
        return None
    body = "|".join(map(re.escape, needles))
    if word_bounded:
        return re.compile(rf"(?<![A-Za-z0-9_])(?:{body})(?![A-Za-z0-9_])", re.IGNORECASE)
    # a literal must not be the middle of a longer number or word (``123`` in ``41234``)
    return re.compile(rf"(?<![A-Za-z0-9])(?:{body})(?![A-Za-z0-9])")


@lru_cache(maxsize=256)
def _cached(context: ToolContext) -> Matcher:
    return Matcher(_literals(context), _words(context.query))


def matcher_for(context: ToolContext) -> Matcher:
    """The context's Matcher (memoised: a turn's results share one query)."""
    return _cached(context)


def line_starts(text: str) -> list[int]:
    """The offset where each line of ``text`` starts."""
    starts = [0]
    find = text.find
    i = find("\n")
    while i != -1:
        starts.append(i + 1)
        i = find("\n", i + 1)
    return starts
