"""Text analysis in one place: sentence segmentation, the lexical analyser, and the patterns
for identifiers, numbers and code that stages must recognise (protected spans for compression,
volatile spans for the prefix stage). Every stage and metric uses these, never its own copy.

Pure Python and ``re`` only: importing it costs nothing. Patterns are compiled once. Chinese
word segmentation uses ``jieba`` (the ``zh`` extra) when it is installed, imported and loaded on
first use; without it Chinese runs become character bigrams.

Chinese and mixed text: the identifier patterns are ASCII-bounded (``re.ASCII``), because under
Unicode rules a Han character is a word character, so ``\b`` finds no boundary in
``访问https://x.cn`` or ``编号42``. Full-width ASCII (``ＡＢＣ１２３``, ``！``) is folded to
half-width for analysis and pattern matching only; spans always index the caller's text.
"""

from __future__ import annotations

import logging
import re
import threading
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

__all__ = [
    "PATTERNS",
    "ChineseMode",
    "Span",
    "analyse",
    "chinese_segmenter",
    "dominant_script",
    "find_protected_spans",
    "may_match",
    "merge_spans",
    "normalise_width",
    "script_spans",
    "sentence_bounds",
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

_A = re.ASCII  # see the module docstring: \b, \w, \d and \s are ASCII-only in these patterns
# characters a URL or email never runs into: CJK ideographs, kana, hangul and CJK punctuation
# (IRIs may contain Han characters, but in running Chinese text a URL is followed directly by
# prose far more often; the ASCII part stays protected either way)
_NOT_URL = "\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"
# after a unit suffix ("Z", "am"): no letter of an alphabetic script may follow, Unicode-wide
# (under ASCII \w, "12:30 Zürich" took "12:30 Z" and split the word); CJK may follow, as above
_NO_LETTER = rf"(?u:(?![^\W\d_{_NOT_URL}]))"
_ZH_NUM = "〇零一二两三四五六七八九十"
_ZH_PERIOD = "凌晨|清晨|早上|早晨|上午|中午|午后|下午|傍晚|晚上|夜里|夜间|半夜|深夜"
_ZH_HOUR = rf"(?:\d{{1,2}}|[{_ZH_NUM}]{{1,3}})"

#: Named patterns shared by the stages. Order matters where kinds overlap: earlier wins.
PATTERNS: dict[str, re.Pattern[str]] = {
    "code_block": re.compile(r"```.*?(?:```|\Z)|~~~.*?(?:~~~|\Z)", re.DOTALL),
    "inline_code": re.compile(r"`[^`\n]+`"),
    "url": re.compile(
        rf"\b(?:https?|ftp|wss?)://[^\s<>\"'`{_NOT_URL}]+[^\s<>\"'`.,;:!?)\]}}{_NOT_URL}]", _A
    ),
    "email": re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b", _A),
    "uuid": re.compile(
        r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b", _A
    ),
    "jwt": re.compile(r"\beyJ[\w-]{5,}\.[\w-]{5,}\.[\w-]{5,}", _A),
    "api_key": re.compile(
        r"\b(?:sk|pk|rk|ghp|gho|xox[abp]|AKIA)[-_][\w-]{12,}|\bAKIA[0-9A-Z]{16}\b", _A
    ),
    # codes people quote back: ticket keys, order and SKU codes, request ids ("HANES-885",
    # "SKU12345", "req-ef05"): a letter first, a digit somewhere, four characters or more
    "code_id": re.compile(
        r"\b(?=[A-Za-z0-9_-]{4})[A-Za-z](?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)*\b", _A
    ),
    "hex_id": re.compile(
        r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{12,}\b|\b0x[0-9a-fA-F]+\b", _A
    ),
    "iso_datetime": re.compile(
        r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\b", _A
    ),
    "date": re.compile(
        rf"\b(?:{_WEEKDAYS},?\s+)?(?:\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTHS}\.?,?\s+\d{{4}}"
        rf"|{_MONTHS}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}"
        r"|\d{1,2}/\d{1,2}/\d{2,4})\b"
        rf"|\b{_WEEKDAYS}\b",
        _A,
    ),
    "time": re.compile(
        rf"\b\d{{1,2}}:\d{{2}}(?::\d{{2}})?\s*(?:(?:[ap]\.?m\.?|UTC|GMT|Z){_NO_LETTER})?(?![\w:])", re.IGNORECASE | _A
    ),
    "unix_timestamp": re.compile(r"\b1[5-9]\d{8}(?:\d{3})?\b", _A),
    # "3 pm", "11:30am" without seconds is "time"; this catches the colon-less clock times
    "time_ampm": re.compile(rf"\b\d{{1,2}}\s?(?:[ap]\.m\.|[ap]m)(?!\w){_NO_LETTER}", re.IGNORECASE | _A),
    # 2026年11月30日, 二〇二六年十一月, 11月30日 / 30号, 2026/11/30, 2026.11.30
    "zh_date": re.compile(
        rf"(?:\d{{4}}|[〇零一二三四五六七八九]{{4}})\s?年\s?(?:\d{{1,2}}|[{_ZH_NUM}]{{1,3}})\s?月"
        rf"(?:\s?(?:\d{{1,2}}|[{_ZH_NUM}]{{1,3}})\s?[日号])?"
        rf"|(?<!\d)(?:\d{{1,2}}|[{_ZH_NUM}]{{1,3}})\s?月\s?(?:\d{{1,2}}|[{_ZH_NUM}]{{1,3}})\s?[日号]"
        r"|\b\d{4}[/.]\d{1,2}[/.]\d{1,2}\b",
        _A,
    ),
    # 下午3点, 上午十点半, 15点30分, 15时30分20秒, 3点钟. A bare "3点" is also "3 points", so a
    # clock time needs a period of the day, minutes, or 半/整/钟
    "zh_time": re.compile(
        rf"(?:{_ZH_PERIOD})\s?{_ZH_HOUR}\s?[点點时](?:\s?{_ZH_HOUR}\s?分|半|一刻|三刻|整|钟)?"
        r"(?:\s?\d{1,2}\s?秒)?"
        r"|(?<!\d)\d{1,2}\s?[点时]\s?\d{1,2}\s?分(?:\s?\d{1,2}\s?秒)?"
        rf"|(?<!\d){_ZH_HOUR}点(?:半|整|钟)",
        _A,
    ),
    # 星期一, 礼拜天, 周五; not 每周一 (a standing rule) nor 一周一次 ("once a week")
    "zh_weekday": re.compile(
        r"(?:星期|礼拜)[一二三四五六日天]|(?<![一二两三四五六七八九十几数每0-9])周[一二三四五六日]"
    ),
    # relative days: the words themselves are stable bytes (a prompt that says 今天 says it on
    # every request), so this kind is opt-in for the prefix stage, not a default
    "zh_relative_day": re.compile(
        r"今天|明天|昨天|后天|前天|今日|明日|昨日|今晚|明晚|今早|明早|本周|上周|下周|这周|"
        r"本月|上个?月|下个?月|今年|去年|明年"
    ),
    "number_unit": re.compile(
        r"(?<![\w.\-])[$€£¥]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
        r"(?:\s?(?:%|[KMGTPE]i?B|[kMGT]?(?:Hz|W|V)|[kmµn]?(?:g|m|s|l)|°[CF]|USD|EUR|GBP|"
        r"tokens?|ms|x)(?!\w)"
        # Chinese units follow the number without a space
        r"|(?:万元|亿元|美元|元|万|亿|块|公里|千米|厘米|毫米|米|公斤|千克|克|吨|毫升|升|小时|分钟|"
        r"秒|天|个月|岁|倍|次|个|件|台|人|％))?(?![\w])",
        _A,
    ),
    "quoted": re.compile(r"\"[^\"\n]{1,200}\"|“[^”\n]{1,200}”|「[^」\n]{1,200}」|『[^』\n]{1,200}』"),
}

_JSON_START = re.compile(r"[\[{]")
#: the deepest nesting read as a JSON span (serde_json's default limit): the decoder recurses
#: once per level, so deeper text (``[[[[...``) would raise RecursionError, not fail to parse
_JSON_MAX_DEPTH = 128
# a JSON value's text, as far as nesting goes: strings, brackets, and the characters that
# cannot appear outside a string (a lone ``"`` is an unterminated string); whitespace, numbers,
# commas, colons and the letters of true, false, null, NaN and Infinity are skipped over
_JSON_TOKEN = re.compile(r'"(?:[^"\\\x00-\x1f]|\\.)*"|[\[\]{}]|[^ \t\n\r,:0-9.eE+\-trufalsnNIiy]')

# What each pattern cannot match without: one of these substrings of the text it runs on, or
# (flag True) an ASCII digit (the patterns' \d is ASCII). ``find_protected_spans`` skips a
# kind whose needs are all absent: most sentences carry no URL, uuid, quote or number.
_NEEDS: dict[str, tuple[tuple[str, ...], bool]] = {
    "code_block": (("```", "~~~"), False),
    "inline_code": (("`",), False),
    "url": (("://",), False),
    "email": (("@",), False),
    "uuid": (("-",), False),
    "jwt": (("eyJ",), False),
    "api_key": (("-", "_", "AKIA"), False),
    "code_id": ((), True),
    "hex_id": ((), True),
    "iso_datetime": ((), True),
    # a weekday name, a month name (case-sensitive) or d/m/y
    "date": (("day", "/", "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct",
              "Nov", "Dec"), False),
    "time": ((), True),
    "unix_timestamp": ((), True),
    "time_ampm": ((), True),
    "zh_date": (("月",), True),
    "zh_time": (("点", "點", "时"), False),
    "zh_weekday": (("星期", "礼拜", "周"), False),
    "number_unit": ((), True),
    "quoted": (('"', "“", "「", "『"), False),
}
_ASCII_DIGIT = re.compile("[0-9]")


def _any_of(needles: Sequence[str]) -> re.Pattern[str]:
    """A regex that finds any of ``needles``: one scan, where ``in`` per needle is one each
    (a summariser asks this of every sentence it scores)."""
    return re.compile("|".join(map(re.escape, needles)))


_NEEDS_ANY = {kind: _any_of(needles) for kind, (needles, _) in _NEEDS.items() if needles}


def may_match(kind: str, text: str) -> bool:
    """False when ``PATTERNS[kind]`` cannot match ``text`` (it lacks every substring that the
    pattern needs): a check much cheaper than the scan. True means "scan to find out"."""
    needs = _NEEDS.get(kind)
    if needs is None:
        return True
    found = _NEEDS_ANY.get(kind)
    if found is not None and found.search(text):
        return True
    return needs[1] and _ASCII_DIGIT.search(text) is not None

#: kinds protected by default in compression (docs/architecture.md, invariant 5)
PROTECTED_KINDS: tuple[str, ...] = (
    "code_block", "inline_code", "url", "email", "uuid", "jwt", "api_key", "hex_id",
    "iso_datetime", "date", "time", "zh_date", "zh_time", "zh_weekday", "number_unit", "quoted",
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
    """Balanced ``{...}`` / ``[...]`` regions that parse as JSON (brackets in strings respected),
    nested no deeper than ``_JSON_MAX_DEPTH``."""
    import json

    spans: list[Span] = []
    pos = 0
    decoder = json.JSONDecoder()
    # whether the decoder may read from an opener (see _nesting_verdicts); None: the text has
    # too few brackets to nest deeper than the limit, so it always may
    verdicts: dict[int, bool] | None = None
    if text.count("[") + text.count("{") > _JSON_MAX_DEPTH:
        verdicts = {}
    while True:
        m = _JSON_START.search(text, pos)
        if m is None:
            return spans
        if verdicts is not None:
            if m.start() not in verdicts:
                verdicts.update(_nesting_verdicts(text, m.start()))
            if not verdicts[m.start()]:
                pos = m.start() + 1
                continue
        try:
            _, end = decoder.raw_decode(text, m.start())
        except ValueError:
            pos = m.start() + 1
            continue
        if end - m.start() > 2:  # "{}" and "[]" alone are not worth protecting
            spans.append(Span(m.start(), end, "json"))
        pos = end


def _nesting_verdicts(text: str, start: int) -> dict[int, bool]:
    """For the opener at ``start`` and each opener inside the value it starts (outside its
    strings): whether the decoder may read a JSON value from there. False when the value nests
    deeper than ``_JSON_MAX_DEPTH``, or never closes before its text stops being JSON (the
    decoder would fail on it anyway). One pass for all of them: each opener's value is read
    the same whether the decoder starts at it or at an opener around it, so ``[[[[...`` costs
    one scan, not one per bracket. Lenient (it does not check the grammar): True only means
    "no deeper than the limit", and the decoder decides."""
    verdicts: dict[int, bool] = {}
    opened: list[int] = []  # positions of the openers not closed yet, outermost first
    below: list[int] = []  # for each, the deepest nesting closed inside it so far
    for m in _JSON_TOKEN.finditer(text, start):
        at = m.start()
        char = text[at]
        if char in "[{":
            opened.append(at)
            below.append(0)
        elif char in "]}":
            depth = below.pop() + 1
            verdicts[opened.pop()] = depth <= _JSON_MAX_DEPTH
            if not opened:
                return verdicts
            below[-1] = max(below[-1], depth)
        elif m.end() - at == 1:  # not a string: no JSON value goes on past here
            break
    verdicts.update((at, False) for at in opened)  # never closed
    return verdicts


def find_protected_spans(
    text: str, *, extra: Sequence[str] = (), kinds: Sequence[str] = PROTECTED_KINDS
) -> list[Span]:
    """Spans that compression must keep byte-exact: JSON, code, identifiers, numbers, dates,
    quotes, and every occurrence of each caller-given literal in ``extra``. Merged, sorted."""
    spans = _json_spans(text) if "{" in text or "[" in text else []
    folded = normalise_width(text)  # same length: "１２３" is a number, spans index ``text``
    # a URL or email ends at full-width punctuation (！，：) as at any CJK punctuation; folded,
    # "https://x.cn/a！b" read as one URL, and a sentence join could fuse a URL with what follows
    alnum_folded = folded
    if not text.isascii() and ("url" in kinds or "email" in kinds):
        alnum_folded = text.translate(_ALNUM_WIDTH_FOLD)
    has_digit: bool | None = None
    for kind in kinds:
        source = alnum_folded if kind in ("url", "email") else folded
        needs = _NEEDS.get(kind)
        if needs is not None and not any(n in source for n in needs[0]):
            if not needs[1]:
                continue
            if has_digit is None:  # digit kinds all run on ``folded``
                has_digit = _ASCII_DIGIT.search(folded) is not None
            if not has_digit:
                continue
        spans.extend(Span(m.start(), m.end(), kind) for m in PATTERNS[kind].finditer(source))
    for literal in extra:
        if literal:
            spans.extend(
                Span(m.start(), m.end(), "caller") for m in re.finditer(re.escape(literal), text)
            )
    return merge_spans(spans)


# ---------------------------------------------------------------- scripts and widths

# full-width ASCII (U+FF01-U+FF5E) and the ideographic space fold to their half-width forms:
# one character for one, so positions in the folded text are positions in the original
_WIDTH_FOLD = {cp: cp - 0xFEE0 for cp in range(0xFF01, 0xFF5F)} | {0x3000: 0x20}
# letters and digits only: full-width punctuation stays, and stops a URL or email
_ALNUM_WIDTH_FOLD = {cp: cp - 0xFEE0 for cp in range(0xFF01, 0xFF5F) if chr(cp - 0xFEE0).isalnum()}
_CJK_RANGES = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_SCRIPT_RUN = re.compile(rf"[{_CJK_RANGES}]+|[A-Za-z\u00c0-\u024f]+|[^\W\d_]+")


def normalise_width(text: str) -> str:
    """``text`` with full-width ASCII letters, digits and punctuation and the ideographic space
    folded to half-width (``ＡＢＣ１２３！`` → ``ABC123!``). Same length as ``text``. For analysis
    only: stages never write it back (CJK punctuation such as 。 and “ is left alone)."""
    return text if text.isascii() else text.translate(_WIDTH_FOLD)


def _script_of(run: str) -> str:
    ch = run[0]
    if "\u3040" <= ch <= "\u30ff" or "\u3400" <= ch <= "\u9fff" or "\uac00" <= ch <= "\ud7af" or (
        "\uf900" <= ch <= "\ufaff"
    ):
        return "cjk"
    return "latin" if ch.isascii() or ch <= "\u024f" else "other"


def script_spans(text: str) -> list[Span]:
    """Runs of one script, kinds ``cjk`` (Han, kana, hangul), ``latin`` or ``other``. Digits,
    spaces and punctuation belong to no script: they join the run before them (or the first
    run, at the start). Covers the text when it has any letter; ``[]`` otherwise."""
    folded = normalise_width(text)
    spans: list[Span] = []
    for m in _SCRIPT_RUN.finditer(folded):
        kind = _script_of(m.group())
        if spans and spans[-1].kind == kind:
            spans[-1] = Span(spans[-1].start, m.end(), kind)
        elif spans:
            spans[-1] = Span(spans[-1].start, m.start(), spans[-1].kind)
            spans.append(Span(m.start(), m.end(), kind))
        else:
            spans.append(Span(0, m.end(), kind))
    if spans:
        spans[-1] = Span(spans[-1].start, len(text), spans[-1].kind)
    return spans


def dominant_script(text: str) -> str:
    """The script most of the text's letters are in (``cjk``, ``latin``, ``other``), counting
    a CJK character as a word's worth of letters (3); ``""`` when it has no letters."""
    weight: dict[str, int] = {}
    for m in _SCRIPT_RUN.finditer(normalise_width(text)):
        kind = _script_of(m.group())
        weight[kind] = weight.get(kind, 0) + len(m.group()) * (3 if kind == "cjk" else 1)
    return max(sorted(weight), key=weight.__getitem__) if weight else ""


# ---------------------------------------------------------------- sentences

_ABBREVIATIONS = frozenset(
    ["mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc", "e.g", "i.e", "cf", "fig", "al", "no", "vol", "approx", "inc", "ltd", "co", "corp", "dept", "est", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "u.s", "u.k", "a.m", "p.m"]
)
_CLOSERS = "\"'”’)\\]」』）》】〕〉"
_ZH_ENDERS = "。！？；｡"
# A sentence ends at . ! ? before whitespace; at . ! ? directly followed by CJK text (mixed
# text has no space there); at CJK enders (not inside a run such as ！！ or ？！); after an
# ellipsis (… or ……, not between its halves); and at line breaks. Closing quotes and brackets
# right after the ender belong to the sentence (split_sentences cuts after them).
_BOUNDARY = re.compile(
    rf"(?<=[.!?])[{_CLOSERS}]*\s+"
    rf"|(?<=[!?])[{_CLOSERS}]*(?=[{_CJK_RANGES}])"
    rf"|(?<=[^\d.][.])[{_CLOSERS}]*(?=[{_CJK_RANGES}])"  # not "3.", not "..."
    rf"|(?<=[{_ZH_ENDERS}])(?![{_ZH_ENDERS}!?…])[{_CLOSERS}]*\s*"
    rf"|(?<=…)(?!…)[{_CLOSERS}]*\s*"
    r"|\n\s*"
)
# Text without CJK, Chinese enders or an ellipsis can only match the first and last
# alternatives above. This pattern finds the same boundaries with the ender consumed (so the
# regex engine can skip to the next . ! ? or newline instead of trying every position): it is
# ``[.!?][closers]*\s+|\n\s*`` written to start with one character set, since Python's
# engine skips ahead by a leading set but tries an alternation at every position (2x faster)
_PLAIN_BOUNDARY = re.compile(rf"[.!?\n](?:(?<=\n)\s*|[{_CLOSERS}]*\s+)")
_NEEDS_FULL_BOUNDARY = re.compile(f"[{_CJK_RANGES}{_ZH_ENDERS}…]")
# what the regions a sentence never ends inside cannot be found without (``_NEEDS`` of the
# guard kinds, and a bracket for JSON): ASCII text with none of them has no such region
_GUARD_KINDS = ("code_block", "url", "email", "uuid", "quoted")
_GUARD_NEEDS = ("{", "[", *(n for kind in _GUARD_KINDS for n in _NEEDS[kind][0]))
_GUARD_FOUND = _any_of(_GUARD_NEEDS)


def split_sentences(text: str) -> list[Span]:
    """Sentence spans covering the text's non-blank parts, in order. Each span includes its
    trailing punctuation and closing quotes or brackets; the whitespace between spans is not
    part of any span. Abbreviations (``e.g.``, ``Dr.``), initials and decimals do not end a
    sentence. Chinese enders (。！？；……) end one with or without a following space. Protected
    regions (code blocks, URLs, JSON, quotations...) are never split."""
    return [Span(a, b, "sentence") for a, b in sentence_bounds(text)]


def sentence_bounds(text: str) -> list[tuple[int, int]]:
    """``split_sentences`` as ``(start, end)`` pairs: for hot loops that only slice (a
    summariser analyses every sentence of a long history; Span objects cost more than the
    cutting)."""
    if not text:
        return []
    guard = (
        find_protected_spans(text, kinds=_GUARD_KINDS)
        # non-ASCII text may hold full-width forms that fold to these: it always looks
        if not text.isascii() or _GUARD_FOUND.search(text)
        else []
    )
    guard_starts = [s.start for s in guard]
    bounds: list[tuple[int, int]] = []
    start = 0
    plain = text.isascii() or not _NEEDS_FULL_BOUNDARY.search(text)
    for m in (_PLAIN_BOUNDARY if plain else _BOUNDARY).finditer(text):
        at = m.start()
        gap = m.group()
        if plain and gap[0] != "\n":  # the plain pattern consumed the ender: skip past it
            at += 1
            gap = gap[1:]
        closers = len(gap) - len(gap.lstrip(_CLOSERS))
        cut = at + closers
        if (
            cut <= start
            or (guard and _inside(guard, guard_starts, at))
            or _is_abbreviation(text, start, at)
        ):
            continue
        _append(bounds, text, start, cut)
        start = m.end()
    _append(bounds, text, start, len(text))
    return bounds


def _append(bounds: list[tuple[int, int]], text: str, start: int, end: int) -> None:
    """``text[start:end]`` without its surrounding whitespace, when anything is left."""
    part = text[start:end]
    stripped = part.lstrip()
    if stripped:
        start += len(part) - len(stripped)
        bounds.append((start, start + len(stripped.rstrip())))


def _inside(spans: Sequence[Span], starts: Sequence[int], pos: int) -> bool:
    """Whether ``pos`` is strictly inside one of ``spans``, merged and sorted as
    ``merge_spans`` returns them (``starts``: their starts). Only the last span to start
    before ``pos`` can hold it: a bisection, not a scan (a scan per sentence end was
    quadratic in a long document)."""
    i = bisect_left(starts, pos) - 1
    return i >= 0 and pos < spans[i].end


def _is_abbreviation(text: str, start: int, cut: int) -> bool:
    if text[cut - 1] != ".":
        return False
    # the word before the dot: what follows the last whitespace since ``start``
    before = text[start : cut - 1]
    word = "" if not before or before[-1].isspace() else before.rsplit(None, 1)[-1]
    word = word.lower().strip("(\"'")
    # "3. " inside a numbered list is a boundary; "1.5" never reaches here (no whitespace)
    return word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha())


# ---------------------------------------------------------------- lexical analysis

STOPWORDS = frozenset(
    ["a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are", "aren't", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "can't", "cannot", "could", "couldn't", "did", "didn't", "do", "does", "doesn't", "doing", "don't", "down", "during", "each", "few", "for", "from", "further", "had", "hadn't", "has", "hasn't", "have", "haven't", "having", "he", "he'd", "he'll", "he's", "her", "here", "here's", "hers", "herself", "him", "himself", "his", "how", "how's", "i", "i'd", "i'll", "i'm", "i've", "if", "in", "into", "is", "isn't", "it", "it's", "its", "itself", "let's", "me", "more", "most", "mustn't", "my", "myself", "no", "nor", "not", "of", "off", "on", "once", "only", "or", "other", "ought", "our", "ours", "ourselves", "out", "over", "own", "same", "shan't", "she", "she'd", "she'll", "she's", "should", "shouldn't", "so", "some", "such", "than", "that", "that's", "the", "their", "theirs", "them", "themselves", "then", "there", "there's", "these", "they", "they'd", "they'll", "they're", "they've", "this", "those", "through", "to", "too", "under", "until", "up", "very", "was", "wasn't", "we", "we'd", "we'll", "we're", "we've", "were", "weren't", "what", "what's", "when", "when's", "where", "where's", "which", "while", "who", "who's", "whom", "why", "why's", "will", "with", "won't", "would", "wouldn't", "you", "you'd", "you'll", "you're", "you've", "your", "yours", "yourself", "yourselves", "also", "just", "s", "t"]
)
#: Chinese function words and question words, dropped from segmented words (not from bigrams:
#: a bigram rarely is one of these)
ZH_STOPWORDS = frozenset(
    ["的", "了", "是", "在", "和", "与", "及", "或", "也", "都", "就", "而", "且", "之", "其", "这", "那", "个", "吗", "呢", "吧", "啊", "呀", "么", "我", "你", "他", "她", "它", "们", "有", "为", "对", "把", "被", "从", "到", "以", "于", "着", "过", "得", "地", "还", "又", "很", "要", "会", "能", "将", "已", "并", "等", "让", "给", "向", "由", "此", "该", "每", "各", "一个", "一些", "一种", "这个", "那个", "这些", "那些", "这样", "那样", "我们", "你们", "他们", "她们", "它们", "自己", "什么", "怎么", "怎样", "怎么样", "如何", "哪", "哪个", "哪些", "哪里", "哪儿", "哪家", "哪年", "哪一", "谁", "多少", "几", "为什么", "是否", "是不是", "有没有", "可以", "没有", "因为", "所以", "但是", "而且", "如果", "或者", "以及", "还是", "就是", "并且", "然后", "其中", "之一", "一下", "请问", "呢", "吗"]
)

ChineseMode = Literal["auto", "jieba", "bigram"]

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*", re.UNICODE)
_CJK = re.compile(f"[{_CJK_RANGES}]+")
_CJK_SPLIT = re.compile(f"([{_CJK_RANGES}]+)")
_HAN_RUN = re.compile(f"[{_HAN}]+")

_jieba_lock = threading.Lock()
_jieba_state: dict[str, Any] = {}  # "tokenizer": a jieba.Tokenizer, or "missing": True


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


def _jieba_tokenizer() -> Any | None:
    """promptslim's own jieba Tokenizer (None when jieba is not installed), loaded once under a
    lock. Its own instance, not ``jieba.dt``: words a caller adds to jieba's global dictionary
    must not change our terms (same input, same output). Loading takes a second or two and
    writes jieba's usual dictionary cache to the temp folder; its log chatter is silenced."""
    state = _jieba_state
    if "tokenizer" in state or "missing" in state:
        return state.get("tokenizer")
    with _jieba_lock:
        if "tokenizer" in state or "missing" in state:
            return state.get("tokenizer")
        try:
            import jieba
        except ImportError:
            state["missing"] = True
            return None
        jieba.setLogLevel(logging.WARNING)  # "Building prefix dict ..." goes to stderr otherwise
        tokenizer = jieba.Tokenizer()
        tokenizer.initialize()
        state["tokenizer"] = tokenizer
        return tokenizer


def chinese_segmenter(mode: ChineseMode = "auto") -> str:
    """Which segmenter ``analyse`` uses for Han text in ``mode``: ``"jieba"`` or ``"bigram"``.
    Loads jieba when it is used (call it once at start-up to take the load off the first
    request). ``mode="jieba"`` without jieba installed raises BackendUnavailable."""
    if mode == "bigram":
        return "bigram"
    if _jieba_tokenizer() is not None:
        return "jieba"
    if mode == "jieba":
        from .errors import BackendUnavailable

        raise BackendUnavailable("jieba (Chinese word segmentation)", extra="zh")
    return "bigram"


def analyse(text: str, *, chinese: ChineseMode = "auto") -> list[str]:
    """Terms for lexical scoring: width-folded, lowercased words without stopwords, lightly
    stemmed. Han text is segmented into words by jieba (``chinese="auto"`` when installed, or
    ``"jieba"``), else into character bigrams (``"bigram"``); kana and hangul always become
    bigrams. Mixed text gets both analysers, each on its own script's runs."""
    return list(_analyse(text, chinese_segmenter(chinese) if _CJK.search(text) else "bigram"))


@lru_cache(maxsize=16_384)
def _analyse(text: str, segmenter: str) -> tuple[str, ...]:
    # memoised: a compressor re-analyses the same sentences on every request that carries them
    terms: list[str] = []
    for m in _WORD.finditer(normalise_width(text).lower()):
        word = m.group().replace("’", "'")
        if _CJK.search(word):
            terms.extend(_mixed_terms(word, segmenter))
            continue
        word = word.removesuffix("'s")
        if word and word not in STOPWORDS:
            terms.append(_stem(word))
    return tuple(terms)


def _mixed_terms(word: str, segmenter: str) -> list[str]:
    out: list[str] = []
    for part in _CJK_SPLIT.split(word):
        if not part:
            continue
        if not _CJK.fullmatch(part):
            if part not in STOPWORDS:
                out.append(_stem(part))
        elif segmenter == "jieba" and _HAN_RUN.fullmatch(part):
            out.extend(_jieba_words(part))
        else:
            out.extend(_bigrams(part))
    return out


def _bigrams(run: str) -> list[str]:
    return [run[i : i + 2] for i in range(max(1, len(run) - 1))]


@lru_cache(maxsize=65_536)
def _jieba_words(run: str) -> tuple[str, ...]:
    tokenizer = _jieba_tokenizer()
    assert tokenizer is not None  # only called after chinese_segmenter() said "jieba"
    return tuple(w for w in tokenizer.lcut(run) if w not in ZH_STOPWORDS and not w.isspace())
