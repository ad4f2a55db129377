"""Code and file reads: keep what the turn asked about, with the signatures around it.

Kept: the first ``head`` lines; an outline (every definition line indented at most
``outline_indent``; in a unified diff, its file headers); each line holding the turn's
literals or query words with ``context`` lines around it, and the definitions that enclose it
(walking out by indentation); the body of a definition the turn names (up to ``body_lines``),
and below any other line holding one of the turn's literals, the rest of the record it is in
(``records``, on by default: a service in a compose file, a Deployment in a manifest, a TOML
table, a log line's JSON payload, a diff's hunk; ``records.py``); in a text with no
definition line, below a line holding a query word on at most 8 lines too (a service named
``billing``, a Terraform resource ``"billing"``), where a query word also matches as a part of a
key that holds another query word (``ledger`` in ``LEDGER_DB_PORT``). Everything else is
elided in runs, each replaced by one comment line in the file's syntax that gives the line
range and the id of its original.

A literal on many lines may be a field every record has (``client_max_body_size`` in each
server of ``nginx -T``): where the record of a rarer literal of the turn (the server it names)
holds it, that is the answer, and its lines in other records are let go
(``_answered_fields``, with ``records``). At most 40 literal lines are kept, the rarest
literals' first, so a file with a field on hundreds of lines still keeps the named record.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable

from ...errors import ConfigError
from . import Compressed, Elision, ToolCompressor, ToolContext, elision_id, marker
from .match import keep_small_gaps, line_starts, matcher_for, rarest_first
from .records import indent as _indent
from .records import looks_like_config, looks_like_diff, record_end

__all__ = ["CodeCompressor", "comment_prefix", "definition_lines", "looks_like_code"]

# what a definition line starts with after its indentation, tested line by line with
# ``startswith``: a multiline regex of these alternatives tried every position of the text
# (25 ns a character, a fifth of a file's compression), the tuple costs one call per line
_DEFINITION_STARTS = (
    "@", "async def ", "def ", "class ", "export ", "function ", "func ", "pub ", "fn ",
    "struct ", "enum ", "trait ", "impl ", "mod ", "interface ", "public ", "private ",
    "protected ", "static ", "internal ", "module ", "type ", "diff --git ",
)  # fmt: skip
# what a line of code starts with, after its indentation (``from x import`` and ``@name`` are
# tested apart); or it ends with ``;``, ``{`` or ``:``. Tested with str methods line by line:
# one regex over the text with an unanchored end test tried every position (25 ns a character)
_CODE_STARTS = (
    "def ", "class ", "import ", "function ", "const ", "let ", "var ", "#include", "package ",
    "public ", "private ", "fn ", "func ", "if (", "for (", "}", "//", "/*", "* ",
)  # fmt: skip
_CODE_ENDS = (";", "{", ":")
_FROM_IMPORT = re.compile(r"from [\w.]+ import ")
_HASH_COMMENT = frozenset(
    [
        "py",
        "pyi",
        "sh",
        "bash",
        "zsh",
        "rb",
        "pl",
        "r",
        "yaml",
        "yml",
        "toml",
        "cfg",
        "ini",
        "mk",
        "cmake",
        "txt",
    ]
)
_SLASH_COMMENT = frozenset(
    [
        "c",
        "h",
        "cc",
        "cpp",
        "hpp",
        "cxx",
        "js",
        "jsx",
        "ts",
        "tsx",
        "mjs",
        "go",
        "rs",
        "java",
        "kt",
        "kts",
        "swift",
        "cs",
        "scala",
        "dart",
        "php",
        "proto",
    ]
)
_DASH_COMMENT = frozenset(["sql", "lua", "hs", "elm"])
_MARKUP_COMMENT = frozenset(["xml", "html", "htm", "xhtml", "svg", "plist", "csproj"])
#: the end a comment needs on its line, by its start
_COMMENT_END = {"<!-- ": " -->"}


def looks_like_code(text: str, path: str | None = None) -> bool:
    """A file read by its path's extension, else by the share of lines that look like code
    (a line may count twice: once for how it starts, once for how it ends); a unified diff, or
    a file of records (``records.py``), is read as a file too."""
    if path and comment_prefix(path) and "." in path.rsplit("/", 1)[-1]:
        return path.rsplit(".", 1)[-1].lower() not in ("txt", "md", "log", "json")
    lines = text.split("\n")
    if len(lines) < 8:
        return False
    if looks_like_diff(text):
        return True
    need = 0.25 * len(lines)
    found = 0
    for line in lines:
        if line.endswith(_CODE_ENDS):
            found += 1
        if _code_start(line.lstrip(" \t")):
            found += 1
        if found >= need:
            return True
    return looks_like_config(text)


def _code_start(s: str) -> bool:
    if s.startswith(_CODE_STARTS):
        return True
    head = s[:1]
    if head == "r":  # ``return`` as a word
        return s.startswith("return") and (len(s) == 6 or not _is_word(s[6]))
    if head == "@":
        return len(s) > 1 and _is_word(s[1])
    return head == "f" and _FROM_IMPORT.match(s) is not None


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def comment_prefix(path: str | None, text: str = "") -> str:
    """The line-comment syntax for ``path`` (by extension), guessed from ``text`` without one."""
    ext = path.rsplit(".", 1)[-1].lower() if path and "." in path else ""
    if ext in _HASH_COMMENT:
        return "# "
    if ext in _SLASH_COMMENT:
        return "// "
    if ext in _DASH_COMMENT:
        return "-- "
    if ext in _MARKUP_COMMENT:
        return "<!-- "
    if not ext and text[:200].lstrip()[:1] == "<":
        return "<!-- "
    if not ext and text:
        python = re.search(r"^\s*(?:def |import |class \w+:)", text, re.MULTILINE)
        return "# " if python or looks_like_config(text) else "// "
    return ""


def definition_lines(lines: list[str]) -> list[int]:
    """The indexes of the lines that open a definition (``def``, ``class``, a decorator...), and
    a diff's file headers; not its hunk headers (``@@``): one per hunk, with the marker after
    each they would cost about what they outline."""
    return [
        i
        for i, line in enumerate(lines)
        if line.lstrip(" \t").startswith(_DEFINITION_STARTS) and not line.startswith("@@")
    ]


class CodeCompressor(ToolCompressor):
    """File-read compression (see the module docstring)."""

    name = "code"

    def __init__(
        self,
        *,
        head: int = 3,
        context: int = 2,
        outline_indent: int = 0,
        body_lines: int = 30,
        max_word_lines: int = 8,
        records: bool = True,
    ) -> None:
        for fld, value in (
            ("head", head),
            ("context", context),
            ("outline_indent", outline_indent),
            ("body_lines", body_lines),
            ("max_word_lines", max_word_lines),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"must be an int >= 0, got {value!r}", field=fld)
        if not isinstance(records, bool):
            raise ConfigError(f"must be true or false, got {records!r}", field="records")
        self.head = head
        self.context = context
        self.outline_indent = outline_indent
        self.body_lines = body_lines
        self.max_word_lines = max_word_lines
        self.records = records

    def compress(self, text: str, context: ToolContext) -> Compressed | None:
        lines = text.split("\n")
        n = len(lines)
        if n <= self.head + 2 * self.context + 4:
            return None
        starts = line_starts(text)
        definitions = definition_lines(lines)
        indents = [_indent(lines[i]) for i in definitions]  # aligned with ``definitions``
        keep = [i < self.head for i in range(n)]
        for i, indent in zip(definitions, indents):
            if indent <= self.outline_indent:
                keep[i] = True
        self._relevant(text, lines, starts, (definitions, indents), keep, context)
        keep_small_gaps(lines, keep)
        return _render(lines, keep, comment_prefix(context.path, text))

    def _relevant(
        self,
        text: str,
        lines: list[str],
        starts: list[int],
        outline: tuple[list[int], list[int]],
        keep: list[bool],
        context: ToolContext,
    ) -> None:
        definitions = outline[0]
        # a key's parts are words in a file of records (``LEDGER_DB_PORT``); in code an
        # identifier's parts are one name, and the turn names functions whole
        relevance, literal_lines = matcher_for(context).line_hits(
            text, starts, parts=not definitions
        )
        if not relevance:
            return
        is_definition = set(definitions)
        n = len(lines)
        diff = self.records and looks_like_diff(text)  # then a named line's record is its hunk
        # in a text with no definition line (a file of records, Terraform, an nginx config) a
        # plain word names a record as well as an identifier does (a compose service
        # ``billing:``): a line holding a query word on few lines keeps its record too; in code
        # such a word is one of many, and a function the turn names keeps its body anyway
        least = 1.0 if self.records and not diff and not definitions else 2.0
        ends: dict[int, int] = {}

        def end(i: int) -> int:
            if i not in ends:
                record = self.records and relevance[i] >= least
                ends[i] = self._end(lines, i, i in is_definition, diff, record)
            return ends[i]

        strong = [i for i, r in relevance.items() if r >= 2.0]
        if self.records:
            answered = _answered_fields(literal_lines, end, self.context)
            strong = [i for i in strong if i not in answered]
        words = sorted(
            (i for i, r in relevance.items() if r < 2.0), key=lambda i: (-relevance[i], i)
        )
        strong = rarest_first(strong, literal_lines)[:40]
        for i in strong + words[: self.max_word_lines]:
            for j in range(max(0, i - self.context), min(n, i + self.context + 1)):
                keep[j] = True
            for j in range(i + 1, end(i)):
                keep[j] = True
            self._enclosing(lines, i, outline, keep)

    def _end(self, lines: list[str], start: int, named: bool, diff: bool, record: bool) -> int:
        """Where what a line the turn names keeps below it ends: a named definition's body (up
        to ``body_lines``), else with ``record`` the rest of its record (``records.record_end``:
        a service in a compose file, a TOML table, a diff's hunk), else the line itself."""
        if named and not diff:  # the turn names this definition: its body
            base = _indent(lines[start])
            for j in range(start + 1, min(len(lines), start + 1 + self.body_lines)):
                if lines[j].strip() and _indent(lines[j]) <= base:
                    return j
            return min(len(lines), start + 1 + self.body_lines)
        if record:
            return record_end(lines, start, self.body_lines, diff=diff)
        return start + 1

    @staticmethod
    def _enclosing(
        lines: list[str], i: int, outline: tuple[list[int], list[int]], keep: list[bool]
    ) -> None:
        definitions, indents = outline
        level = _indent(lines[i]) if lines[i].strip() else 1 << 30
        # the definitions before line i, nearest first (indents computed once per file)
        for k in range(bisect_left(definitions, i) - 1, -1, -1):
            if indents[k] < level:
                keep[definitions[k]] = True
                level = indents[k]
                if level == 0:
                    break


#: a literal on at least this many lines may be a field every record has
_FIELD_LINES = 4
#: the most lines the turn's other literals may be on for their records to be the ones it names
_NAMED_LINES = 8


def _answered_fields(
    literal_lines: dict[str, list[int]], end: Callable[[int], int], context: int
) -> set[int]:
    """Lines to let go: those of a literal on ``_FIELD_LINES`` lines or more, and on twice as
    many as the turn's rarest literal (a field every record has, ``client_max_body_size`` in
    each server of ``nginx -T``), that the record of a rarer literal of the turn (the server it
    names) already holds, outside such records.
    The question asks for that field of that record; the other records' values of it, each
    with its context and record, were most of what such a file kept. ``end``: where a
    literal's line's record ends."""
    if len(literal_lines) < 2:
        return set()
    fewest = min(map(len, literal_lines.values()))
    least = max(_FIELD_LINES, 2 * fewest)  # the record's own name may be on a few of its lines
    fields = {lit for lit, at in literal_lines.items() if len(at) >= least}
    named = {i for lit, at in literal_lines.items() if lit not in fields for i in at}
    if not fields or not named or len(named) > _NAMED_LINES:
        return set()
    spans = [(max(0, i - context), end(i) + context) for i in sorted(named)]

    def held(j: int) -> bool:
        return any(a <= j < b for a, b in spans)

    out: set[int] = set()
    for lit in fields:
        at = literal_lines[lit]
        if any(held(j) for j in at):
            out.update(j for j in at if j not in named and not held(j))
    return out


def _render(lines: list[str], keep: list[bool], prefix: str) -> Compressed | None:
    out: list[str] = []
    elisions: list[Elision] = []
    i, n = 0, len(lines)
    while i < n:
        if keep[i]:
            out.append(lines[i])
            i += 1
            continue
        j = i
        while j < n and not keep[j]:
            j += 1
        original = "\n".join(lines[i:j])
        ident = elision_id(original)
        where = f"lines {i + 1}-{j}"
        elisions.append(Elision(ident, "lines", j - i, where, original))
        first = next((line for line in lines[i:j] if line.strip()), None)
        pad = " " * _indent(first) if first is not None else ""
        note = marker(j - i, "lines" if j - i > 1 else "line", ident, where)
        out.append(pad + prefix + note + _COMMENT_END.get(prefix, ""))
        i = j
    if not elisions:
        return None
    return Compressed("\n".join(out), tuple(elisions), "code")
