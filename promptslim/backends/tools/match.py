"""What a tool result should keep because the turn asked for it: literals (ids, names,
numbers from the query and the tool-call arguments) and query words, found in one regex pass
over the whole text (a per-line analyser costs tens of milliseconds on a 10k-token log; one
pass over the text costs well under one).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from functools import lru_cache
from itertools import accumulate

from ...text import find_protected_spans
from . import ToolContext

__all__ = ["Matcher", "keep_small_gaps", "line_starts", "matcher_for", "rarest_first"]

# the words a question is made of that say nothing about which item it wants
_STOPWORDS = frozenset(
    """a an the of in on at to for from by with and or not no is are was were be been being do
    does did what which who whom whose when where why how that this these those it its as if
    than then there their them they he she his her we our you your i me my any all each some
    get got give find show list tell please can could would should will shall may might must
    value values number numbers name names one two first last latest new old about into out
    over under up down again more most other such only own same so too very just also use used
    using result results tool call calls output file files line lines item items""".split()  # noqa: SIM905
)
# a word worth matching literally: has a digit, an inner capital, _ . / - or : inside it
_IDENTIFIER = re.compile(r"[A-Za-z0-9_][\w./:-]*[\w]", re.ASCII)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]{2,}", re.ASCII)
_IDENT_LIKE = re.compile(r"\d|[a-z][A-Z]|[_./:-]", re.ASCII)
# literals shorter than this match too much by accident (``1`` is in every number)
_MIN_LITERAL = 3
_MAX_LITERALS = 64
# a query word on at most this many lines always counts (the log and code compressors keep
# up to this many word-matched lines)
_WORD_LINES = 8


@lru_cache(maxsize=256)
def _query_literals(query: str) -> tuple[str, ...]:
    found: list[str] = []
    for span in find_protected_spans(query):
        value = span.of(query).strip("\"'“”「」`")
        if len(value) >= _MIN_LITERAL or value.isdigit():
            found.append(value)
    found += [w for w in _IDENTIFIER.findall(query) if _IDENT_LIKE.search(w)]
    return tuple(found)


def _literals(context: ToolContext) -> tuple[str, ...]:
    found = [h for h in context.hints if len(h) >= _MIN_LITERAL]
    found += [p for p in context.protect if p]
    found += _query_literals(context.query)
    unique = dict.fromkeys(f for f in found if f.strip())
    return tuple(sorted(unique, key=lambda s: (-len(s), s))[:_MAX_LITERALS])


@lru_cache(maxsize=256)
def _words(query: str) -> tuple[str, ...]:
    words = {w.lower() for w in _WORD.findall(query)} - _STOPWORDS
    return tuple(sorted(words))


_PART_SEP = "\x1e"
_PLUS_ONE = (1).__add__
_WORDCHAR = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")


def _occurrences(
    needles: Sequence[str], text: str, inner: frozenset[str]
) -> Iterator[tuple[int, str]]:
    """Where each needle occurs in ``text`` with no character of ``inner`` on either side (a
    literal is not the middle of a longer number, ``123`` in ``41234``; a word not the middle
    of a longer word). ``str.find`` per needle: a turn's needles differ per result and per
    query, and compiling a pattern for each cost more (3 ms a query here) than these scans."""
    find, n = text.find, len(text)
    for needle in needles:
        size = len(needle)
        at = find(needle)
        while at != -1:
            end = at + size
            if (at == 0 or text[at - 1] not in inner) and (end == n or text[end] not in inner):
                yield at, needle
            at = find(needle, at + 1)


def _in_segments(
    needles: Sequence[str],
    text: str,
    inner: frozenset[str],
    starts: Sequence[int],
    *,
    within: bool,
) -> Iterator[tuple[int, str]]:
    """(segment, needle) once for each segment of ``text`` (the segments start at ``starts``)
    where the needle occurs as ``_occurrences`` finds it; ``within``: only a match that ends
    before the next segment starts counts. Once a segment holds a needle the scan goes on at
    the next segment: further hits there add nothing, and a word in every URL of an API
    response cost a bisect per hit."""
    find, n, last = text.find, len(text), len(starts) - 1
    for needle in needles:
        size = len(needle)
        at = find(needle)
        while at != -1:
            end = at + size
            if (at == 0 or text[at - 1] not in inner) and (end == n or text[end] not in inner):
                i = bisect_right(starts, at) - 1
                nxt = starts[i + 1] if i < last else n + 1
                if not within or end < nxt:
                    yield i, needle
                    if nxt > n:
                        break
                    at = find(needle, nxt)
                    continue
            at = find(needle, at + 1)


#: a key's words: split at underscores, then where a capital starts a word (``DelaySeconds``)
#: or a run of capitals ends (``HTTPServer``)
_KEY_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")


def _key_words(key: str) -> frozenset[str]:
    """The words of an identifier, lowercased (``initialDelaySeconds``: initial, delay, seconds;
    ``LEDGER_DB_PORT``: ledger, db, port)."""
    return frozenset(w.lower() for piece in key.split("_") for w in _KEY_WORD.findall(piece))


def _identifier_parts(
    words: Sequence[str], text: str, low: str, starts: Sequence[int]
) -> set[tuple[int, str]]:
    """(line, word) for each query word that is a word of an identifier on the line
    (``ledger`` in ``LEDGER_DB_PORT``, ``delay`` in ``initialDelaySeconds``; ``low`` is
    ``text`` lowercased) that holds another query word too, and is on at most ``_WORD_LINES``
    lines: an environment's or a config's key is named by the words of the question that asks
    it, but one shared part (``api`` of ``opentelemetry_api``) is most often chance, and a key
    on many lines is a field every record has (``amount_cents`` in each payload of a log),
    which names none of them."""
    alpha = [w for w in words if w.isalpha()]  # a word with a digit is a literal, matched so
    # such a key has a query word that is not its first: after an underscore or a capital. A
    # scan in C per word finds those; in most texts there are none, and the search ends here
    seeds = [w for w in alpha if "_" + w in low or w.capitalize() in text]
    if not seeds or len(alpha) < 2:
        return set()
    wanted, n = frozenset(alpha), len(text)
    keys: dict[str, set[tuple[int, str]]] = {}
    for word in seeds:
        for hay, pattern, shift in ((low, "_" + word, 1), (text, word.capitalize(), 0)):
            at = hay.find(pattern)
            while at != -1:
                start = stop = at + shift
                while start > 0 and text[start - 1] in _WORDCHAR:
                    start -= 1
                while stop < n and text[stop] in _WORDCHAR:
                    stop += 1
                key = text[start:stop]
                named = wanted.intersection(_key_words(key))
                if len(named) >= 2:
                    line = bisect_right(starts, start) - 1
                    keys.setdefault(key.lower(), set()).update((line, w) for w in named)
                at = hay.find(pattern, stop)
    found: set[tuple[int, str]] = set()
    for hits in keys.values():
        if len({line for line, _ in hits}) <= _WORD_LINES:
            found |= hits
    return found


def _literal_matches(literals: Sequence[str], text: str) -> Iterator[tuple[int, str]]:
    return _occurrences(literals, text, _ALNUM)


def _word_matches(words: Sequence[str], text: str) -> Iterator[tuple[int, str]]:
    """Query words (lowercase) in lowercased ``text``."""
    return _occurrences(words, text, _WORDCHAR)


class _Parts:
    """Parts joined by a separator that is neither a letter nor a digit (so a part's edges
    stay edges for the boundary test), and where each part starts; one join serves the
    literal scan and the word scan. A match that runs past its part's end (a needle holding
    the separator) is not the part's."""

    __slots__ = ("n", "parts", "starts", "text")

    def __init__(
        self, parts: Sequence[str], text: str | None = None, starts: list[int] | None = None
    ) -> None:
        self.parts = parts
        self.n = len(parts)
        self.text = _PART_SEP.join(parts) if text is None else text
        if starts is None:
            # a part ends one before the next starts; the sums run in C (map, accumulate)
            starts = list(accumulate(map(_PLUS_ONE, map(len, parts)), initial=0))
            starts.pop()  # where a part after the last would start
        self.starts = starts

    def lower(self) -> _Parts:
        """The parts lowercased. ``str.lower`` maps each character on its own but for a final
        sigma, which the separator (no letter, not case-ignorable) ends as the end of a part
        does: so the joined text is lowered once, unless a character lowered to two (then
        the offsets would drift, and each part is lowered on its own)."""
        low = self.text.lower()
        if len(low) == len(self.text):
            return _Parts(self.parts, low, self.starts)
        return _Parts([p.lower() for p in self.parts])

    def sets(self, needles: Sequence[str], inner: frozenset[str]) -> list[set[str]]:
        found: list[set[str]] = [set() for _ in range(self.n)]
        if needles and self.n:
            for i, needle in _in_segments(needles, self.text, inner, self.starts, within=True):
                found[i].add(needle)
        return found

    def counts(self, needles: Sequence[str], inner: frozenset[str]) -> list[int]:
        """How many distinct needles each part holds (``_in_segments`` names a needle once
        per part, so a count, with no set per part)."""
        found = [0] * self.n
        if needles and self.n:
            distinct = tuple(dict.fromkeys(needles))  # a needle given twice counts once
            for i, _ in _in_segments(distinct, self.text, inner, self.starts, within=True):
                found[i] += 1
        return found


class Matcher:
    """Finds a turn's literals and query words in text. ``literal_hits(text)`` counts literal
    occurrences; ``lines_hit(text, starts)`` gives, per line, how many distinct literals and
    words it holds (literals weigh 2: an id named by the call is stronger than a word)."""

    def __init__(self, literals: Sequence[str], words: Sequence[str]) -> None:
        self.literals = tuple(literals)
        self.words = tuple(words)

    @property
    def empty(self) -> bool:
        return not self.literals and not self.words

    def literal_hits(self, text: str) -> int:
        return sum(1 for _ in _literal_matches(self.literals, text))

    def literals_in(self, text: str) -> set[str]:
        """The distinct literals found in ``text``."""
        return {lit for _, lit in _literal_matches(self.literals, text)}

    def word_hits(self, text: str) -> int:
        """Distinct query words in ``text``."""
        if not self.words:
            return 0
        return len({w for _, w in _word_matches(self.words, text.lower())})

    def literals_per_part(self, parts: Sequence[str]) -> list[set[str]]:
        """``literals_in`` of each part, found in one scan of the parts joined (a scan per
        part and literal cost most of a JSON array's compression)."""
        return _Parts(parts).sets(self.literals, _ALNUM)

    def word_hits_per_part(self, parts: Sequence[str]) -> list[int]:
        """``word_hits`` of each part, found in one scan of the parts joined."""
        if not self.words:
            return [0] * len(parts)
        return _Parts(parts).lower().counts(self.words, _WORDCHAR)

    def sets_per_part(self, parts: Sequence[str]) -> tuple[list[set[str]], list[set[str]]]:
        """The literals and the query words each part holds, the parts joined once."""
        joined = _Parts(parts)
        literals = joined.sets(self.literals, _ALNUM)
        if not self.words:
            return literals, [set() for _ in parts]
        return literals, joined.lower().sets(self.words, _WORDCHAR)

    def lines_hit(self, text: str, starts: Sequence[int]) -> dict[int, float]:
        """Line index -> relevance (2 per distinct literal, 1 per distinct query word on at most
        ``_WORD_LINES`` lines, less for a word on more)."""
        return self.line_hits(text, starts)[0]

    def line_hits(
        self, text: str, starts: Sequence[int], *, parts: bool = False
    ) -> tuple[dict[int, float], dict[str, list[int]]]:
        """``lines_hit``, and the lines each literal that counts is on, in order. ``parts``: where
        no literal is in the text, a query word also matches a word of a key that holds another
        (``ledger`` in ``LEDGER_DB_PORT``, ``delay`` in ``initialDelaySeconds``;
        ``_identifier_parts``)."""
        seen: dict[int, set[str]] = {}
        for line, lit in _in_segments(self.literals, text, _ALNUM, starts, within=False):
            seen.setdefault(line, set()).add("L" + lit)
        # parts only where the turn's literals are on no line: then the question's words are
        # all there is to go on (and the search for parts is one more pass over the text)
        parts = parts and not seen
        if self.words:
            low = text.lower()
            if len(low) != len(text):  # a character lowercased to two: offsets would drift
                low = text
            for line, word in _in_segments(self.words, low, _WORDCHAR, starts, within=False):
                seen.setdefault(line, set()).add("W" + word)
            for line, word in _identifier_parts(self.words, text, low, starts) if parts else ():
                seen.setdefault(line, set()).add("W" + word)
        # a word on every tenth line (``tests`` in a pytest log) or a literal on every third
        # (the repository in every URL) picks out nothing: it does not count. A word on a few
        # lines still picks them out, however short the text (``litellm`` on 6 of a 24-line
        # pip log, one of them the version asked for): the compressors keep up to 8 such lines
        spread: dict[str, int] = {}
        for keys in seen.values():
            for k in keys:
                spread[k] = spread.get(k, 0) + 1
        lines = len(starts)
        limits = {"L": max(3, lines // 3), "W": max(_WORD_LINES, lines // 10)}
        # a word counts less the more lines hold it: ``pip`` on 40 lines of a pip log must not
        # outrank ``anyio`` on its 3 for the few word-matched lines a compressor keeps
        weight = {k: 2.0 if k[0] == "L" else min(1.0, _WORD_LINES / n) for k, n in spread.items()}
        out: dict[int, float] = {}
        literal_lines: dict[str, list[int]] = {}
        for line, keys in seen.items():
            score = sum(weight[k] for k in keys if spread[k] <= limits[k[0]])
            if score:
                out[line] = score
            for k in keys:
                if k[0] == "L" and spread[k] <= limits["L"]:
                    literal_lines.setdefault(k[1:], []).append(line)
        return out, {lit: sorted(at) for lit, at in literal_lines.items()}


@lru_cache(maxsize=256)
def _cached(context: ToolContext) -> Matcher:
    return Matcher(_literals(context), _words(context.query))


def matcher_for(context: ToolContext) -> Matcher:
    """The context's Matcher (memoised: a turn's results share one query)."""
    return _cached(context)


def rarest_first(lines: Sequence[int], literal_lines: dict[str, list[int]]) -> list[int]:
    """``lines`` ordered by how few lines their rarest literal is on (``literal_lines``, from
    ``Matcher.line_hits``), then by position: the order a cap on literal lines keeps them in.
    By position alone, a literal on every record's line (a field, a job's name) filled the cap
    and a rarer one's lines past it (the record the turn names) were lost."""
    fewest: dict[int, int] = {}
    for at in literal_lines.values():
        for i in at:
            fewest[i] = min(fewest.get(i, len(at)), len(at))
    last = 1 + max(map(len, literal_lines.values()), default=0)
    return sorted(lines, key=lambda i: (fewest.get(i, last), i))


def line_starts(text: str) -> list[int]:
    """The offset where each line of ``text`` starts."""
    # running sums of the lines' lengths (each with its newline), all in C: a ``find`` loop
    # cost a Python step per line
    starts = list(accumulate(map(_PLUS_ONE, map(len, text.split("\n"))), initial=0))
    starts.pop()  # where a line after the last would start
    return starts


def keep_small_gaps(
    lines: Sequence[str], keep: list[bool], *, max_lines: int = 8, max_chars: int = 120
) -> None:
    """Keep the lines of short gaps between kept lines: a marker would cost more than they do.
    Short is by characters, newlines included (blank lines and a signature's ``Best,`` cost
    little); ``max_lines`` keeps a gap of many empty lines from passing as short."""
    n = len(lines)
    i = 0
    while i < n:
        if keep[i]:
            i += 1
            continue
        j = i
        while j < n and not keep[j]:
            j += 1
        if j - i <= max_lines and sum(len(x) + 1 for x in lines[i:j]) <= max_chars:
            for k in range(i, j):
                keep[k] = True
        i = j
