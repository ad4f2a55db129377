"""Input the fuzzer found mishandled: documents with extra keys or odd ids, caller-set
``frozen_prefix``, content parts through ``Message.with_text``, and misuse of Budget, Pipeline.run
and ``Request.from_openai`` options. Each gets a typed error naming the field, or is kept."""

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from promptslim import (
    Budget,
    ConfigError,
    InvalidRequest,
    Pipeline,
    PromptSlimError,
    Report,
    Request,
    Result,
)
from promptslim.stages.prefix import PrefixStage
from promptslim.types import Document, Message

from .conftest import chat_body

# ---------------------------------------------------------------- documents


def _with_documents(documents: list[Any]) -> Request:
    body = chat_body(1)
    body["documents"] = documents
    return Request.from_openai(body)


def test_document_extra_keys_are_kept_in_metadata_not_dropped() -> None:
    request = _with_documents(
        [{"id": "a", "text": "hello", "title": "T"}, {"id": "b", "text": "x", "url": "https://e.x/b"}]
    )
    assert request.warnings == []
    a, b = request.documents
    assert (a.id, a.text, a.metadata, a.title) == ("a", "hello", {"title": "T"}, "T")
    assert (b.id, b.metadata) == ("b", {"url": "https://e.x/b"})
    block = Result(request=request, report=Report()).to_openai()["messages"][-2]
    assert block["content"].startswith("Document [1](Title: T) hello")


def test_document_metadata_wins_over_a_top_level_key_and_says_so() -> None:
    request = _with_documents(
        [{"id": "a", "text": "t", "title": "top", "lang": "en", "metadata": {"title": "meta"}}]
    )
    assert request.documents[0].metadata == {"title": "meta", "lang": "en"}
    assert request.warnings == ["documents[0].title: also in metadata; the metadata's value kept"]


def test_document_null_id_or_metadata_is_treated_as_missing() -> None:
    request = _with_documents(
        [{"id": None, "text": "n"}, {"text": "m", "metadata": None}, {"id": 7, "text": "i"}]
    )
    assert [(d.id, d.metadata) for d in request.documents] == [
        ("doc-0", {}), ("doc-1", {}), ("7", {})
    ]  # fmt: skip
    assert request.warnings == []


@pytest.mark.parametrize(("bad_id", "kind"), [(True, "bool"), (1.5, "float"), (["a"], "list")])
def test_document_id_of_another_type_is_skipped_naming_the_field(bad_id: Any, kind: str) -> None:
    request = _with_documents([{"id": "ok", "text": "fine"}, {"id": bad_id, "text": "t"}])
    assert [d.id for d in request.documents] == ["ok"]  # never the string "True"
    assert request.warnings == [
        f"skipped: documents[1].id: expected a string or an integer, got {kind}"
    ]


json_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=10)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
extra_keys = st.text(min_size=1, max_size=8).filter(lambda k: k not in Document.model_fields)


@given(
    text=st.text(max_size=40),
    extra=st.dictionaries(extra_keys, json_values, max_size=4),
    metadata=st.none() | st.dictionaries(st.text(max_size=8), json_values, max_size=3),
)
def test_any_document_with_text_is_kept_with_all_its_keys(
    text: str, extra: dict[str, Any], metadata: dict[str, Any] | None
) -> None:
    raw: dict[str, Any] = {"text": text, **extra}
    if metadata is not None:
        raw["metadata"] = metadata
    request = _with_documents([raw])
    (doc,) = request.documents
    assert doc.text == text and doc.id == "doc-0"
    assert doc.metadata == {**extra, **(metadata or {})}


# ---------------------------------------------------------------- frozen_prefix

SYSTEM_USER = {
    "messages": [
        {"role": "system", "content": "You are helpful. Today is 2024-01-01."},
        {"role": "user", "content": "what happened on 2024-01-01?"},
    ]
}


@pytest.mark.parametrize(
    ("body", "n", "reason"),
    [
        (SYSTEM_USER, 2, "last user message"),
        ({"messages": [{"role": "user", "content": "x"}]}, 3, "number of messages"),
        ({"messages": [{"role": "system", "content": "x"}]}, 2, "number of messages"),
        (SYSTEM_USER, -1, "greater than or equal to 0"),
    ],
)
def test_caller_frozen_prefix_is_validated_at_parse_time(body: dict, n: int, reason: str) -> None:
    with pytest.raises(InvalidRequest, match=reason) as info:
        Request.from_openai(body, frozen_prefix=n)
    assert info.value.field == "frozen_prefix"


def test_valid_caller_frozen_prefix_is_accepted_and_leaves_the_last_user_message() -> None:
    request = Request.from_openai(SYSTEM_USER, frozen_prefix=1)
    assert request.prefix_end() == 1
    out = PrefixStage().run(request).request
    assert out.messages[out.last_user_index() or 0] == request.messages[1]
    # without a user message every message may be frozen
    only_system = {"messages": [{"role": "system", "content": "a"}, {"role": "developer", "content": "b"}]}
    assert Request.from_openai(only_system, frozen_prefix=2).frozen_prefix == 2


# ---------------------------------------------------------------- Message.with_text

IMAGE = {"type": "image_url", "image_url": {"url": "https://e.x/a.png"}}
EPHEMERAL = {"type": "ephemeral"}


def _user(content: Any) -> Message:
    return Message.model_validate({"role": "user", "content": content})


def test_with_text_keeps_part_order_and_extra_keys() -> None:
    message = _user([IMAGE, {"type": "text", "text": "what is this?", "cache_control": EPHEMERAL}])
    assert message.with_text("what?").to_openai()["content"] == [
        IMAGE, {"type": "text", "text": "what?", "cache_control": EPHEMERAL}
    ]  # fmt: skip


def test_with_text_keeps_a_single_text_part_as_a_part() -> None:
    message = _user([{"type": "text", "text": "long text", "cache_control": EPHEMERAL}])
    assert message.with_text("short").to_openai()["content"] == [
        {"type": "text", "text": "short", "cache_control": EPHEMERAL}
    ]


def test_with_text_folds_several_text_parts_into_the_first_keeping_their_keys() -> None:
    message = _user(
        [
            {"type": "text", "text": "a", "x_first": 1},
            IMAGE,
            {"type": "text", "text": "b", "cache_control": EPHEMERAL, "x_first": 2},
        ]
    )
    assert message.with_text("a b").to_openai()["content"] == [
        {"type": "text", "text": "a b", "x_first": 1, "cache_control": EPHEMERAL}, IMAGE
    ]  # fmt: skip
    assert message.with_text(message.text) == message  # unchanged text: every part as it was


text_parts = st.fixed_dictionaries(
    {"type": st.just("text"), "text": st.text(max_size=10)},
    optional={"cache_control": st.just(EPHEMERAL), "x_vendor": st.integers()},
)
other_parts = st.fixed_dictionaries(
    {"type": st.sampled_from(["image_url", "input_audio"]), "data": st.integers()}
)


@given(parts=st.lists(text_parts | other_parts, min_size=1, max_size=6), new=st.text(max_size=20))
def test_with_text_changes_only_the_text(parts: list[dict[str, Any]], new: str) -> None:
    message = _user(parts)
    out = message.with_text(new)
    assert out.text == new
    content = out.to_openai()["content"]
    assert [p for p in content if "text" not in p] == [p for p in parts if "text" not in p]
    texts = [p for p in parts if "text" in p]
    if texts:
        (kept,) = [p for p in content if "text" in p]
        assert content.index(kept) == parts.index(texts[0])  # where the first text part was
        for key in {k for p in texts for k in p} - {"text"}:
            assert key in kept


# ---------------------------------------------------------------- misuse errors


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"total": 0}, "total"),
        ({"history": -1}, "history"),
        ({"history_share": 2.0}, "history_share"),
        ({"total": "many"}, "total"),
        ({"totl": 5}, "totl"),
        # a config's true or "500" is not 1 or 500 tokens
        ({"total": True}, "total"),
        ({"documents": "500"}, "documents"),
    ],
)
def test_bad_budget_raises_config_error_naming_the_field(options: dict, field: str) -> None:
    with pytest.raises(ConfigError) as info:
        Budget(**options)
    assert info.value.field == field
    assert isinstance(info.value, ValueError)  # as pydantic's ValidationError was


def test_budget_in_a_config_still_names_its_path() -> None:
    with pytest.raises(ConfigError) as info:
        Pipeline.from_config({"budget": {"total": 0}})
    assert info.value.field == "budget.total"
    assert Budget(total=5, history_share=0.2) == Budget.model_validate({"total": 5, "history_share": 0.2})


def test_pipeline_run_with_a_dict_gives_a_typed_error() -> None:
    request = Request.from_openai(chat_body(1))
    with pytest.raises(ConfigError, match=r"Budget\(\*\*") as info:
        Pipeline([]).run(request, {"total": 5})  # type: ignore[arg-type]
    assert info.value.field == "budget"
    with pytest.raises(InvalidRequest, match="Request.from_openai") as info:
        Pipeline([]).run(chat_body(1))  # type: ignore[arg-type]
    assert info.value.field == "request"
    with pytest.raises(ConfigError) as info:
        Pipeline([], budget={"total": 5})  # type: ignore[arg-type]
    assert info.value.field == "budget"


def test_unknown_from_openai_option_is_an_error_naming_it() -> None:
    with pytest.raises(InvalidRequest, match="known: query") as info:
        Request.from_openai(chat_body(1), foo=1)
    assert info.value.field == "foo"
    assert isinstance(info.value, PromptSlimError)
    request = Request.from_openai(chat_body(1), query="q", protect=["x"], tokenizer=None)
    assert (request.query, request.protect) == ("q", ["x"])
