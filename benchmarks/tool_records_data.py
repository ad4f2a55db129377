"""``bench_tools.py``'s records that are neither configuration files nor plain logs, generated in
code: each sent as one tool result, the answer several lines or blocks from the line naming
the question's subject, inside the same record.

- ``git_diff``: a ``git diff`` of compose files, two or three hunks each; the question names a
  service and asks the new timeout its file's first hunk sets, five lines below the name;
- ``payload_log``: a service log where one request line in three prints its JSON payload below
  it; the question names a request and asks the amount in its payload;
- ``markdown_sections``: a Markdown handbook, a ``##`` section per service with ``### Overview``
  and ``### Limits`` subsections; the question names a service and asks its rate limit, in a
  paragraph of the ``Limits`` subsection that names no service;
- ``pom_xml``: a Maven ``pom.xml``'s dependencies; the question names an artifact and asks its
  version, on the line below the name;
- ``html_table``: an HTML table, one cell per line; the question names a service and asks the
  limit three cells to the right, three lines below the name;
- ``pytest_failures``: ``pytest -v`` output of 300 tests, six failing; the question names a
  failed test and asks the status it got, in its failure section's ``E`` line below a
  traceback of 5 to 30 lines (every ``E`` line has one pattern, numbers and quotes aside);
- ``compiler_errors``: ``cargo build`` errors, one paragraph each; the question names a file
  and asks the type found there, three lines below the ``-->`` line naming the file.

Each is seeded by the generator it is given, so a run is reproducible.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable

from config_data import TEAMS, config_item, other_service

from promptslim.bench.datasets import BenchItem

__all__ = [
    "TOOL_RECORDS",
    "compiler_errors",
    "git_diff",
    "html_table",
    "markdown_sections",
    "payload_log",
    "pom_xml",
    "pytest_failures",
]

FILES = 10
REQUESTS = 90
SECTIONS = 12
KEYS = ("interval", "deadline", "grace")
DEPENDENCIES = 30
ROWS = 60
ERRORS = 14


def _hunk(rng: random.Random, name: str, first: bool, old: int, new: int) -> list[str]:
    key = "timeout" if first else rng.choice(KEYS)
    at = rng.randrange(3, 90)
    head = f"   {name}:" if first else f"     # {key} for the {rng.choice(TEAMS)} team"
    return [
        f"@@ -{at},9 +{at},{9 + first} @@ services:",
        head,
        f"     image: registry.local/{name}:1.{rng.randrange(30)}",
        f"     replicas: {rng.randrange(1, 9)}",
        f"     port: {rng.randrange(8000, 9000)}",
        f"-    {key}: {old}ms",
        f"+    {key}: {new}ms",
        *(["+    retries: 3"] if first else []),
        f"     memory: {rng.choice([256, 512, 1024])}Mi",
        "     restart: always",
        f"     user: svc-{rng.randrange(99)}",
    ]


def git_diff(rng: random.Random, i: int) -> BenchItem:
    """A ``git diff`` of compose files; the question asks the new timeout of one service,
    set in its file's first hunk five lines below the service's name."""
    target, where = f"billing-worker-{i}", rng.randrange(FILES)
    values = rng.sample(range(100, 9000), FILES * 6)  # distinct: one line answers
    lines: list[str] = []
    for k in range(FILES):
        name = target if k == where else other_service(rng, target)
        lines += [
            f"diff --git a/deploy/{name}.yaml b/deploy/{name}.yaml",
            f"index {rng.getrandbits(28):07x}..{rng.getrandbits(28):07x} 100644",
            f"--- a/deploy/{name}.yaml",
            f"+++ b/deploy/{name}.yaml",
        ]
        for h in range(rng.choice([2, 3])):
            lines += _hunk(rng, name, h == 0, values[6 * k + 2 * h], values[6 * k + 2 * h + 1])
    answer = f"+    timeout: {values[6 * where + 1]}ms"
    question = f"What timeout does the diff set for {target}?"
    return config_item("git_diff", i, ["\n".join(lines)], question, answer)


def payload_log(rng: random.Random, i: int) -> BenchItem:
    """A service log, one request line in three followed by its JSON payload; the question
    asks the amount one request paid."""
    target = f"req-{i:05d}-{rng.getrandbits(16):04x}"
    where = 3 * rng.randrange(REQUESTS // 3)
    amounts = rng.sample(range(100, 99999), REQUESTS)
    lines: list[str] = []
    for k in range(REQUESTS):
        rid = target if k == where else f"req-{rng.randrange(99999):05d}-{rng.getrandbits(16):04x}"
        stamp = f"2026-11-{1 + k % 28:02d}T10:{k % 60:02d}:{rng.randrange(60):02d}Z"
        if k % 3:
            ms = rng.randrange(1, 90)
            lines.append(f"{stamp} INFO GET /v1/health 200 {ms}ms request_id={rid}")
            continue
        payload = {
            "customer": f"cus_{rng.getrandbits(24):06x}",
            "currency": rng.choice(["EUR", "USD", "GBP"]),
            "amount_cents": amounts[k],
            "method": {"type": rng.choice(["card", "sepa"]), "last4": f"{rng.randrange(9999):04d}"},
        }
        lines.append(f"{stamp} INFO payment accepted request_id={rid} payload:")
        lines += json.dumps(payload, indent=2).split("\n")
    question = f"How many cents did request {target} pay?"
    return config_item(
        "payload_log", i, ["\n".join(lines)], question, f'"amount_cents": {amounts[where]}'
    )


def markdown_sections(rng: random.Random, i: int) -> BenchItem:
    """A Markdown handbook, a section per service; the question asks one service's rate
    limit, stated in its ``Limits`` subsection in a paragraph that names no service."""
    target, where = f"billing-worker-{i}", rng.randrange(SECTIONS)
    limits = rng.sample(range(50, 5000), SECTIONS)
    parts = ["# Service handbook", "What each service does and the limits it runs under."]
    for k in range(SECTIONS):
        name = target if k == where else other_service(rng, target)
        parts += [
            f"## {name}",
            "### Overview",
            (
                f"The service reads events from the {rng.choice(TEAMS)} queue and writes what it "
                "computes to the primary store. It moved to the new cluster last quarter and has "
                "had no incident since."
            ),
            "### Limits",
            (
                f"Upstream calls are capped at {limits[k]} requests per second. Bursts above the cap "
                "are rejected by the gateway rather than queued, so callers should retry with "
                "backoff."
            ),
        ]
    question = f"What is the upstream rate limit of {target}?"
    return config_item(
        "markdown_sections", i, ["\n\n".join(parts)], question, f"at {limits[where]} requests"
    )


def pom_xml(rng: random.Random, i: int) -> BenchItem:
    """A Maven ``pom.xml``'s dependencies; the question asks one artifact's version."""
    target, where = f"ledger-core-{i}", rng.randrange(DEPENDENCIES)
    lines = ['<?xml version="1.0" encoding="UTF-8"?>', "<project>", "  <dependencies>"]
    versions = []
    for k in range(DEPENDENCIES):
        name = target if k == where else other_service(rng, target)
        versions.append(f"{rng.randrange(1, 9)}.{rng.randrange(40)}.{rng.randrange(40)}")
        lines += [
            "    <dependency>",
            f"      <groupId>com.example.{rng.choice(TEAMS)}</groupId>",
            f"      <artifactId>{name}</artifactId>",
            f"      <version>{versions[-1]}</version>",
            f"      <scope>{rng.choice(['compile', 'test', 'runtime'])}</scope>",
            "    </dependency>",
        ]
    lines += ["  </dependencies>", "</project>"]
    question = f"Which version of {target} does the project depend on?"
    return config_item(
        "pom_xml", i, ["\n".join(lines)], question, f"<version>{versions[where]}</version>"
    )


def html_table(rng: random.Random, i: int) -> BenchItem:
    """An HTML table of services, a cell a line; the question asks one service's limit."""
    target, where = f"billing-worker-{i}", rng.randrange(ROWS)
    limits = rng.sample(range(50, 9000), ROWS)
    lines = ["<html><body>", "<h1>Services</h1>", "<table>"]
    lines.append("<tr><th>Service</th><th>Owner</th><th>Region</th><th>Limit</th></tr>")
    for k in range(ROWS):
        name = target if k == where else other_service(rng, target)
        lines += [
            "<tr>",
            f"  <td>{name}</td>",
            f"  <td>{rng.choice(['ana', 'bo', 'cyd', 'dee'])}</td>",
            f"  <td>{rng.choice(['eu-west', 'us-east', 'ap-south'])}</td>",
            f"  <td>{limits[k]} rps</td>",
            "</tr>",
        ]
    lines += ["</table>", "</body></html>"]
    question = f"What is the limit of {target}?"
    return config_item(
        "html_table", i, ["\n".join(lines)], question, f"<td>{limits[where]} rps</td>"
    )


TESTS, FAILED = 300, 6
STATUSES = ("pending", "settled", "voided", "refunded", "disputed", "expired")
WORDS = ("ledger", "invoice", "refund", "payout", "session", "cart", "quota", "webhook")


def _failure(rng: random.Random, name: str, status: str) -> list[str]:
    want = rng.choice([s for s in STATUSES if s != status])
    body = [
        f"        step_{j}(fixture, retries={rng.randrange(5)})"
        for j in range(rng.randrange(5, 31))
    ]
    return [
        f"{'_' * 30} {name} {'_' * 30}",
        "",
        f"    def {name}(ledger, customer):",
        *body,
        "        got = settle(fixture)",
        f">       assert got.status == {want!r}",
        f"E       AssertionError: assert {status!r} == {want!r}",
        "",
        f"tests/test_{name.split('_')[1]}.py:{rng.randrange(10, 400)}: AssertionError",
    ]


def pytest_failures(rng: random.Random, i: int) -> BenchItem:
    """``pytest -v`` output; the question asks the status one failed test got."""
    names = [f"test_{rng.choice(WORDS)}_{k}_{rng.randrange(99)}" for k in range(TESTS)]
    failed = sorted(rng.sample(range(TESTS), FAILED))
    target = failed[rng.randrange(FAILED)]
    names[target] = f"test_refund_{i}"
    lines = ["=" * 30 + " test session starts " + "=" * 30, f"collected {TESTS} items", ""]
    for k, name in enumerate(names):
        verdict = "FAILED" if k in failed else "PASSED"
        lines.append(
            f"tests/test_{name.split('_')[1]}.py::{name} {verdict} [{100 * k // TESTS:3d}%]"
        )
    lines += ["", "=" * 30 + " FAILURES " + "=" * 30]
    statuses = {k: rng.choice(STATUSES) for k in failed}
    for k in failed:
        lines += _failure(rng, names[k], statuses[k])
    lines.append(f"{'=' * 20} {FAILED} failed, {TESTS - FAILED} passed in 12.34s {'=' * 20}")
    question = f"What status did test_refund_{i} get instead of the one it expected?"
    answer = f"AssertionError: assert {statuses[target]!r} =="
    return config_item("pytest_failures", i, ["\n".join(lines)], question, answer)


TYPES = ("u32", "i64", "usize", "f64", "String", "&str", "Option<u32>", "Vec<u8>")


def compiler_errors(rng: random.Random, i: int) -> BenchItem:
    """``cargo build`` errors, a paragraph each; the question asks the type found in one file."""
    target, where = f"src/refund_{i}.rs", rng.randrange(ERRORS)
    lines = ["   Compiling ledger v0.4.2 (/work/ledger)"]
    found = ""
    for k in range(ERRORS):
        name = target if k == where else f"src/{rng.choice(WORDS)}_{rng.randrange(999)}.rs"
        want, got = rng.sample(TYPES, 2)
        row = rng.randrange(10, 900)
        lines += [
            "error[E0308]: mismatched types",
            f"  --> {name}:{row}:{rng.randrange(5, 40)}",
            "   |",
            f"{row:>3} |     let total: {want} = amount_{k};",
            f"   |                {'-' * len(want)}   ^^^^^^^^^ expected `{want}`, found `{got}`",
            "   |                |",
            "   |                expected due to this",
            "",
        ]
        found = f"expected `{want}`, found `{got}`" if k == where else found
    lines.append(f"error: could not compile `ledger` (lib) due to {ERRORS} previous errors")
    question = f"In {target}, which type does the compiler say it found?"
    return config_item("compiler_errors", i, ["\n".join(lines)], question, found)


#: the shapes by name
TOOL_RECORDS: dict[str, Callable[[random.Random, int], BenchItem]] = {
    "git_diff": git_diff,
    "payload_log": payload_log,
    "markdown_sections": markdown_sections,
    "pom_xml": pom_xml,
    "html_table": html_table,
    "pytest_failures": pytest_failures,
    "compiler_errors": compiler_errors,
}
