"""Protected spans: the patterns for identifiers, numbers, URLs, code and JSON that stages
must recognise (protected spans for compression, volatile spans for the prefix stage).

The identifier patterns are ASCII-bounded (``re.ASCII``): under Unicode rules a Han character
is a word character, so ``\\b`` finds no boundary in ``访问https://x.cn`` or ``编号42``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from .scripts import fold_alnum_width, normalise_width
from .spans import Span

__all__ = ["BOUNDARY_FREE_KINDS", "PATTERNS", "Span", "find_protected_spans", "may_match", "merge_spans"]


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
# A pattern that starts with a digit lets ``re`` skip ahead to the next digit; one that starts
# with ``\b`` is tried at every position of the text. ``\d(?<!\w\d)`` is ``\b\d`` (ASCII
# \w): a digit with no word character before it
_WORD_START_DIGIT = r"\d(?<!\w\d)"
# 2026/11/30, 2026.11.30: the one form of ``zh_date`` without a Chinese character
_SLASH_DATE = rf"{_WORD_START_DIGIT}\d{{3}}[/.]\d{{1,2}}[/.]\d{{1,2}}\b"
# 11/30/2026, 30/11/26: the one form of ``date`` without a month or weekday name
_NUMERIC_DATE = r"\d{1,2}/\d{1,2}/\d{2,4}"

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
        rf"{_WORD_START_DIGIT}\d{{3}}-\d{{2}}-\d{{2}}"
        r"(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\b",
        _A,
    ),
    "date": re.compile(
        rf"\b(?:{_WEEKDAYS},?\s+)?(?:\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTHS}\.?,?\s+\d{{4}}"
        rf"|{_MONTHS}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}"
        rf"|{_NUMERIC_DATE})\b"
        rf"|\b{_WEEKDAYS}\b",
        _A,
    ),
    "time": re.compile(
        rf"{_WORD_START_DIGIT}\d?:\d{{2}}(?::\d{{2}})?\s*(?:(?:[ap]\.?m\.?|UTC|GMT|Z){_NO_LETTER})?(?![\w:])", re.IGNORECASE | _A
    ),
    "unix_timestamp": re.compile(r"1(?<!\w1)[5-9]\d{8}(?:\d{3})?\b", _A),
    # "3 pm", "11:30am" without seconds is "time"; this catches the colon-less clock times
    "time_ampm": re.compile(rf"{_WORD_START_DIGIT}\d?\s?(?:[ap]\.m\.|[ap]m)(?!\w){_NO_LETTER}", re.IGNORECASE | _A),
    # 2026年11月30日, 二〇二六年十一月, 11月30日 / 30号, 2026/11/30, 2026.11.30
    "zh_date": re.compile(
        rf"(?:\d{{4}}|[〇零一二三四五六七八九]{{4}})\s?年\s?(?:\d{{1,2}}|[{_ZH_NUM}]{{1,3}})\s?月"
        rf"(?:\s?(?:\d{{1,2}}|[{_ZH_NUM}]{{1,3}})\s?[日号])?"
        rf"|(?<!\d)(?:\d{{1,2}}|[{_ZH_NUM}]{{1,3}})\s?月\s?(?:\d{{1,2}}|[{_ZH_NUM}]{{1,3}})\s?[日号]"
        rf"|{_SLASH_DATE}",
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
        # the lookahead first: the lookbehind alone was tried at every position of the text
        r"(?=[$€£¥\d])(?<![\w.\-])[$€£¥]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
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

#: what ``date``'s named forms cannot match without: a weekday or a month name (case-sensitive)
_DATE_NAMES = ("day", "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct",
               "Nov", "Dec")  # fmt: skip

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
    # a weekday name, a month name or d/m/y
    "date": (("/", *_DATE_NAMES), False),
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

# A pattern whose other alternatives each need one of these substrings, and what is left of it
# for text that has none of them: ``zh_date``'s Chinese forms all hold 月, and its leading
# character classes made it the slowest scan of an English sentence with a number in it;
# ``date``'s named forms need a month or weekday name, and paths and URLs ("/") sent text
# without one through all of its alternatives at every word
_REDUCED: dict[str, tuple[re.Pattern[str], re.Pattern[str]]] = {
    "zh_date": (re.compile("月"), re.compile(_SLASH_DATE, _A)),
    "date": (_any_of(_DATE_NAMES), re.compile(rf"{_WORD_START_DIGIT}\d?/\d{{1,2}}/\d{{2,4}}\b", _A)),
}


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

#: kinds whose matches hold only ASCII letters, digits and ``- . _ + @`` (or the full-width
#: forms that fold to them): no white space, line break, ellipsis, CJK ender or character, so
#: no place a sentence ends (``text.sentence_bounds``) or a long one is cut (at spaces) ever
#: lies inside one. Finding sentences and units need not scan for them; compression does
BOUNDARY_FREE_KINDS = frozenset({"email", "uuid", "jwt", "api_key", "hex_id", "unix_timestamp"})

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
    alnum_folded = fold_alnum_width(text) if "url" in kinds or "email" in kinds else folded
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
        pattern = PATTERNS[kind]
        reduced = _REDUCED.get(kind)
        if reduced is not None and reduced[0].search(source) is None:
            pattern = reduced[1]
        spans.extend(Span(m.start(), m.end(), kind) for m in pattern.finditer(source))
    for literal in extra:
        if literal:
            spans.extend(
                Span(m.start(), m.end(), "caller") for m in re.finditer(re.escape(literal), text)
            )
    return merge_spans(spans)

