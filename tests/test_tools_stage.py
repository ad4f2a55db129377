"""The tools stage: pairing and ids intact, the same bytes on every turn, every elision
reported and resolvable through ``expand``, the expand tool, and the bounded stores."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from promptslim import Pipeline, Request
from promptslim.backends.tools.expand import (
    EXPAND_TOOL_NAME,
    answer_expand_call,
    expand,
    is_expand_call,
)
from promptslim.backends.tools.store import MemoryToolStore, SqliteToolStore, tool_store_from_spec
from promptslim.bench.datasets import BenchItem
from promptslim.bench.tool_traces import trace_requests
from promptslim.errors import ConfigError, InvalidRequest
from promptslim.stages.tools import ToolsStage


def _issues(n: int = 40, closed: int = 23) -> str:
    return json.dumps(
        [
            {
                "number": 500 + i,
                "title": f"Crash in parser {i}",
                "state": "closed" if i == closed else "open",
                "labels": ["bug"],
            }
            for i in range(n)
        ]
    )


def _log() -> str:
    lines = [f"[{i:04d}] fetched page {i} in {i % 7 + 1} ms" for i in range(400)]
    return "\n".join(lines + ["ERROR: page 401 refused (HTTP 429)", "done: 400 pages"])


def _call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def _trace() -> Request:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "What is the title of issue 517?"},
        _call("call_a", "list_issues", {"repo": "acme/widgets"}),
        {"role": "tool", "tool_call_id": "call_a", "content": _issues()},
        _call("call_b", "run", {"command": "crawl --all"}),
        {"role": "tool", "tool_call_id": "call_b", "content": _log()},
        {"role": "assistant", "content": "Issue 517 is 'Crash in parser 17'."},
        {"role": "user", "content": "And which page was refused?"},
        _call("call_c", "list_issues", {"repo": "acme/gadgets"}),
        {"role": "tool", "tool_call_id": "call_c", "content": _issues(60, closed=5)},
    ]
    return Request.from_openai({"messages": messages})


def test_tool_results_shrink_and_pairing_ids_and_order_stay() -> None:
    request = _trace()
    result = ToolsStage(store=MemoryToolStore()).run(request)
    before, after = request.messages, result.request.messages
    assert [(m.role, m.tool_call_id, m.tool_calls) for m in before] == [
        (m.role, m.tool_call_id, m.tool_calls) for m in after
    ]
    assert all(a == b for a, b in zip(before, after) if a.role != "tool")
    assert result.report.tokens_out < 0.4 * result.report.tokens_in
    texts = [m.text for m in after]
    assert "Crash in parser 17" in texts[3]  # named by the query of its turn
    assert "ERROR: page 401 refused (HTTP 429)" in texts[5]
    json.loads(texts[3])
    json.loads(texts[9])


def test_every_elision_is_reported_and_expands_to_its_original() -> None:
    store = MemoryToolStore()
    request = _trace()
    result = ToolsStage(store=store).run(request)
    details = result.report.stage("tools").details["tools"]
    assert {d["message"] for d in details} == {3, 5, 9}
    ids = [e["id"] for d in details for e in e_list(d)]
    assert ids and all(i in "".join(m.text for m in result.request.messages) for i in ids)
    changes = result.report.stage("tools").changes
    assert {c.target for c in changes} == {"messages[3]", "messages[5]", "messages[9]"}
    log_out = result.request.messages[5].text
    for e in details[1]["elisions"]:
        original = expand(e["id"], store=store)
        assert original in request.messages[5].text
        log_out = log_out.replace(
            next(line for line in log_out.split("\n") if e["id"] in line), original
        )
    assert log_out == request.messages[5].text  # nothing lost that no marker names


def e_list(detail: dict[str, Any]) -> list[dict[str, Any]]:
    return list(detail["elisions"])


def test_the_same_bytes_on_every_turn_and_on_a_fresh_replica() -> None:
    item = BenchItem("t", _trace(), ("x",))
    stage = ToolsStage(store=MemoryToolStore())
    sent: dict[int, str] = {}
    for turn in trace_requests(item):
        out = stage.run(turn).request
        for i, m in enumerate(out.messages):
            if m.role == "tool":
                assert sent.setdefault(i, m.text) == m.text
    replica = ToolsStage(store=MemoryToolStore()).run(item.request).request
    assert all(replica.messages[i].text == text for i, text in sent.items())
    cached = stage.run(item.request).report.stage("tools").details["tools"]
    assert all(d["cached"] for d in cached)


def test_a_later_user_message_does_not_change_an_earlier_result() -> None:
    first = _trace()
    later = first.replace(
        messages=[
            *first.messages,
            *Request.from_openai(
                {"messages": [{"role": "user", "content": "Now list every open issue number 530"}]}
            ).messages,
        ]
    )
    stage = ToolsStage(store=MemoryToolStore())
    a = stage.run(first).request.messages[3].text
    b = ToolsStage(store=MemoryToolStore()).run(later).request.messages[3].text
    assert a == b


def test_the_expand_tool_is_added_once_and_its_calls_are_answered() -> None:
    store = MemoryToolStore()
    result = ToolsStage(store=store, expand_tool=True).run(_trace())
    tools = result.request.tools or []
    assert [t["function"]["name"] for t in tools] == [EXPAND_TOOL_NAME]
    again = ToolsStage(store=store, expand_tool=True).run(result.request)
    assert again.request.tools == tools
    ident = result.report.stage("tools").details["tools"][0]["elisions"][0]["id"]
    call = {
        "id": "call_x",
        "type": "function",
        "function": {"name": EXPAND_TOOL_NAME, "arguments": json.dumps({"id": ident})},
    }
    assert is_expand_call(call)
    answer = answer_expand_call(call, store=store)
    assert answer["tool_call_id"] == "call_x" and answer["content"] == expand(ident, store=store)
    bad = answer_expand_call(
        {**call, "function": {"name": EXPAND_TOOL_NAME, "arguments": "{"}}, store=store
    )
    assert "arguments" in bad["content"]
    gone = answer_expand_call(
        {**call, "function": {"name": EXPAND_TOOL_NAME, "arguments": '{"id": "ps000000000000"}'}},
        store=store,
    )
    assert "no longer stored" in gone["content"]


def test_a_result_that_answers_the_expand_tool_stays_whole() -> None:
    big = _issues()
    messages = [
        {"role": "user", "content": "q"},
        _call("call_e", EXPAND_TOOL_NAME, {"id": "ps0123456789ab"}),
        {"role": "tool", "tool_call_id": "call_e", "content": big},
    ]
    out = ToolsStage(store=MemoryToolStore()).run(Request.from_openai({"messages": messages}))
    assert out.request.messages[2].text == big


def test_expand_rejects_what_is_not_an_id() -> None:
    with pytest.raises(InvalidRequest) as err:
        expand("../../etc/passwd", store=MemoryToolStore())
    assert err.value.field == "id"
    with pytest.raises(KeyError):
        expand("ps0123456789ab", store=MemoryToolStore())


def test_namespaces_keep_tenants_apart() -> None:
    store = MemoryToolStore()
    result = ToolsStage(store=store, namespace="tenant-a").run(_trace())
    ident = result.report.stage("tools").details["tools"][0]["elisions"][0]["id"]
    assert expand(ident, store=store, namespace="tenant-a")
    with pytest.raises(KeyError):
        expand(ident, store=store, namespace="tenant-b")


def test_the_memory_store_is_bounded_by_bytes() -> None:
    store = MemoryToolStore(max_bytes=10_000)
    for i in range(200):
        store.put("ns", f"k{i}", b"x" * 300)
    assert store.size <= 10_000
    assert store.get("ns", "k199") == b"x" * 300  # the newest stays
    assert store.get("ns", "k0") is None  # the oldest went first


def test_the_sqlite_store_is_shared_and_bounded_by_bytes(tmp_path: Path) -> None:
    path = tmp_path / "tools.db"
    store = SqliteToolStore(path, max_bytes=5_000)
    for i in range(100):
        store.put("ns", f"k{i}", bytes([i]) * 200)
    store.prune()
    assert store.size() <= 5_000
    assert SqliteToolStore(path).get("ns", "k99") == bytes([99]) * 200  # another opener sees it
    assert store.get("ns", "k0") is None


def test_store_specs_and_stage_config_errors(tmp_path: Path) -> None:
    assert isinstance(tool_store_from_spec(f"sqlite:{tmp_path / 'x.db'}"), SqliteToolStore)
    assert tool_store_from_spec("memory:1000").max_bytes == 1000  # type: ignore[attr-defined]
    with pytest.raises(ConfigError) as err:
        tool_store_from_spec("s3://bucket/originals")
    assert err.value.field == "store"
    with pytest.raises(ConfigError) as err:
        ToolsStage(compressors=("json", "yaml"))
    assert err.value.field == "compressors[1]"
    with pytest.raises(ConfigError) as err:
        ToolsStage(options={"json": {"nope": 1}})
    assert err.value.field == "options.json"


def test_the_stage_builds_from_config_and_round_trips() -> None:
    pipeline = Pipeline.from_config(
        {"stages": [{"name": "tools", "min_chars": 500, "store": "memory:100000"}]}
    )
    assert Pipeline.from_config(pipeline.to_config()).to_config() == pipeline.to_config()
    out = pipeline.run(_trace())
    assert out.report.tokens_out < out.report.tokens_in


def test_short_results_and_the_stable_prefix_are_left_alone() -> None:
    request = _trace()
    out = ToolsStage(store=MemoryToolStore(), min_chars=10**9).run(request)
    assert out.request.messages == request.messages
    frozen = request.replace(frozen_prefix=4)
    out = ToolsStage(store=MemoryToolStore()).run(frozen)
    assert out.request.messages[3] == request.messages[3]
    assert out.request.messages[5] != request.messages[5]


def test_the_default_pipeline_compresses_tool_results_and_keeps_the_question() -> None:
    request = _trace()
    result = Pipeline.default().run(request)
    assert [s.stage for s in result.report.stages][:2] == ["prefix", "tools"]
    assert result.report.tokens_out < 0.5 * result.report.tokens_in
    last = request.last_user_index()
    assert last is not None and result.request.messages[last] == request.messages[last]
