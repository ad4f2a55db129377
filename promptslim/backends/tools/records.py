"""Files of records (YAML, ``kubectl describe``, TOML, INI): how to tell one, and where the
record a line is in ends.

In a configuration file the line that answers sits a few lines below the one naming the
question's subject, inside the same record: a service's ``timeout`` under its name in a compose
file, a Deployment's memory limit five levels below its name, a TOML table's keys under its
``[header]``. Its short alike lines would pass for a log, and keeping the lines around a named
line stops short of the answer. So such a file is read as a file (``looks_like_config``), and
below a line the turn names the rest of its record is kept (``record_end``): the rest of the
indented blocks around the line, or of the ``[section]`` it is in, or, below a comment, the
record of the line it describes.
"""

from __future__ import annotations

__all__ = ["CONFIG_HEAD", "indent", "is_header", "looks_like_config", "record_end"]

#: the lines the configuration test reads: a file of records is alike from its top, and a log
#: of 50,000 lines should not pay a loop over all of them to be told apart from one
CONFIG_HEAD = 100
_KEY, _HEADER = 1, 2


def is_header(s: str) -> bool:
    """A ``[section]`` or ``[[table]]`` header line (``s`` without its indentation)."""
    return s.startswith("[") and s.rstrip().endswith("]")


def _kind(s: str) -> int:
    """What the line ``s`` (without its indentation) is in a file of records: a key
    (``key: value``, ``key = value``, a list item, a comment), a header, or neither (0)."""
    if s.startswith(("- ", "#", ";")):
        return _KEY
    if is_header(s):
        return _HEADER
    colon = s.find(":")
    if colon > 0 and s[colon + 1 : colon + 2] in ("", " ", "\t") and " " not in s[:colon]:
        return _KEY
    equals = s.find("=")
    key = s[:equals].rstrip(" \t") if equals > 0 else ""
    return _KEY if key and " " not in key and "\t" not in key else 0


def looks_like_config(text: str) -> bool:
    """Of the first ``CONFIG_HEAD`` lines, half are keys, list items, comments or headers, and
    either three in ten are indented (YAML) or two are ``[section]`` headers (TOML, INI). A
    log of ``key=value`` pairs (logfmt) is neither indented nor sectioned."""
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


def indent(line: str) -> int:
    """The width of the spaces and tabs that start ``line``."""
    return len(line) - len(line.lstrip(" \t"))


def _indented_end(lines: list[str], start: int, limit: int) -> int:
    """The end of the outermost indented block around line ``start`` that ends within
    ``limit`` lines, the line's own block included where the next line is deeper. A block
    ends at a non-blank line indented no deeper than its head, or at the end of the text, but
    for the block the text's first line opens (``services:``): that is the whole file."""
    n = len(lines)
    following = next((j for j in range(start + 1, n) if lines[j].strip()), n)
    level = indent(lines[start])
    heads = [start] if following < n and indent(lines[following]) > level else []
    # its parents, innermost first, no further up than a few limits: a long file indented
    # throughout is not read back to its top for each named line
    for j in range(start - 1, max(-1, start - 4 * limit - 1), -1):
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


def record_end(lines: list[str], start: int, limit: int) -> int:
    """Where the record line ``start`` is in ends (exclusive), at most ``limit`` lines below
    it: the rest of its indented blocks (YAML) or of its ``[section]`` (TOML, INI). A comment
    names what follows it (``# aws_instance.web will be created`` above the resource's block
    in a Terraform plan): the record of the line right after it, at its indent, counts too."""
    end = max(_indented_end(lines, start, limit), _section_end(lines, start, limit))
    head = lines[start].lstrip(" \t")
    nxt = start + 1
    if head.startswith(("#", "//")) and nxt < len(lines) and 1 < limit:
        line = lines[nxt]
        below = line.lstrip(" \t")
        if below and not below.startswith(("#", "//")) and indent(line) == indent(lines[start]):
            end = max(end, _indented_end(lines, nxt, limit - 1))
    return end
