"""Request limits (``promptslim.limits``) and body fidelity: every bound is a typed error naming
the field, before any stage runs; what JSON allows and the OpenAI API sends goes through."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promptslim import InvalidRequest, Pipeline, Request, RequestLimits, check_body
from promptslim.render import json_bytes

USER = {"role": "user", "content": "What is in the file?"}


def _nested(depth: int) -> Any:
    value: Any = 1
    for i in range(depth):
        value = {"a": value} if i % 2 else [value]
    return value


@pytest.mark.parametrize("depth", [65, 494, 5_000, 100_000])
def test_deep_nesting_anywhere_is_refused_naming_the_field(depth: int) -> None:
    body = {"messages": [USER], "tools": [{"type": "function", "function": {
        "name": "f", "parameters": _nested(depth)}}]}  # fmt: skip
    with pytest.raises(InvalidRequest) as info:
        Request.from_openai(body)
    assert info.value.field.startswith("tools[0].function.parameters")
    assert "64 levels" in info.value.reason


def test_nesting_up_to_the_bound_is_accepted_and_survives_the_pipeline() -> None:
    schema = _nested(55)  # plus the seven levels from the body down to "x"
    body = {"messages": [USER], "tools": [{"type": "function", "function": {
        "name": "f", "parameters": {"type": "object", "x": schema}}}]}  # fmt: skip
    out = Pipeline.default().run(Request.from_openai(body)).to_openai()
    assert out["tools"][0]["function"]["parameters"]["x"] == schema


@pytest.mark.parametrize(
    ("extra", "field"),
    [({"temperature": float("nan")}, "temperature"), ({"top_p": float("inf")}, "top_p"),
     ({"seed": 10**5000}, "seed"), ({"metadata": {"k": [float("-inf")]}}, "metadata.k[0]")],
)  # fmt: skip
def test_numbers_json_cannot_carry_back_are_refused(extra: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        Request.from_openai({"messages": [USER], **extra})
    assert info.value.field == field


def test_a_text_part_without_text_is_refused() -> None:
    body = {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}},
                                                      {"type": "text"}]}]}  # fmt: skip
    with pytest.raises(InvalidRequest) as info:
        Request.from_openai(body)
    assert info.value.field == "messages[0].content[1].text"


def test_counts_and_characters_are_bounded_by_the_limits_given() -> None:
    limits = RequestLimits(max_messages=3, max_documents=2, max_chars=1_000)
    with pytest.raises(InvalidRequest) as info:
        Request.from_openai({"messages": [USER] * 4}, limits=limits)
    assert info.value.field == "messages"
    with pytest.raises(InvalidRequest) as info:
        Request.from_openai({"messages": [USER], "documents": ["a", "b", "c"]}, limits=limits)
    assert info.value.field == "documents"
    with pytest.raises(InvalidRequest) as info:
        Request.from_openai({"messages": [USER], "documents": ["x" * 1_001]}, limits=limits)
    assert info.value.field == "documents[0]"
    ok = Request.from_openai({"messages": [USER] * 3, "documents": ["a", "b"]}, limits=limits)
    assert len(ok.messages) == 3 and len(ok.documents) == 2


def test_a_fifty_megabyte_document_is_refused_by_default() -> None:
    with pytest.raises(InvalidRequest) as info:
        Request.from_openai({"messages": [USER], "documents": ["word " * 10_000_000]})
    assert info.value.field == "documents[0]"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=30,
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(extra=json_values)
def test_any_json_value_within_bounds_passes_and_comes_back_equal(extra: Any) -> None:
    body = {"messages": [USER], "metadata": {"v": extra}}
    check_body(body)
    out = json.loads(json_bytes(Request.from_openai(body).to_openai()))
    assert out["metadata"] == {"v": extra}


def test_custom_tool_calls_are_forwarded_untouched() -> None:
    call = {"id": "c1", "type": "custom", "custom": {"name": "shell", "input": "ls -la /tmp"}}
    body = {"model": "m", "messages": [
        USER, {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.txt b.txt"},
        {"role": "user", "content": "and the second file?"}]}  # fmt: skip
    out = Pipeline.default().run(Request.from_openai(body)).to_openai()
    assert out["messages"][1]["tool_calls"] == [call]
    with pytest.raises(InvalidRequest) as info:
        Request.from_openai({"messages": [{"role": "assistant", "tool_calls": [
            {"id": "c2", "type": "function"}]}]})  # fmt: skip
    assert info.value.field == "messages[0].tool_calls[0].function"


def test_a_clients_pinned_flag_is_honoured_and_reported() -> None:
    body = {"messages": [{"role": "user", "content": "keep me", "pinned": True}, USER]}
    result = Pipeline.default().run(Request.from_openai(body))
    assert any("messages[0]: pinned" in w for w in result.report.warnings)
    assert "pinned" not in result.to_openai()["messages"][0]
