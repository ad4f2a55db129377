"""The record the turn names: a field every record of a file has, asked for one record, is
kept in that record and let go in the others (``code._answered_fields``); past their caps on
literal lines the code and log compressors keep the rarest literals' lines first, so the named
record is kept however many records the file has; and in a file of records a record named by
a plain word (a compose service ``ledger:``) keeps its rest as one named by an identifier
does."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promptslim.backends.tools import ToolContext
from promptslim.backends.tools.code import CodeCompressor
from promptslim.backends.tools.json_crusher import JsonCompressor, _word_items, load_json
from promptslim.backends.tools.log_records import REACH
from promptslim.backends.tools.logs import LogCompressor, _setting
from promptslim.backends.tools.match import Matcher, _identifier_parts, line_starts, rarest_first
from promptslim.backends.tools.records import looks_like_config, record_end

from .test_tool_compressors import as_plain, originals, restore_json, restore_lines

NAMED = "billing-7.example.com"


def nginx(servers: int, at: int, *, field_in_named: bool = True) -> tuple[str, list[str]]:
    """An ``nginx -T`` dump of ``servers`` server blocks, the ``at``-th the named one; each
    server sets its own ``client_max_body_size`` (the named one only with ``field_in_named``:
    else it inherits the ``http`` block's). Returns the text and each server's field line."""
    out = ["worker_processes auto;", "http {", "    client_max_body_size 1m;"]
    fields = []
    for k in range(servers):
        name = NAMED if k == at else f"team{k}-{k * 37 % 101}.example.com"
        field = f"            client_max_body_size {10 + k}m;"
        fields.append(field)
        out += [
            "    server {",
            "        listen 443 ssl;",
            f"        server_name {name};",
            f"        access_log /var/log/nginx/{name}.log;",
            "        location / {",
            f"            proxy_pass http://127.0.0.1:{4000 + k};",
        ]
        if field_in_named or k != at:
            out.append(field)
        out += ["        }", "    }"]
    out.append("}")
    return "\n".join(out), fields


ASKED = ToolContext(query=f"What client_max_body_size does {NAMED} allow?")


def test_the_named_records_field_is_kept_and_the_others_let_go() -> None:
    text, fields = nginx(15, 9)
    out = CodeCompressor().compress(text, ASKED)
    assert out is not None
    assert fields[9] in out.text and f"server_name {NAMED};" in out.text
    assert not any(f in out.text for k, f in enumerate(fields) if k != 9)
    assert restore_lines(out.text, originals(out)) == text
    # without the record rules every server's field line is kept, with its context
    plain = CodeCompressor(records=False).compress(text, ASKED)
    assert plain is not None and all(f in plain.text for f in fields)
    assert len(out.text) < len(plain.text) / 2


def test_the_named_record_is_kept_past_the_cap_on_literal_lines() -> None:
    text, fields = nginx(70, 66)
    out = CodeCompressor().compress(text, ASKED)
    assert out is not None and fields[66] in out.text
    assert sum(f in out.text for f in fields) == 1


def test_an_inherited_field_keeps_every_line_of_it_and_the_named_record() -> None:
    """The named server does not set the field: no record holds the answer, so nothing is
    let go; the ``http`` block's line (its value) and the named server are both kept."""
    text, fields = nginx(70, 66, field_in_named=False)
    out = CodeCompressor().compress(text, ASKED)
    assert out is not None
    assert "    client_max_body_size 1m;" in out.text and f"server_name {NAMED};" in out.text
    assert sum(f in out.text for f in fields) >= 30


def test_a_literal_alone_keeps_its_lines() -> None:
    """No rarer literal names a record: a field asked for alone keeps every line of it (up to
    the cap), as a literal always did."""
    text, fields = nginx(15, 9)
    out = CodeCompressor().compress(text, ToolContext(query="Which client_max_body_size is set?"))
    assert out is not None and all(f in out.text for f in fields)


@pytest.mark.parametrize("sharing, all_kept", [(8, False), (9, True)])
def test_a_name_on_many_lines_names_no_record(sharing: int, all_kept: bool) -> None:
    """A rarer literal on more lines than a record's name is on (one name shared by nine
    servers) names no record: nothing is let go. Shared by eight, each is a named record."""
    text, fields = nginx(20, 19)
    shared = "shared.example.com"
    for k in range(sharing):
        text = text.replace(
            f"server_name team{k}-{k * 37 % 101}.example.com", f"server_name {shared}"
        )
    asked = ToolContext(query=f"What client_max_body_size does {shared} allow?")
    out = CodeCompressor().compress(text, asked)
    assert out is not None and all(f in out.text for f in fields[:sharing])
    assert all(f in out.text for f in fields) is all_kept


@settings(max_examples=60, deadline=None)
@given(
    servers=st.integers(2, 80),
    data=st.data(),
    field_in_named=st.booleans(),
)
def test_the_answer_survives_any_layout(
    servers: int, data: st.DataObject, field_in_named: bool
) -> None:
    at = data.draw(st.integers(0, servers - 1))
    text, fields = nginx(servers, at, field_in_named=field_in_named)
    out = CodeCompressor().compress(text, ASKED)
    kept = text if out is None else out.text
    assert f"server_name {NAMED};" in kept
    assert (fields[at] if field_in_named else "    client_max_body_size 1m;") in kept
    if out is not None:
        assert restore_lines(out.text, originals(out)) == text


_TOKEN = st.sampled_from(["max_size", "a.b", "x1", "word", " ", "_", "max_size2", "\n"])


@settings(max_examples=200, deadline=None)
@given(bits=st.lists(_TOKEN, max_size=60), literals=st.lists(_TOKEN, max_size=3))
def test_each_literals_lines_are_the_lines_that_count_it(
    bits: list[str], literals: list[str]
) -> None:
    """``line_hits``' lines of each literal are the lines whose relevance it adds to."""
    text = "".join(bits)
    needles = [lit for lit in dict.fromkeys(literals) if lit.strip() and len(lit) >= 2]
    matcher = Matcher(needles, ())
    relevance, literal_lines = matcher.line_hits(text, line_starts(text))
    assert relevance == matcher.lines_hit(text, line_starts(text))
    per_line: dict[int, int] = {}
    for lit, at in literal_lines.items():
        assert lit in needles and at == sorted(set(at))
        for i in at:
            per_line[i] = per_line.get(i, 0) + 1
    assert {i: 2.0 * c for i, c in per_line.items()} == relevance


def test_a_log_keeps_the_named_workers_line_past_the_cap_on_literal_lines() -> None:
    """A job's name on 250 lines of a log and a worker's on one: the log compressor's cap of
    64 literal lines kept the job's first 64 lines and lost the worker's (the answer)."""
    lines = []
    for k in range(1000):
        stamp = f"2026-12-01T10:{k // 60 % 60:02d}:{k % 60:02d}Z"
        if k == 700:
            lines.append(f"{stamp} INFO ingest_daily_report worker-77 finished rows=4521")
        elif k % 4 == 0:
            lines.append(f"{stamp} INFO ingest_daily_report worker-{k % 50} batch {k} done")
        else:
            lines.append(f"{stamp} DEBUG scheduler tick {k} queue depth {k % 13}")
    text = "\n".join(lines)
    asked = ToolContext(query="How many rows did ingest_daily_report write on worker-77?")
    out = LogCompressor().compress(text, asked)
    assert out is not None and "worker-77 finished rows=4521" in out.text
    assert restore_lines(out.text, originals(out)) == text


def test_the_rarest_literals_lines_come_first() -> None:
    literal_lines = {"field": [1, 3, 5, 7, 9], "name": [8], "pair": [2, 6]}
    assert rarest_first([9, 7, 6, 5, 3, 2, 1, 8, 4], literal_lines) == [8, 2, 6, 1, 3, 5, 7, 9, 4]


WORDS = ("billing", "search", "auth", "media", "queue", "ledger", "mailer", "gateway", "reports")


def compose(target: str = "ledger") -> tuple[str, str]:
    """A compose file of services named by plain words, the timeout six lines below each
    name; the target's timeout line."""
    lines, answer = ["services:"], ""
    for k, name in enumerate(WORDS):
        lines += [
            f"  {name}:",
            f"    image: registry.local/team/svc-{k}:1.{k}",
            f"    replicas: {k % 4 + 1}",
            "    environment:",
            "      LOG_LEVEL: info",
            f"      REGION: eu-{k}",
            f"    timeout: {100 + k}ms",
            f"    mem_limit: {256 + k}m",
        ]
        answer = f"    timeout: {100 + k}ms" if name == target else answer
    return "\n".join(lines), answer


def test_a_word_in_code_keeps_no_record() -> None:
    """A Python module whose head is a table (it passes the test for files of records) has
    definitions: a query word's line there keeps its context, not the rest of its block."""
    table = [f'    "key{k}": {k},' for k in range(40)]
    body = [f"    step_{k} = prepare({k})" for k in range(12)]
    text = "\n".join(
        ["TABLE = {", *table, "}", "", "def run(name):", "    frobnicate(name)", *body]
    )
    assert looks_like_config(text)
    out = CodeCompressor().compress(text, ToolContext(query="What does frobnicate do?"))
    assert out is not None
    kept = out.text.split("\n")
    assert "    frobnicate(name)" in kept and "    step_1 = prepare(1)" in kept
    assert "    step_6 = prepare(6)" not in kept


def playbook(tasks: int = 20, target: int = 13) -> tuple[str, str]:
    """``ansible-playbook`` output, a task per plain word, one host changed in each; the
    target task's ``changed:`` line."""
    names = [f"{word}{k // len(WORDS) or ''}" for k, word in enumerate(WORDS * 5)][:tasks]
    lines, answer = ["PLAY [deploy services] " + "*" * 50, ""], ""
    for k, name in enumerate(names):
        changed = f'changed: [web-{k % 6 + 1}] => {{"pid": {40_000 + k}}}'
        hosts = [changed if h == k % 6 else f"ok: [web-{h + 1}]" for h in range(6)]
        lines += [f"TASK [{name} : restart service] " + "*" * 40, *hosts, ""]
        answer = changed if k == target else answer
    return "\n".join(lines), answer


@pytest.mark.parametrize(
    ("compressor", "items", "query"),
    [
        # in a file of records, a word's line keeps its record, as a literal's does
        (CodeCompressor, compose, "What is the timeout of the ledger service?"),
        # in a log, a word names the banner that holds it: the section below (the hosts)
        (LogCompressor, lambda: playbook(target=8), "Which host changed in the reports task?"),
    ],
)
def test_a_record_named_by_a_plain_word_keeps_its_rest(
    compressor: type[CodeCompressor | LogCompressor],
    items: Callable[[], tuple[str, str]],
    query: str,
) -> None:
    """``ledger`` and ``reports`` are no identifiers, only query words on one line each."""
    text, answer = items()
    asked = ToolContext(query=query)
    out = compressor().compress(text, asked)
    assert out is not None and answer in out.text.split("\n")
    assert restore_lines(out.text, originals(out)) == text
    off = compressor(records=False).compress(text, asked)
    assert off is not None and answer not in off.text.split("\n")


def test_a_word_on_a_plain_log_line_keeps_only_that_line() -> None:
    """The same log with its task lines not banners: a word on a plain line names no more than
    the line (a word in a log is too often incidental to name a paragraph)."""
    text, answer = playbook(target=8)
    plain = text.replace(" " + "*" * 40, "")
    out = LogCompressor().compress(plain, ToolContext(query="Which host changed in reports?"))
    assert out is not None and "TASK [reports : restart service]" in out.text.split("\n")
    assert answer not in out.text.split("\n")


def test_a_word_named_section_ends_at_the_next_banner_and_within_reach() -> None:
    """A section is kept to the next banner, and never past ``REACH`` lines below its own."""
    text, _ = playbook(target=8)
    asked = ToolContext(query="Which host changed in the reports restart task?")
    out = LogCompressor(tail=0).compress(text, asked)
    assert out is not None and '"pid": 40008' in out.text and '"pid": 40009' not in out.text
    long = ["noise"] * 5 + ["=== reports ===", *(f"host-{k} ok" for k in range(40))] + ["x"] * 5
    out = LogCompressor(tail=0).compress("\n".join(long), ToolContext(query="reports status?"))
    assert out is not None
    kept = out.text.split("\n")
    assert f"host-{REACH - 1} ok" in kept and f"host-{REACH} ok" not in kept


def test_a_word_on_many_banners_names_no_section() -> None:
    """``core`` is on 12 of the 40 tasks' banners: it still picks them out as lines, but names
    none of their sections."""
    lines = playbook(tasks=40)[0].split("\n")
    banners = [i for i, line in enumerate(lines) if line.startswith("TASK")]
    for i in banners[16::2]:
        lines[i] = lines[i].replace("restart service", "restart core")
    asked = ToolContext(query="Which host did core?")
    out = LogCompressor(head=0, tail=0).compress("\n".join(lines), asked)
    assert out is not None and "TASK [gateway1 : restart core]" in out.text
    assert '"pid": 40016' not in out.text


def test_a_terraform_resource_named_by_a_word_keeps_its_body() -> None:
    """Terraform is no file of keys by the router's test, but has no definition line either:
    the ``resource`` line naming ``ledger`` keeps the body its bracket opens."""
    lines = []
    for k, name in enumerate(WORDS):
        lines += [
            f'resource "aws_instance" "{name}" {{',
            f'  ami           = "ami-{k:08x}"',
            '  instance_type = "t3.micro"',
            "  tags = {",
            '    Team = "core"',
            "  }",
            "  root_block_device {",
            f"    volume_size = {8 * (k + 1)}",
            "  }",
            "}",
            "",
        ]
    text = "\n".join(lines)
    assert not looks_like_config(text)
    asked = ToolContext(query="How big is the root volume of the ledger instance?")
    out = CodeCompressor().compress(text, asked)
    answer = f"    volume_size = {8 * (WORDS.index('ledger') + 1)}"
    assert out is not None and answer in out.text.split("\n")
    assert restore_lines(out.text, originals(out)) == text


def test_a_comment_above_a_header_heads_the_sections_up_to_the_next_one() -> None:
    """``systemctl cat`` heads each unit file with ``# /etc/systemd/system/NAME.service``
    above its ``[Unit]``: the unit named by a word keeps all its sections, the ``[Service]``
    timeout with them; the next unit's comment ends them."""
    lines = []
    for k, name in enumerate(WORDS):
        lines += [
            f"# /etc/systemd/system/{name}.service",
            "[Unit]",
            f"Description={name.title()} service",
            "",
            "[Service]",
            f"ExecStart=/usr/bin/svc-{k}",
            f"TimeoutStartSec={10 + k}",
            "",
            "[Install]",
            "WantedBy=multi-user.target",
            "",
        ]
    text = "\n".join(lines)
    at = lines.index("# /etc/systemd/system/ledger.service")
    assert record_end(lines, at, 30) == at + 11  # up to the next unit's comment
    out = CodeCompressor().compress(
        text, ToolContext(query="What start timeout does the ledger service have?")
    )
    assert out is not None and f"TimeoutStartSec={10 + WORDS.index('ledger')}" in out.text
    assert restore_lines(out.text, originals(out)) == text


def test_a_comment_above_each_section_heads_that_section_alone() -> None:
    lines = ["# the database", "[database]", "host = db", "port = 5432", "# the cache", "[cache]"]
    assert record_end(lines, 0, 30) == 4
    assert record_end(lines, 4, 30) == 6


def _services_json() -> tuple[str, str]:
    names = [*WORDS, "frontend", "exporter", "catalog", "profile"]
    items = [
        {"name": name, "image": f"registry.local/svc-{k}", "limits": {"memory": f"{128 + k}Mi"}}
        for k, name in enumerate(names)
    ]
    return json.dumps(items), f"{128 + names.index('ledger')}Mi"


def test_a_json_item_named_by_a_plain_word_is_kept() -> None:
    """``{"name": "ledger", ...}`` in an array of 13: the one query word only that item holds
    names it, as a literal would (two words were needed, and the keys are no words)."""
    text, answer = _services_json()
    asked = ToolContext(query="What is the memory limit of ledger?")
    out = JsonCompressor().compress(text, asked)
    assert out is not None and answer in out.text
    restored = restore_json(load_json(out.text), originals(out))
    assert as_plain(restored) == as_plain(load_json(text))


def test_items_are_ranked_by_the_words_few_items_hold() -> None:
    words = [{"a"}, {"a", "b"}, {"a", "c"}, {"d", "e"}, {"a", "d", "e"}, set(), {"a"}]
    # "b" and "c" are in one item each, "d" and "e" in two, "a" in five: named by none
    assert _word_items(words, 2) == {3, 4}  # two words few items hold
    assert _word_items(words, 4) == {1, 2, 3, 4}
    assert _word_items([{"a"}, {"a"}, {"a"}], 2) == set()  # one common word names nothing


SERVICES = (*WORDS, "catalog", "orders", "payments", "profile", "inventory", "shipping", "pricing")
SETTINGS = ("TIMEOUT_MS", "DB_HOST", "DB_PORT", "LOG_LEVEL", "MAX_CONNECTIONS", "REGION")


def environment(*, yaml: bool = False) -> str:
    """A service's environment (``printenv``), or the same keys as a ConfigMap's data: every
    key an identifier whose parts are words (``LEDGER_TIMEOUT_MS``)."""
    pairs = [
        (f"{name.upper()}_{setting}", str(1000 + 37 * k + 5 * j))
        for j, setting in enumerate(SETTINGS)
        for k, name in enumerate(SERVICES)
    ]
    if yaml:
        head = ["apiVersion: v1", "kind: ConfigMap", "metadata:", "  name: services", "data:"]
        return "\n".join(head + [f'  {key}: "{value}"' for key, value in pairs])
    return "\n".join(["HOME=/root", "HOSTNAME=pod-7f9c", *(f"{k}={v}" for k, v in pairs)])


@pytest.mark.parametrize(("compressor", "yaml"), [(LogCompressor, False), (CodeCompressor, True)])
def test_a_key_named_by_the_questions_words_is_kept(
    compressor: type[CodeCompressor | LogCompressor], yaml: bool
) -> None:
    """``ledger``, ``db`` and ``port`` are only parts of ``LEDGER_DB_PORT``, no words of the
    text: the key whose parts hold them is the line the question asks."""
    text = environment(yaml=yaml)
    answer = next(line for line in text.split("\n") if "LEDGER_DB_PORT" in line)
    out = compressor().compress(text, ToolContext(query="Which DB port does ledger use?"))
    assert out is not None and answer in out.text.split("\n")
    assert restore_lines(out.text, originals(out)) == text


def deployment() -> str:
    """A Deployment's container as ``kubectl get -o yaml`` prints it: camelCase keys, two
    probes with the same fields."""
    probes = []
    for k, (kind, path) in enumerate((("livenessProbe", "healthz"), ("readinessProbe", "ready"))):
        probes += [
            f"        {kind}:",
            "          httpGet:",
            f"            path: /{path}",
            "            port: http",
            f"          initialDelaySeconds: {31 + k}",
            f"          periodSeconds: {17 + k}",
            f"          timeoutSeconds: {5 + k}",
        ]
    head = ["apiVersion: apps/v1", "kind: Deployment", "spec:", "  template:", "    spec:"]
    env = [f"        - name: VAR_{k}\n          value: v{k}" for k in range(30)]
    container = ["      containers:", "      - env:", *env, "        image: ledger:1.2", *probes]
    return "\n".join([*head, *container, "      terminationGracePeriodSeconds: 45"])


@pytest.mark.parametrize(
    ("query", "answer"),
    [
        ("What is the initial delay of the liveness probe?", "initialDelaySeconds: 31"),
        ("What timeout does the readiness probe have?", "timeoutSeconds: 6"),
        ("What is the termination grace period?", "terminationGracePeriodSeconds: 45"),
    ],
)
def test_a_camel_case_key_is_named_by_the_questions_words(query: str, answer: str) -> None:
    """``livenessProbe`` and ``initialDelaySeconds`` hold the question's words, no word of the
    text: the key's line and the probe's block are kept."""
    text = deployment()
    out = CodeCompressor().compress(text, ToolContext(query=query))
    assert out is not None
    kept = [line.strip() for line in out.text.split("\n")]
    assert answer in kept
    assert restore_lines(out.text, originals(out)) == text


def test_one_shared_part_names_no_line() -> None:
    """A key whose parts hold one query word (``api`` of ``opentelemetry_api``, ``ledger`` of
    ``LEDGER_REGION`` for a question about timeouts) is not matched by its parts."""
    text = "opentelemetry_api 1.2\nLEDGER_REGION=eu\nLEDGER_TIMEOUT_MS=30\nledger up\nmy-api ok"
    matcher = Matcher((), ("api", "ledger", "timeout"))
    hits, _ = matcher.line_hits(text, line_starts(text), parts=True)
    assert sorted(hits) == [2, 3, 4]
    plain, _ = matcher.line_hits(text, line_starts(text))
    assert sorted(plain) == [3, 4]


@pytest.mark.parametrize(("first", "matched"), [("req-7 started", False), ("started", True)])
def test_parts_are_matched_only_where_no_literal_names_a_line(first: str, matched: bool) -> None:
    """Where the turn's literal (``req-7``) names a line, the question's words are not looked
    for inside keys: the literal pins what was asked."""
    text = f"{first}\nLEDGER_DB_PORT=5432\nSEARCH_DB_HOST=db"
    hits, _ = Matcher(("req-7",), ("ledger", "port")).line_hits(text, line_starts(text), parts=True)
    assert (1 in hits) is matched


@pytest.mark.parametrize(("records", "matched"), [(8, True), (9, False)])
def test_a_key_on_many_lines_is_a_field_its_parts_do_not_name(records: int, matched: bool) -> None:
    """``amount_cents`` in every payload of a log is a field each record has: on 9 lines its
    parts name none of them, on 8 they still do."""
    text = "\n".join(f'req-{k} body={{"amount_cents": {k}}}' for k in range(records))
    found = _identifier_parts(("amount", "cents"), text, text.lower(), line_starts(text))
    assert bool(found) is matched


def test_parts_are_not_matched_in_code() -> None:
    """In code (a text with definitions) an identifier's parts are no words: a name like
    ``ledger_timeout_fallback`` there is one of many, and the turn names functions whole."""
    body = [f"    step_{k} = prepare({k})" for k in range(30)]
    text = "\n".join(
        ["def run(name):", *body, "    ledger_timeout_fallback = 3", *body, "    return name"]
    )
    out = CodeCompressor().compress(text, ToolContext(query="What is the ledger timeout?"))
    assert out is not None and "    ledger_timeout_fallback = 3" not in out.text.split("\n")


_PART = st.sampled_from(["ledger", "timeout", "api", "ms", "x1", "db"])


def _render(parts: list[str], style: int) -> str:
    """A key of these words: ``ledger_db``, ``LEDGER_DB`` or ``ledgerDb``."""
    if style == 0:
        return "_".join(parts)
    if style == 1:
        return "_".join(parts).upper()
    return parts[0] + "".join(p.capitalize() for p in parts[1:])


_KEY = st.tuples(st.lists(_PART, min_size=1, max_size=4), st.integers(0, 2))


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(st.lists(_KEY, max_size=4), max_size=30),
    words=st.lists(_PART.filter(str.isalpha), max_size=3, unique=True),
)
def test_a_words_parts_are_matched_where_its_key_holds_two_words(
    lines: list[list[tuple[list[str], int]]], words: list[str]
) -> None:
    """A query word matches on a line as a word of a key there exactly where the key holds it
    and another query word among its words, snake or camel case, and the key is on at most 8
    lines."""
    text = "\n".join(" ".join(_render(parts, style) for parts, style in line) for line in lines)
    found = _identifier_parts(tuple(sorted(words)), text, text.lower(), line_starts(text))
    named: dict[str, set[int]] = {}
    held: dict[str, set[str]] = {}
    for i, line in enumerate(lines):
        for parts, style in line:
            if len(set(parts) & set(words)) >= 2:
                key = _render(parts, style).lower()
                named.setdefault(key, set()).add(i)
                held[key] = set(parts) & set(words)
    expected = {(i, w) for key, at in named.items() if len(at) <= 8 for i in at for w in held[key]}
    assert found == expected


def test_a_settings_error_words_in_its_key_do_not_make_it_an_error() -> None:
    """``LEDGER_TIMEOUT_MS=1185`` is a setting named by an error word, not an error: the 16
    ``*_TIMEOUT_MS`` keys of an environment are not each kept as error lines."""
    text = environment()
    out = LogCompressor().compress(text, ToolContext(query="Which DB port does ledger use?"))
    assert out is not None
    kept = out.text.split("\n")
    assert sum("_TIMEOUT_MS=" in line for line in kept) <= 2
    assert restore_lines(out.text, originals(out)) == text


@pytest.mark.parametrize(
    ("line", "setting"),
    [
        ("DB_TIMEOUT_MS=30", True),
        ("net.ipv4.tcp_fin_timeout = 60", True),  # sysctl -a
        ("FAIL_FAST=true", True),
        ("export LEDGER_TIMEOUT_MS=30", True),  # a .env file sourced by a shell
        ('declare -x LEDGER_TIMEOUT_MS="30"', True),  # export -p
        ('declare -x ON_ERROR="fail"', False),
        ("ts=2026-12-01T10:00:00Z level=error msg=boom", False),  # logfmt: the value says it
        ("RETRY_ON=timeout", False),
        ("ERROR: could not connect", False),
        ("2026-12-01 10:00:00 connect timeout=30s", False),
    ],
)
def test_what_is_a_setting(line: str, setting: bool) -> None:
    assert _setting(line) is setting


def test_a_logfmt_error_is_still_kept_once() -> None:
    lines = [
        f"ts=2026-12-01T10:{k // 60:02d}:{k % 60:02d}Z level=info msg=tick n={k}"
        for k in range(300)
    ]
    lines[150] = "ts=2026-12-01T10:02:30Z level=error msg=upstream refused n=150"
    out = LogCompressor().compress("\n".join(lines), ToolContext(query="What went wrong?"))
    assert out is not None and lines[150] in out.text.split("\n")
