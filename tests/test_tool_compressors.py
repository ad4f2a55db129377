"""The tool-result compressors: valid JSON out, nothing lost without a marker, what the turn
asked for kept, bad JSON handled as text."""

from __future__ import annotations

import io
import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promptslim.backends.compress.extractive import split_units
from promptslim.backends.tools import TOOL_COMPRESSORS, Compressed, ToolContext
from promptslim.backends.tools.code import CodeCompressor
from promptslim.backends.tools.json_crusher import JsonCompressor, load_json
from promptslim.backends.tools.logs import LogCompressor
from promptslim.backends.tools.router import candidates, route
from promptslim.errors import ConfigError

MARKER = re.compile(r"\[… \d+ \w+ elided(?: \(.*?\))? id=(ps[0-9a-f]{12})\]")
ALL = {n: TOOL_COMPRESSORS.get(n)() for n in ("json", "log", "code", "text")}


def originals(out: Compressed) -> dict[str, str]:
    return {e.id: e.original for e in out.elisions}


def restore_json(value: Any, store: dict[str, str]) -> Any:
    """The data with every marker replaced by what it stands for."""
    if isinstance(value, list) and not (value and isinstance(value[0], tuple)):
        out: list[Any] = []
        for v in value:
            m = MARKER.fullmatch(v) if isinstance(v, str) else None
            if m and "(same as " in v:  # a repeated object: one value
                out.append(restore_json(load_json(store[m.group(1)]), store))
            else:
                out.extend(load_json(store[m.group(1)]) if m else [restore_json(v, store)])
        return out
    if isinstance(value, list):  # an object's (key, value) pairs
        return [(k, restore_json(v, store)) for k, v in value]
    if isinstance(value, str):
        m = MARKER.fullmatch(value)
        if m and "(same as " in value:
            return restore_json(load_json(store[m.group(1)]), store)
        m = MARKER.search(value)
        if m and m.end() == len(value):
            return value[: m.start() - 1] + store[m.group(1)]
    return value


def as_plain(value: Any) -> Any:
    """Objects from load_json as lists of pairs, numbers as their spelling: comparable data."""
    if isinstance(value, list):
        return [as_plain(v) for v in value]
    if isinstance(value, tuple):
        return (value[0], as_plain(value[1]))
    return str(value) if isinstance(value, str) else value


def restore_lines(text: str, store: dict[str, str]) -> str:
    lines = []
    for line in text.split("\n"):
        m = MARKER.search(line)
        lines.append(store[m.group(1)] if m and line.strip().endswith(m.group(0)) else line)
    return "\n".join(lines)


def restore_text(text: str, store: dict[str, str]) -> str:
    return MARKER.sub(lambda m: store[m.group(1)], text)


# ---------------------------------------------------------------- JSON

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**12), max_value=10**12)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=40) | st.dictionaries(st.text(max_size=6), inner, max_size=6)
    ),
    max_leaves=120,
)


@settings(max_examples=150, deadline=None)
@given(value=json_values, query=st.text(max_size=40), indent=st.sampled_from([None, 2]))
def test_valid_json_in_gives_valid_json_out_and_markers_restore_it(
    value: Any, query: str, indent: int | None
) -> None:
    text = json.dumps(value, indent=indent)
    out = JsonCompressor(max_string=16, dedup_chars=8).compress(text, ToolContext(query=query))
    if out is None:
        return
    parsed = json.loads(out.text)  # valid JSON, strictly
    assert parsed is not None or out.text == "null"
    restored = restore_json(load_json(out.text), originals(out))
    assert as_plain(restored) == as_plain(load_json(text))


def _issues(n: int = 40) -> list[dict[str, Any]]:
    return [
        {
            "number": 1000 + i,
            "title": f"Issue about module {i}",
            "state": "closed" if i == 23 else "open",
            "comments": 3 if i != 31 else 4000,
            "price": "1.50",
            "user": {"login": f"user{i}", "id": 7000 + i},
        }
        for i in range(n)
    ]


def test_json_keeps_ends_matches_anomalies_outliers_and_counts_the_rest() -> None:
    text = json.dumps(_issues())
    out = JsonCompressor().compress(
        text, ToolContext(query="What is the title of issue 1017?", hints=("get_issues",))
    )
    assert out is not None and out.kind == "json"
    kept = [x for x in json.loads(out.text) if isinstance(x, dict)]
    numbers = {x["number"] for x in kept}
    assert {1000, 1039} <= numbers  # first and last
    assert 1017 in numbers  # named by the query
    assert 1023 in numbers  # its state differs from the majority
    assert 1031 in numbers  # a numeric outlier
    assert len(kept) < 12
    left_out = sum(e.count for e in out.elisions if e.kind == "items")
    assert left_out == 40 - len(kept)
    assert all(MARKER.search(m) for m in json.loads(out.text) if isinstance(m, str))


def test_repeated_objects_are_shown_once() -> None:
    user = {"login": "octocat", "id": 1, "url": "https://api.example.com/users/octocat" * 10}
    text = json.dumps(
        {"owner": user, "organization": user, "items": [{"n": i, "user": user} for i in range(3)]}
    )
    out = JsonCompressor().compress(text, ToolContext())
    assert out is not None
    data = json.loads(out.text)
    assert data["owner"] == user
    assert (
        "same as $.owner" in data["organization"] and "same as $.owner" in data["items"][2]["user"]
    )
    assert as_plain(restore_json(load_json(out.text), originals(out))) == as_plain(load_json(text))


def test_json_numbers_are_spelled_as_the_input_spelled_them() -> None:
    text = (
        "[" + ",".join(f'{{"v": 1.50, "big": 1e400, "n": -0, "i": {i}}}' for i in range(30)) + "]"
    )
    out = JsonCompressor().compress(text, ToolContext())
    assert out is not None
    assert '"v":1.50' in out.text and '"big":1e400' in out.text and '"n":-0' in out.text


def test_short_arrays_of_scalars_stay_whole_and_long_ones_are_crushed() -> None:
    # a marker costs about what seven small counts do: only the long array is crushed
    weeks = [{"days": [i % 5, 7, 3, 9, 7, 3, 0], "week": 1353196800 + i} for i in range(40)]
    text = json.dumps({"weeks": weeks, "samples": list(range(1000, 1300))})
    out = JsonCompressor().compress(text, ToolContext())
    assert out is not None
    data = json.loads(out.text)
    kept = [w for w in data["weeks"] if isinstance(w, dict)]
    assert kept and all(len(w["days"]) == 7 for w in kept)
    assert len(data["samples"]) < 10 and any(MARKER.fullmatch(str(v)) for v in data["samples"])
    assert len(out.text) < len(text)


def test_a_tool_call_argument_keeps_its_item() -> None:
    items = [{"id": f"ord_{i:04d}", "total": i} for i in range(50)]
    ctx = ToolContext(query="how much was it?", hints=("get_orders", "ord_0033"))
    out = JsonCompressor().compress(json.dumps(items), ctx)
    assert out is not None and '"ord_0033"' in out.text


@pytest.mark.parametrize(
    "text", ['[{"a": 1}, {"a": 2}, {"a"', "{not json at all, [1, 2, 3]\n" * 40, "[1, 2, 3]]]"]
)
def test_bad_or_truncated_json_is_handled_as_text(text: str) -> None:
    assert JsonCompressor().compress(text, ToolContext()) is None
    out = route(text, ToolContext(), ALL)
    assert out is None or out.kind != "json"


def test_deep_json_does_not_crash() -> None:
    text = "[" * 5000 + "]" * 5000
    assert JsonCompressor().compress(text, ToolContext()) is None


def test_json_options_are_checked() -> None:
    with pytest.raises(ConfigError) as err:
        JsonCompressor(head=-1)
    assert err.value.field == "head"


# ---------------------------------------------------------------- logs, code, text


def _log() -> str:
    lines = ["Starting build 4.2 at 2026-12-01T10:00:00Z"]
    lines += [
        f"2026-12-01T10:00:{i % 60:02d}Z Downloading chunk {i} of 300 ({i * 17} kB)"
        for i in range(300)
    ]
    lines += [
        "Traceback (most recent call last):",
        '  File "build.py", line 12, in <module>',
        "    main()",
        "ValueError: bad checksum 9f8e7d",
    ]
    lines += [f"cleanup step {i}" for i in range(30)]
    lines += ["Installed widget-3.1.4 into /opt/widgets", "exit code 2"]
    return "\n".join(lines)


def test_log_collapses_repeats_keeps_errors_and_tail_and_restores() -> None:
    text = _log()
    out = ALL["log"].compress(text, ToolContext(query="which widget version was installed?"))
    assert out is not None and out.kind == "log"
    assert len(out.text) < 0.2 * len(text)
    for line in (
        "ValueError: bad checksum 9f8e7d",
        "Traceback (most recent call last):",
        "exit code 2",
    ):
        assert line in out.text.split("\n")
    assert "Installed widget-3.1.4 into /opt/widgets" in out.text
    assert restore_lines(out.text, originals(out)) == text


def test_code_keeps_the_named_function_with_its_class_and_restores() -> None:
    path = Path(json.__file__).parent / "decoder.py"
    text = path.read_text()
    ctx = ToolContext(
        query="what does raw_decode return?", hints=("read_file", str(path)), path=str(path)
    )
    out = ALL["code"].compress(text, ctx)
    assert out is not None and out.kind == "code"
    assert "    def raw_decode(self, s, idx=0):" in out.text
    assert "class JSONDecoder(object):" in out.text
    assert "# [… " in out.text  # elided in the file's comment syntax
    assert len(out.text) < 0.5 * len(text)
    assert restore_lines(out.text, originals(out)) == text


def _deployment(name: str, memory: int) -> str:
    return (
        f"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\nspec:\n"
        f"  template:\n    spec:\n      containers:\n      - name: {name}\n"
        f"        image: registry.local/{name}:1.4\n        resources:\n          requests:\n"
        f"            memory: {memory // 4 * 2}Mi\n          limits:\n"
        f"            memory: {memory}Mi\n        readinessProbe:\n          path: /healthz"
    )


def test_code_keeps_the_rest_of_the_record_a_named_line_is_in() -> None:
    # a manifest read by a tool: the asked limit sits five levels below the name, and the
    # lines around the name alone stop before it
    text = "\n---\n".join(_deployment(f"ledger-{i}", 301 + 10 * i) for i in range(12))
    ctx = ToolContext(query="What is the memory limit of the ledger-7 deployment?")
    out = ALL["code"].compress(text, ctx)
    assert out is not None and out.kind == "code"
    assert "memory: 371Mi" in out.text  # ledger-7's limit
    assert "memory: 381Mi" not in out.text and len(out.text) < 0.4 * len(text)
    assert restore_lines(out.text, originals(out)) == text
    off = CodeCompressor(records=False).compress(text, ctx)  # the lines around the name only
    assert off is not None and "memory: 371Mi" not in off.text
    with pytest.raises(ConfigError) as err:
        CodeCompressor(records=1)  # type: ignore[arg-type]
    assert err.value.field == "records"
    # a block the text's first line opens is the whole file, not a record of it
    fields = "    image: web:1.4\n    replicas: 2\n    cpu: 250m\n"
    services = "services:\n" + "".join(
        f"  svc-{i}:\n{fields}    port: {8000 + i}\n" for i in range(40)
    )
    out = ALL["code"].compress(services, ToolContext(query="the port of svc-37?"))
    assert out is not None and "port: 8037" in out.text and "port: 8039" not in out.text


def _compose(n: int) -> str:
    """A compose file: short alike lines that would pass for a log, each service's timeout
    three lines below its name."""
    services = "".join(
        f"  svc-{i}:\n    image: registry.local/svc-{i}:1.{i % 7}\n    replicas: {1 + i % 5}\n"
        f"    timeout: {1000 + 37 * i}ms\n    memory: 512Mi\n"
        for i in range(n)
    )
    return "services:\n" + services


def test_indented_records_without_a_path_are_read_as_a_file_not_a_log() -> None:
    text = _compose(60)
    ctx = ToolContext(query="What is the timeout of the svc-41 service?")
    assert candidates(text, ctx)[0] == "code"
    out = route(text, ctx, ALL)
    assert out is not None and out.kind == "code"
    assert "timeout: 2517ms" in out.text  # svc-41's, three lines below its name
    assert "timeout: 2554ms" not in out.text and len(out.text) < 0.3 * len(text)
    assert "# [… " in out.text  # YAML's comment syntax for the markers
    assert restore_lines(out.text, originals(out)) == text


@pytest.mark.parametrize(
    ("table", "field"),
    [
        ("[services.svc-{i}]", 'timeout = "{t}ms"'),  # TOML
        ("[svc-{i}]", "timeout={t}ms"),  # INI
    ],
)
def test_a_section_a_named_line_is_in_is_kept_to_the_next_header(table: str, field: str) -> None:
    # flat files: the asked key three lines below the header naming its section, and no
    # indentation to tell the record by
    sections = [
        f"{table.format(i=i)}\nimage = registry.local/app:1.{i % 7}\nreplicas = {1 + i % 5}\n"
        f"{field.format(t=1000 + 37 * i)}\nmemory = 512Mi\n"
        for i in range(60)
    ]
    text = "\n".join(sections)
    ctx = ToolContext(query="What is the timeout of the svc-41 service?")
    out = route(text, ctx, ALL)
    assert out is not None and out.kind == "code"
    assert field.format(t=2517) in out.text  # svc-41's
    assert field.format(t=2554) not in out.text and len(out.text) < 0.3 * len(text)
    assert restore_lines(out.text, originals(out)) == text
    off = CodeCompressor(records=False).compress(text, ctx)
    assert off is not None and field.format(t=2517) not in off.text


def _plan(n: int) -> str:
    """A Terraform plan: each resource's block introduced by a comment naming it."""
    blocks = [
        f'  # aws_instance.web-{i} will be created\n  + resource "aws_instance" "web-{i}" {{\n'
        f'      + ami           = "ami-{i:08x}"\n      + arn           = (known after apply)\n'
        f'      + instance_type = "t3.micro"\n      + root_block_device {{\n'
        f"          + volume_size = {100 + i}\n        }}\n    }}\n"
        for i in range(n)
    ]
    return "Terraform will perform the following actions:\n\n" + "\n".join(blocks)


def test_a_named_comment_keeps_the_record_of_the_line_it_describes() -> None:
    text = _plan(40)
    ctx = ToolContext(query="What root volume size will aws_instance.web-23 get?")
    out = route(text, ctx, ALL)
    assert out is not None and out.kind == "code"
    assert "volume_size = 123" in out.text  # five lines below the comment, one block deeper
    assert "volume_size = 124" not in out.text and len(out.text) < 0.3 * len(text)
    assert restore_lines(out.text, originals(out)) == text
    off = CodeCompressor(records=False).compress(text, ctx)
    assert off is not None and "volume_size = 123" not in off.text


def _git_log(n: int) -> str:
    authors = ("Ana Lima", "Bo Chen", "Cyd Park", "Dee Roy", "Eli Cohen")
    entries = [
        f"commit {i:040x}\nAuthor: {authors[i % 5]} <a{i}@example.com>\n"
        f"Date:   Mon Nov {1 + i % 28} 10:{i % 60:02d}:00 2026 +0000\n\n"
        f"    Speed up cache-{i} lookups\n\n    Signed-off-by: {authors[i % 5]}\n"
        for i in range(n)
    ]
    return "\n".join(entries)


def test_a_named_continuation_line_keeps_the_header_it_hangs_under() -> None:
    # git log: the message names what the commit did, its author is in the header above
    text = _git_log(60)
    ctx = ToolContext(query="Who sped up the cache-37 lookups?")
    out = route(text, ctx, ALL)
    assert out is not None and out.kind == "log"
    assert f"commit {37:040x}" in out.text and "<a37@example.com>" in out.text
    assert "<a36@example.com>" not in out.text and len(out.text) < 0.3 * len(text)
    assert restore_lines(out.text, originals(out)) == text
    off = LogCompressor(records=False).compress(text, ctx)
    assert off is not None and "<a37@example.com>" not in off.text
    with pytest.raises(ConfigError) as err:
        LogCompressor(records="yes")  # type: ignore[arg-type]
    assert err.value.field == "records"
    # a header further above than the reach is not looked for
    far = text.replace("    Speed up cache-37 lookups", "\n" * 25 + "    Speed up cache-37 lookups")
    out = route(far, ctx, ALL)
    assert out is not None and "<a37@example.com>" not in out.text


def test_text_keeps_literal_sentences_and_restores() -> None:
    filler = "The committee met again and discussed the schedule for the coming season at length. "
    text = filler * 20 + "The access code for the vault is ZX-4471. " + filler * 20
    out = ALL["text"].compress(
        text, ToolContext(query="what is the access code?", hints=("ZX-4471",))
    )
    assert out is not None and out.kind == "text"
    assert "ZX-4471" in out.text and len(out.text) < 0.6 * len(text)
    assert restore_text(out.text, originals(out)) == text


def test_a_transcript_without_sentence_ends_is_compressed_in_parts() -> None:
    filler = "and then the committee met again and talked about the schedule for the season "
    text = (filler * 25 + "the access code for the vault is zx-4471 " + filler * 25).strip()
    assert len(split_units(text)) == 1  # one run-on "sentence": left alone before
    out = ALL["text"].compress(text, ToolContext(query="what is the vault access code"))
    assert out is not None and "zx-4471" in out.text and len(out.text) < 0.6 * len(text)
    assert restore_text(out.text, originals(out)) == text


def test_router_sends_each_kind_to_its_compressor() -> None:
    ctx = ToolContext(query="x")
    assert route(json.dumps(_issues()), ctx, ALL).kind == "json"  # type: ignore[union-attr]
    assert route(_log(), ctx, ALL).kind == "log"  # type: ignore[union-attr]
    code = (Path(json.__file__).parent / "decoder.py").read_text()
    assert route(code, ToolContext(path="json/decoder.py"), ALL).kind == "code"  # type: ignore[union-attr]


def test_compressors_are_deterministic() -> None:
    ctx = ToolContext(query="title of issue 1017", hints=("ord_1",))
    for text in (json.dumps(_issues()), _log()):
        a = route(text, ctx, ALL)
        b = route(text, ctx, {n: TOOL_COMPRESSORS.get(n)() for n in ALL})
        assert a is not None and b is not None and a.text == b.text


# ---------------------------------------------------------------- long-line logs


def _service_log() -> str:
    """Python's logging output in a service's usual format, with long request lines."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-8s %(name)s: %(message)s"))
    logger = logging.getLogger("acme.api.requests")
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.INFO)
    try:
        for i in range(100):
            if i == 63:
                logger.error(
                    "charge for order ORD-55120 rejected by the payment gateway: HTTP 502 after "
                    "3 retries (request_id=req-8812734, latency_ms=30012)"
                )
                continue
            logger.info(
                "completed GET /api/v2/customers/%d/orders?page=%d&size=50 status=200 "
                'duration_ms=%d user_agent="Mozilla/5.0 (X11; Linux x86_64) Firefox/133.0"',
                1000 + 37 * i,
                i % 9 + 1,
                5 + (i * 53) % 290,
            )
    finally:
        logger.removeHandler(handler)
    return stream.getvalue()


def _json_lines_log() -> str:
    records = [
        {
            "ts": f"2026-11-30T10:{i // 60:02d}:{i % 60:02d}.{(i * 37) % 1000:03d}Z",
            "level": "error" if i == 51 else "info",
            "logger": "acme.api.requests",
            "msg": "charge rejected by the payment gateway: HTTP 502 after 3 retries"
            if i == 51
            else f"completed GET /api/v2/customers/{1000 + 37 * i}/orders",
            "duration_ms": 5 + (i * 53) % 290,
            "trace_id": f"{(i * 2654435761) % 2**64:016x}",
        }
        for i in range(90)
    ]
    return "\n".join(json.dumps(r) for r in records)


def _access_log() -> str:
    """Common Log Format with the referrer and user agent (nginx's ``combined``)."""
    return "\n".join(
        f"10.0.{i % 7}.{(i * 31) % 250} - - [30/Nov/2026:10:{i // 60:02d}:{i % 60:02d} +0000] "
        f'"GET /api/v2/customers/{1000 + 37 * i}/orders?page={i % 9 + 1} HTTP/1.1" '
        f'{502 if i == 40 else 200} {200 + (i * 97) % 9000} "-" '
        '"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 Chrome/131.0"'
        for i in range(90)
    )


def _build_log() -> str:
    """A CMake build under ninja as pip's verbose install prints it (indented two spaces):
    one compiler command of 400 characters and more a step, one step failing, then CMake's
    install lines; neither kind alone is half of the lines."""
    flags = " ".join(f"-I/tmp/pip-build/vendor/llama.cpp/src/part{k}" for k in range(8))
    steps = [
        f"  [{i}/40] /usr/bin/g++ -DGGML_USE_CPU -O3 {flags} -o src/CMakeFiles/unit{i}.o"
        f" -c /tmp/pip-build/vendor/llama.cpp/src/unit{i}.cpp"
        for i in range(1, 41)
    ]
    steps[30] += "\n  FAILED: src/CMakeFiles/unit31.o"
    steps += [f"  -- Installing: /tmp/wheel/platlib/lib/libunit{i}.so" for i in range(60)]
    return "\n".join(steps)


@pytest.mark.parametrize(
    ("make", "error"),
    [
        (_service_log, "rejected by the payment gateway"),
        (_json_lines_log, "rejected by the payment gateway"),
        (_access_log, '" 502 '),
        (_build_log, "FAILED: src/CMakeFiles/unit31.o"),
    ],
)
def test_logs_of_long_lines_go_to_the_log_compressor_and_keep_their_error(
    make: Any, error: str
) -> None:
    # service, JSON-lines, access and build logs run to 200 characters a line: their records
    # start alike (a timestamp, a JSON object, an address, a step counter), and the one
    # failure is kept though the question names none of its words
    text = make()
    assert len(text) / text.count("\n") > 160
    out = route(text, ToolContext(query="why is checkout broken?"), ALL)
    assert out is not None and out.kind == "log"
    assert error in out.text
    assert len(out.text) < 0.3 * len(text)
    assert restore_lines(out.text, originals(out)) == text


def test_paragraphs_and_lists_of_long_lines_stay_text() -> None:
    sentence = "The committee met again and discussed the schedule for the coming season. "
    paragraphs = "\n".join(f"Paragraph {i} opens the topic. " + sentence * 4 for i in range(20))
    items = "\n".join(f"- Item {i}: " + sentence * 3 for i in range(20))
    for text in (paragraphs, items):
        assert len(text) / text.count("\n") > 160
        assert candidates(text, ToolContext(query="x")) == ("text",)
