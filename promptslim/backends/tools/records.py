"""Files of records (YAML, ``kubectl describe``, TOML, INI, XML): how to tell one, and where the
record a line is in ends; the same for unified diffs and for bodies in brackets.

In a configuration file the line that answers sits a few lines below the one naming the
question's subject, inside the same record: a service's ``timeout`` under its name in a compose
file, a Deployment's memory limit five levels below its name, a TOML table's keys under its
``[header]``. Its short alike lines would pass for a log, and keeping the lines around a named
line stops short of the answer. So such a file is read as a file (``looks_like_config``), and
below a line the turn names the rest of its record is kept (``record_end``): the rest of the
indented blocks around the line, or of the ``[section]`` it is in, or, below a comment, the
record of the line it describes (a comment right above a ``[section]`` header heads the
sections up to the next such comment: a unit file in ``systemctl cat``). A body in brackets
that opens on the line or on the one after it (a log line's JSON payload, a call's arguments)
is part of its record too (``block_end``, which the log compressor shares). In a unified diff
(``looks_like_diff``) a line's record is its hunk: the changed lines below a file's or a
hunk's header name nothing themselves.
"""

from __future__ import annotations

import re

__all__ = [
    "CONFIG_HEAD",
    "block_end",
    "indent",
    "is_header",
    "looks_like_config",
    "looks_like_diff",
    "record_end",
]

#: the lines the configuration test reads: a file of records is alike from its top, and a log
#: of 50,000 lines should not pay a loop over all of them to be told apart from one
CONFIG_HEAD = 100
_KEY, _HEADER = 1, 2
#: a unified diff's hunk header (``@@ -12,7 +12,8 @@``)
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@", re.MULTILINE)
_OPENERS, _CLOSERS = "{[(", "}])"


def is_header(s: str) -> bool:
    """A ``[section]`` or ``[[table]]`` header line (``s`` without its indentation)."""
    return s.startswith("[") and s.rstrip().endswith("]")


def _kind(s: str) -> int:
    """What the line ``s`` (without its indentation) is in a file of records: a key
    (``key: value``, ``key = value``, a list item, a comment, an XML or HTML tag), a header,
    or neither (0)."""
    if s.startswith(("- ", "#", ";")) or _is_tag(s):
        return _KEY
    if is_header(s):
        return _HEADER
    colon = s.find(":")
    if colon > 0 and s[colon + 1 : colon + 2] in ("", " ", "\t") and " " not in s[:colon]:
        return _KEY
    equals = s.find("=")
    key = s[:equals].rstrip(" \t") if equals > 0 else ""
    return _KEY if key and " " not in key and "\t" not in key else 0


def _is_tag(s: str) -> bool:
    """Whether ``s`` starts with a markup tag (``<dependency>``, ``</tr>``, ``<!--``, ``<?xml``);
    not a syslog priority (``<34>Oct 11 ...``)."""
    return s[:1] == "<" and (s[1:2].isalpha() or s[1:2] in ("/", "!", "?"))


def looks_like_config(text: str) -> bool:
    """Of the first ``CONFIG_HEAD`` lines, half are keys, list items, comments, tags or
    headers, and either three in ten are indented (YAML, pretty-printed XML) or two are
    ``[section]`` headers (TOML, INI). A log of ``key=value`` pairs (logfmt) is neither
    indented nor sectioned."""
    lines = text.split("\n", CONFIG_HEAD)[:CONFIG_HEAD]
    n = len(lines)
    if n < 8:
        return False
    keyed = indented = headers = 0
    for seen, line in enumerate(lines, 1):
        s = line.lstrip(" \t")
        indented += len(s) < len(line)
        kind = _kind(s) if s else 0
        keyed += kind != 0
        headers += kind == _HEADER
        if seen - keyed > 0.5 * n:  # already too many lines that are none of these
            return False
    return indented >= 0.3 * n or headers >= 2


def looks_like_diff(text: str) -> bool:
    """A unified diff (``git diff``, ``git show``, ``diff -u``): a ``+++`` file line and a hunk
    header. The substring test runs first: most text has no ``+++`` line and pays one scan."""
    return "\n+++ " in text and _HUNK.search(text) is not None


def indent(line: str) -> int:
    """The width of the spaces and tabs that start ``line``."""
    return len(line) - len(line.lstrip(" \t"))


def _indented_end(lines: list[str], start: int, limit: int, outer: bool = True) -> int:
    """The end of the outermost indented block around line ``start`` that ends within
    ``limit`` lines (``outer``; else only the line's own), the line's own block included where
    the next line is deeper. A block ends at a non-blank line indented no deeper than its head,
    or at the end of the text, but for the block the text's first line opens (``services:``):
    that is the whole file."""
    n = len(lines)
    following = next((j for j in range(start + 1, n) if lines[j].strip()), n)
    level = indent(lines[start])
    heads = [start] if following < n and indent(lines[following]) > level else []
    # its parents, innermost first, no further up than a few limits: a long file indented
    # throughout is not read back to its top for each named line
    for j in range(start - 1, max(-1, start - 4 * limit - 1) if outer else start, -1):
        if level == 0:
            break
        if lines[j].strip() and indent(lines[j]) < level:
            level = indent(lines[j])
            heads.append(j)
    end, j = start + 1, following
    while heads and j < min(n, start + 1 + limit):
        if lines[j].strip():
            ended = [h for h in heads if indent(lines[h]) >= indent(lines[j])]
            heads = heads[len(ended) :]
            end = j if ended else end
        j += 1
    first = next((k for k, line in enumerate(lines) if line.strip()), 0)
    if j >= n and any(h != first for h in heads):
        end = n  # the text's end ends the blocks still open
    return end


def _section_end(lines: list[str], start: int, limit: int) -> int:
    """The end of the ``[section]`` line ``start`` is in (its header within ``limit`` lines
    above, or the line itself): the next header, or ``limit`` lines below the line."""
    low = max(-1, start - limit - 1)
    if not any(is_header(lines[j].lstrip(" \t")) for j in range(start, low, -1)):
        return start + 1
    end = start + 1
    while end < min(len(lines), start + 1 + limit) and not is_header(lines[end].lstrip(" \t")):
        end += 1
    return end


def _bracket_end(lines: list[str], start: int, limit: int) -> int:
    """Past the line where the brackets that line ``start`` leaves open close, when that is
    within ``limit`` lines below it; else ``start + 1``. Brackets inside strings count like any
    other: at worst the body ends early, or stays open past the limit and adds nothing."""
    depth = 0
    for j in range(start, min(len(lines), start + 1 + limit)):
        line = lines[j]
        depth += sum(map(line.count, _OPENERS)) - sum(map(line.count, _CLOSERS))
        if depth <= 0:
            return j + 1
    return start + 1


def _opens(line: str) -> bool:
    """Whether ``line`` leaves a bracket open (cheap first: most lines hold none)."""
    return any(c in line for c in _OPENERS) and (
        sum(map(line.count, _OPENERS)) > sum(map(line.count, _CLOSERS))
    )


def block_end(lines: list[str], start: int, limit: int, *, outer: bool = True) -> int:
    """Where the block under line ``start`` ends (exclusive), at most ``limit`` lines below:
    the rest of the indented blocks around it (``outer``; else only the line's own, deeper
    lines: in a log, a named line's siblings are other records), and a body in brackets that
    opens on the line, or on the next line at its indent (a JSON payload printed below it)."""
    end = _indented_end(lines, start, limit, outer)
    if _opens(lines[start]):
        end = max(end, _bracket_end(lines, start, limit))
    nxt = start + 1
    if (
        nxt < len(lines)
        and 1 < limit
        and _opens(lines[nxt])
        and indent(lines[nxt]) == indent(lines[start])
    ):
        below = _indented_end(lines, nxt, limit - 1, outer)
        end = max(end, below, _bracket_end(lines, nxt, limit - 1))
    return end


def _hunk_end(lines: list[str], start: int, limit: int) -> int:
    """In a diff, the end of the hunk line ``start`` is in, at most ``limit`` lines below it:
    from a file's or a hunk's header, past the header lines to the end of the hunk below."""
    end, stop = start + 1, min(len(lines), start + 1 + limit)
    in_hunk = _hunk_line(lines[start])
    while end < stop:
        line = lines[end]
        if _hunk_line(line):
            in_hunk = True
        elif in_hunk and line and not line.startswith("\\"):  # "\ No newline at end of file"
            break
        end += 1
    return end


def _hunk_line(line: str) -> bool:
    """A context, added or removed line of a diff (not a ``---``/``+++`` file line)."""
    return line[:1] in (" ", "+", "-") and not line.startswith(("+++ ", "--- "))


def record_end(lines: list[str], start: int, limit: int, *, diff: bool = False) -> int:
    """Where the record line ``start`` is in ends (exclusive), at most ``limit`` lines below
    it: the rest of its indented blocks (YAML) or of its ``[section]`` (TOML, INI), or a body in
    brackets it opens (``block_end``). A comment names what follows it (``# aws_instance.web
    will be created`` above the resource's block in a Terraform plan): the record of the line
    right after it, at its indent, counts too. In a unified diff (``diff``): the hunk."""
    if diff:
        return _hunk_end(lines, start, limit)
    end = max(block_end(lines, start, limit), _section_end(lines, start, limit))
    head = lines[start].lstrip(" \t")
    nxt = start + 1
    if head.startswith(("#", "//")) and nxt < len(lines) and 1 < limit:
        line = lines[nxt]
        below = line.lstrip(" \t")
        if below and not below.startswith(("#", "//")) and indent(line) == indent(lines[start]):
            end = max(end, block_end(lines, nxt, limit - 1), _group_end(lines, start, limit))
    return end


def _heads_group(lines: list[str], at: int) -> bool:
    """Whether line ``at`` is a comment right above a ``[section]`` header."""
    return (
        lines[at].lstrip(" \t").startswith(("#", "//"))
        and at + 1 < len(lines)
        and is_header(lines[at + 1].lstrip(" \t"))
    )


def _group_end(lines: list[str], start: int, limit: int) -> int:
    """Where the sections a comment right above a ``[section]`` header introduces end: at the
    next such comment, or ``limit`` lines below (``systemctl cat`` heads each unit file's
    sections with ``# /etc/systemd/system/NAME.service``; an INI file's comment above each
    section heads that section alone). Past ``start + 1`` only when ``start`` is one."""
    if not _heads_group(lines, start):
        return start + 1
    end, stop = start + 2, min(len(lines), start + 1 + limit)
    while end < stop and not _heads_group(lines, end):
        end += 1
    return end
