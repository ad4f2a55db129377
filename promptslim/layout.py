"""The line layout of a text: which line breaks only wrap a line, and where paragraphs start.

Documents reach promptslim in a few layouts, and what a line break means differs between them:

- ``blank_lines``: paragraphs separated by blank lines (Markdown, most text splitters' output).
  A blank line starts a paragraph; a single line break does not.
- ``lines``: one paragraph per line (web scrapes, many loaders and databases). Every line
  break starts a paragraph, except after a heading (one phrase without a sentence end: a
  title, a label), which belongs to the paragraph below it.
- ``wrapped``: prose hard-wrapped at a fixed width (PDF extraction, e-mail, plain-text files).
  Most line breaks fall inside a sentence: they are *soft*, and sentence splitting must read
  them as spaces, or a sentence (and the answer in it) is cut at every line end. A paragraph
  starts after a line that ends a sentence when the next line's first word would have fitted
  on it (wrapping did not break the line there: a paragraph's last line), unless blank lines
  mark the paragraphs.
- ``none``: no line break at all (text whose whitespace a loader collapsed): no structure to
  read.

A text is ``wrapped`` when at least ``WRAPPED_SHARE`` of the breaks between two non-blank lines
continue a sentence: the line before is at least ``WRAP_FILL`` of the widest line and does not
end a sentence, and the line after goes on in lower case at the same indent. Prose wrapped at
80 columns scores about 0.6; one paragraph per line, code (indented, or ending in ``;`` or
``:``), logs (lines that start with a timestamp), records, lists and tables score near 0. A
text is ``lines`` when it has no blank line, is not wrapped, and its lines hold paragraphs
rather than single sentences or rows: at least ``LINES_SENTENCES`` sentences a line on average
(each sentence end inside a line counts one more).

Pure Python: a scan of the lines, no model, no tokenizer.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal, NamedTuple

from .memo import BoundedCache

__all__ = [
    "LINES_SENTENCES",
    "WRAPPED_SHARE",
    "WRAP_FILL",
    "LayoutKind",
    "LineLayout",
    "line_layout",
    "unwrap",
]

LayoutKind = Literal["none", "blank_lines", "lines", "wrapped"]

#: a wrapped line fills at least this much of the widest line (greedy wrapping leaves each
#: line short of the width by less than a word; ragged or justified text stays well above it)
WRAP_FILL = 0.6
#: the share of breaks between non-blank lines that continue a sentence in wrapped prose
WRAPPED_SHARE = 0.4
#: the mean sentences a line holds when lines are paragraphs (a title line and its paragraph
#: on the next line make two lines of several sentences; a list or a table, one each)
LINES_SENTENCES = 1.5

_CLOSERS = re.escape("\"'”’)]」』）》】")  # a sentence's closing quotes and brackets
_SENTENCE_END = re.compile(f"[.!?:;…。！？；][{_CLOSERS}]*$")
_SENTENCE_INSIDE = re.compile(f"[.!?][{_CLOSERS}]* +\\S")
_LIST_ITEM = re.compile(r"(?:[-*•+>|#]|\d{1,3}[.)])\s")
_BLANK_RUN = re.compile(r"\n[^\S\n]*\n")
#: a line break between two non-blank lines (trailing spaces aside: an estimate from below)
_PAIR_BREAK = re.compile(r"\n(?<=\S\n)(?=[^\S\n]*\S)")
#: a break that may continue a sentence: after a character that ends none, before one that is
#: not a capital, a digit or a mark (``_continues`` holds for no other break, but one after
#: trailing spaces, which sends a text to the exact count)
_MAY_CONTINUE = re.compile(r"\n(?<=[^\s.!?:;…。！？；]\n)(?=[^\S\n]*[^\s\dA-Z\"'(\[{<#*\-+•|>])")
_TRAILING_SPACE = re.compile(r"\n(?<=[^\S\n]\n)")


@dataclass(frozen=True)
class LineLayout:
    """A text's layout (see the module docstring): ``soft``, the offsets of the line breaks
    that only wrap a line; ``breaks``, the offsets of the line breaks that start a paragraph
    (of a blank-line run, its first), sorted."""

    kind: LayoutKind
    soft: tuple[int, ...] = ()
    breaks: tuple[int, ...] = ()

    def starts_paragraph(self, start: int, end: int) -> bool:
        """Whether a paragraph break lies in ``text[start:end]`` (the gap between two units)."""
        i = bisect_left(self.breaks, start)
        return i < len(self.breaks) and self.breaks[i] < end


class _Line(NamedTuple):
    start: int  # offset of the line's first character
    end: int  # offset of the line break after it (the text's length for the last line)
    text: str  # without its line break, trailing whitespace removed
    indent: int
    ends_sentence: bool

    def is_heading(self) -> bool:
        """One phrase without a sentence end: a title or a label, not a paragraph (a passage
        cut off mid-sentence still holds sentence ends)."""
        return not self.ends_sentence and _SENTENCE_INSIDE.search(self.text) is None


def _pairs(text: str) -> list[tuple[_Line, _Line]]:
    """Each two neighbouring lines that are both non-blank."""
    lines: list[_Line] = []
    start = 0
    for raw in text.split("\n"):
        line = raw.rstrip()
        ends = _SENTENCE_END.search(line) is not None
        lines.append(_Line(start, start + len(raw), line, len(line) - len(line.lstrip()), ends))
        start += len(raw) + 1
    return [(a, b) for a, b in pairwise(lines) if a.text and b.text]


def _continues(a: _Line, b: _Line, width: int) -> bool:
    """Whether the break between non-blank lines ``a`` and ``b`` falls inside a sentence of
    wrapped prose."""
    if len(a.text) < WRAP_FILL * width or a.ends_sentence:
        return False
    # lower case: a record per line ending in a comma (JSON, CSV) goes on with a quote or a digit
    return b.indent == a.indent and b.text[b.indent : b.indent + 1].islower()


_NONE = LineLayout("none")


def line_layout(text: str) -> LineLayout:
    """The layout of ``text`` and the offsets of its soft line breaks and paragraph breaks
    (memoised: documents recur across requests, and several steps ask about the same one)."""
    if "\n" not in text:
        return _NONE
    return _layouts(text)


def _layout(text: str) -> LineLayout:
    blank = tuple(m.start() for m in _BLANK_RUN.finditer(text))
    # counts over the whole text (scans at C speed) rule out most texts with line breaks
    # (code, logs, records, lists) before any line is looked at one by one
    pairs = len(_PAIR_BREAK.findall(text))
    may_continue = len(_MAY_CONTINUE.findall(text))
    if _TRAILING_SPACE.search(text) or (pairs >= 3 and may_continue >= WRAPPED_SHARE * pairs):
        wrapped = _wrapped(text, blank)
        if wrapped is not None:
            return wrapped
    if blank:
        return LineLayout("blank_lines", (), blank)
    lines = sum(1 for line in text.split("\n") if line.strip())
    inside = text.count(". ") + text.count("! ") + text.count("? ")  # sentence ends in a line
    if lines + inside < LINES_SENTENCES * lines:
        return _NONE
    return LineLayout("lines", (), tuple(a.end for a, _ in _pairs(text) if not a.is_heading()))


def _wrapped(text: str, blank: tuple[int, ...]) -> LineLayout | None:
    """The layout of ``text`` when it is hard-wrapped prose, else None."""
    pairs = _pairs(text)
    if len(pairs) < 3:
        return None
    width = max(len(line.text) for pair in pairs for line in pair)
    if sum(_continues(a, b, width) for a, b in pairs) < WRAPPED_SHARE * len(pairs):
        return None
    soft = tuple(_soft_breaks(pairs, width))
    if blank:
        return LineLayout("wrapped", soft, blank)
    ends = tuple(a.end for a, b in pairs if a.ends_sentence and _fits(a, b, width))
    return LineLayout("wrapped", soft, ends)


# each entry keeps its text alive: charged its characters (about 2,000 chunks of 1,000 tokens)
_layouts: BoundedCache[str, LineLayout] = BoundedCache(
    max_entries=8192, max_size=8_000_000, compute=_layout
)


def _fits(a: _Line, b: _Line, width: int) -> bool:
    """Whether the first word of ``b`` would have fitted at the end of ``a``: then wrapping did
    not break the line there, its writer did (a paragraph's end, a title's)."""
    body = b.text[b.indent :]
    return len(a.text) + 1 + len(body.split(" ", 1)[0]) <= width


def _soft_breaks(pairs: list[tuple[_Line, _Line]], width: int) -> list[int]:
    """In wrapped prose, every break after a full line that does not end a sentence, unless
    the next line starts a list item or sits at another indent."""
    out: list[int] = []
    for a, b in pairs:
        if len(a.text) < WRAP_FILL * width or a.ends_sentence:
            continue
        if b.indent != a.indent or _LIST_ITEM.match(b.text[b.indent :]):
            continue
        out.append(a.end)
    return out


def unwrap(text: str, layout: LineLayout | None = None) -> str:
    """``text`` with its soft line breaks read as spaces: the same length and offsets, so a
    span found in it indexes ``text`` itself."""
    soft = (layout or line_layout(text)).soft
    if not soft:
        return text
    chars = list(text)
    for at in soft:
        chars[at] = " "
    return "".join(chars)
