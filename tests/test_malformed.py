"""Malformed-input corpus (docs/architecture.md, invariant 9): every bad input to ``promptslim
compress``, ``promptslim lint`` and the bench dataset loaders ends in a typed error naming the
field or line, never a traceback, and the valid parts of a dataset still load. The fixtures are
generated here (no large committed files), the 50 MB one in ``tmp_path``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from promptslim.bench.datasets import load_dataset
from promptslim.cli import EXIT_BAD_INPUT, main
from promptslim.errors import DatasetError, PromptSlimError

GOOD = {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi?"}]}

# (name, file bytes, what the error must name)
REQUEST_CORPUS: list[tuple[str, bytes, str]] = [
    ("truncated", json.dumps(GOOD).encode()[:-7], "line 1 column"),
    ("empty", b"", "line 1 column 1"),
    ("binary", bytes(range(256)) * 4, "not UTF-8"),
    ("array", b"[1, 2]", "body"),
    ("no_messages", b'{"model": "m"}', "messages"),
    ("messages_object", b'{"messages": {"role": "user"}}', "messages"),
    ("unknown_role", json.dumps({"messages": [{"role": "robot", "content": "x"}]}).encode(), "messages[0].role"),
    ("content_number", json.dumps({"messages": [{"role": "user", "content": 7}]}).encode(), "messages[0].content"),
    ("missing_role", json.dumps({"messages": [{"role": "user", "content": "a"}, {"content": "b"}]}).encode(), "messages[1].role"),
    ("tool_without_id", json.dumps({"messages": [{"role": "tool", "content": "r"}]}).encode(), "messages[0].tool_call_id"),
    ("bad_tool_call", json.dumps({"messages": [{"role": "assistant", "tool_calls": [{"id": "c"}]}]}).encode(), "messages[0].tool_calls[0]"),
    ("message_string", json.dumps({"messages": ["hello"]}).encode(), "messages[0]"),
    ("tools_string", json.dumps({**GOOD, "tools": "all"}).encode(), "tools"),
    ("model_number", json.dumps({**GOOD, "model": 4}).encode(), "model"),
    ("documents_string", json.dumps({**GOOD, "documents": "d"}).encode(), "documents"),
    ("nul_bytes", b'{"messages": \x00\x00}', "line 1 column"),
    ("bom_then_garbage", b"\xef\xbb\xbf{not json", "line 1 column"),
]


def _expect_typed_error(capsys: pytest.CaptureFixture[str], code: int, *needles: str) -> str:
    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT, err
    assert "Traceback" not in err
    line = err.strip().splitlines()[-1]
    assert line.startswith("promptslim: error:"), err
    for needle in needles:
        assert needle in line, f"{needle!r} not named in {line!r}"
    return line


# ---------------------------------------------------------------- promptslim compress


@pytest.mark.parametrize(("name", "data", "field"), REQUEST_CORPUS, ids=[c[0] for c in REQUEST_CORPUS])
def test_compress_names_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, data: bytes, field: str) -> None:
    path = tmp_path / f"{name}.json"
    path.write_bytes(data)
    _expect_typed_error(capsys, main(["compress", str(path)]), field)


def test_compress_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.json"
    _expect_typed_error(capsys, main(["compress", str(missing)]), str(missing))


def test_compress_bad_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    request = tmp_path / "r.json"
    request.write_text(json.dumps(GOOD))
    for config, field in [
        ({"stages": [{"name": "compress", "rate": 7}]}, "stages[0].rate"),
        ({"stages": [{"name": "nosuch"}]}, "stages[0].name"),
        ({"stages": [{"name": "history", "colour": "red"}]}, "stages[0].colour"),
        ({"budget": {"total": "lots"}}, "budget.total"),
    ]:
        path = tmp_path / "c.json"
        path.write_text(json.dumps(config))
        _expect_typed_error(capsys, main(["compress", str(request), "--config", str(path)]), field)


def test_compress_bad_document_is_skipped_not_fatal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    body = {**GOOD, "documents": [{"id": "ok", "text": "Paris is in France."}, 42, {"text": None}]}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(body))
    out = tmp_path / "out.json"
    assert main(["compress", str(path), "-o", str(out), "--report", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert any("documents[1]" in w for w in report["warnings"])
    assert any("documents[2]" in w for w in report["warnings"])
    assert "Paris is in France." in out.read_text()  # the valid document still reaches the model


def test_compress_50mb_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A 50 MB body cut off mid-string: a typed error with the position, quickly."""
    filler = "word " * (10 * 1024 * 1024)  # 50 MiB of text
    data = json.dumps({"messages": [{"role": "user", "content": filler}]})[:-20]
    path = tmp_path / "big.json"
    path.write_text(data)
    assert path.stat().st_size >= 50 * 1024 * 1024
    _expect_typed_error(capsys, main(["compress", str(path)]), "invalid JSON at line 1 column")


# ---------------------------------------------------------------- promptslim lint


def test_lint_names_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = json.dumps(GOOD)
    cases: list[tuple[str, str]] = [
        (f"{good}\n{{broken\n", ":2"),
        (f"{good}\n{json.dumps({'messages': [{'role': 'alien'}]})}\n", ":2"),
        (f"{good}\n{good}\n{json.dumps({'messages': 'x'})}\n", ":3"),
    ]
    for text, where in cases:
        path = tmp_path / "stream.jsonl"
        path.write_text(text)
        code = main(["lint", str(path)])
        err = capsys.readouterr().err
        assert code == EXIT_BAD_INPUT and "Traceback" not in err
        assert f"{path}{where}" in err, err


def test_lint_binary_and_huge(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    binary = tmp_path / "garbage.jsonl"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 100)
    _expect_typed_error(capsys, main(["lint", str(binary)]), "not UTF-8")
    huge = tmp_path / "huge.jsonl"
    line = json.dumps(GOOD) + "\n"
    with huge.open("w") as f:
        f.write(line * 3)
        f.write("x" * (50 * 1024 * 1024) + "\n")  # one 50 MB line of garbage
    code = main(["lint", str(huge)])
    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT and "Traceback" not in err
    assert f"{huge}:4" in err


# ---------------------------------------------------------------- bench dataset loaders


def _nq(i: int) -> dict[str, Any]:
    return {"question": f"q{i}?", "answers": [f"a{i}"], "ctxs": [{"title": "t", "text": f"a{i} is here"}]}


LOADER_BAD_LINES: list[tuple[str, str]] = [
    ("{truncated", "invalid JSON"),
    ("[1, 2, 3]", "expected a JSON object"),
    ('"a string"', "expected a JSON object"),
    (json.dumps({"answers": ["x"], "ctxs": []}), "question"),  # missing field
    (json.dumps({"question": 5, "answers": ["x"], "ctxs": []}), "question"),  # wrong type
    (json.dumps({"question": "q", "answers": [1], "ctxs": []}), "answers"),
    (json.dumps({"question": "q", "answers": ["x"], "ctxs": "no"}), "ctxs"),
    (json.dumps({"question": "q", "answers": ["x"], "ctxs": [7]}), "ctxs[0]"),
]


def test_nq_loader_skips_bad_lines_and_keeps_the_rest(tmp_path: Path) -> None:
    lines = []
    for i, (bad, _) in enumerate(LOADER_BAD_LINES):
        lines.append(json.dumps(_nq(i)))
        lines.append(bad)
    path = tmp_path / "nq.jsonl"
    path.write_text("\n".join(lines) + "\n")
    loaded = load_dataset(f"nq:{path}")
    assert len(loaded.items) == len(LOADER_BAD_LINES)  # every valid line
    assert len(loaded.errors) == len(LOADER_BAD_LINES)
    for k, (error, (_, needle)) in enumerate(zip(loaded.errors, LOADER_BAD_LINES)):
        assert isinstance(error, DatasetError)
        assert error.line == 2 * k + 2
        assert needle in str(error), (str(error), needle)
        assert f":{2 * k + 2}" in str(error)


@pytest.mark.parametrize(
    ("kind", "record", "field"),
    [
        ("kv", {"ordered_kv_records": "nope", "key": "k", "value": "v"}, "ordered_kv_records"),
        ("jsonl", {"messages": [{"role": "wizard"}], "answers": ["x"]}, "role"),
        ("jsonl", {"messages": 3, "answers": ["x"]}, "messages"),
    ],
)
def test_other_loaders_name_the_field(tmp_path: Path, kind: str, record: dict[str, Any], field: str) -> None:
    path = tmp_path / f"{kind}.jsonl"
    path.write_text(json.dumps(record) + "\n")
    loaded = load_dataset(f"{kind}:{path}")
    assert not loaded.items
    assert len(loaded.errors) == 1
    assert field in str(loaded.errors[0]) and ":1" in str(loaded.errors[0])


def test_loader_binary_garbage_keeps_what_came_before(tmp_path: Path) -> None:
    path = tmp_path / "nq.jsonl"
    path.write_bytes((json.dumps(_nq(0)) + "\n").encode() * 2 + b"\xff\xfe\x00garbage")
    loaded = load_dataset(f"nq:{path}")
    assert len(loaded.items) == 2
    assert loaded.errors and loaded.errors[0].line == 3


def test_loader_50mb_file(tmp_path: Path) -> None:
    """50 MB of records, one broken line among them: every other line loads."""
    path = tmp_path / "big.jsonl"
    record = _nq(0)
    record["ctxs"] = [{"title": "t", "text": "filler " * 5000}]  # ~35 KB a line
    line = json.dumps(record) + "\n"
    n = 50 * 1024 * 1024 // len(line) + 2  # the broken line is shorter
    with path.open("w") as f:
        for i in range(n):
            f.write("{broken\n" if i == n // 2 else line)
    assert path.stat().st_size >= 50 * 1024 * 1024
    loaded = load_dataset(f"nq:{path}")
    assert len(loaded.items) == n - 1
    assert [e.line for e in loaded.errors] == [n // 2 + 1]


def test_unreadable_dataset_is_typed(tmp_path: Path) -> None:
    for spec in (f"nq:{tmp_path / 'missing.jsonl'}", "builtin:nosuch", "nosuchkind:x", str(tmp_path / "nope")):
        with pytest.raises(PromptSlimError) as info:
            load_dataset(spec)
        assert str(info.value)


def test_loader_bad_byte_mid_file_loses_only_its_line(tmp_path: Path) -> None:
    good = (json.dumps(_nq(0)) + "\n").encode()
    path = tmp_path / "nq.jsonl"
    path.write_bytes(good * 2 + b"\xff\xfe\x00garbage\n" + good)
    loaded = load_dataset(f"nq:{path}")
    assert len(loaded.items) == 3
    assert [e.line for e in loaded.errors] == [3]
    assert "not UTF-8" in str(loaded.errors[0])
