"""Markdown sections in a text's blank-line blocks: which headings each block sits under.

A heading names what the blocks under it are about, down to the next heading of its level or
above, and a section's later paragraphs rarely say it again: a runbook names the service in
its heading and gives the limit two paragraphs down. So a block is ranked with the headings it
is under as its title (``billing-api / Limits``), and a block kept without its heading keeps
the heading's line, so that what it says is not read as said of the section before.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

__all__ = ["TITLE_CHARS", "Heading", "section_headings", "title"]

#: the longest title the headings above a block make (the innermost are kept)
TITLE_CHARS = 300
#: an ATX heading line (``## Limits``): its level is the number of ``#``
_HEADING = re.compile(r"^(#{1,6})[ \t]+(\S[^\n]*?)[ \t#]*$", re.MULTILINE)
_FENCE = re.compile(r"^[ \t]*(?:```|~~~)", re.MULTILINE)


class Heading(NamedTuple):
    """A heading line: the block it is in, its span in that block, its level and text."""

    block: int
    start: int
    end: int
    level: int
    text: str


def section_headings(bodies: Sequence[str]) -> tuple[tuple[Heading, ...], ...]:
    """For each block, the headings in force once its own are read, outermost first. A ``#``
    line inside a fenced code block (a shell comment) is no heading."""
    out: list[tuple[Heading, ...]] = []
    open_: list[Heading] = []
    fenced = False
    for b, body in enumerate(bodies):
        if "#" in body:
            fences = (
                [m.start() for m in _FENCE.finditer(body)] if "`" in body or "~" in body else []
            )
            for m in _HEADING.finditer(body):
                if fenced ^ (sum(1 for f in fences if f < m.start()) % 2 == 1):
                    continue
                level = len(m.group(1))
                while open_ and open_[-1].level >= level:
                    open_.pop()
                open_.append(Heading(b, m.start(), m.end(), level, m.group(2)))
            fenced ^= len(fences) % 2 == 1
        elif fenced or "`" in body or "~" in body:
            fenced ^= len(_FENCE.findall(body)) % 2 == 1
        out.append(tuple(open_))
    return tuple(out)


def title(headings: Sequence[Heading]) -> str | None:
    """The headings' text joined by `` / ``, at most ``TITLE_CHARS`` (the end kept)."""
    joined = " / ".join(h.text for h in headings)
    return joined[-TITLE_CHARS:] if joined else None
