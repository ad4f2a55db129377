"""Text analysis in one place: sentence segmentation, the lexical analyser, and the patterns
for identifiers, numbers and code that stages must recognise (protected spans for compression,
volatile spans for the prefix stage). Every stage and metric uses these, never its own copy.

Pure Python, ``re``, and ``regex`` (tiktoken's dependency) for the words of non-ASCII text,
imported on first use: importing this module costs nothing. Patterns are compiled once. Chinese
word segmentation uses ``jieba`` (the ``zh`` extra) when it is installed, imported and loaded on
first use; without it Chinese runs become character bigrams.

Chinese and mixed text: the identifier patterns are ASCII-bounded (``re.ASCII``), because under
Unicode rules a Han character is a word character, so ``\b`` finds no boundary in
``访问https://x.cn`` or ``编号42``. Full-width ASCII (``ＡＢＣ１２３``, ``！``) is folded to
half-width for analysis and pattern matching only; spans always index the caller's text.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import unicodedata
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from typing import Any, Literal

from .memo import BoundedCache
from .protected import (
    _NEEDS,
    PATTERNS,
    Span,
    _any_of,
    find_protected_spans,
    may_match,
    merge_spans,
)
from .scripts import (
    _CJK_RANGES,
    _HAN,
    dominant_script,
    normalise_width,
    script_spans,
)

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


# ---------------------------------------------------------------- sentences

_ABBREVIATIONS = frozenset(
    ["mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc", "e.g", "i.e", "cf", "fig", "al", "no", "vol", "approx", "inc", "ltd", "co", "corp", "dept", "est", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "u.s", "u.k", "a.m", "p.m"]
)
_CLOSERS = "\"'”’)\\]」』）》】〕〉"
_ZH_ENDERS = "。！？；｡"
#: enders of other scripts that end a sentence as . ! ? do, before whitespace: the danda and
#: double danda (Hindi, Marathi, Nepali, Bengali...), the Arabic question mark, the Urdu full
#: stop, and the Ethiopic, Myanmar and Armenian full stops
_SPACED_ENDERS = "\u0964\u0965\u061f\u06d4\u1362\u104b\u0589"
#: scripts whose sentences end at a space between two of their letters (Thai, Lao, Khmer)
_SPACE_ENDED = "\u0e00-\u0eff\u1780-\u17ff"
# A sentence ends at . ! ? before whitespace; at . ! ? directly followed by CJK text (mixed
# text has no space there); at CJK enders (not inside a run such as ！！ or ？！); after an
# ellipsis (… or ……, not between its halves); at line breaks; and at a space between two
# Thai, Lao or Khmer letters. Closing quotes and brackets right after the ender belong to the
# sentence (split_sentences cuts after them).
_BOUNDARY = re.compile(
    rf"(?<=[.!?{_SPACED_ENDERS}])[{_CLOSERS}]*\s+"
    rf"|(?<=[!?])[{_CLOSERS}]*(?=[{_CJK_RANGES}])"
    rf"|(?<=[^\d.][.])[{_CLOSERS}]*(?=[{_CJK_RANGES}])"  # not "3.", not "..."
    rf"|(?<=[{_ZH_ENDERS}])(?![{_ZH_ENDERS}!?…])[{_CLOSERS}]*\s*"
    rf"|(?<=…)(?!…)[{_CLOSERS}]*\s*"
    r"|\n\s*"
    rf"|(?<=[{_SPACE_ENDED}])\s+(?=[{_SPACE_ENDED}])"
)
# Text without CJK, Chinese enders, an ellipsis or Thai, Lao or Khmer letters can only match
# the first alternative above and the line breaks. This pattern finds the same boundaries with
# the ender consumed (so the regex engine can skip to the next ender or newline instead of
# trying every position): it is ``[ender][closers]*\s+|\n\s*`` written to start with one
# character set, since Python's engine skips ahead by a leading set but tries an alternation
# at every position (2x faster)
_PLAIN_BOUNDARY = re.compile(rf"[.!?{_SPACED_ENDERS}\n](?:(?<=\n)\s*|[{_CLOSERS}]*\s+)")
_NEEDS_FULL_BOUNDARY = re.compile(f"[{_CJK_RANGES}{_ZH_ENDERS}…{_SPACE_ENDED}]")
# the regions a sentence never ends inside (besides JSON): the protected kinds that can hold
# a place one would end at (``BOUNDARY_FREE_KINDS``' cannot: an email or a uuid needs no
# guard); and what they cannot be found without (``_NEEDS`` of the guard kinds, and a bracket
# for JSON): ASCII text with none of them has no such region
_GUARD_KINDS = ("code_block", "url", "quoted")
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
    return _bounds_outside(text, guard)


def _bounds_outside(text: str, guard: Sequence[Span]) -> list[tuple[int, int]]:
    """``sentence_bounds`` with no sentence ending inside ``guard`` (merged, sorted spans)."""
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

#: words of ASCII text; non-ASCII text is read by ``_unicode_words`` (the same words in ASCII)
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*", re.UNICODE)
#: words joined by - _ . : / into one token (``db-4471``, ``v2.3.1``, ``parse_config``); the
#: look-behind lets a match start at a word's start only, not inside every word it fails on
_COMPOUND = re.compile(r"(?<![^\W_])[^\W_]+(?:[-_.:/][^\W_]+)+", re.UNICODE)
#: a separator between two word characters, as every compound holds one: the pattern starts
#: with the separator, so ``re`` skips to the next - _ . : / rather than try every position
_JOINT = re.compile(r"[-_.:/](?<=[^\W_][-_.:/])(?=[^\W_])", re.UNICODE)
_CJK = re.compile(f"[{_CJK_RANGES}]+")
#: scripts written without spaces between words (Thai, Lao, Myanmar, Khmer): their runs become
#: character bigrams, as kana and hangul do (no segmenter for them ships with promptslim)
_UNSPACED = "\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff"
_BIGRAMMED = re.compile(f"[{_CJK_RANGES}{_UNSPACED}]+")
_BIGRAMMED_SPLIT = re.compile(f"([{_CJK_RANGES}{_UNSPACED}]+)")
#: marks a writer may or may not type, dropped so that a word matches either way: combining
#: accents left after NFC (a Russian stress mark), Hebrew and Arabic vowel points, the Arabic
#: tatweel, zero-width joiners (Persian's "می‌خواهم"). Not the marks that make a word's letters
#: (Devanagari's vowel signs): those stay
_OPTIONAL_MARKS: dict[int, None] = {
    cp: None
    for first, last in ((0x300, 0x36F), (0x591, 0x5C7), (0x610, 0x6ED))
    for cp in range(first, last + 1)
    if unicodedata.category(chr(cp)) == "Mn"
} | dict.fromkeys((0x640, 0x200C, 0x200D))
_HAN_RUN = re.compile(f"[{_HAN}]+")

_jieba_lock = threading.Lock()
_jieba_state: dict[str, Any] = {}  # "tokenizer": a jieba.Tokenizer, or "missing": True


def _stem_word(word: str) -> str:
    """A light English suffix stripper: enough for BM25 to match plural/verb forms."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("es") and word[-3] in "sxz":
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


#: stems by word (a bounded memo: words recur in every request, so a cold request still finds
#: most of its own here, and ``clear_memos`` keeps them)
_stem: BoundedCache[str, str] = BoundedCache(
    max_entries=65_536, max_size=2_000_000, compute=_stem_word, clears=False
)


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
    stemmed, and each identifier-like compound (words joined by ``- _ . : /`` with a digit or
    an underscore in it) also as a whole. Han text is segmented into words by jieba
    (``chinese="auto"`` when installed, or ``"jieba"``), else into character bigrams
    (``"bigram"``); kana, hangul and the scripts written without spaces (Thai, Lao, Myanmar,
    Khmer) always become bigrams. Mixed text gets both analysers, each on its own script's
    runs. Non-ASCII text is read composed (NFC); a word keeps the combining marks that make
    its letters (Devanagari's vowel signs) and loses the optional ones (``_OPTIONAL_MARKS``)."""
    return list(_analyse((text, chinese_segmenter(chinese) if _CJK.search(text) else "bigram")))


def _analyse_text(key: tuple[str, str]) -> tuple[str, ...]:
    text, segmenter = key
    folded = normalise_width(text).lower()
    # kept whole beside its words, as search engines keep the original token: "db-4471" then
    # matches the row that holds it above a header that holds "host" and "ip", while "4471"
    # alone still matches "db 4471"
    terms = list(_compounds(folded))
    ascii_only = folded.isascii()
    words = _WORD if ascii_only else _unicode_words()
    mixed = False  # whether any word may hold a bigrammed run: one search, not one a word
    if not ascii_only:
        folded = unicodedata.normalize("NFC", folded).translate(_OPTIONAL_MARKS)
        folded = folded.replace("’", "'")
        mixed = _BIGRAMMED.search(folded) is not None
    for word in words.findall(folded):
        if mixed and _BIGRAMMED.search(word):
            terms.extend(_mixed_terms(word, segmenter))
            continue
        word = word.removesuffix("'s")
        if word and word not in STOPWORDS:
            terms.append(_stem(word))
    return tuple(terms)


@functools.cache
def _unicode_words() -> Any:
    """The word pattern for non-ASCII text: ``_WORD``'s, with the combining marks inside a word.
    ``re`` counts no mark as a word character, so a Devanagari vowel sign, an Arabic or Hebrew
    vowel point or a Russian stress mark would cut a word into pieces ("राजधानी": "र", "जध",
    "न"), and BM25 would match a document holding the same letters in other words. The
    ``regex`` package (tiktoken's own dependency) knows Unicode's categories."""
    import regex

    part = r"[\p{L}\p{N}][\p{L}\p{N}\p{M}]*"
    return regex.compile(rf"{part}(?:['’]{part})*")


def _compounds(text: str) -> Iterator[str]:
    """The identifier-like compounds of ``text`` (prose such as "well-known" has no digit;
    CJK runs get their own analysers)."""
    if _JOINT.search(text) is None:  # every compound holds one: most prose has none
        return
    for m in _COMPOUND.finditer(text):
        compound = m.group()
        if ("_" in compound or any(c.isdigit() for c in compound)) and not _BIGRAMMED.search(
            compound
        ):
            yield compound


def _analysed_size(key: tuple[str, str], terms: tuple[str, ...]) -> int:
    return len(key[0]) + len(terms) + 1  # the text kept alive, and the tuple of terms


#: terms by (text, segmenter): a compressor re-analyses the same sentences on every request
#: that carries them. Bounded by entries and by the characters of text held
_analyse: BoundedCache[tuple[str, str], tuple[str, ...]] = BoundedCache(
    max_entries=16_384, max_size=8_000_000, compute=_analyse_text, sizeof=_analysed_size
)


def _mixed_terms(word: str, segmenter: str) -> list[str]:
    out: list[str] = []
    for part in _BIGRAMMED_SPLIT.split(word):
        if not part:
            continue
        if not _BIGRAMMED.fullmatch(part):
            if part not in STOPWORDS:
                out.append(_stem(part))
        elif segmenter == "jieba" and _HAN_RUN.fullmatch(part):
            out.extend(_jieba_words(part))
        else:
            out.extend(_bigrams(part))
    return out


def _bigrams(run: str) -> list[str]:
    return [run[i : i + 2] for i in range(max(1, len(run) - 1))]


def _jieba_segment(run: str) -> tuple[str, ...]:
    tokenizer = _jieba_tokenizer()
    assert tokenizer is not None  # only called after chinese_segmenter() said "jieba"
    return tuple(w for w in tokenizer.lcut(run) if w not in ZH_STOPWORDS and not w.isspace())


#: jieba's words by Han run
_jieba_words: BoundedCache[str, tuple[str, ...]] = BoundedCache(
    max_entries=65_536, max_size=2_000_000, compute=_jieba_segment
)
