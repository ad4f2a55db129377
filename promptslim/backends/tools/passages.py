"""Passages in a plain-text tool result: a retriever tool's documents joined by blank lines
(LangChain's ``create_retriever_tool`` joins them so), a fetched article's paragraphs.

The text compressor picks sentences by their words alone, and lost the answer of a search
where the question's words sit in the sentence before it. Prose in blank-line blocks is
ranked as documents instead (``stages.tools_documents``): each block one, the blocks read as
prose by the rule a JSON document list's bodies meet (``prose.reads_as_prose``). What is
left out becomes markers, runs of blocks and stretches of a kept block each with its original
in an ``Elision``; the separators between what stays are the text's own. In Markdown, a block
is ranked with the headings it is under as its title, and keeps their lines (``sections``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import Compressed, Elision, elision_id, marker
from .prose import MAX_ITEMS, reads_as_prose, trimmed_body
from .sections import Heading, section_headings, title

__all__ = ["HEADING_CHARS", "Passages", "find_passages"]

#: a block of one line shorter than this is a heading
HEADING_CHARS = 100
#: a blank line (white space aside) between two blocks
_BLOCK_BREAK = re.compile(r"\n[ \t\r\f\v]*\n\s*")


@dataclass(frozen=True)
class Passages:
    """A plain-text result's blocks: their spans in ``text`` and their text (``bodies``)."""

    text: str
    spans: tuple[tuple[int, int], ...]
    bodies: tuple[str, ...]
    headings: tuple[tuple[Heading, ...], ...]  # the Markdown headings each block is under

    @property
    def titles(self) -> tuple[str | None, ...]:
        return tuple(map(title, self.headings))

    def leaves(self) -> list[list[tuple[str, Any]]]:
        """Each block as the one leaf ``literal_items`` searches."""
        return [[("", body)] for body in self.bodies]

    def render(self, kept: Mapping[int, Sequence[tuple[int, int]] | None]) -> Compressed | None:
        """The text with only the blocks in ``kept`` (a block mapped to spans keeps those
        spans of it), and the lines of the headings a kept block is under; each run of
        left-out blocks one marker. None when all is kept."""
        kept = self._with_headings(kept)
        elisions: list[Elision] = []
        out: list[str] = []
        cursor = 0  # where the text not yet written starts
        i, n = 0, len(self.spans)
        while i < n:
            start, end = self.spans[i]
            if i in kept:
                spans, body = kept[i], self.bodies[i]
                if spans is not None:
                    body = trimmed_body(body, spans, f"passage {i}", elisions)
                out += [self.text[cursor:start], body]
                cursor, i = end, i + 1
                continue
            j = i
            while j < n and j not in kept:
                j += 1
            stop = self.spans[j - 1][1]
            original = self.text[start:stop]
            ident = elision_id(original)
            elisions.append(Elision(ident, "passages", j - i, f"chars {start}-{stop}", original))
            unit = "passages" if j - i > 1 else "passage"
            out += [self.text[cursor:start], marker(j - i, unit, ident)]
            cursor, i = stop, j
        out.append(self.text[cursor:])
        return Compressed("".join(out), tuple(elisions), "documents") if elisions else None

    def _with_headings(
        self, kept: Mapping[int, Sequence[tuple[int, int]] | None]
    ) -> dict[int, Sequence[tuple[int, int]] | None]:
        """``kept`` and, for each heading a kept block is under, its line: the heading's block
        mapped to that span besides what it keeps (nothing to add where it is kept whole)."""
        out = dict(kept)
        for i in kept:
            for h in self.headings[i]:
                spans = out.get(h.block, ())
                if spans is not None and (h.start, h.end) not in spans:
                    out[h.block] = sorted([*spans, (h.start, h.end)])
        return out


def find_passages(text: str) -> Passages | None:
    """The blank-line blocks of ``text`` when they read as prose and are no more than
    ``MAX_ITEMS`` (as many as a JSON document list may hold), else None. A heading (a
    block of one line shorter than ``HEADING_CHARS``) goes with the block after it, and a
    Markdown heading right below it goes on to the next (``## billing-api`` then ``###
    Overview``): what a passage is about stays with it. Short paragraphs one after another (in
    Chinese, a paragraph is often shorter than a heading) pair up, but no more."""
    spans: list[tuple[int, int]] = []
    start = len(text) - len(text.lstrip())
    last = start  # where the block the break ends starts (past the headings it goes with)
    for m in _BLOCK_BREAK.finditer(text):
        block = text[last : m.start()]
        heading = bool(block) and "\n" not in block and len(block) < HEADING_CHARS
        if block and not (heading and (last == start or block.startswith("#"))):
            spans.append((start, m.start()))
            start = m.end()
        elif not block and start == last:
            start = m.end()
        last = m.end()
    end = len(text.rstrip())
    if end > start:
        spans.append((start, end))
    if len(spans) > MAX_ITEMS:  # the ranking's work is bounded: the text compressor's then
        return None
    bodies = tuple(text[a:b] for a, b in spans)
    if not bodies or not reads_as_prose(bodies):
        return None
    return Passages(text, tuple(spans), bodies, section_headings(bodies))
