"""Agent traces for the tools benchmarks: built from recorded responses, logs and source files
(small samples written here in their real formats), one needle per trace, one request per turn."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from promptslim.bench.datasets import load_dataset
from promptslim.bench.tool_traces import (
    TraceSources,
    build_traces,
    read_replay_data,
    trace_requests,
)
from promptslim.errors import DatasetError


def _replay(folder: Path) -> Path:
    """Two records in PyGithub's ReplayData layout (11 lines each)."""
    folder.mkdir()
    issues = [
        {
            "number": 100 + i,
            "title": f"Issue {i}",
            "state": "open",
            "created_at": f"2020-01-{i + 1:02d}T00:00:00Z",
        }
        for i in range(20)
    ]
    repo = {
        "name": "widgets",
        "full_name": "acme/widgets",
        "language": "Python",
        "created_at": "2019-05-05T05:05:05Z",
        "description": "x" * 200,
    }
    records = []
    for path, body in (("/repos/acme/widgets/issues", issues), ("/repos/acme/widgets", repo)):
        records += [
            "https",
            "GET",
            "api.github.com",
            "None",
            path,
            "{}",
            "None",
            "200",
            "[]",
            json.dumps(body),
            "",
        ]
    (folder / "Repo.testThings.txt").write_text("\n".join(records))
    return folder


def test_replay_records_are_read(tmp_path: Path) -> None:
    found = read_replay_data(_replay(tmp_path / "ReplayData"))
    assert [r.path for r in found] == ["/repos/acme/widgets/issues", "/repos/acme/widgets"]
    assert all(r.status == 200 and json.loads(r.body) for r in found)


def test_traces_have_a_needle_pairs_and_one_request_per_turn(tmp_path: Path) -> None:
    log = tmp_path / "pip.log"
    log.write_text(
        "\n".join(
            f"Collecting pkg{i}\n  Downloading pkg{i}-1.{i}.0-py3-none-any.whl (12 kB)"
            for i in range(40)
        )
    )
    src = Path(json.__file__).parent / "decoder.py"
    sources = TraceSources.from_paths(
        replay_dir=_replay(tmp_path / "ReplayData"),
        logs=[("pip install -v pkgs", log)],
        source_files=[src],
    )
    items = build_traces(sources, n=8, seed=3, calls=(5, 9))
    assert len(items) == 8
    for item in items:
        messages = item.request.messages
        needle = messages[item.metadata["needle_message"]]
        assert needle.role == "tool" and item.answers[0] in needle.text
        calls = [c.id for m in messages if m.tool_calls for c in m.tool_calls]
        assert calls == [m.tool_call_id for m in messages if m.role == "tool"]
        assert 5 <= len(calls) <= 9
        turns = trace_requests(item)
        assert len(turns) == len(calls) and turns[-1].messages == messages
    assert {i.metadata["kind"] for i in items} == {"json", "log", "code"}
    assert build_traces(sources, n=8, seed=3, calls=(5, 9))[0].request == items[0].request


def test_a_proxy_log_needle_is_one_requests_prompt_tokens(tmp_path: Path) -> None:
    # promptslim serve's JSON line per request, as Exchange.log_line writes it
    lines = [
        json.dumps(
            {"event": "request", "pid": 7, "id": f"{i:032x}", "route": "chat", "status": 200,
             "tokens_in": (150 + i) if i % 3 else 42, "tokens_out": 900,
             "total_ms": 12.5 + i}
        )
        for i in range(60)
    ]  # fmt: skip
    log = tmp_path / "serve.log"
    log.write_text("\n".join(lines))
    sources = TraceSources.from_paths(logs=[("promptslim serve", log)])
    items = build_traces(sources, n=6, seed=1, calls=(3, 4), kinds=("log",))
    assert len(items) == 6
    for item in items:
        (line,) = [x for x in lines if item.answers[0] in x and x.split('"id": "')[1][:32] in
                   item.request.messages[1].text]  # fmt: skip
        assert json.loads(line)["tokens_in"] == int(item.answers[0]) >= 100
        assert item.metadata["kind"] == "log"


def test_the_dataset_spec_and_a_missing_folder(tmp_path: Path) -> None:
    loaded = load_dataset(f"tools:{_replay(tmp_path / 'ReplayData')}", limit=3)
    assert len(loaded.items) == 3
    with pytest.raises(DatasetError):
        load_dataset(f"tools:{tmp_path / 'nope'}", limit=1)
