"""Which compressor a tool result goes to, by its content (and the path its call named).

JSON when it parses as JSON (tried by the JSON compressor itself: bad or truncated JSON comes
back as None and goes on as text); code when the call named a source file, when most lines
look like code, when it is a unified diff, or when they are records of keys or tags (YAML,
``kubectl describe``, TOML, INI, XML, HTML: ``records.looks_like_config``); a log when it has
many short lines, or when most of its lines start as log records do (a timestamp, a level, a
syslog date, a client address, a JSON object, a build step: service, access, JSON-lines and
build logs run to 200 characters a line and more); plain text otherwise. The first
candidate's answer is final: a code file or a log its compressor keeps whole (too short,
nothing worth a marker), or whose compression would not be shorter, is sent as it was, not
handed on to the text compressor, which picks sentences and is the wrong tool for either. Only text that turns out not to be JSON goes on to the next
candidate, and only such text pays for the code and log tests.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from . import Compressed, ToolCompressor, ToolContext
from .code import looks_like_code
from .json_crusher import JsonCompressor, NotJson

__all__ = ["candidates", "route"]


#: how a log record's line starts: a date or a time of day (ISO, syslog's "Nov 30 10:01:05",
#: glog's "I1130 10:01"), an upper-case level, a client's IPv4 address (access logs), a JSON
#: object (JSON-lines logs), a build step's counter (ninja's "[163/193] /usr/bin/g++ ...",
#: whose compiler lines run to 2,000 characters) or CMake's "-- " status line; a bracket may
#: come first
_RECORD_START = re.compile(
    r"^[ \t]*\[?(?:\d{4}[-/]\d{2}[-/]\d{2}|\d{2}:\d{2}:\d{2}|[A-Z][a-z]{2} +\d{1,2} \d{2}:\d{2}"
    r"|[IWEF]\d{4} \d{2}:\d{2}|(?:TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|FATAL|CRITICAL)\b"
    r"|\d{1,3}(?:\.\d{1,3}){3}\b|\{\"|\d+/\d+\]|-- )",
    re.MULTILINE | re.ASCII,
)
#: the share of a text's non-blank lines that must start as records for it to be a log
_RECORD_SHARE = 0.5


def _looks_like_log(text: str) -> bool:
    lines = text.count("\n") + 1
    if lines < 12:
        return False
    # sentences run long and end with punctuation; log lines are short and rarely do
    if len(text) / lines < 160 and text.count(". ") < lines / 2:
        return True
    # long lines: records still start alike, where paragraphs of prose do not
    filled = lines - text.count("\n\n")  # blank lines aside (an estimate from above)
    return len(_RECORD_START.findall(text)) >= _RECORD_SHARE * filled


def _candidates(text: str, context: ToolContext) -> Iterator[str]:
    if text.lstrip()[:1] in ("{", "["):
        yield "json"
    if looks_like_code(text, context.path):
        yield "code"
    elif _looks_like_log(text):
        yield "log"
    yield "text"


def candidates(text: str, context: ToolContext) -> tuple[str, ...]:
    """The compressor names to try, in order."""
    return tuple(_candidates(text, context))


def route(
    text: str,
    context: ToolContext,
    compressors: Mapping[str, ToolCompressor],
    *,
    parsed: Any = None,
) -> Compressed | None:
    """The first candidate's result, when it shrinks the text (None: send it unchanged); a
    text that is not JSON goes on past the JSON compressor. ``parsed``: the text's JSON value
    (``load_json``), where the caller has parsed it."""
    for name in _candidates(text, context):
        compressor = compressors.get(name)
        if compressor is None:
            continue
        if isinstance(compressor, JsonCompressor):
            try:
                # valid JSON with nothing to crush stays as it is, not text-compressed
                return compressor.compress_json(text, context, parsed=parsed)
            except NotJson:
                continue
        out = compressor.compress(text, context)
        if out is None and name == "json" and not _is_json(text):
            continue  # as above, for a JSON compressor of the caller's own
        # markers can cost what they elide: then the text goes as it was
        return out if out is not None and len(out.text) < len(text) else None
    return None


def _is_json(text: str) -> bool:
    import json

    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True
