"""Logs and command output: collapse what repeats, keep what went wrong and how it ended.

Each line is masked (timestamps, hex ids, UUIDs, paths' digits and every number become one
placeholder), so ``Downloading x (1.2 MB)`` and ``Downloading x (3.4 MB)`` are one pattern.
Kept whole: the first ``head`` and last ``tail`` lines, error and warning lines (not a setting
whose key alone holds the word, ``DB_TIMEOUT_MS=30`` of ``printenv``), stack traces (a
``Traceback`` block, indented ``File ...`` / ``at ...`` frames), and lines holding the turn's
literals (at most 64, the rarest literals' lines first: a worker named on one line
outranks a job named on hundreds) or the most query words (a word also as a part of a key
that holds another query word: ``ledger`` in ``LEDGER_DB_PORT`` of ``printenv``). A line
holding a literal keeps the rest of its record (``records``: the header above an indented
line, the block or the JSON payload below a line, its short paragraph, the section under a
banner; ``log_records``), and a banner holding a query word on few lines its section.
Of the remaining lines, the first of each pattern is kept until ``keep_ratio`` of the text is
used, rarest patterns first; a run of lines with one pattern keeps its first line and a count.
Every run of left-out lines becomes one marker line naming the line range, how many of its
lines repeated a kept pattern, and the id of its original.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import Counter

from ...errors import ConfigError
from . import Compressed, Elision, ToolCompressor, ToolContext, elision_id, marker
from .log_records import keep_record, keep_section, named_sections
from .match import keep_small_gaps, line_starts, matcher_for, rarest_first

__all__ = ["LogCompressor", "mask_line"]

# one alternation run once over the whole text (a sub per line per pattern cost 3 ms on 18 KB):
# quoted strings and paths (lines that say the same thing about different names), then any
# run of hex digits and separators that holds a digit (numbers, timestamps, UUIDs, hashes);
# each alternative starts with a literal or a character class, never an optional group
_MASK = re.compile(
    r"'[^'\n]{0,200}'|\"[^\"\n]{0,200}\"|/[^\s'\"]*|[0-9a-fA-F]*[0-9][0-9a-fA-F.:,_-]*"
)
# found in the lowercased text, without word bounds, by ``str.find`` per word: a regex
# alternation of them tried every position (25 ns a character, 0.2 ms on 8 KB), a find per
# word scans at memory speed
_IMPORTANT = (
    "error", "fatal", "fail", "exception", "panic", "critical", "warn", "denied", "refused",
    "timeout", "timed out", "abort", "traceback", "assert", "segmentation fault", "killed",
    "cannot", "can't", "could not", "unable to", "not found",
    # an access log's server errors (Common Log Format: the status follows the quoted request)
    '" 500 ', '" 502 ', '" 503 ', '" 504 ',
)  # fmt: skip
#: a line that starts as a setting does: a key, then ``=`` (``A_B=1``, ``net.x.y = 2``, and a
#: shell's ``export A_B=1`` or ``declare -x A_B="1"`` of ``export -p``)
_ASSIGNMENT = re.compile(r"(?:export[ \t]+|declare[ \t]+-x[ \t]+)?[A-Za-z_][\w.-]*[ \t]*=")
_FRAME = re.compile(r"^\s+(?:File \"|at [\w$.<>]+\(|from [\w/.]+:\d+|\^+\s*$|[\w.]+Error\b)")
_TRACE_START = re.compile(r"^(?:Traceback \(most recent call last\)|\S*(?:Exception|Error)\b.*:\s)")


def mask_line(line: str) -> str:
    """The line's pattern: quoted names, paths, timestamps, ids and numbers become ``#``."""
    return _MASK.sub("#", line).strip()


def _setting(line: str) -> bool:
    """Whether ``line`` is a setting whose key alone holds an error word (``DB_TIMEOUT_MS=30`` of
    ``printenv``, ``net.ipv4.tcp_fin_timeout = 60`` of ``sysctl -a``): a name, not an event.
    ``level=error msg=...`` (logfmt) holds one in a value, and is an error line."""
    match = _ASSIGNMENT.match(line)
    if match is None:
        return False
    value = line[match.end() :].lower()
    return not any(word in value for word in _IMPORTANT)


def _lines_with(words: tuple[str, ...], text: str, starts: list[int]) -> set[int]:
    """The lines of ``text`` (starting at ``starts``) that hold any of ``words``."""
    found: set[int] = set()
    find = text.find
    for word in words:
        at = find(word)
        while at != -1:
            line = bisect_right(starts, at) - 1
            found.add(line)
            # the rest of this line holds nothing new for this word
            end = starts[line + 1] if line + 1 < len(starts) else len(text)
            at = find(word, max(at + 1, end))
    return found


class LogCompressor(ToolCompressor):
    """Log and command-output compression (see the module docstring).

    ``head``/``tail``: lines always kept at each end. ``keep_ratio``: share of the text's
    characters the other kept lines may use. ``max_line``: longer lines count as this long
    when spending that share (a progress bar redrawn on one line should not take it all).
    ``records``: a line holding a literal keeps the rest of its record, a banner holding a query
    word on few lines its section (``log_records``).
    """

    name = "log"

    def __init__(
        self,
        *,
        head: int = 3,
        tail: int = 10,
        keep_ratio: float = 0.06,
        max_line: int = 400,
        records: bool = True,
    ) -> None:
        for fld, value in (("head", head), ("tail", tail), ("max_line", max_line)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"must be an int >= 0, got {value!r}", field=fld)
        if (
            isinstance(keep_ratio, bool)
            or not isinstance(keep_ratio, (int, float))
            or not 0 <= keep_ratio <= 1
        ):
            raise ConfigError(f"must be in [0, 1], got {keep_ratio!r}", field="keep_ratio")
        if not isinstance(records, bool):
            raise ConfigError(f"must be true or false, got {records!r}", field="records")
        self.head = head
        self.tail = tail
        self.keep_ratio = keep_ratio
        self.max_line = max_line
        self.records = records

    def compress(self, text: str, context: ToolContext) -> Compressed | None:
        lines = text.split("\n")
        n = len(lines)
        if n <= self.head + self.tail + 2:
            return None
        masks = [m.strip() for m in _MASK.sub("#", text).split("\n")]
        if len(masks) != n:  # a quoted string never spans lines, so this cannot happen
            masks = [mask_line(line) for line in lines]
        keep = self._must_keep(text, lines, masks, context)
        self._fill(lines, masks, keep)
        keep_small_gaps(lines, keep)
        return _render(lines, masks, keep, "log")

    def _must_keep(
        self, text: str, lines: list[str], masks: list[str], context: ToolContext
    ) -> list[bool]:
        n = len(lines)
        keep = [i < self.head or i >= n - self.tail for i in range(n)]
        starts = line_starts(text)
        relevance, literal_lines = matcher_for(context).line_hits(text, starts, parts=True)
        # literals always, the rarest literals' lines first past the cap; word-only matches:
        # the best few lines
        strong = rarest_first([i for i, r in relevance.items() if r >= 2.0], literal_lines)[:64]
        words = sorted(
            (i for i, r in relevance.items() if r < 2.0), key=lambda i: (-relevance[i], i)
        )
        sections = named_sections(lines, strong) if self.records else set()
        self._keep_errors(text, lines, masks, starts, sections, keep)
        for i in strong + words[:8]:
            keep[i] = True
        for i in strong if self.records else ():
            keep_record(lines, i, keep)
        for i in words[:8] if self.records else ():
            if relevance[i] >= 1.0:  # a query word on few lines
                keep_section(lines, i, keep)
        return keep

    @staticmethod
    def _keep_errors(
        text: str,
        lines: list[str],
        masks: list[str],
        starts: list[int],
        sections: set[int],
        keep: list[bool],
    ) -> None:
        """Keep stack traces, and error and warning lines, each pattern once but in a section
        the turn names (``log_records.named_sections``)."""
        warned: set[str] = set()  # a warning repeated 300 times is kept once, then counted
        low = text.lower()
        # a few characters lowercase to two ("İ"): then offsets would drift, so match as is
        important = _lines_with(_IMPORTANT, low if len(low) == len(text) else text, starts)
        in_trace = False
        for i, line in enumerate(lines):
            if not line or (line[0] not in " \t" and not in_trace and i not in important):
                continue  # the common case: a plain line, decided without a regex
            if _TRACE_START.match(line):
                in_trace = True
            elif in_trace and line and not line[0].isspace() and not _FRAME.match(line):
                keep[i] = True  # the exception line that ends a traceback
                in_trace = False
                continue
            if in_trace or _FRAME.match(line):
                keep[i] = True
            elif (
                i in important
                and (masks[i] not in warned or i in sections)
                and not _setting(line)  # a key named by an error word is no error
            ):
                keep[i] = True
                warned.add(masks[i])

    def _fill(self, lines: list[str], masks: list[str], keep: list[bool]) -> None:
        """Spend ``keep_ratio`` of the text on first occurrences of patterns, rarest first."""
        total = sum(len(line) + 1 for line in lines)
        room = self.keep_ratio * total - sum(
            min(len(line), self.max_line) + 1 for line, k in zip(lines, keep) if k
        )
        shown = {m for m, k in zip(masks, keep) if k}
        counts = Counter(masks)
        first: dict[str, int] = {}
        for i, m in enumerate(masks):
            first.setdefault(m, i)
        for m in sorted(first, key=lambda m: (counts[m], first[m])):
            if room <= 0:
                break
            if m in shown or not m:
                continue
            i = first[m]
            keep[i] = True
            shown.add(m)
            room -= min(len(lines[i]), self.max_line) + 1


def _render(lines: list[str], masks: list[str], keep: list[bool], kind: str) -> Compressed | None:
    """The kept lines with one marker per left-out run (``lines a-b``, 1-based)."""
    out: list[str] = []
    elisions: list[Elision] = []
    shown: set[str] = set()
    i, n = 0, len(lines)
    while i < n:
        if keep[i]:
            out.append(lines[i])
            shown.add(masks[i])
            i += 1
            continue
        j = i
        while j < n and not keep[j]:
            j += 1
        original = "\n".join(lines[i:j])
        ident = elision_id(original)
        repeats = sum(1 for m in masks[i:j] if m in shown)
        same = len(set(masks[i:j])) == 1 and i > 0 and masks[i - 1] == masks[i]
        if same:
            note = "the same as the line above, numbers aside"
        else:
            note = f"lines {i + 1}-{j}" + (f", {repeats} repeat kept patterns" if repeats else "")
        where = f"lines {i + 1}-{j}"
        elisions.append(Elision(ident, "lines", j - i, where, original, note))
        out.append(marker(j - i, "lines" if j - i > 1 else "line", ident, note))
        i = j
    if not elisions:
        return None
    return Compressed("\n".join(out), tuple(elisions), kind)
