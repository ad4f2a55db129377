"""Records the tool compressors keep whole around a named line: a unified diff's hunk, a JSON
payload printed under a log line, XML elements, a compiler error's paragraph, a test's failure
section; the bounds of every record rule; short gaps kept; no result sent bigger."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from promptslim.backends.tools import TOOL_COMPRESSORS, Compressed, ToolCompressor, ToolContext
from promptslim.backends.tools.code import CodeCompressor
from promptslim.backends.tools.log_records import REACH, is_banner, keep_record
from promptslim.backends.tools.logs import LogCompressor
from promptslim.backends.tools.match import keep_small_gaps
from promptslim.backends.tools.records import block_end, looks_like_diff, record_end
from promptslim.backends.tools.router import candidates, route

from .test_tool_compressors import ALL, originals, restore_lines

SERVICES = ("auth-api-7", "search-cron-12", "billing-worker-31", "media-api-4", "queue-cron-9")


def _diff(target: str = "billing-worker-31") -> str:
    """A ``git diff`` of one compose file per service, two hunks each: the first names the
    service, and its changed timeout is five lines below that name."""
    out = []
    for k, name in enumerate(SERVICES):
        out += [
            f"diff --git a/deploy/{name}.yaml b/deploy/{name}.yaml",
            f"index {k:07x}..{k + 9:07x} 100644",
            f"--- a/deploy/{name}.yaml",
            f"+++ b/deploy/{name}.yaml",
            f"@@ -{k + 3},8 +{k + 3},8 @@ services:",
            f"   {name}:",
            f"     image: registry.local/{name}:1.{k}",
            f"     replicas: {k + 1}",
            f"     port: {8000 + k}",
            f"-    timeout: {100 + k}ms",
            f"+    timeout: {700 + k}ms",
            "     memory: 256Mi",
            "     restart: always",
            f"@@ -{k + 40},6 +{k + 40},6 @@ services:",
            "     healthcheck:",
            f"-      interval: {10 + k}s",
            f"+      interval: {20 + k}s",
            "       retries: 3",
            "     user: svc",
        ]
    return "\n".join(out)


def test_a_diff_is_read_as_a_file_and_a_named_line_keeps_its_hunk() -> None:
    text = _diff()
    ctx = ToolContext(query="What is the new timeout of billing-worker-31?")
    assert looks_like_diff(text) and candidates(text, ctx)[0] == "code"
    out = CodeCompressor().compress(text, ctx)
    assert out is not None and "+    timeout: 702ms" in out.text
    # the rest of the file's diff (its second hunk) and the other files' hunks are left out
    assert "+      interval: 22s" not in out.text and "+    timeout: 700ms" not in out.text
    # every file's header stays: a kept hunk is never read as another file's
    assert all(f"diff --git a/deploy/{name}.yaml" in out.text for name in SERVICES)
    assert restore_lines(out.text, originals(out)) == text
    off = CodeCompressor(records=False).compress(text, ctx)
    assert off is not None and "+    timeout: 702ms" not in off.text


def test_a_file_named_only_in_its_header_keeps_its_first_hunk() -> None:
    text = _diff().replace("billing-worker-31:", "svc:").replace("/billing-worker-31:", "/b:")
    ctx = ToolContext(query="What does the diff change in deploy/billing-worker-31.yaml?")
    out = CodeCompressor().compress(text, ctx)
    assert out is not None and "+    timeout: 702ms" in out.text
    # the record runs from the file's header to its first hunk's end: the next hunk is another
    lines = text.split("\n")
    header = lines.index(
        "diff --git a/deploy/billing-worker-31.yaml b/deploy/billing-worker-31.yaml"
    )
    second = next(i for i in range(header + 5, len(lines)) if lines[i].startswith("@@"))
    assert record_end(lines, header, 30, diff=True) == second
    assert record_end(lines, header, 5, diff=True) == header + 6  # within its limit


@pytest.mark.parametrize(
    ("text", "diff"),
    [
        ("--- a.txt\n+++ b.txt\n@@ -1 +1 @@\n-old\n+new", True),  # diff -u, one-line hunks
        (("commit 1a2b\nAuthor: A <a@x>\n\n    msg\n\ndiff --git a/x b/x\n--- a/x\n+++ b/x\n"
         "@@ -10,2 +10,3 @@ def f():\n     a\n+    b"), True),  # git show
        ("Scores\n+++ great\n+++ fine\n@@ not a hunk @@", False),
        ("@@ -1,2 +1,2 @@ alone, without the file lines", False),
    ],
)  # fmt: skip
def test_what_is_a_unified_diff(text: str, diff: bool) -> None:
    assert looks_like_diff(text) is diff


def _payload_log(target: str, with_bodies: int = 4) -> str:
    """Request lines, every ``with_bodies``-th with a JSON payload printed below it."""
    lines = []
    for k in range(40):
        rid = target if k == 20 else f"req-{k:04d}"
        if k % with_bodies:
            lines.append(f"2024-05-01T10:{k:02d}:07Z INFO GET /health 200 3ms request_id={rid}")
            continue
        lines += [
            f"2024-05-01T10:{k:02d}:09Z INFO payment accepted request_id={rid} body=",
            "{",
            f'  "customer": "cus_{k:06x}",',
            '  "currency": "EUR",',
            f'  "amount_cents": {1000 + k},',
            '  "method": "card"',
            "}",
        ]
    return "\n".join(lines)


def test_a_log_line_keeps_the_json_payload_printed_below_it() -> None:
    text = _payload_log("req-target")
    ctx = ToolContext(query="What amount in cents did request req-target pay?")
    assert candidates(text, ctx)[0] == "log"
    out = LogCompressor().compress(text, ctx)
    assert out is not None and '"amount_cents": 1020' in out.text
    assert '"amount_cents": 1016' not in out.text  # another request's payload
    assert restore_lines(out.text, originals(out)) == text
    off = LogCompressor(records=False).compress(text, ctx)
    assert off is not None and '"amount_cents": 1020' not in off.text


def test_a_log_of_payloads_read_as_records_keeps_the_named_payload() -> None:
    text = _payload_log("req-target", with_bodies=1)  # every line has one: keys, indented
    ctx = ToolContext(query="What amount in cents did request req-target pay?")
    assert candidates(text, ctx)[0] == "code"
    out = CodeCompressor().compress(text, ctx)
    assert out is not None and '"amount_cents": 1020' in out.text
    off = CodeCompressor(records=False).compress(text, ctx)
    assert off is not None and '"amount_cents": 1020' not in off.text


def test_a_named_log_line_keeps_its_own_block_not_its_siblings() -> None:
    rows = [" id | name | cpu", "----+------+----"]
    rows += [f" {k:2d} | svc-{k} | {100 + k}m" for k in range(30)]
    lines = [*rows, "(30 rows)"]
    # in a file, a line's record is the outermost indented block (the rest of the table); in a
    # log, its own deeper lines (none)
    assert block_end(lines, 12, 20) == len(lines) - 1
    assert block_end(lines, 12, 20, outer=False) == 13


@pytest.mark.parametrize(
    ("lines", "start", "end"),
    [
        (["a request body={", '  "x": 1,', "}", "next"], 0, 3),  # opened on the line
        (["a request", "{", '  "x": 1', "}", "next"], 0, 4),  # on the next line, at its indent
        (["a (note", "b", "c", "d"], 0, 1),  # never closed within the limit: no block
        (["a request", "f(x)", "next"], 0, 1),  # the next line opens nothing it leaves open
        (["  a request", "{", "}"], 0, 1),  # the next line is not at the named one's indent
    ],
)
def test_a_block_in_brackets(lines: list[str], start: int, end: int) -> None:
    assert block_end(lines, start, 3) == end


_LINE = st.sampled_from(
    ["a", "  b: 1", "    c", "[s]", "# c", "{", "}", "  x = f(", ")", "", "@@ -1 +1 @@", "+y",
     "-z", " w", "diff --git a/f b/f", "--- a/f", "+++ b/f", "\\ No newline at end of file"]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(_LINE, min_size=1, max_size=40), st.integers(0, 39), st.integers(0, 12))
@example(["a", "{", "  b: 1", "}"], 0, 1)  # a next-line bracket with one line of limit left
@example(["  b: 1", "    c", "    c"], 0, 0)
@example(["# c", "[s]", "a", "a", "a", "# c", "[s]"], 0, 3)  # a comment heading sections
def test_a_record_ends_within_its_limit(lines: list[str], at: int, limit: int) -> None:
    start = at % len(lines)
    bound = min(len(lines), start + 1 + limit)
    for end in (
        record_end(lines, start, limit),
        record_end(lines, start, limit, diff=True),
        block_end(lines, start, limit),
        block_end(lines, start, limit, outer=False),
    ):
        assert start + 1 <= end <= max(bound, start + 1)


def _pom(target: str = "billing-core-7") -> str:
    deps = []
    for k, name in enumerate(["auth-core-1", "queue-util-4", target, "media-client-9"] * 3):
        deps += [
            "    <dependency>",
            f"      <groupId>com.example.g{k}</groupId>",
            f"      <artifactId>{name}{'' if name == target else f'-{k}'}</artifactId>",
            f"      <version>{k}.{k + 1}.0</version>",
            "      <scope>compile</scope>",
            "    </dependency>",
        ]
    return "\n".join(
        [
            '<?xml version="1.0"?>',
            "<project>",
            "  <dependencies>",
            *deps,
            "  </dependencies>",
            "</project>",
        ]
    )


def test_an_xml_file_is_read_as_a_file_with_markup_comments() -> None:
    text = _pom()
    ctx = ToolContext(query="Which version of billing-core-7 does the project use?")
    assert candidates(text, ctx)[0] == "code"  # its short alike lines made it a log
    out = CodeCompressor().compress(text, ctx)
    assert out is not None and "<version>2.3.0</version>" in out.text
    markers = [line for line in out.text.split("\n") if "elided" in line]
    assert markers and all(
        m.strip().startswith("<!-- [… ") and m.endswith("] -->") for m in markers
    )
    unwrapped = "\n".join(line.removesuffix(" -->") for line in out.text.split("\n"))
    assert restore_lines(unwrapped, originals(out)) == text


def test_an_html_table_row_keeps_its_cells_below_the_named_one() -> None:
    rows = [
        f"<tr>\n  <td>svc-{k}</td>\n  <td>ana</td>\n  <td>eu</td>\n  <td>{100 + k} rps</td>\n</tr>"
        for k in range(40)
    ]
    text = "<table>\n<tr><th>Service</th><th>Owner</th><th>Region</th><th>Limit</th></tr>\n"
    text += "\n".join(rows) + "\n</table>"
    ctx = ToolContext(query="What is the limit of svc-17?")
    assert candidates(text, ctx)[0] == "code"
    out = CodeCompressor().compress(text, ctx)
    assert out is not None and "<td>117 rps</td>" in out.text and "<td>118 rps</td>" not in out.text
    off = CodeCompressor(records=False).compress(text, ctx)
    assert off is not None and "<td>117 rps</td>" not in off.text


def _pytest_failures(target: str = "test_refund_7") -> str:
    """``pytest -v`` output: passes, then a failure section per failed test, each with an
    ``E`` line of the same pattern (numbers aside)."""
    names = [f"test_cart_{k}" for k in range(30)]
    names[12] = target
    failed = [3, 12, 21]
    lines = ["=== test session starts ===", "collected 30 items", ""]
    lines += [
        f"tests/test_a.py::{n} {'FAILED' if k in failed else 'PASSED'}" for k, n in enumerate(names)
    ]
    lines += [
        "",
        "=================================== FAILURES ===================================",
    ]
    for k in failed:
        lines += [
            f"_________________________________ {names[k]} _________________________________",
            "",
            f"    def {names[k]}(ledger, customer):",
            "        fixture = make_fixture(kind='refund', amount=100, currency='EUR')",
            "        ledger.post(fixture, customer=customer, settle=True)",
            *[f"        step_{j}(fixture)" for j in range(REACH)],  # past the section's reach
            "        got = compute(fixture)",
            f">       assert got == {100 + k}",
            f"E       assert {k} == {100 + k}",
            "",
            f"tests/test_a.py:{10 + k}: AssertionError",
        ]
    lines += ["=== 3 failed, 27 passed in 1.23s ==="]
    return "\n".join(lines)


def test_a_named_tests_failure_section_keeps_its_assertion() -> None:
    text = _pytest_failures()
    ctx = ToolContext(query="What did test_refund_7 get instead?")
    assert candidates(text, ctx)[0] == "log"
    out = LogCompressor().compress(text, ctx)
    # the E line's pattern was kept already, for the first failure: elsewhere it would count
    # as a repeat, in the named test's section it is the answer
    assert out is not None and "E       assert 12 == 112" in out.text
    assert restore_lines(out.text, originals(out)) == text
    off = LogCompressor(records=False).compress(text, ctx)
    assert off is not None and "E       assert 12 == 112" not in off.text


def _rustc(target: str = "src/refund_7.rs", errors: int = 10) -> str:
    """``cargo build`` errors, each a paragraph: what, where (``-->``), the source line."""
    out = ["   Compiling proj v0.1.0 (/work/proj)"]
    for k in range(errors):
        name = target if k == 6 else f"src/cart_{k}.rs"
        out += [
            "error[E0308]: mismatched types",
            f"  --> {name}:{100 + k}:17",
            "   |",
            f"{100 + k} |     let total: u32 = amount_{k};",
            "   |                ---   ^^^^^^^^ expected `u32`, found `i64`",
            "",
        ]
    return "\n".join([*out, "error: could not compile `proj` due to 10 previous errors"])


def test_a_named_compiler_errors_paragraph_is_kept() -> None:
    text = _rustc()
    ctx = ToolContext(query="Which statement in src/refund_7.rs has the type error?")
    out = LogCompressor().compress(text, ctx)
    assert out is not None and "106 |     let total: u32 = amount_6;" in out.text
    assert "105 |     let total" not in out.text  # another error's paragraph
    off = LogCompressor(records=False).compress(text, ctx)
    assert off is not None and "106 |     let total: u32 = amount_6;" not in off.text


def test_a_paragraph_longer_than_the_reach_adds_nothing() -> None:
    lines = [f"line {k}" for k in range(REACH + 5)]
    keep = [False] * len(lines)
    keep_record(lines, 3, keep)
    assert not any(keep)
    short = ["", "a", "b", "c", ""]
    keep = [False] * len(short)
    keep_record(short, 2, keep)
    assert keep == [False, True, True, True, False]


def test_a_named_banner_keeps_its_section_within_the_reach() -> None:
    # (no blank lines, and more than the reach: not a short paragraph)
    lines = ["____ test_x ____", "plain a", "plain b", "____ test_y ____", *["plain"] * REACH]
    keep = [False] * len(lines)
    keep_record(lines, 0, keep)
    assert keep[:4] == [False, True, True, False] and not any(keep[4:])
    lines = ["____ test_x ____", *[f"plain {k}" for k in range(2 * REACH)]]
    keep = [False] * len(lines)
    keep_record(lines, 0, keep)
    assert sum(keep) == REACH and keep[REACH] and not keep[REACH + 1]


@pytest.mark.parametrize(
    ("line", "banner"),
    [
        ("_____ test_refund _____", True),
        ("=================================== FAILURES ===", True),
        ("----------- Captured stdout call -----------", True),
        ("===================", False),  # a rule with no title
        ("-- Configuring done", False),  # a CMake line
        ("# Heading #", False),
        ("=== RUN   TestRefund", False),  # go test: no closing rule
        ("TASK [web : restart service] *********", True),  # Ansible: a title, then a rule
        ("PLAY RECAP ****", True),
        ("total ===", False),  # a rule of three is no rule
        ("a --- b", False),
        ("x = y - z", False),
    ],
)
def test_what_is_a_banner(line: str, banner: bool) -> None:
    assert is_banner(line) is banner


def test_short_gaps_are_kept_by_their_characters() -> None:
    lines = ["kept", "Date: Mon", "", "Hi all,", "", "kept", "x" * 50, "y" * 50, "z" * 50, "kept"]
    keep = [line == "kept" for line in lines]
    keep_small_gaps(lines, keep)
    assert keep == [True] * 6 + [False] * 3 + [True]
    empty = ["kept", *[""] * 9, "kept"]
    keep = [line == "kept" for line in empty]
    keep_small_gaps(empty, keep)
    assert keep == [True] + [False] * 9 + [True]  # many lines: a marker says how many


class _Growing(ToolCompressor):
    """A test seam: a compressor whose markers cost more than what they replace."""

    name = "log"

    def compress(self, text: str, context: ToolContext) -> Compressed | None:
        return Compressed(text + " [… 0 lines elided]", (), "log")


def test_a_result_that_does_not_shrink_is_sent_as_it_was() -> None:
    text = "\n".join(f"2026-11-30 10:{k:02d}:00 INFO worker {k} done" for k in range(40))
    ctx = ToolContext(query="how did worker 3 do?")
    assert candidates(text, ctx) == ("log", "text")
    text_compressor = TOOL_COMPRESSORS.get("text")()
    assert text_compressor.compress(text, ctx) is not None  # it would pick sentences of it
    assert route(text, ctx, {"log": _Growing(), "text": text_compressor}) is None


def test_a_log_or_code_its_compressor_keeps_whole_is_not_handed_to_the_text_compressor() -> None:
    log = "\n".join(
        f"0.00.{k:03d} I slot {k} | task {k} | processing task, n_tokens = 42" for k in range(14)
    )
    ctx = ToolContext(query="which task ran in slot 3?")
    assert candidates(log, ctx)[0] == "log" and LogCompressor().compress(log, ctx) is None
    assert TOOL_COMPRESSORS.get("text")().compress(log, ctx) is not None
    assert route(log, ctx, ALL) is None
    assert route("{not json" + " and some words." * 200, ctx, ALL) is not None  # text after all
