"""The tool compressors' fast paths find what the plain definitions find: literals and query
words per JSON item in one scan of the items joined, log keywords by ``str.find``, the code
test by string methods; and a query word on a few lines of a short log keeps its lines."""

from __future__ import annotations

import json
import re
from bisect import bisect_right

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from promptslim.backends.tools import ToolContext
from promptslim.backends.tools.code import looks_like_code
from promptslim.backends.tools.json_crusher import JsonCompressor, NotJson
from promptslim.backends.tools.logs import _IMPORTANT, LogCompressor, _lines_with
from promptslim.backends.tools.match import Matcher, line_starts
from promptslim.backends.tools.records import looks_like_config, record_end
from promptslim.backends.tools.router import route
from promptslim.backends.tools.text import TextCompressor

# small alphabets, so that needles do occur in the parts, at their edges and across them
_CHARS = st.sampled_from(list("ab1_ .-A\x1e\x1f"))
_PART = st.text(_CHARS, max_size=12)
_NEEDLE = st.text(_CHARS, min_size=1, max_size=4).filter(str.strip)


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(_PART, max_size=8), literals=st.lists(_NEEDLE, max_size=4))
def test_literals_per_part_are_each_parts_literals(parts: list[str], literals: list[str]) -> None:
    m = Matcher(literals, ())
    assert m.literals_per_part(parts) == [m.literals_in(p) for p in parts]


@settings(max_examples=300, deadline=None)
@given(
    parts=st.lists(_PART, max_size=8),
    words=st.lists(st.text(st.sampled_from("ab1_"), min_size=1, max_size=3), max_size=3),
)
def test_word_hits_per_part_are_each_parts_word_hits(parts: list[str], words: list[str]) -> None:
    m = Matcher((), words)
    assert m.word_hits_per_part(parts) == [m.word_hits(p) for p in parts]


# the code test as one regex (what it was): a match per line start, one per line end
_CODE_LINE = re.compile(
    r"^[ \t]*(?:def |class |import |from [\w.]+ import |function |const |let |var |return\b|"
    r"#include|package |public |private |fn |func |if \(|for \(|\}|//|/\*|\* |@\w)|[;{:]$",
    re.MULTILINE,
)
_CODE_BITS = st.sampled_from(
    ["def f", "return", "returns", "@x", "@ ", "from a.b import c", "from import", "}", "{", ";",
     ":", "x = 1", "  ", "\t", "// c", "* ", "if (x)", "é", "\r"]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(st.lists(_CODE_BITS, max_size=3).map("".join), min_size=0, max_size=14))
def test_the_code_test_is_the_share_of_code_like_lines(lines: list[str]) -> None:
    text = "\n".join(lines)
    n = text.count("\n") + 1
    expected = n >= 8 and sum(1 for _ in _CODE_LINE.finditer(text)) >= 0.25 * n
    assert looks_like_code(text) == (expected or looks_like_config(text))


_DESCRIBE = """Name:         web-7d4b9c
Namespace:    default
Node:         worker-2/10.0.0.12
Labels:       app=web
Containers:
  web:
    Image:        registry.local/web:1.4
    Port:         8080/TCP
    Limits:
      memory:  512Mi
    Requests:
      memory:  256Mi
Conditions:
  Type:    Ready
  Status:  True"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # a compose file, a manifest, ``kubectl describe``: indented records of keys
        ("services:\n" + "  api:\n    image: api:1\n    timeout: 30s\n" * 4, True),
        (("spec:\n  containers:\n  - name: a\n    resources:\n      limits:\n"
          "        memory: 1Gi\n      requests:\n        cpu: 1\n"), True),
        (_DESCRIBE, True),
        # TOML and INI: flat keys under ``[section]`` headers
        ("[tool.a]\nname = \"a\"\nversion = \"1.0\"\n\n" * 3, True),
        ("; deploy\n[db]\nhost=10.0.0.1\nport=5432\n[cache]\nhost=10.0.0.2\nttl=60\n", True),
        # pretty-printed XML and HTML: indented tags
        ("<?xml version=\"1.0\"?>\n<project>\n" + "  <dependency>\n    <version>1.2</version>\n"
         "  </dependency>\n" * 3 + "</project>", True),
        ("<table>\n" + "<tr>\n  <td>a</td>\n  <td>1 rps</td>\n</tr>\n" * 3 + "</table>", True),
        # flat headers, a log whose lines start with a level, test output, a logfmt log (keys,
        # neither indented nor sectioned): not records
        ("time=10:00:01 level=info msg=ok\n" * 10, False),
        ("From: a@b.c\nTo: d@e.f\nSubject: hi\nDate: today\n" * 3, False),
        ("INFO: started\n  retrying the fetch now\nWARN: slow\n  waited 3 s for it\n" * 3, False),
        ("tests/test_a.py::test_x PASSED\n  tests/test_b.py::test_y FAILED\n" * 5, False),
        # syslog lines open with a priority in angle brackets, not a tag
        ("<34>Oct 11 22:14:15 host su: failed\n  <13>Oct 11 22:14:16 host cron: ok\n" * 5, False),
        # too short to tell
        ("a:\n  b: 1\n  c: 2\n", False),
    ],
)  # fmt: skip
def test_records_of_keys_are_told_apart(text: str, expected: bool) -> None:
    assert looks_like_config(text) is expected
    assert looks_like_code(text) is expected


_CONFIG_LINE = st.tuples(
    st.sampled_from(["", "", "  ", "\t", " \t"]),
    st.sampled_from(
        [
            "key: v",
            "key:",
            "- item",
            "k\tx:",
            "a b: v",
            "plain",
            "",
            "k:v",
            ": v",
            "-x",
            "k = v",
            "k=",
            "a b = v",
            "=v",
            "[s]",
            "[s] x",
            "# c",
            ";c",
            "k:x=1",
            "<a>",
            "</a>",
            "<!-- c",
            "<34> x",
            "< x",
        ]
    ),
).map("".join)
# a key (``key: v``, ``key = v``), a list item, a comment, a tag; a header apart
_KEYED = re.compile(r"[ \t]*(?:- |#|;|<[A-Za-z/!?]|[^ \t:][^ :]*:(?:[ \t]|$)|[^ \t=]+[ \t]*=)")
_HEADER = re.compile(r"[ \t]*\[.*\]\s*$")


@settings(max_examples=500, deadline=None)
@given(lines=st.lists(_CONFIG_LINE, min_size=4, max_size=20))
@example(lines=["[a]", "k = v", "k = v", "k = v", "[b]", "k = v", "k = v", "k = v"])
@example(lines=["[a]", "k\tx = v", "k\tx = v", "k\tx = v", "[b]", "k = v", "plain", "plain"])
def test_the_config_test_is_the_share_of_indented_and_keyed_lines(lines: list[str]) -> None:
    # the definition counted plainly, without the early exits
    text = "\n".join(lines)
    n = text.count("\n") + 1
    headers = sum(1 for line in text.split("\n") if _HEADER.match(line))
    keyed = headers + sum(
        1 for line in text.split("\n") if _KEYED.match(line) and not _HEADER.match(line)
    )
    indented = sum(1 for line in text.split("\n") if line[:1] in (" ", "\t"))
    expected = n >= 8 and keyed >= 0.5 * n and (indented >= 0.3 * n or headers >= 2)
    assert looks_like_config(text) is expected
    # only the head is read: what follows its first 100 lines does not change the answer
    head = "\n".join((lines * 100)[:100])
    assert looks_like_config(head + "\nplain line" * 300) is looks_like_config(head)


_LOG_BITS = st.sampled_from(
    ["ok", "error", "warn", "timed out", "not found", "Fail", "x", " ", "\n", "errror", "can't"]
)


@settings(max_examples=300, deadline=None)
@given(bits=st.lists(_LOG_BITS, max_size=30))
def test_log_keywords_are_found_on_every_line_that_holds_one(bits: list[str]) -> None:
    text = "".join(bits)
    starts = line_starts(text)
    pattern = re.compile("|".join(re.escape(w) for w in _IMPORTANT))
    expected = {bisect_right(starts, m.start()) - 1 for m in pattern.finditer(text)}
    assert _lines_with(_IMPORTANT, text, starts) == expected


def _pip_log() -> str:
    lines = [
        "WARNING: Location 'file:///opt/pypi/simple/litellm/' is ignored: it is not a file.",
        "WARNING: Location 'file:///opt/pypi-more/simple/litellm/' is ignored: it is not a file.",
        "Collecting litellm<2.0,>=1.96.2 (from headroom-ai)",
        "  Downloading litellm-1.110.2-py3-none-any.whl (9.8 MB)",
        "     ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━ 9.8/9.8 MB 97.0 MB/s eta 0:00:00",
    ]
    for i, pkg in enumerate(["tomlkit", "fastuuid", "zipp", "jinja2", "rich", "click"]):
        lines += [
            f"WARNING: Location 'file:///opt/pypi/simple/{pkg}/' is ignored: it is not a file.",
            f"Collecting {pkg}<{i + 2}.0,>=0.{i}.0 (from {'litellm' if i < 2 else 'rich'}<2.0)",
            f"  Downloading {pkg}-0.{i}.{i + 3}-py3-none-any.whl ({i + 10} kB)",
        ]
    lines.append("Requirement already satisfied: filelock>=4.2.1 in ./site-packages (4.3.1)")
    return "\n".join(lines)


def test_a_query_word_on_a_few_lines_of_a_short_log_keeps_them() -> None:
    text = _pip_log()
    # the package's name on 6 of 24 lines (a tenth of the lines is 2): as pip wrote it here
    assert len(text.split("\n")) == 24 and text.count("litellm") == 6
    ctx = ToolContext(
        query="In the output of `pip install -v headroom`, which version of litellm was downloaded?"
    )
    out = LogCompressor().compress(text, ctx)
    assert out is not None
    assert "  Downloading litellm-1.110.2-py3-none-any.whl (9.8 MB)" in out.text.split("\n")


@pytest.mark.parametrize("text", ['{"a": [1, 2', "[1, 2,]", '{"a" 1}', "[" * 2000])
def test_text_that_is_not_json_is_told_apart_and_goes_on_as_text(text: str) -> None:
    with pytest.raises(NotJson):
        JsonCompressor().compress_json(text, ToolContext())
    assert JsonCompressor().compress(text, ToolContext()) is None


def test_valid_json_with_nothing_to_crush_is_left_as_it_is() -> None:
    # long enough for the text compressor, but one object with no long array or string
    text = json.dumps({f"field_{i}": f"Value {i} of the record. It is short." for i in range(60)})
    compressors = {"json": JsonCompressor(), "text": TextCompressor()}
    assert JsonCompressor().compress_json(text, ToolContext()) is None
    assert route(text, ToolContext(query="field_7"), compressors) is None


def test_a_rare_query_word_outranks_a_common_one_in_a_long_log() -> None:
    # "pip" is on 40 lines before the answer, "anyio" on three: the few word-matched lines a
    # log keeps must be anyio's
    lines = [f"Collecting package-{i} (from other-{i})" for i in range(400)]
    for i in range(0, 200, 5):
        lines[i] = f"INFO: pip is looking at multiple candidates of package-{i}"
    lines[300:303] = [
        "WARNING: Location 'file:///simple/anyio/' is ignored",
        "Collecting anyio (from httpx)",
        "  Downloading anyio-4.16.0-py3-none-any.whl (134 kB)",
    ]
    context = ToolContext(query="In the output of pip install, which anyio was downloaded?")
    out = LogCompressor().compress("\n".join(lines), context)
    assert out is not None and "anyio-4.16.0" in out.text
    assert len(out.text) < len("\n".join(lines)) / 2


@pytest.mark.parametrize(("above", "kept"), [(50, True), (200, False)])
def test_a_records_parents_are_looked_for_a_few_limits_up(above: int, kept: bool) -> None:
    # a block whose head is further up than four limits is not read back to: a long file
    # indented throughout costs a bounded scan for each named line
    lines = ["a: 0", "b:", *["  x: 1"] * above, "  named: v", "  y: 2", "c: 3"]
    start = lines.index("  named: v")
    assert (record_end(lines, start, 30) == start + 2) is kept
    assert record_end(lines, start, 30) in (start + 1, start + 2)
