"""The LlamaIndex adapters against the real llama-index-core package.

Seam stages (promptslim BaseStage subclasses) pin the translation; the real stages are
exercised at the end when they import.
"""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st
from llama_index.core.base.llms.types import (
    ChatMessage,
    ImageBlock,
    MessageRole,
    TextBlock,
    ToolCallBlock,
)
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from promptslim import Budget, Message, PassThrough, Request
from promptslim.integrations.llamaindex import (
    PromptSlimPostprocessor,
    aslim_chat_history,
    from_llamaindex_messages,
    slim_chat_history,
    to_llamaindex_messages,
)
from promptslim.stages.base import BaseStage, StageLog

from .conftest import assert_missing_extra


class DropAndRank(BaseStage):
    """Drops documents containing "drop", scores the rest by length, longest first."""

    name = "drop_and_rank"

    def __init__(self) -> None:
        pass

    def apply(self, request: Request, budget: Budget, log: StageLog) -> Request:
        kept = [
            d.model_copy(update={"score": float(len(d.text))})
            for d in request.documents
            if "drop" not in d.text
        ]
        return request.replace(documents=sorted(kept, key=lambda d: -len(d.text)))


class Halve(BaseStage):
    """Cuts every document's text in half (what a compress stage does), scores unchanged."""

    name = "halve"

    def __init__(self) -> None:
        pass

    def apply(self, request: Request, budget: Budget, log: StageLog) -> Request:
        return request.replace(
            documents=[
                d.model_copy(update={"text": d.text[: len(d.text) // 2]}) for d in request.documents
            ]
        )


class FoldHistory(BaseStage):
    """Replaces all but the last two messages with a summary, shortens the one before last."""

    name = "fold"

    def __init__(self) -> None:
        pass

    def apply(self, request: Request, budget: Budget, log: StageLog) -> Request:
        *head, before, last = request.messages
        summary = Message(role="system", content=f"summary of {len(head)} messages")
        return request.replace(messages=[summary, before.with_text(before.text[:5]), last])


def nodes() -> list[NodeWithScore]:
    return [
        NodeWithScore(
            node=TextNode(text="short", id_="n1", metadata={"file": "a.txt", "title": "A"}),
            score=0.2,
        ),
        NodeWithScore(
            node=TextNode(text="please drop me", id_="n2", metadata={"file": "b.txt"}), score=0.9
        ),
        NodeWithScore(
            node=TextNode(text="a much longer passage", id_="n3", metadata={"page": 3}), score=None
        ),
    ]


# ---------------------------------------------------------------- postprocessor


def test_postprocessor_keeps_node_identity_and_sets_scores() -> None:
    given_nodes = nodes()
    out = PromptSlimPostprocessor(stage=DropAndRank()).postprocess_nodes(given_nodes, query_str="q")
    assert [n.node for n in out] == [given_nodes[2].node, given_nodes[0].node]
    assert out[0].node is given_nodes[2].node and out[1].node is given_nodes[0].node
    assert [n.score for n in out] == [21.0, 5.0]
    assert out[1].node.metadata == {"file": "a.txt", "title": "A"}
    assert given_nodes[0].score == 0.2  # inputs untouched


def test_postprocessor_passthrough_keeps_scores_and_sends_metadata_apart() -> None:
    seen: list[Request] = []

    class Spy(PassThrough):
        def apply(self, request: Request, budget: Budget, log: StageLog) -> Request:
            seen.append(request)
            return request

    given_nodes = nodes()
    out = PromptSlimPostprocessor(stage=Spy()).postprocess_nodes(given_nodes, QueryBundle("why?"))
    assert [(n.node, n.score) for n in out] == [(n.node, n.score) for n in given_nodes]
    request = seen[0]
    assert request.effective_query == "why?"
    assert [d.id for d in request.documents] == ["n1", "n2", "n3"]
    assert request.documents[0].text == "short" and request.documents[0].title == "A"


def test_postprocessor_compressed_text_keeps_node_id_and_metadata() -> None:
    given_nodes = nodes()
    out = PromptSlimPostprocessor(stage=Halve()).postprocess_nodes(given_nodes)
    assert [n.node.node_id for n in out] == ["n1", "n2", "n3"]
    assert out[2].node.get_content() == "a much lon" and out[2].node.metadata == {"page": 3}
    assert given_nodes[2].node.get_content() == "a much longer passage"


def test_postprocessor_empty_and_async() -> None:
    post = PromptSlimPostprocessor(stage=DropAndRank())
    assert post.postprocess_nodes([]) == []
    assert asyncio.run(post.apostprocess_nodes([])) == []
    sync = post.postprocess_nodes(nodes(), query_str="q")
    async_ = asyncio.run(post.apostprocess_nodes(nodes(), query_str="q"))
    assert [(n.node.node_id, n.score) for n in sync] == [(n.node.node_id, n.score) for n in async_]


def test_postprocessor_serialises_without_the_stage() -> None:
    post = PromptSlimPostprocessor(stage=PassThrough(), budget=Budget(documents=10))
    assert post.to_dict()["class_name"] == "PromptSlimPostprocessor"
    assert "stage" not in post.to_dict()


# ---------------------------------------------------------------- chat history


def chat() -> list[ChatMessage]:
    return [
        ChatMessage(role=MessageRole.SYSTEM, content="be brief"),
        ChatMessage(
            role=MessageRole.USER, content="weather in Paris?", additional_kwargs={"name": "ann"}
        ),
        ChatMessage(
            role=MessageRole.ASSISTANT,
            blocks=[
                ToolCallBlock(tool_name="weather", tool_call_id="c1", tool_kwargs={"city": "Paris"})
            ],
        ),
        ChatMessage(
            role=MessageRole.TOOL, content="sunny, 21 C", additional_kwargs={"tool_call_id": "c1"}
        ),
        ChatMessage(role=MessageRole.ASSISTANT, content="It is sunny and warm today in Paris."),
        ChatMessage(role=MessageRole.USER, content="and tomorrow?"),
    ]


def test_history_helper_keeps_objects_and_fields() -> None:
    messages = chat()
    out = slim_chat_history(messages, stage=FoldHistory())
    assert out[0].role == MessageRole.SYSTEM and out[0].content == "summary of 4 messages"
    assert out[1].content == "It is" and out[1].role == MessageRole.ASSISTANT
    assert out[2] is messages[-1]
    assert slim_chat_history([], stage=FoldHistory()) == []
    assert all(
        a is b
        for a, b in zip(slim_chat_history(messages, stage=PassThrough()), messages, strict=True)
    )


def test_history_helper_async() -> None:
    out = asyncio.run(aslim_chat_history(chat(), stage=FoldHistory()))
    assert [m.content for m in out] == [
        m.content for m in slim_chat_history(chat(), stage=FoldHistory())
    ]


def test_conversion_to_promptslim() -> None:
    ps = from_llamaindex_messages(chat())
    assert [m.role for m in ps] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert ps[1].name == "ann" and ps[3].tool_call_id == "c1"
    assert (
        ps[2].tool_calls is not None
        and ps[2].tool_calls[0].function.arguments == '{"city": "Paris"}'
    )
    image = ChatMessage(
        role=MessageRole.USER, blocks=[TextBlock(text="see"), ImageBlock(url="https://x/y.png")]
    )
    converted = from_llamaindex_messages([image])[0]
    assert (
        converted.text == "see"
        and isinstance(converted.content, list)
        and len(converted.content) == 2
    )


def test_shortened_message_keeps_its_non_text_blocks() -> None:
    image = ChatMessage(
        role=MessageRole.USER,
        blocks=[TextBlock(text="look at this"), ImageBlock(url="https://x/y.png")],
        additional_kwargs={"k": 1},
    )
    ps = [m.with_text("look") for m in from_llamaindex_messages([image])]
    back = to_llamaindex_messages(ps, [image])[0]
    assert (
        back.content == "look"
        and isinstance(back.blocks[1], ImageBlock)
        and back.additional_kwargs == {"k": 1}
    )


roles = st.sampled_from(
    [MessageRole.SYSTEM, MessageRole.USER, MessageRole.ASSISTANT, MessageRole.CHATBOT]
)
li_messages = st.builds(
    lambda r, t, k: ChatMessage(role=r, content=t, additional_kwargs=k),
    roles,
    st.text(min_size=1, max_size=30),
    st.dictionaries(st.sampled_from(["a", "b"]), st.integers(), max_size=2),
)


@given(st.lists(li_messages, max_size=6))
def test_round_trip_through_a_copying_stage_is_lossless(messages: list[ChatMessage]) -> None:
    class Copy(PassThrough):
        def apply(self, request: Request, budget: Budget, log: StageLog) -> Request:
            return request.replace(messages=[m.with_text(m.text) for m in request.messages])

    assert slim_chat_history(messages, stage=Copy()) == messages


# ---------------------------------------------------------------- packaging


def test_missing_llamaindex_raises_backend_unavailable() -> None:
    hidden = ["llama_index", "llama_index.core"]
    assert_missing_extra("promptslim.integrations.llamaindex", hidden, "llamaindex")


# ---------------------------------------------------------------- the real stages


def _real(name: str) -> type:
    from promptslim import STAGES

    try:
        return STAGES.get(name)  # type: ignore[no-any-return]
    except ImportError as exc:  # the stage module is not in this checkout yet
        pytest.skip(f"stage {name!r} not available: {exc}")


def test_postprocessor_with_the_real_retrieval_stage() -> None:
    given_nodes = [
        NodeWithScore(
            node=TextNode(text="The Eiffel Tower is 330 metres tall.", id_="e", metadata={"k": 1}),
            score=0.1,
        ),
        NodeWithScore(node=TextNode(text="Bananas are rich in potassium.", id_="b"), score=0.9),
        NodeWithScore(
            node=TextNode(text="Mount Everest is 8,849 metres high.", id_="m"), score=0.5
        ),
    ]
    post = PromptSlimPostprocessor(stage=_real("retrieval")(scorer="bm25", max_k=2))
    out = post.postprocess_nodes(given_nodes, query_str="How tall is the Eiffel Tower?")
    assert 1 <= len(out) <= 2 and out[0].node is given_nodes[0].node
    assert out[0].score is not None and out[0].score != 0.1


def test_history_helper_with_the_real_history_stage() -> None:
    history = [ChatMessage(role=MessageRole.SYSTEM, content="You are a guide.")]
    for i in range(12):
        history.append(ChatMessage(role=MessageRole.USER, content=f"fact {i}? " + "word " * 30))
        history.append(
            ChatMessage(role=MessageRole.ASSISTANT, content=f"fact {i}: " + "word " * 30)
        )
    history.append(ChatMessage(role=MessageRole.USER, content="summarise"))
    out = slim_chat_history(history, stage=_real("history")(), budget=Budget(total=400))
    assert len(out) < len(history) and out[-1] is history[-1] and out[0] is history[0]
