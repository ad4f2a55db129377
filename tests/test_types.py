import copy
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from promptslim import Document, InvalidRequest, Report, Request, Result, count_request
from promptslim.render import DOCUMENTS_ROLE
from promptslim.types import Change, Message, StageReport, trusted

from .conftest import chat_body

FULL_BODY = {
    "model": "gpt-x",
    "temperature": 0.3,
    "stream": True,
    "stream_options": {"include_usage": True},
    "response_format": {"type": "json_object"},
    "messages": [
        {"role": "developer", "content": "Be brief."},
        {"role": "system", "content": "You are helpful.", "name": "sys"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in this image?"},
                {
                    "type": "image_url",
                    "image_url": {"url": "https://example.com/a.png", "detail": "low"},
                },
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "refusal": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"q": "cat"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "time", "arguments": "{}"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "a cat"},
        {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "noon"}]},
        {"role": "user", "content": "thanks", "x_vendor_field": {"keep": [1, 2, 3]}},
    ],
    "tools": [
        {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
    ],
    "tool_choice": "auto",
    "some_future_field": [None, 1.5, "x"],
}


def test_openai_body_round_trips_losslessly() -> None:
    body = copy.deepcopy(FULL_BODY)
    request = Request.from_openai(body)
    assert request.to_openai() == FULL_BODY
    # a Result with no documents sends exactly the body it got
    assert Result(request=request, report=Report()).to_openai() == FULL_BODY
    assert body == FULL_BODY  # input not mutated


def test_round_trip_survives_json_serialisation() -> None:
    request = Request.from_openai(FULL_BODY)
    again = Request.from_openai(json.loads(json.dumps(request.to_openai())))
    assert again.to_openai() == FULL_BODY


def test_documents_render_before_last_user_message() -> None:
    body = chat_body(1)
    body["documents"] = [{"id": "a", "text": "alpha", "metadata": {"title": "A"}}, "beta"]
    request = Request.from_openai(body)
    assert [d.id for d in request.documents] == ["a", "doc-1"]
    sent = Result(request=request, report=Report()).to_openai()
    assert "documents" not in sent
    assert sent["messages"][-1] == body["messages"][-1]  # the last user message, untouched
    block = sent["messages"][-2]
    assert block["role"] == DOCUMENTS_ROLE
    assert block["content"] == "Document [1](Title: A) alpha\nDocument [2] beta"
    # Request.to_openai keeps documents as data
    assert request.to_openai()["documents"][0]["id"] == "a"


def test_query_defaults_to_last_user_message() -> None:
    request = Request.from_openai(chat_body(2))
    assert request.effective_query == "and the final question?"
    assert Request.from_openai(chat_body(2), query="q").effective_query == "q"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ([], "body"),
        ({}, "messages"),
        ({"messages": {"role": "user"}}, "messages"),
        ({"messages": ["hi"]}, "messages[0]"),
        ({"messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
        ({"messages": [{"content": "x"}]}, "messages[0].role"),
        ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        (
            {"messages": [{"role": "user", "content": "a"}, {"role": "tool", "content": "x"}]},
            "messages[1].tool_call_id",
        ),
        (
            {"messages": [{"role": "assistant", "tool_calls": [{"id": "1", "type": "function"}]}]},
            "messages[0].tool_calls[0].function",
        ),
        ({"messages": [{"role": "user", "content": [{"text": "no type"}]}]}, "messages[0].content"),
        ({"messages": [], "model": 3}, "model"),
        ({"messages": [], "tools": "x"}, "tools"),
        ({"messages": [], "documents": "x"}, "documents"),
    ],
)
def test_malformed_input_names_the_field(body: object, field: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        Request.from_openai(body)  # type: ignore[arg-type]
    assert info.value.field is not None
    assert info.value.field.startswith(field), info.value.field


def test_bad_documents_are_skipped_and_reported_not_fatal() -> None:
    body = chat_body(1)
    body["documents"] = [
        {"id": "ok", "text": "fine"},
        {"id": "bad", "text": 42},
        17,
        {"text": "also ok"},
    ]
    request = Request.from_openai(body)
    assert [d.id for d in request.documents] == ["ok", "doc-3"]
    assert any("documents[1].text" in w for w in request.warnings)
    assert any("documents[2]" in w for w in request.warnings)


def test_pinned_is_ours_and_never_sent() -> None:
    request = Request.from_openai({"messages": [{"role": "user", "content": "x", "pinned": True}]})
    assert request.messages[0].pinned
    assert "pinned" not in request.to_openai()["messages"][0]


def test_models_are_frozen() -> None:
    request = Request.from_openai(chat_body(1))
    with pytest.raises(ValidationError):
        request.messages[0].content = "changed"  # type: ignore[misc]
    doc = Document(id="a", text="t")
    with pytest.raises(ValidationError):
        doc.text = "u"  # type: ignore[misc]


json_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
text_part = st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=40)})
message = st.one_of(
    st.fixed_dictionaries(
        {
            "role": st.sampled_from(["system", "developer", "user", "assistant"]),
            "content": st.text(max_size=80) | st.lists(text_part, max_size=3),
        },
        optional={"name": st.text(min_size=1, max_size=10), "x_extra": json_values},
    ),
    st.fixed_dictionaries(
        {
            "role": st.just("tool"),
            "tool_call_id": st.text(min_size=1, max_size=8),
            "content": st.text(max_size=40),
        }
    ),
)


@given(
    messages=st.lists(message, min_size=1, max_size=6),
    extra=st.dictionaries(
        st.text(min_size=1, max_size=10).filter(
            lambda k: k not in {"messages", "model", "tools", "documents"}
        ),
        json_values,
        max_size=4,
    ),
)
def test_round_trip_property(messages: list[dict], extra: dict) -> None:
    body = {"messages": messages, **extra}
    assert Request.from_openai(body).to_openai() == body


def test_trusted_builds_what_model_construct_builds() -> None:
    change = Change(kind="dropped", target="messages[1]", tokens=12, reason="oldest")
    stage_fields = {
        "stage": "history",
        "tokens_in": 120,
        "tokens_out": 108,
        "ms": 0.25,
        "changes": [change],
        "warnings": ["w"],
        "details": {"units": 3},
    }
    report_fields = {
        "stages": [StageReport.model_construct(**stage_fields)],
        "tokens_in": 120,
        "tokens_out": 108,
        "ms": 0.3,
        "warnings": ["w"],
        "prefix_fingerprint": "ab12",
        "cacheable_tokens": 40,
        "degraded": None,
    }
    request = Request.from_openai(chat_body(1))
    for cls, fields in (
        (StageReport, stage_fields),
        (Report, report_fields),
        (Result, {"request": request, "report": Report()}),
    ):
        fast, slow = trusted(cls, **fields), cls.model_construct(**fields)
        assert type(fast) is cls
        assert fast == slow
        assert fast.model_fields_set == slow.model_fields_set
        assert fast.model_dump() == slow.model_dump()
        assert fast.__pydantic_extra__ == slow.__pydantic_extra__
        assert fast.__pydantic_private__ == slow.__pydantic_private__
    # the objects are ordinary models: validation accepts their dump
    assert (
        StageReport.model_validate(trusted(StageReport, **stage_fields).model_dump()).stage
        == "history"
    )


def test_trusted_refuses_partial_fields_and_models_it_cannot_build() -> None:
    with pytest.raises(TypeError, match="ms"):
        trusted(
            StageReport, stage="x", tokens_in=1, tokens_out=1, changes=[], warnings=[], details={}
        )
    with pytest.raises(TypeError, match="tokenz"):
        trusted(
            Report,
            stages=[],
            tokens_in=1,
            tokens_out=1,
            ms=0.0,
            warnings=[],
            prefix_fingerprint=None,
            cacheable_tokens=None,
            tokenz=3,
        )
    request = Request.from_openai(chat_body(1))
    with pytest.raises(TypeError, match="model_construct"):  # private attributes (caches)
        trusted(Request, **dict(request))
    message = request.messages[0]
    with pytest.raises(TypeError, match="model_construct"):  # extra="allow"
        trusted(Message, **dict(message))


def test_request_equality_ignores_the_count_memo() -> None:
    a, b = Request.from_openai(chat_body(2)), Request.from_openai(chat_body(2))
    count_request(a)  # a carries a memo, b does not
    assert a == b
    assert a != b.replace(model="other")
    # which body keys were present is still part of the value (it decides what is written)
    assert a != Request.from_openai({**chat_body(2), "documents": []})
    with pytest.raises(TypeError):
        hash(a)


def test_replace_keeps_which_body_keys_were_sent_and_recounts() -> None:
    # the body keys decide what to_openai writes (an empty "documents" list sent stays sent);
    # the count memo carried over with the private attributes must not serve the new lists
    body = {**chat_body(3), "documents": []}
    request = Request.from_openai(body)
    total = count_request(request)
    shorter = request.replace(messages=request.messages[:1])
    assert shorter.to_openai().keys() == request.to_openai().keys() >= {"documents"}
    assert shorter.to_openai()["messages"] == [request.messages[0].to_openai()]
    assert count_request(shorter) < total == count_request(request)
    assert request.replace(model="other").to_openai()["model"] == "other"


def test_a_document_s_title_is_its_title_else_the_headings_a_header_splitter_left() -> None:
    assert Document(id="a", text="x").title is None
    assert Document(id="a", text="x", metadata={"title": 7}).title == "7"
    nested = {"Header 2": "Production", "Header 1": "A Walk Among the Tombstones", "n": 1}
    assert Document(id="a", text="x", metadata=nested).title == (
        "A Walk Among the Tombstones / Production"  # outermost first, whatever the dict's order
    )
    assert Document(id="a", text="x", metadata={"Header 3": "Cast", "Header 1": ""}).title == (
        "Cast"
    )
    assert Document(id="a", text="x", metadata={"title": "T", "Header 1": "H"}).title == "T"
    # LlamaIndex's Markdown parser: the headings a section is under, its own in its text
    path = {"header_path": "/A Walk Among the Tombstones/Production/"}
    assert Document(id="a", text="x", metadata=path).title == (
        "A Walk Among the Tombstones/Production"
    )
    assert Document(id="a", text="x", metadata={"header_path": "/"}).title is None
    assert Document(id="a", text="x", metadata={**path, "Header 1": "H"}).title == "H"
    assert Document(id="a", text="x", metadata={"header_path": 3}).title is None
    request = Request(
        messages=[{"role": "user", "content": "Where was it filmed?"}],
        documents=[Document(id="a", text="In New York.", metadata=nested)],
    )
    block = Result(request=request, report=Report()).to_openai()["messages"][-2]
    assert block["content"] == (
        "Document [1](Title: A Walk Among the Tombstones / Production) In New York."
    )
