"""Passages in tool results: what reads as prose, what the tools stage ranks (``Found``: a
JSON document list, ``documents``, or a text's blocks, ``passages``), and a passage cut to the
spans the ranking kept, a marker for each stretch between.

Prose is told from the rest of what tools return by cheap tests, the cheapest first: the body
that holds the median character is ``MIN_BODY_CHARS`` long or more (a search engine's snippet
is, a title is not); lines run ``MIN_LINE_CHARS`` on average (a diff, a listing or a log has
short lines); ``LETTER_SHARE`` of the characters are letters or white space and at most
``TOKEN_SHARE`` sit in runs of 40 Latin characters with no space (no ids, URLs, keys, encoded
blobs or code). The character tests read at most ``SAMPLE_CHARS``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ...escapes import unescaped
from ...scripts import CJK_CHAR_WEIGHT, cjk_characters, dominant_script
from . import Compressed, Elision, elision_id, marker

__all__ = ["MAX_ITEMS", "Found", "reads_as_prose", "trimmed_body"]

#: the most items (or blocks) the tools stage ranks in one result: its work stays bounded
MAX_ITEMS = 500
#: what reads as prose (``reads_as_prose``)
MIN_BODY_CHARS = 100
MIN_LINE_CHARS = 60
LETTER_SHARE = 0.8
TOKEN_SHARE = 0.2
SAMPLE_CHARS = 8_000
#: a run of characters with no white space long enough to be a token, not a word
_LONG_RUN = re.compile(r"\S{40,}")
_LETTERS_OR_SPACE = re.compile(r"[^\W\d_]+|\s+")


class Found(Protocol):
    """A document list or passages of a tool result: what the tools stage ranks, and how it
    writes back what stays (``kept``: by index, None for a whole item, else its body's spans)."""

    @property
    def bodies(self) -> tuple[str, ...]: ...

    @property
    def titles(self) -> tuple[str | None, ...]: ...

    def leaves(self) -> list[list[tuple[str, Any]]]: ...

    def render(self, kept: Mapping[int, Sequence[tuple[int, int]] | None]) -> Compressed | None: ...


def reads_as_prose(
    bodies: Sequence[str], min_body: int = MIN_BODY_CHARS, min_line: int = MIN_LINE_CHARS
) -> bool:
    """Whether the bodies read as passages: long enough, in lines of running text (a diff, a
    listing or a log has short lines), mostly letters and spaces, and words rather than
    tokens (a key, an id, base64 or a URL is a long run of Latin letters with no space). The
    cheap tests first: most tool output fails on its line lengths. ``min_body`` and
    ``min_line``: the lengths asked of the median body and the mean line (a chat's messages
    are asked for less: ``documents.MESSAGE_CHARS``)."""
    if not bodies:
        return False
    # the character tests read each body's head, ``SAMPLE_CHARS`` in all: a 60,000-character
    # log costs what a page does
    # escapes (JSON's \u, HTML's &#...;) read as the characters they stand for
    heads = [unescaped(b[: max(SAMPLE_CHARS // len(bodies), 200)]) for b in bodies]
    chars = sum(map(len, bodies))
    median = _weighted_median(sorted(map(len, bodies)), chars)
    # blank lines aside (counted as "\n\n", an estimate): a heading that goes with the
    # paragraph below it brings a blank line as well as its own short one
    lines = sum(b.count("\n") + 1 - b.count("\n\n") for b in bodies)
    # a CJK character says about what a word does (one regex search when the heads are Latin)
    cjk = dominant_script("".join(heads)) == "cjk"
    if median < min_body or chars < min_line * lines:
        # its prose is short by characters
        if not cjk:
            return False
        weighted = CJK_CHAR_WEIGHT
        if weighted * median < min_body or weighted * chars < min_line * lines:
            return False
    sampled = sum(map(len, heads))
    # letter and space runs removed, what is left is the rest: one pass in C per body
    letters = sampled - sum(len(_LETTERS_OR_SPACE.sub("", b)) for b in heads)
    if cjk:
        # a CJK character counts as the letters it says: a Chinese passage's line of JSON
        # (a search's JSON Lines) has as many marks around it as an English one's, in a
        # third of the characters
        weighed = (CJK_CHAR_WEIGHT - 1) * sum(map(cjk_characters, heads))
        letters, sampled = letters + weighed, sampled + weighed
    if letters < LETTER_SHARE * sampled:
        return False
    tokens = sum(
        len(run) for b in heads for run in _LONG_RUN.findall(b) if dominant_script(run) == "latin"
    )
    return tokens <= TOKEN_SHARE * sampled


def _weighted_median(lengths: Sequence[int], total: int) -> int:
    """The length of the body that holds the median character (``lengths`` sorted): a few
    short ones (a heading, an empty snippet) do not make long passages short."""
    seen = 0
    for n in lengths:
        seen += n
        if 2 * seen >= total:
            return n
    return 0


def trimmed_body(
    body: str, spans: Sequence[tuple[int, int]], field: str, elisions: list[Elision]
) -> str:
    """``body`` cut to ``spans`` (in order): each stretch between them that is more than white
    space becomes a marker whose elision (at ``field[start:end]``) goes to ``elisions``; the
    white space around it, and between neighbouring spans, stays as it was."""
    parts: list[str] = []
    cursor = 0
    for start, end in [*spans, (len(body), len(body))]:
        gap = body[cursor:start]
        left = gap.strip()
        if left:
            at = cursor + len(gap) - len(gap.lstrip())
            ident = elision_id(left)
            where = f"{field}[{at}:{at + len(left)}]"
            elisions.append(Elision(ident, "chars", len(left), where, left))
            lead, trail = gap[: len(gap) - len(gap.lstrip())], gap[len(gap.rstrip()) :]
            gap = f"{lead or ' ' * (cursor > 0)}{marker(len(left), 'chars', ident)}"
            gap += trail or " " * (end > start)
        parts += [gap, body[start:end]]
        cursor = max(cursor, end)
    return "".join(parts)
