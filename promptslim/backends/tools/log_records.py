"""A log's records that span lines: what of it a line the turn names keeps besides itself.

Command output puts one record on several lines in a few ways, and the line that names the
question's subject is rarely the one that answers it:

- an indented line hangs under the header above it (a ``git log`` entry's message under its
  commit, author and date): ``keep_header``;
- a line's own deeper lines and a body in brackets printed below it (a traceback, a JSON
  payload): ``records.block_end``;
- a short paragraph between blank lines (a compiler's error: ``error[E0308]: mismatched
  types``, the ``--> src/x.rs:12:5`` line naming the file, the source line below);
- a section under a banner (pytest's ``____ test_refund ____`` above the test's failure), up to
  the next banner; its error lines are kept however many times their pattern repeats elsewhere
  (``named_sections``: elsewhere a warning repeated 300 times is kept once).

A query word (no identifier) on a few lines names only a banner's section (``keep_section``:
Ansible's ``TASK [billing : restart service] ****`` above its hosts); on a plain line it keeps
that line alone, as a word in a log is too often incidental to name what follows it.

Each reaches at most ``REACH`` lines from the named line, but for a section's error lines,
which are looked for up to ``SECTION_SCAN`` lines down.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .records import block_end

__all__ = [
    "REACH",
    "SECTION_SCAN",
    "is_banner",
    "keep_header",
    "keep_record",
    "keep_section",
    "named_sections",
]

#: how far from a named line the rest of its record may reach
REACH = 20
#: how far below a named banner its section's error lines are looked for
SECTION_SCAN = 200
#: how many lines a header above a continuation line keeps
_HEADER_LINES = 3
#: a banner: a title between runs of one rule character (``____ test_x ____``, ``=== FAILURES
#: ===``, ``---- Captured stdout call ----``)
_BANNER = re.compile(r"[ \t]*([=_*#~-])\1{2,}[ \t]+\S.*?[ \t]+\1{3,}[ \t]*")
#: or a title then a run of one rule character (Ansible's ``TASK [web : restart] *****``)
_TITLE_RULE = re.compile(r"[^\s=_*#~-].*?[ \t]([=_*#~-])\1{3,}[ \t]*")


def is_banner(line: str) -> bool:
    """Whether ``line`` is a banner (``____ test_x ____``, ``TASK [web : restart] ****``)."""
    if line[:1] in " \t=_*#~-":
        return _BANNER.fullmatch(line) is not None
    return line.rstrip()[-1:] in "=_*#~-" and _TITLE_RULE.fullmatch(line) is not None


def keep_header(lines: list[str], i: int, keep: list[bool]) -> None:
    """Keep the header a continuation line ``i`` hangs under: the nearest line above it that is
    not indented (past indented and blank lines, within ``REACH`` lines) and the lines not
    indented right above that one, ``_HEADER_LINES`` in all. A ``git log`` entry's message
    names what the commit did, and its author and date sit in the header above it."""
    j = i - 1
    while j >= max(0, i - REACH) and (not lines[j] or lines[j][0] in " \t"):
        j -= 1
    if j < max(0, i - REACH):
        return
    for k in range(j, max(-1, j - _HEADER_LINES), -1):
        if not lines[k] or lines[k][0] in " \t":
            break
        keep[k] = True


def _paragraph(lines: list[str], i: int) -> range:
    """The lines of the paragraph (between blank lines) line ``i`` is in, when it is at most
    ``REACH`` lines long; else none."""
    start = i
    while start > 0 and lines[start - 1].strip() and i - start < REACH:
        start -= 1
    end = i + 1
    while end < len(lines) and lines[end].strip() and end - start <= REACH:
        end += 1
    if end - start > REACH or (start > 0 and lines[start - 1].strip()):
        return range(0)
    return range(start, end)


def _banner_end(lines: list[str], i: int, limit: int) -> int:
    """Below the banner ``i``: the next banner, or ``limit`` lines down."""
    j = i + 1
    while j < min(len(lines), i + 1 + limit) and not is_banner(lines[j]):
        j += 1
    return j


def keep_record(lines: list[str], i: int, keep: list[bool]) -> None:
    """Keep the rest of the record the named line ``i`` is in (the module docstring)."""
    if lines[i][:1] in (" ", "\t"):
        keep_header(lines, i, keep)
    end = block_end(lines, i, REACH, outer=False)
    if is_banner(lines[i]):
        end = max(end, _banner_end(lines, i, REACH))
    for k in range(i + 1, end):
        keep[k] = True
    for k in _paragraph(lines, i):
        keep[k] = True


def keep_section(lines: list[str], i: int, keep: list[bool]) -> None:
    """Keep the section under the banner ``i``, to the next banner and at most ``REACH`` lines
    down. A banner is a title: a query word in it names its section (an Ansible task's hosts),
    where a word on a plain line names no more than that line."""
    if is_banner(lines[i]):
        for k in range(i + 1, _banner_end(lines, i, REACH)):
            keep[k] = True


def named_sections(lines: list[str], named: Iterable[int]) -> set[int]:
    """The lines of the sections under the named banners among ``named``, to the next banner
    and at most ``SECTION_SCAN`` lines down."""
    inside: set[int] = set()
    for i in named:
        if is_banner(lines[i]):
            inside.update(range(i + 1, _banner_end(lines, i, SECTION_SCAN)))
    return inside
