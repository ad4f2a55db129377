"""The line layout of a text: which line breaks only wrap a line, and where paragraphs start.

Documents reach promptslim in a few layouts, and what a line break means differs between them:

- ``blank_lines``: paragraphs separated by blank lines (Markdown, most text splitters' output).
  A blank line starts a paragraph, but after a heading alone between blank lines (``## Setup``),
  which belongs to the paragraph below it; a single line break does not.
- ``lines``: one paragraph per line (web scrapes, many loaders and databases). Every line
  break starts a paragraph, except after a heading (one phrase without a sentence end: a
  title, a label), which belongs to the paragraph below it.
- ``wrapped``: prose hard-wrapped at a fixed width (PDF extraction, e-mail, plain-text files).
  Most line breaks fall inside a sentence: they are *soft*, and sentence splitting must read
  them as spaces, or a sentence (and the answer in it) is cut at every line end. A paragraph
  starts at a heading (one phrase without a sentence end, with room left for the next word),
  and after a line that ends a sentence when the next line's first word would have fitted on
  it (wrapping did not break the line there: a paragraph's last line), unless blank lines mark
  the paragraphs. Text extracted from a PDF also holds each page's running foot and head
  (``Page 9``, ``HANDBOOK``) and a blank line between pages: a sentence that goes on past them
  is one sentence, and blank lines that only join pages mark no paragraph (``_page_gaps``).
  An e-mail's quoted text is wrapped behind one or two quote marks (``> ``, ``>> ``), which
  count as the lines' indent.
- ``cues``: subtitles and timed transcripts (SRT, WebVTT, Whisper's ``[00:04.000 --> ...]``
  segments): a cue's text between timing lines, cut where the time ran out, so a sentence goes
  on from one cue to the next past the blank line, the cue's id and its timing line
  (``_cue_layout``). A text is read so when at least ``_CUE_SHARE`` of its lines time a cue.
- ``none``: no line break at all (text whose whitespace a loader collapsed): no structure to
  read.

A text is ``wrapped`` when at least ``WRAPPED_SHARE`` of the breaks between two non-blank lines
continue a sentence: the line before is at least ``WRAP_FILL`` of the widest line and does not
end a sentence, and the line after goes on at the same indent in lower case, or with a word
that would not have fitted on the line before (greedy wrapping broke there), and at least
``LOWER_SHARE`` of those go on in lower case. Prose wrapped at 80 columns scores about 0.5;
one paragraph per line, code (indented, or ending in ``;`` or ``:``), logs, records, lists,
imports and tables score near 0 (their rows start with a digit, a mark, the same word as the
row before, or a capital, never in lower case). A text is ``lines`` when it has no blank
line, is not wrapped, and its lines hold paragraphs rather than single sentences or rows: at
least ``LINES_SENTENCES`` sentences a line on average (each sentence end inside a line counts
one more).

Pure Python: a scan of the lines, no model, no tokenizer.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal, NamedTuple

from .cues import TIMING, cue_free
from .memo import BoundedCache

__all__ = [
    "LINES_SENTENCES",
    "LOWER_SHARE",
    "WRAPPED_SHARE",
    "WRAP_FILL",
    "LayoutKind",
    "LineLayout",
    "cue_free",
    "line_layout",
    "unwrap",
]

LayoutKind = Literal["none", "blank_lines", "lines", "wrapped", "cues"]

#: a wrapped line fills at least this much of the widest line (greedy wrapping leaves each
#: line short of the width by less than a word; ragged or justified text stays well above it)
WRAP_FILL = 0.6
#: the share of breaks between non-blank lines that continue a sentence in wrapped prose
WRAPPED_SHARE = 0.4
#: the share of those breaks that go on in lower case in prose (most words are): rows that all
#: start with a capital (logs by level, tables) have none; a text in a script without case
#: has none either, and is not read as wrapped
LOWER_SHARE = 0.25
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
#: not a digit or a mark, quote marks aside (``_continues`` holds for no other break, but one
#: after trailing spaces, which sends a text to the exact count)
_MAY_CONTINUE = re.compile(
    r"\n(?<=[^\s.!?:;…。！？；]\n)(?=[^\S\n]*(?:>[^\S\n]?){0,2}[^\s\d\"'(\[{<#*\-+•|>])"
)
#: an e-mail's quote marks before a line's text, one or two deep (``> ``, ``>> ``, ``> > ``);
#: three (``>>> ``) is a Python prompt as often, and its lines are code
_QUOTED = re.compile(r"[^\S\n]*(?:>[^\S\n]?){1,2}(?!>)")
_TRAILING_SPACE = re.compile(r"\n(?<=[^\S\n]\n)")
#: a page's running head or foot recurs at least this often in a text (once a page)
_RUNNING = 2
#: a text is subtitles when at least this share of its non-blank lines are timing lines (a
#: cue has one, its id and a line or two of text beside it; a page about the format, a few)
_CUE_SHARE = 0.15
#: what ends a sentence at the end of a cue's line (a colon there introduces what follows, as
#: often as not on the next line: ``(Swedish:``)
_CUE_END = re.compile(f"[.!?…。！？][{_CLOSERS}]*$")
_DIGITS = re.compile(r"\d+")


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


def _lines(text: str) -> list[_Line]:
    """Every line of ``text``, the blank ones too."""
    lines: list[_Line] = []
    start = 0
    for raw in text.split("\n"):
        line = raw.rstrip()
        ends = _SENTENCE_END.search(line) is not None
        indent = len(line) - len(line.lstrip())
        if line[indent : indent + 1] == ">":  # an e-mail's quoted text: the marks indent it
            quoted = _QUOTED.match(line)
            indent = quoted.end() if quoted else indent
        lines.append(_Line(start, start + len(raw), line, indent, ends))
        start += len(raw) + 1
    return lines


def _pairs(lines: list[_Line]) -> list[tuple[_Line, _Line]]:
    """Each two neighbouring lines that are both non-blank."""
    return [(a, b) for a, b in pairwise(lines) if a.text and b.text]


def _continues(a: _Line, b: _Line, width: int) -> bool:
    """Whether the break between non-blank lines ``a`` and ``b`` falls inside a sentence of
    wrapped prose: ``a`` is full and ends no sentence, and ``b`` goes on at the same indent in
    lower case, or with a word that would not have fitted on ``a`` (greedy wrapping broke
    there). A letter either way: a record a line (JSON, CSV, logs) goes on with a quote, a
    bracket or a digit; and rows that start with the same word as the row before (imports,
    tables, logs by level) are rows."""
    if len(a.text) < WRAP_FILL * width or a.ends_sentence or b.indent != a.indent:
        return False
    if _first_word(a) == _first_word(b):  # rows alike (imports, tables, logs), not prose
        return False
    first = b.text[b.indent : b.indent + 1]
    return first.islower() or (first.isalpha() and not _fits(a, b, width))


def _first_word(line: _Line) -> str:
    return line.text[line.indent :].split(" ", 1)[0]


_NONE = LineLayout("none")


def line_layout(text: str) -> LineLayout:
    """The layout of ``text`` and the offsets of its soft line breaks and paragraph breaks
    (memoised: documents recur across requests, and several steps ask about the same one)."""
    if "\n" not in text:
        return _NONE
    return _layouts(text)


def _layout(text: str) -> LineLayout:
    if "-->" in text:
        cues = _cue_layout(text)
        if cues is not None:
            return cues
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
        return LineLayout("blank_lines", (), _under_headings(text))
    lines = sum(1 for line in text.split("\n") if line.strip())
    inside = text.count(". ") + text.count("! ") + text.count("? ")  # sentence ends in a line
    if lines + inside < LINES_SENTENCES * lines:
        return _NONE
    ends = tuple(a.end for a, _ in _pairs(_lines(text)) if not a.is_heading())
    return LineLayout("lines", (), ends)


def _under_headings(text: str) -> tuple[int, ...]:
    """The blank-line runs of ``text`` that start a paragraph: all but those right after a
    heading alone between blank lines (Markdown's ``## Setup``, a page's title), which
    belongs to the paragraph below it, as in the ``lines`` layout. Read as a paragraph of its
    own, it leaves a section of about one window to be cut, and the window over the section's
    tail runs on into the next heading, which names what the next section is about."""
    breaks: list[int] = []
    start = 0  # where the paragraph before the blank run starts
    end = len(text.rstrip())
    for match in _BLANK_RUN.finditer(text):
        paragraph = text[start : match.start()].strip()
        start = match.end()
        alone = paragraph and "\n" not in paragraph and start < end
        if not (alone and _lines(paragraph)[0].is_heading()):
            breaks.append(match.start())
    return tuple(breaks)


def _wrapped(text: str, blank: tuple[int, ...]) -> LineLayout | None:
    """The layout of ``text`` when it is hard-wrapped prose, else None."""
    lines = _lines(text)
    pairs = _pairs(lines)
    if len(pairs) < 3:
        return None
    width = max(len(line.text) for pair in pairs for line in pair)
    continuing = [b for a, b in pairs if _continues(a, b, width)]
    lower = sum(1 for b in continuing if b.text[b.indent : b.indent + 1].islower())
    if len(continuing) < WRAPPED_SHARE * len(pairs) or lower < LOWER_SHARE * len(continuing):
        return None
    headings = {a.start for a, b in pairs if _heading(a, b, width)}
    # text extracted from a PDF: between two pages, the foot and the head (``_page_gaps``). A
    # line's room is judged against the line after them, not the foot's first word
    gaps = _page_gaps(lines)
    headings -= {g.before.start for g in gaps if not _heading(g.before, g.after, width)}
    soft = _soft_breaks(pairs, width, headings)
    if all(any(g.before.end <= at < g.after.start for g in gaps) for at in blank):
        blank = ()  # they join pages: no paragraph is marked by a blank line
    ends = blank or tuple(
        a.end for a, b in pairs if b.start in headings or _ends_paragraph(a, b, width)
    )
    for gap in gaps:
        start, end = gap.before.end, gap.after.start
        if _wraps(gap.before, gap.after, width, headings):
            # the sentence goes on past the page: one sentence, its answer in it
            soft += [at for at in range(start, end) if text[at] == "\n"]
        elif blank or gap.after.start in headings or _ends_paragraph(gap.before, gap.after, width):
            continue  # a paragraph ends with the page
        elif text.count("\n", start, end) == 2:
            continue  # one line alone between two sentences: a title (``Show (season 8)``) or a foot
        ends = tuple(at for at in ends if not start <= at < end)
    return LineLayout("wrapped", tuple(sorted(set(soft))), ends)


def _cue_layout(text: str) -> LineLayout | None:
    """The layout of subtitles or a timed transcript (``cues``), else None: a cue's text runs
    from its timing line to a blank line, and a sentence goes on from one cue's text to the
    next cue's past the blank line, the next cue's id and its timing line (the captioner broke
    it where the time ran out, not where the sentence ended). Other lines (a title, a file's
    header) are one paragraph a line, a heading belonging to the cues below it."""
    lines = _lines(text)
    timing = [TIMING.match(line.text) for line in lines]
    if sum(1 for m in timing if m) < max(2, _CUE_SHARE * sum(1 for ln in lines if ln.text)):
        return None
    # a line of its own: a timing line, or a cue's id (the line right above a timing line)
    alone = [m is not None and m.end() == len(line.text) for m, line in zip(timing, lines)]
    soft: list[int] = []
    ends: list[int] = []
    before: _Line | None = None  # the last line of text, with only a cue's lines since
    cued = False  # whether ``before`` is a cue's text
    in_cue = False  # whether the lines from here to the next blank line are a cue's text
    for i, line in enumerate(lines):
        if not line.text or alone[i] or (i + 1 < len(lines) and alone[i + 1] and not timing[i]):
            in_cue = bool(line.text) and (in_cue or alone[i])
            continue
        in_cue = in_cue or timing[i] is not None
        if before is not None and cued and in_cue and not _CUE_END.search(before.text):
            soft += [at for at in range(before.end, line.start) if text[at] == "\n"]
        elif before is not None and not (cued and in_cue) and (cued or not before.is_heading()):
            ends.append(before.end)  # a paragraph starts after the cues, or after a paragraph
        before, cued = line, in_cue
    return LineLayout("cues", tuple(soft), tuple(ends))


class _PageGap(NamedTuple):
    before: _Line  # the line of prose before the gap
    after: _Line  # the line of prose after it


def _page_gaps(lines: list[_Line]) -> list[_PageGap]:
    """Where one page of text extracted from a PDF ends and the next starts: the running lines
    (a page's foot and head: ``Page 9 of 40``, ``CHAPTER 3 | Handbook``) and blank lines
    between two lines of prose, one of them numbered. A running line is a phrase without a
    sentence end that recurs in the text, its numbers aside; a numbered one is a page on from
    the one before it or the one after it: one of its numbers is one more. A title that
    recurs as it is (two passages of one article) is no page's, nor are titles whose number
    does not go up by one from one to the next (``2015 World Series``, ``2005 World Series``)."""
    recurring: dict[str, list[_Line]] = {}
    for line in lines:
        if line.text and line.is_heading():
            recurring.setdefault(_DIGITS.sub("#", line.text.strip()), []).append(line)
    running: dict[int, bool] = {}  # each running line's start: whether it is numbered
    for same in (same for same in recurring.values() if len(same) >= _RUNNING):
        steps = [_next_page(a, b) for a, b in pairwise(same)]
        for i, line in enumerate(same):
            running[line.start] = (i > 0 and steps[i - 1]) or (i < len(steps) and steps[i])
    out: list[_PageGap] = []
    before: _Line | None = None  # the last line of prose, with only running or blank lines since
    numbered = False  # whether a numbered running line came after ``before``
    for line in lines:
        if not line.text:
            continue
        if line.start in running:
            numbered = numbered or running[line.start]
            continue
        if numbered and before is not None:
            out.append(_PageGap(before, line))
        before, numbered = line, False
    return out


def _next_page(a: _Line, b: _Line) -> bool:
    """Whether running line ``b`` is on the page after ``a``'s: one of its numbers is one more,
    the others the same (``Page 9 of 40``, ``Page 10 of 40``)."""
    steps = [int(y) - int(x) for x, y in zip(_DIGITS.findall(a.text), _DIGITS.findall(b.text))]
    return steps.count(1) == 1 and steps.count(0) == len(steps) - 1


def _heading(line: _Line, after: _Line, width: int) -> bool:
    """Whether ``line`` of wrapped prose is a heading: one phrase without a sentence end, not
    in lower case, with room left for the next line's first word (no wrapped line has that).
    A paragraph starts at it whatever the line before: a passage cut off mid-sentence does
    not run into the next one's title."""
    first = line.text[line.indent : line.indent + 1]
    return line.is_heading() and not first.islower() and _fits(line, after, width)


# each entry keeps its text alive: charged its characters (about 2,000 chunks of 1,000 tokens)
_layouts: BoundedCache[str, LineLayout] = BoundedCache(
    max_entries=8192, max_size=8_000_000, compute=_layout
)


def _ends_paragraph(a: _Line, b: _Line, width: int) -> bool:
    """Whether wrapped prose's line ``a`` ends a paragraph, ``b`` the next line of prose: it
    ends a sentence, and ``b``'s first word would have fitted on it."""
    return a.ends_sentence and _fits(a, b, width)


def _fits(a: _Line, b: _Line, width: int) -> bool:
    """Whether the first word of ``b`` would have fitted at the end of ``a``: then wrapping did
    not break the line there, its writer did (a paragraph's end, a title's)."""
    return len(a.text) + 1 + len(_first_word(b)) <= width


def _soft_breaks(pairs: list[tuple[_Line, _Line]], width: int, headings: set[int]) -> list[int]:
    """In wrapped prose, the breaks between non-blank lines that only wrap a line (``_wraps``)."""
    return [a.end for a, b in pairs if _wraps(a, b, width, headings)]


def _wraps(a: _Line, b: _Line, width: int, headings: set[int]) -> bool:
    """Whether, in wrapped prose, ``b`` goes on with the sentence of ``a``: ``a`` is full and
    does not end a sentence, and ``b`` is no heading, starts no list item and sits at the
    same indent."""
    if len(a.text) < WRAP_FILL * width or a.ends_sentence or b.start in headings:
        return False
    return b.indent == a.indent and not _LIST_ITEM.match(b.text[b.indent :])


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
