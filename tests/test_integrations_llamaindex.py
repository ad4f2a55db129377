"""The LlamaIndex adapters against the real llama-index-core package.

Seam stages (promptslim BaseStage subclasses) pin the translation; the real stages are
exercised at the end when they import.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

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
from llama_index.core.bridge.pydantic import Field
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.llms import MockLLM
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from promptslim import Budget, ConfigError, Message, PassThrough, Request
from promptslim.integrations.llamaindex import (
    PromptSlimPostprocessor,
    PromptSlimReportEvent,
    aslim_chat_history,
    from_llamaindex_messages,
    slim_chat_history,
    to_llamaindex_messages,
)
from promptslim.integrations.llamaindex_memory import PromptSlimMemory
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


def test_a_splitters_nodes_are_placed_so_the_next_piece_stays() -> None:
    from llama_index.core import Document as LlamaDocument
    from llama_index.core.node_parser import SentenceSplitter

    article = (
        "Cool Hand Luke is an American prison drama film directed by Stuart Rosenberg and "
        "starring Paul Newman, with George Kennedy in a supporting role. It was shot in the "
        "San Joaquin River delta, standing in for the American South.\n\n"
        "Warner Bros. opened it in cinemas across the United States on November 1, 1967."
    )
    others = [
        "Luke Skywalker is the hero of the original Star Wars trilogy, a farm boy turned Jedi.",
        "Cool Hand is a 2009 album by a Swedish jazz trio, released on a small label.",
        "A prison film is a genre of film about prisoners and their attempts to escape.",
        "Paul Newman founded a food company that gives all its profits to charity.",
    ]
    splitter = SentenceSplitter(chunk_size=50, chunk_overlap=0)
    nodes = splitter.get_nodes_from_documents(
        [LlamaDocument(text=article, doc_id="luke"), *(LlamaDocument(text=t) for t in others)]
    )
    assert nodes[1].node_id != nodes[0].node_id and "1967" in nodes[1].get_content()
    assert "source" not in nodes[0].metadata  # filled on the stage's copy only
    given = [NodeWithScore(node=n, score=None) for n in nodes]
    query = "When was Cool Hand Luke with Paul Newman first shown?"
    # the words name the film's first piece and the other sources' pieces, not the next one
    stage = _real("retrieval")
    alone = PromptSlimPostprocessor(stage=stage(scorer="bm25", next_pieces=0))
    assert nodes[1] not in [n.node for n in alone.postprocess_nodes(given, query_str=query)]
    post = PromptSlimPostprocessor(stage=stage(scorer="bm25"))
    out = post.postprocess_nodes(given, query_str=query)
    assert [n.node for n in out][:1] == [nodes[0]] and nodes[1] in [n.node for n in out]
    assert "source" not in nodes[0].metadata


HANDBOOK = """# Cool Hand Luke

Cool Hand Luke is an American prison drama film directed by Stuart Rosenberg.

## Cast

Paul Newman plays Luke, with George Kennedy in a supporting role as Dragline.

## Production

Filming took place in the San Joaquin River delta near Stockton, California, which stood in
for the American South.

# Slasher (TV series)

Slasher is an anthology horror series; each season follows a town hunted by a killer.

## Cast

Katie McGrath and Brandon Jay McLaren lead the first season's cast.

## Production

Filming took place in Sudbury and Parry Sound, Ontario, over the summer.
"""


def test_the_headings_a_section_is_under_are_read_as_its_title() -> None:
    # LlamaIndex's Markdown parser keeps a section's own heading in its text and the ones
    # above it in metadata: each production section says where filming took place, and only
    # its metadata says of which film; the section after each film's opening is its cast
    from llama_index.core import Document as LlamaDocument
    from llama_index.core.node_parser import MarkdownNodeParser

    nodes = MarkdownNodeParser().get_nodes_from_documents([LlamaDocument(text=HANDBOOK)])
    assert [n.metadata["header_path"] for n in nodes if "Filming" in n.get_content()] == [
        "/Cool Hand Luke/",
        "/Slasher (TV series)/",
    ]
    given = [NodeWithScore(node=n, score=None) for n in nodes]
    cases = {"Cool Hand Luke": ("Stockton", "Sudbury"), "Slasher": ("Sudbury", "Stockton")}
    post = PromptSlimPostprocessor()
    for film, (place, other) in cases.items():
        out = post.postprocess_nodes(given, query_str=f"Where was {film} filmed?")
        kept = [n.node.get_content() for n in out]
        assert any(place in text for text in kept), film
        assert not any(other in text for text in kept), film
    assert [n.metadata for n in nodes][1] == {"header_path": "/Cool Hand Luke/"}


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


# ---------------------------------------------------------------- retriever conventions


class ScoreByNumber(BaseStage):
    """Scores nodes by the number in their text and puts them in the retrieval stage's
    ``edges`` order (best first, second best last)."""

    name = "score_by_number"

    def __init__(self) -> None:
        pass

    def apply(self, request: Request, budget: Budget, log: StageLog) -> Request:
        from promptslim.stages.retrieval import _edges

        docs = request.documents
        scored = [d.model_copy(update={"score": float(d.text.split()[-1])}) for d in docs]
        best = sorted(range(len(scored)), key=lambda i: -(scored[i].score or 0.0))
        return request.replace(documents=[scored[i] for i in _edges(best)])


def numbered() -> list[NodeWithScore]:
    return [
        NodeWithScore(node=TextNode(text=f"node {n}", id_=f"n{n}"), score=n / 10)
        for n in (3, 9, 5, 7, 1)
    ]


def test_top_n_takes_the_best_by_score_then_the_stage_order() -> None:
    post = PromptSlimPostprocessor(stage=ScoreByNumber(), top_n=2)
    assert [n.node.node_id for n in post.postprocess_nodes(numbered())] == ["n9", "n7"]
    three = PromptSlimPostprocessor(stage=ScoreByNumber(), top_n=3)
    out = asyncio.run(three.apostprocess_nodes(numbered()))
    assert [n.node.node_id for n in out] == ["n9", "n5", "n7"]  # edges order of the best three
    every = PromptSlimPostprocessor(stage=ScoreByNumber()).postprocess_nodes(numbered())
    assert [n.node.node_id for n in every] == ["n9", "n5", "n1", "n3", "n7"]


def test_keep_retrieval_score_keeps_the_retrievers_score_in_metadata() -> None:
    given_nodes = numbered()
    post = PromptSlimPostprocessor(stage=ScoreByNumber(), top_n=1, keep_retrieval_score=True)
    (best,) = post.postprocess_nodes(given_nodes)
    assert best.score == 9.0 and best.node.metadata["retrieval_score"] == 0.9
    plain = PromptSlimPostprocessor(stage=ScoreByNumber(), top_n=1).postprocess_nodes(numbered())
    assert "retrieval_score" not in plain[0].node.metadata


def test_the_query_bundles_embedding_is_reused() -> None:
    seen: list[Request] = []

    class Spy(PassThrough):
        def apply(self, request: Request, budget: Budget, log: StageLog) -> Request:
            seen.append(request)
            return request

    bundle = QueryBundle("why?", embedding=[0.1, 0.2, 0.3])
    PromptSlimPostprocessor(stage=Spy()).postprocess_nodes(nodes(), bundle)
    PromptSlimPostprocessor(stage=Spy()).postprocess_nodes(nodes(), QueryBundle("why?"))
    assert seen[0].query_embedding == [0.1, 0.2, 0.3] and seen[1].query_embedding is None


def test_to_dict_keeps_the_budget_and_round_trips() -> None:
    post = PromptSlimPostprocessor(budget=Budget(documents=300), top_n=4, keep_retrieval_score=True)
    data = post.to_dict()
    assert data["budget"]["documents"] == 300 and data["top_n"] == 4
    again = PromptSlimPostprocessor.from_json(post.to_json())
    assert again.budget == Budget(documents=300) and again.top_n == 4
    assert again.keep_retrieval_score is True


def test_a_dict_budget_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="budget"):
        PromptSlimPostprocessor(budget={"documents": 10})
    with pytest.raises(ConfigError, match="budget"):
        slim_chat_history(chat(), budget={"history": 10})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="budget"):
        PromptSlimMemory(budget={"history": 10})


# ---------------------------------------------------------------- instrumentation


class Collect(BaseEventHandler):
    """A real LlamaIndex event handler on the root dispatcher: keeps promptslim's events."""

    events: list[PromptSlimReportEvent] = Field(default_factory=list)

    @classmethod
    def class_name(cls) -> str:
        return "Collect"

    def handle(self, event: Any, **kwargs: Any) -> None:
        if isinstance(event, PromptSlimReportEvent):
            self.events.append(event)


@pytest.fixture
def collect() -> Iterator[Collect]:
    handler = Collect()
    root = get_dispatcher()
    root.add_event_handler(handler)
    yield handler
    root.event_handlers.remove(handler)


def test_instrumentation_sees_the_report_figures(collect: Collect) -> None:
    PromptSlimPostprocessor(stage=DropAndRank()).postprocess_nodes(nodes(), query_str="q")
    slim_chat_history(chat(), stage=FoldHistory())
    assert [e.source for e in collect.events] == ["postprocessor", "memory"]
    figures = collect.events[0].figures
    assert figures["tokens_out"] < figures["tokens_in"]
    assert figures["stages"]["drop_and_rank"]["tokens_in"] == figures["tokens_in"]
    assert "drop me" not in repr([e.figures for e in collect.events])


# ---------------------------------------------------------------- memory


def long_chat(turns: int = 12) -> list[ChatMessage]:
    messages = []
    for i in range(turns):
        messages += [
            ChatMessage(role="user", content=f"question {i}: where did order 77{i} ship to?"),
            ChatMessage(role="assistant", content=f"answer {i}: order 77{i} went to Lisbon."),
        ]
    return messages


class RecordingLLM(MockLLM):
    """LlamaIndex's MockLLM, keeping each list of messages a chat engine sends it."""

    sent: list[list[ChatMessage]] = Field(default_factory=list)

    def chat(self, messages: Any, **kwargs: Any) -> Any:
        self.sent.append(list(messages))
        return super().chat(messages, **kwargs)

    async def achat(self, messages: Any, **kwargs: Any) -> Any:
        self.sent.append(list(messages))
        return super().chat(messages, **kwargs)


def test_memory_in_a_chat_engine_sends_the_slimmed_history(collect: Collect) -> None:
    history = long_chat()
    n = len(history)  # the store keeps this very list, and appends to it
    memory = PromptSlimMemory.from_defaults(chat_history=history, budget=Budget(history=60))
    llm = RecordingLLM(max_tokens=4)
    engine = SimpleChatEngine.from_defaults(llm=llm, memory=memory)
    engine.chat("Which order did I ask about first?")
    sent = llm.sent[0]
    assert len(sent) < n + 1
    assert sent[-1].content == "Which order did I ask about first?"  # the question unchanged
    assert len(memory.get_all()) == n + 2  # the store keeps the whole conversation
    assert memory.get_all()[0] is history[0]
    assert collect.events and collect.events[-1].source == "memory"
    asyncio.run(engine.achat("And the second one?"))
    assert len(llm.sent[1]) < n + 3 and llm.sent[1][-1].content == "And the second one?"


def test_memory_keeps_what_fits_as_the_same_objects() -> None:
    history = long_chat(2)
    memory = PromptSlimMemory.from_defaults(chat_history=history, budget=Budget(history=10_000))
    out = memory.get()
    assert len(out) == len(history) and all(a is b for a, b in zip(out, history))
    assert asyncio.run(memory.aget()) == out
    memory.reset()
    assert memory.get() == []


def test_memory_total_budget_leaves_room_for_the_engines_prefix() -> None:
    memory = PromptSlimMemory.from_defaults(chat_history=long_chat(), budget=Budget(total=120))
    roomy, tight = memory.get(), memory.get(initial_token_count=60)
    assert len(tight) < len(roomy)


def test_memory_serialises_its_budget() -> None:
    memory = PromptSlimMemory.from_defaults(budget=Budget(history=50), chat_store_key="k")
    data = memory.to_dict(exclude={"chat_store"})
    assert data["budget"]["history"] == 50 and "stage" not in data
    again = PromptSlimMemory.from_dict(data)
    assert again.budget == Budget(history=50) and again.chat_store_key == "k"


def test_memory_in_a_function_agent() -> None:
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.llms.mock import MockFunctionCallingLLM

    sent: list[list[ChatMessage]] = []

    class Recording(MockFunctionCallingLLM):
        async def astream_chat(self, messages: Any, **kwargs: Any) -> Any:
            sent.append(list(messages))
            return await super().astream_chat(messages, **kwargs)

        async def achat(self, messages: Any, **kwargs: Any) -> Any:
            sent.append(list(messages))
            return await super().achat(messages, **kwargs)

    history = long_chat()
    n = len(history)
    memory = PromptSlimMemory.from_defaults(chat_history=history, budget=Budget(history=60))
    agent = FunctionAgent(tools=[], llm=Recording())

    async def ask() -> None:
        await agent.run("Which order did I ask about first?", memory=memory)

    asyncio.run(ask())
    assert sent and len(sent[0]) < n + 1
    assert sent[0][-1].content == "Which order did I ask about first?"
    assert len(memory.get_all()) == n + 2  # the question and the answer, stored in full
