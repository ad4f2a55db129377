"""Text analysis in one place: sentence segmentation, the lexical analyser, and the patterns
for identifiers, numbers and code that stages must recognise (protected spans for compression,
volatile spans for the prefix stage). Every stage and metric uses these, never its own copy.

Pure Python and ``re`` only: importing it costs nothing. Patterns are compiled once.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

__all__ = [
    "PATTERNS",
    "Span",
    "analyse",
    "find_protected_spans",
    "merge_spans",
    "split_sentences",
]


@dataclass(frozen=True, order=True)
class Span:
    """``text[start:end]``, with the kind of thing it is (``sentence``, ``uuid``, ``code``...)."""

    start: int
    end: int
    kind: str = ""

    def of(self, text: str) -> str:
        return text[self.start : self.end]


# ---------------------------------------------------------------- shared patterns

_MONTHS = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
    r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
_WEEKDAYS = r"(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day"

#: Named patterns shared by the stages. Order matters where kinds overlap: earlier wins.
PATTERNS: dict[str, re.Pattern[str]] = {
    "code_block": re.compile(r"```.*?(?:```|\Z)|~~~.*?(?:~~~|\Z)", re.S),
    "inline_code": re.compile(r"`[^`\n]+`"),
    "url": re.compile(r"\b(?:https?|ftp|wss?)://[^\s<>\"'`]+[^\s<>\"'`.,;:!?)\]}]"),
    "email": re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b"),
    "uuid": re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"),
    "jwt": re.compile(r"\beyJ[\w-]{5,}\.[\w-]{5,}\.[\w-]{5,}"),
    "api_key": re.compile(r"\b(?:sk|pk|rk|ghp|gho|xox[abp]|AKIA)[-_][\w-]{12,}|\bAKIA[0-9A-Z]{16}\b"),
    "hex_id": re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{12,}\b|\b0x[0-9a-fA-F]+\b"),
    "iso_datetime": re.compile(
        r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\b"
    ),
    "date": re.compile(
        rf"\b(?:{_WEEKDAYS},?\s+)?(?:\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTHS}\.?,?\s+\d{{4}}"
        rf"|{_MONTHS}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}"
        r"|\d{1,2}/\d{1,2}/\d{2,4})\b"
        rf"|\b{_WEEKDAYS}\b"
    ),
    "time": re.compile(r"\b\d{1,2}:\d{2}(?::\d{2})?\s*(?:[ap]\.?m\.?|UTC|GMT|Z)?(?![\w:])", re.I),
    "unix_timestamp": re.compile(r"\b1[5-9]\d{8}(?:\d{3})?\b"),
    # "3 pm", "11:30am" without seconds is "time"; this catches the colon-less clock times
    "time_ampm": re.compile(r"\b\d{1,2}\s?(?:[ap]\.m\.|[ap]m)(?!\w)", re.I),
    "number_unit": re.compile(
        r"(?<![\w.\-])[$€£¥]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
        r"(?:\s?(?:%|[KMGTPE]i?B|[kMGT]?(?:Hz|W|V)|[kmµn]?(?:g|m|s|l)|°[CF]|USD|EUR|GBP|"
        r"tokens?|ms|x)(?!\w))?(?![\w])"
    ),
    "quoted": re.compile(r"\"[^\"\n]{1,200}\"|“[^”\n]{1,200}”"),
}

_JSON_START = re.compile(r"[\[{]")

#: kinds protected by default in compression (DESIGN.md invariant 5)
PROTECTED_KINDS: tuple[str, ...] = (
    "code_block", "inline_code", "url", "email", "uuid", "jwt", "api_key", "hex_id",
    "iso_datetime", "date", "time", "number_unit", "quoted",
)


def merge_spans(spans: Iterable[Span]) -> list[Span]:
    """Sorted spans with overlapping ones merged (the widest first one's kind kept)."""
    out: list[Span] = []
    for s in sorted(spans, key=lambda s: (s.start, -s.end)):
        if out and s.start < out[-1].end:
            last = out[-1]
            if s.end > last.end:
                out[-1] = Span(last.start, s.end, last.kind)
        else:
            out.append(s)
    return out


def _json_spans(text: str) -> list[Span]:
    """Balanced ``{...}`` / ``[...]`` regions that parse as JSON (brackets in strings respected)."""
    import json

    spans: list[Span] = []
    pos = 0
    decoder = json.JSONDecoder()
    while True:
        m = _JSON_START.search(text, pos)
        if m is None:
            return spans
        try:
            _, end = decoder.raw_decode(text, m.start())
        except ValueError:
            pos = m.start() + 1
            continue
        if end - m.start() > 2:  # "{}" and "[]" alone are not worth protecting
            spans.append(Span(m.start(), end, "json"))
        pos = end


def find_protected_spans(
    text: str, *, extra: Sequence[str] = (), kinds: Sequence[str] = PROTECTED_KINDS
) -> list[Span]:
    """Spans that compression must keep byte-exact: JSON, code, identifiers, numbers, dates,
    quotes, and every occurrence of each caller-given literal in ``extra``. Merged, sorted."""
    spans = _json_spans(text) if "{" in text or "[" in text else []
    for kind in kinds:
        spans.extend(Span(m.start(), m.end(), kind) for m in PATTERNS[kind].finditer(text))
    for literal in extra:
        if literal:
            spans.extend(
                Span(m.start(), m.end(), "caller") for m in re.finditer(re.escape(literal), text)
            )
    return merge_spans(spans)


# ---------------------------------------------------------------- sentences

_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st vs etc e.g i.e cf fig al no vol approx inc ltd co corp dept est "
    "jan feb mar apr jun jul aug sep sept oct nov dec u.s u.k a.m p.m".split()
)
# a sentence ends at . ! ? (with closing quotes/brackets) before whitespace, at CJK enders,
# and at blank lines / line breaks
_BOUNDARY = re.compile(r"(?<=[.!?])[\"'”’)\]]*\s+|(?<=[。！？；])[”’」』）]*|(?<=…)\s*|\n\s*")


def split_sentences(text: str) -> list[Span]:
    """Sentence spans covering the text's non-blank parts, in order. Each span includes its
    trailing punctuation; the whitespace between spans is not part of any span. Abbreviations
    (``e.g.``, ``Dr.``), initials and decimals do not end a sentence. Protected regions (code
    blocks, URLs, JSON...) are never split."""
    if not text:
        return []
    guard = find_protected_spans(text, kinds=("code_block", "url", "email", "uuid", "quoted"))
    spans: list[Span] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        cut = m.start()
        if cut <= start or _inside(guard, cut) or _is_abbreviation(text, start, cut):
            continue
        _append(spans, text, start, cut)
        start = m.end()
    _append(spans, text, start, len(text))
    return spans


def _append(spans: list[Span], text: str, start: int, end: int) -> None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if end > start:
        spans.append(Span(start, end, "sentence"))


def _inside(spans: Sequence[Span], pos: int) -> bool:
    return any(s.start < pos < s.end for s in spans)


def _is_abbreviation(text: str, start: int, cut: int) -> bool:
    if text[cut - 1] != ".":
        return False
    word_start = cut - 1
    while word_start > start and not text[word_start - 1].isspace():
        word_start -= 1
    word = text[word_start : cut - 1].lower().strip("(\"'")
    if word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha()):
        return True
    # "3. " inside a numbered list is a boundary; "1.5" never reaches here (no whitespace)
    return False


# ---------------------------------------------------------------- lexical analysis

STOPWORDS = frozenset(
    """a about above after again against all am an and any are aren't as at be because been
    before being below between both but by can can't cannot could couldn't did didn't do does
    doesn't doing don't down during each few for from further had hadn't has hasn't have haven't
    having he he'd he'll he's her here here's hers herself him himself his how how's i i'd i'll
    i'm i've if in into is isn't it it's its itself let's me more most mustn't my myself no nor
    not of off on once only or other ought our ours ourselves out over own same shan't she she'd
    she'll she's should shouldn't so some such than that that's the their theirs them themselves
    then there there's these they they'd they'll they're they've this those through to too under
    until up very was wasn't we we'd we'll we're we've were weren't what what's when when's where
    where's which while who who's whom why why's will with won't would wouldn't you you'd you'll
    you're you've your yours yourself yourselves also just s t""".split()
)

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*", re.UNICODE)
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")


@lru_cache(maxsize=65_536)
def _stem(word: str) -> str:
    """A light English suffix stripper: enough for BM25 to match plural/verb forms."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("es") and word[-3] in "sxz":
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def analyse(text: str) -> list[str]:
    """Terms for lexical scoring: lowercased words without stopwords, lightly stemmed; runs of
    CJK characters become character bigrams (no dictionary needed)."""
    terms: list[str] = []
    for m in _WORD.finditer(text.lower()):
        word = m.group().replace("’", "'")
        if _CJK.search(word):
            terms.extend(_cjk_terms(word))
            continue
        if word.endswith("'s"):
            word = word[:-2]
        if word and word not in STOPWORDS:
            terms.append(_stem(word))
    return terms


def _cjk_terms(word: str) -> list[str]:
    out: list[str] = []
    for part in re.split(r"([\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+)", word):
        if not part:
            continue
        if _CJK.fullmatch(part):
            out.extend(part[i : i + 2] for i in range(max(1, len(part) - 1)))
        elif part not in STOPWORDS:
            out.append(_stem(part))
    return out
