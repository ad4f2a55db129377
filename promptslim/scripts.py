"""Scripts and character widths: which writing system a run of text is in, and full-width
ASCII folded to half-width (for analysis and pattern matching only; spans always index the
caller's text)."""

from __future__ import annotations

import re

from .memo import BoundedCache
from .spans import Span

__all__ = [
    "CJK_CHAR_WEIGHT",
    "cjk_characters",
    "document_script",
    "dominant_script",
    "fold_alnum_width",
    "normalise_width",
    "script_spans",
]


# full-width ASCII (U+FF01-U+FF5E) and the ideographic space fold to their half-width forms:
# one character for one, so positions in the folded text are positions in the original
_WIDTH_FOLD = {cp: cp - 0xFEE0 for cp in range(0xFF01, 0xFF5F)} | {0x3000: 0x20}
# letters and digits only: full-width punctuation stays, and stops a URL or email
_ALNUM_WIDTH_FOLD = {cp: cp - 0xFEE0 for cp in range(0xFF01, 0xFF5F) if chr(cp - 0xFEE0).isalnum()}
# any character either fold changes: most non-ASCII text has none, and one search in C is far
# cheaper than translating it character by character through a dict
_FULL_WIDTH = re.compile("[\uff01-\uff5e\u3000]")
#: the letters of a Latin text one CJK character says about as much as (a word's worth)
CJK_CHAR_WEIGHT = 3
_CJK_RANGES = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK_RUN = re.compile(f"[{_CJK_RANGES}]+")
_SCRIPT_RUN = re.compile(rf"[{_CJK_RANGES}]+|[A-Za-z\u00c0-\u024f]+|[^\W\d_]+")
# a letter no Latin run holds: a run can only start with one (a run starting with a Latin
# letter is a Latin run), and full-width letters are among them, so where there is none the
# text folded or not is Latin letters or no letters
_OUTSIDE_LATIN = re.compile(r"[^\W\d_A-Za-z\u00c0-\u024f]")
_LETTER = re.compile(r"[^\W\d_]")


def normalise_width(text: str) -> str:
    """``text`` with full-width ASCII letters, digits and punctuation and the ideographic space
    folded to half-width (``ＡＢＣ１２３！`` → ``ABC123!``). Same length as ``text``. For analysis
    only: stages never write it back (CJK punctuation such as 。 and “ is left alone)."""
    if text.isascii() or _FULL_WIDTH.search(text) is None:
        return text
    return text.translate(_WIDTH_FOLD)


def fold_alnum_width(text: str) -> str:
    """``text`` with full-width ASCII letters and digits folded to half-width, punctuation left
    full-width (``ｘ．ｃｎ！`` → ``x．cn！``): where a URL or an email must stop. Same length."""
    if text.isascii() or _FULL_WIDTH.search(text) is None:
        return text
    return text.translate(_ALNUM_WIDTH_FOLD)


def _script_of(run: str) -> str:
    ch = run[0]
    if (
        "\u3040" <= ch <= "\u30ff"
        or "\u3400" <= ch <= "\u9fff"
        or "\uac00" <= ch <= "\ud7af"
        or "\uf900" <= ch <= "\ufaff"
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


def cjk_characters(text: str) -> int:
    """How many of ``text``'s characters are Chinese, Japanese or Korean."""
    return sum(map(len, _CJK_RUN.findall(text)))


def dominant_script(text: str) -> str:
    """The script most of the text's letters are in (``cjk``, ``latin``, ``other``), counting
    a CJK character as a word's worth of letters (``CJK_CHAR_WEIGHT``); ``""`` when it has no
    letters."""
    if _OUTSIDE_LATIN.search(text) is None:  # every run Latin: no need to weigh them
        return "latin" if _LETTER.search(text) else ""
    weight: dict[str, int] = {}
    for m in _SCRIPT_RUN.finditer(normalise_width(text)):
        kind = _script_of(m.group())
        weight[kind] = weight.get(kind, 0) + len(m.group()) * (
            CJK_CHAR_WEIGHT if kind == "cjk" else 1
        )
    return max(sorted(weight), key=weight.__getitem__) if weight else ""


#: ``dominant_script`` of a document, memoised: a request's documents recur across requests,
#: and the retrieval stage asks twice (which model may read it, how long its windows are).
#: Bounded by entries and by the characters of text held
document_script: BoundedCache[str, str] = BoundedCache(
    max_entries=8_192, max_size=8_000_000, compute=dominant_script
)
