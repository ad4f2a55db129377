"""The LangChain adapters against the real langchain-core and langchain-tests packages.

The seam stages below are promptslim stages (BaseStage subclasses) standing in for the real
ones, so these tests pin the adapter's translation; the real stages are exercised at the end.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document as LCDocument
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.prompt_values import ChatPromptValue
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_tests.integration_tests import RetrieversIntegrationTests

from promptslim import Budget, InvalidRequest, Message, PassThrough, Request
from promptslim.integrations.langchain import (
    PromptSlimCompressor,
    PromptSlimRetriever,
    PromptSlimRunnable,
    from_langchain_messages,
    to_langchain_messages,
)
from promptslim.stages.base import BaseStage, StageLog

from .conftest import assert_missing_extra

# ---------------------------------------------------------------- seam stages


class DropAndRank(BaseStage):
    """Drops documents whose text contains "drop", scores the rest by length, longest first."""

    name = "drop_and_rank"

    def __init__(self) -> None:
        pass

    def apply(self, request: Request, budget: Budget, log: StageLog) -> Request:
        kept = [d for d in request.documents if "drop" not in d.text]
        scored = [d.model_copy(update={"score": float(len(d.text))}) for d in kept]
        return request.replace(documents=sorted(scored, key=lambda d: -len(d.text)))


class Shout(BaseStage):
    """Upper-cases every message but the last, and adds a new system note at the front."""

    name = "shout"

    def __init__(self) -> None:
        pass

    def apply(self, request: Request, budget: Budget, log: StageLog) -> Request:
        *head, last = request.messages
        shouted = [m.with_text(m.text.upper()) if m.text else m for m in head]
        note = Message(role="system", content="summary of earlier turns")
        return request.replace(messages=[note, *shouted, last])


def lc_docs() -> list[LCDocument]:
    return [
        LCDocument(page_content="short", metadata={"source": "a", "title": "A"}, id="d1"),
        LCDocument(page_content="please drop me", metadata={"source": "b"}, id="d2"),
        LCDocument(page_content="a much longer passage", metadata={"id": "meta-3", "n": 3}),
        LCDocument(page_content="no id at all", metadata={}),
    ]


# ---------------------------------------------------------------- compressor


def test_compressor_keeps_identity_and_metadata_and_adds_scores() -> None:
    docs = lc_docs()
    out = PromptSlimCompressor(stage=DropAndRank()).compress_documents(docs, "query")
    assert [d.page_content for d in out] == ["a much longer passage", "no id at all", "short"]
    assert out[0].metadata == {"id": "meta-3", "n": 3, "promptslim_score": 21.0}
    assert out[2].id == "d1" and out[2].metadata["source"] == "a"
    assert out[2].metadata["promptslim_score"] == 5.0
    assert all("promptslim_score" not in d.metadata for d in docs)  # inputs untouched


def test_compressor_passthrough_changes_nothing_and_adds_no_score() -> None:
    docs = lc_docs()
    out = PromptSlimCompressor(stage=PassThrough()).compress_documents(docs, "q")
    assert [(d.id, d.page_content, d.metadata) for d in out] == [
        (d.id, d.page_content, d.metadata) for d in docs
    ]


def test_compressor_duplicate_ids_map_back_by_position() -> None:
    docs = [LCDocument(page_content=t, id="same") for t in ("one", "two", "three")]
    out = PromptSlimCompressor(stage=PassThrough(), score_key="s").compress_documents(docs, "q")
    assert [d.page_content for d in out] == ["one", "two", "three"]
    assert {d.id for d in out} == {"same"}


HANDBOOK = """# Cool Hand Luke

Cool Hand Luke is an American prison drama film directed by Stuart Rosenberg and starring
Paul Newman, with George Kennedy in a supporting role.

## Production

Filming took place in the San Joaquin River delta near Stockton, California, which stood in
for the American South.

# Slasher (TV series)

Slasher is an anthology horror series; each season follows a town hunted by a killer.

## Production

Filming took place in Sudbury and Parry Sound, Ontario, over the summer.

# The Hand (film)

The Hand is a horror film written and directed by Oliver Stone, starring Michael Caine.
"""


def test_a_section_s_headings_in_its_metadata_are_read_as_its_title() -> None:
    # LangChain's Markdown splitter takes the headings out of the text: the section that
    # answers says where filming took place, but not of what; its metadata says so
    from langchain_text_splitters import MarkdownHeaderTextSplitter

    splitter = MarkdownHeaderTextSplitter([("#", "Header 1"), ("##", "Header 2")])
    docs = splitter.split_text(HANDBOOK)
    assert all("#" not in d.page_content for d in docs)
    out = PromptSlimCompressor().compress_documents(docs, "Where was Cool Hand Luke filmed?")
    kept = [d.page_content for d in out]
    assert any("Stockton" in text for text in kept)
    assert not any("Sudbury" in text for text in kept)  # the other film's filming places
    # the metadata goes back as it came, the score added: no title written into it
    assert all(set(d.metadata) <= {"Header 1", "Header 2", "promptslim_score"} for d in out)


def test_compressor_empty_and_async() -> None:
    compressor = PromptSlimCompressor(stage=DropAndRank())
    assert compressor.compress_documents([], "q") == []
    assert asyncio.run(compressor.acompress_documents([], "q")) == []
    sync = compressor.compress_documents(lc_docs(), "q")
    async_ = asyncio.run(compressor.acompress_documents(lc_docs(), "q"))
    assert sync == async_


def test_compressor_passes_budget_and_query_to_the_stage() -> None:
    seen: list[tuple[Request, Budget]] = []

    class Spy(PassThrough):
        def apply(self, request: Request, budget: Budget, log: StageLog) -> Request:
            seen.append((request, budget))
            return request

    PromptSlimCompressor(stage=Spy(), budget=Budget(documents=7)).compress_documents(
        lc_docs(), "why?"
    )
    request, budget = seen[0]
    assert budget == Budget(documents=7)
    assert request.effective_query == "why?" and request.messages[-1].text == "why?"
    assert [d.id for d in request.documents] == ["d1", "d2", "meta-3", "doc-3"]
    assert request.documents[0].title == "A"


# ---------------------------------------------------------------- retriever


def _store() -> InMemoryVectorStore:
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
    store.add_documents(
        [
            LCDocument(page_content=f"passage {i} about topic {i % 3}", metadata={"i": i})
            for i in range(8)
        ]
    )
    return store


# the suite has async tests and pytest-asyncio runs in strict mode; the mark lands on its sync
# tests too, which pytest-asyncio only warns about
@pytest.mark.asyncio
@pytest.mark.filterwarnings("ignore:.*is marked with '@pytest.mark.asyncio' but it is not an async")
class TestPromptSlimRetrieverStandard(RetrieversIntegrationTests):
    """LangChain's own standard retriever tests."""

    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return PromptSlimRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {
            "base_retriever": _store().as_retriever(search_kwargs={"k": 8}),
            "compressor": PromptSlimCompressor(stage=PassThrough()),
        }

    @property
    def retriever_query_example(self) -> str:
        return "topic 1"


def test_retriever_runs_the_stage_and_caps_k() -> None:
    retriever = PromptSlimRetriever(
        base_retriever=_store().as_retriever(search_kwargs={"k": 8}),
        compressor=PromptSlimCompressor(stage=DropAndRank()),
    )
    docs = retriever.invoke("topic 2")
    assert len(docs) == 8 and all(
        "promptslim_score" in d.metadata and "i" in d.metadata for d in docs
    )
    assert len(retriever.invoke("topic 2", k=2)) == 2
    assert len(asyncio.run(retriever.ainvoke("topic 2", k=3))) == 3


class ScoreByNumber(BaseStage):
    """Scores documents by the number in their text (higher is better) and puts them in the
    retrieval stage's default ``edges`` order: best first, second best last."""

    name = "score_by_number"

    def __init__(self) -> None:
        pass

    def apply(self, request: Request, budget: Budget, log: StageLog) -> Request:
        from promptslim.stages.retrieval import _edges

        scored = [
            d.model_copy(update={"score": float(d.text.split()[-1])}) for d in request.documents
        ]
        best = sorted(range(len(scored)), key=lambda i: -(scored[i].score or 0.0))
        return request.replace(documents=[scored[i] for i in _edges(best)])


def test_retriever_k_takes_the_best_by_score_then_the_stage_order() -> None:
    docs = [LCDocument(page_content=f"doc {n}", id=f"d{n}") for n in (3, 9, 5, 7, 1)]
    retriever = PromptSlimRetriever(
        base_retriever=_Fixed(documents=docs),
        compressor=PromptSlimCompressor(stage=ScoreByNumber()),
        k=2,
    )
    # all five in edges order: 9, 5, 1, 3, 7; a plain cut at 2 would give 9 and 5
    assert [d.id for d in retriever.invoke("q", k=None)] == ["d9", "d5", "d1", "d3", "d7"]
    assert [d.id for d in retriever.invoke("q")] == ["d9", "d7"]  # best first, second last
    assert [d.id for d in retriever.invoke("q", k=3)] == ["d9", "d5", "d7"]
    assert [d.id for d in asyncio.run(retriever.ainvoke("q", k=4))] == ["d9", "d5", "d3", "d7"]


class _Fixed(BaseRetriever):
    documents: list[LCDocument]

    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[LCDocument]:
        return list(self.documents)


class _Events(BaseCallbackHandler):
    """A real LangChain callback handler: records custom events, as tracers do."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        self.events.append((name, data))


def test_callback_handlers_see_the_report_figures() -> None:
    handler = _Events()
    retriever = PromptSlimRetriever(
        base_retriever=_Fixed(documents=lc_docs()),
        compressor=PromptSlimCompressor(stage=DropAndRank()),
    )
    retriever.invoke("q", config={"callbacks": [handler]})
    asyncio.run(retriever.ainvoke("q", config={"callbacks": [handler]}))
    slimmer = PromptSlimRunnable(stage=Shout())
    slimmer.invoke(conversation(), config={"callbacks": [handler]})
    asyncio.run(slimmer.ainvoke(conversation(), config={"callbacks": [handler]}))
    assert [name for name, _ in handler.events] == ["promptslim.report"] * 4
    figures = handler.events[0][1]
    assert figures["tokens_in"] > figures["tokens_out"] > 0
    assert figures["stages"]["drop_and_rank"]["tokens_in"] == figures["tokens_in"]
    assert figures["degraded"] is False and figures["cacheable_tokens"] is None
    shout = handler.events[2][1]
    assert shout["tokens_out"] >= shout["tokens_in"] and set(shout["stages"]) == {"shout"}
    assert "PARIS" not in repr(handler.events) and "drop me" not in repr(handler.events)


def test_no_handler_no_event() -> None:
    # without callbacks the adapters run as before (no error for a missing parent run)
    assert PromptSlimRunnable(stage=Shout()).invoke(conversation())
    assert PromptSlimCompressor(stage=DropAndRank()).compress_documents(lc_docs(), "q")


# ---------------------------------------------------------------- messages


def conversation() -> list[BaseMessage]:
    return [
        SystemMessage("You are terse.", id="s"),
        HumanMessage("look it up", name="ann", id="u1", additional_kwargs={"x": 1}),
        AIMessage(
            "",
            id="a1",
            tool_calls=[{"name": "search", "args": {"q": "paris"}, "id": "call-1"}],
            response_metadata={"model": "m"},
        ),
        ToolMessage("Paris is in France.", tool_call_id="call-1", id="t1", artifact={"raw": 1}),
        HumanMessage(content=["and", {"type": "text", "text": "its population?"}], id="u2"),
    ]


def test_runnable_passthrough_returns_the_same_objects() -> None:
    messages = conversation()
    out = PromptSlimRunnable(stage=PassThrough()).invoke(messages)
    assert isinstance(out, list) and all(a is b for a, b in zip(out, messages, strict=True))


def test_runnable_keeps_fields_of_changed_messages_and_builds_new_ones() -> None:
    messages = conversation()
    out = PromptSlimRunnable(stage=Shout()).invoke(messages)
    assert isinstance(out, list)
    assert isinstance(out[0], SystemMessage) and out[0].content == "summary of earlier turns"
    assert out[1] == messages[0].model_copy(update={"content": "YOU ARE TERSE."})
    assert out[2].id == "u1" and out[2].name == "ann" and out[2].additional_kwargs == {"x": 1}
    assert out[3] is messages[2]  # no text: unchanged, tool calls intact
    assert isinstance(out[4], ToolMessage) and out[4].artifact == {"raw": 1}
    assert out[4].content == "PARIS IS IN FRANCE." and out[4].tool_call_id == "call-1"
    assert out[5] is messages[4]  # the last user message reaches the model unchanged


def test_runnable_in_lcel_with_a_prompt_and_a_chat_model() -> None:
    prompt = ChatPromptTemplate.from_messages([("system", "be brief"), ("human", "{q}")])
    chain = prompt | PromptSlimRunnable(stage=Shout()) | ParrotFakeChatModel()
    reply = chain.invoke({"q": "hello?"})
    assert reply.content == "hello?"
    value = (prompt | PromptSlimRunnable(stage=Shout())).invoke({"q": "hi"})
    assert isinstance(value, ChatPromptValue)
    assert [m.content for m in value.messages] == ["summary of earlier turns", "BE BRIEF", "hi"]


def test_runnable_empty_async_and_batch() -> None:
    slimmer = PromptSlimRunnable(stage=Shout())
    assert slimmer.invoke([]) == []
    assert asyncio.run(slimmer.ainvoke(conversation())) == slimmer.invoke(conversation())
    assert len(slimmer.batch([conversation(), [("human", "x")]])) == 2


def test_runnable_accepts_tuples_and_dicts() -> None:
    out = PromptSlimRunnable(stage=PassThrough()).invoke(
        [("system", "s"), {"role": "user", "content": "u"}]
    )
    assert isinstance(out, list)
    assert [type(m) for m in out] == [SystemMessage, HumanMessage]


def test_unknown_role_is_a_typed_error() -> None:
    with pytest.raises(InvalidRequest) as err:
        from_langchain_messages([HumanMessage("a"), ChatMessage(role="narrator", content="x")])
    assert err.value.field == "messages[1].role"


def test_conversion_to_promptslim() -> None:
    ps = from_langchain_messages(conversation())
    assert [m.role for m in ps] == ["system", "user", "assistant", "tool", "user"]
    assert ps[1].name == "ann"
    assert (
        ps[2].tool_calls is not None and ps[2].tool_calls[0].function.arguments == '{"q": "paris"}'
    )
    assert ps[3].tool_call_id == "call-1"
    assert ps[4].text == "and\nits population?"
    developer = SystemMessage("d", additional_kwargs={"__openai_role__": "developer"})
    assert from_langchain_messages([developer])[0].role == "developer"


# ---- round trips (hypothesis)

texts = st.text(max_size=30)
ids = st.none() | st.text(alphabet="abc123", min_size=1, max_size=6)
names = st.none() | st.text(alphabet="abcxyz_", min_size=1, max_size=8)
contents = texts | st.lists(
    texts
    | st.builds(lambda t: {"type": "text", "text": t}, texts)
    | st.just({"type": "image_url", "image_url": {"url": "https://x/y.png"}}),
    max_size=3,
)
kwargs = st.dictionaries(st.sampled_from(["k", "refusal"]), st.integers(), max_size=2)
tool_calls = st.lists(
    st.builds(
        lambda n, a, i: {"name": n, "args": a, "id": i},
        st.text(alphabet="fgh", min_size=1, max_size=5),
        st.dictionaries(
            st.text(alphabet="pq", min_size=1, max_size=3), st.integers() | texts, max_size=2
        ),
        st.text(alphabet="c0123", min_size=1, max_size=5),
    ),
    max_size=2,
)
lc_messages = st.one_of(
    st.builds(
        lambda c, i, k: SystemMessage(content=c, id=i, additional_kwargs=k), contents, ids, kwargs
    ),
    st.builds(lambda c, i, n: HumanMessage(content=c, id=i, name=n), contents, ids, names),
    st.builds(lambda c, i, t: AIMessage(content=c, id=i, tool_calls=t), contents, ids, tool_calls),
    st.builds(
        lambda c, i, t: ToolMessage(content=c, id=i, tool_call_id=t),
        contents,
        ids,
        st.text(min_size=1, max_size=5),
    ),
    st.builds(
        lambda c, n: FunctionMessage(content=c, name=n),
        contents,
        st.text(alphabet="fn", min_size=1, max_size=4),
    ),
)


@given(st.lists(lc_messages, max_size=6))
def test_round_trip_through_a_stage_is_lossless(messages: list[BaseMessage]) -> None:
    # every message copied by the stage (with_text) yet equal: all come back equal, every field kept
    class Copy(PassThrough):
        def apply(self, request: Request, budget: Budget, log: StageLog) -> Request:
            return request.replace(
                messages=[
                    m.with_text(m.text)
                    if isinstance(m.content, str)
                    else m.model_copy(update={"content": m.content})
                    for m in request.messages
                ]
            )

    out = PromptSlimRunnable(stage=Copy()).invoke(messages)
    assert out == messages


def _plain(m: BaseMessage) -> bool:
    # fields only LangChain has (ids, kwargs) are carried by identity, not by conversion
    return (
        m.id is None
        and not m.additional_kwargs
        and all(isinstance(p, dict) for p in m.content if not isinstance(m.content, str))
    )


@given(st.lists(lc_messages, max_size=6))
def test_conversion_alone_round_trips_openai_fields(messages: list[BaseMessage]) -> None:
    plain = [m for m in messages if _plain(m)]
    assert to_langchain_messages(from_langchain_messages(plain)) == plain


# ---------------------------------------------------------------- packaging


def test_missing_langchain_raises_backend_unavailable() -> None:
    assert_missing_extra("promptslim.integrations.langchain", ["langchain_core"], "langchain")


def test_import_promptslim_loads_no_framework() -> None:
    code = "import sys, promptslim, promptslim.integrations; print(sorted(m for m in sys.modules if m.startswith(('langchain', 'llama_index'))))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.stdout.strip() == "[]", out.stderr


# ---------------------------------------------------------------- the real stages


def _real(name: str) -> type:
    from promptslim import STAGES

    try:
        return STAGES.get(name)  # type: ignore[no-any-return]
    except ImportError as exc:  # the stage module is not in this checkout yet
        pytest.skip(f"stage {name!r} not available: {exc}")


def test_compressor_with_the_real_retrieval_stage() -> None:
    docs = [
        LCDocument(
            page_content="The Eiffel Tower is 330 metres tall.", metadata={"src": "e"}, id="e"
        ),
        LCDocument(page_content="Bananas are rich in potassium.", metadata={"src": "b"}, id="b"),
        LCDocument(
            page_content="Mount Everest is 8,849 metres high.", metadata={"src": "m"}, id="m"
        ),
    ]
    stage = _real("retrieval")(scorer="bm25", max_k=2)
    out = PromptSlimCompressor(stage=stage).compress_documents(
        docs, "How tall is the Eiffel Tower?"
    )
    assert 1 <= len(out) <= 2 and out[0].id == "e"
    assert out[0].metadata["src"] == "e" and isinstance(out[0].metadata["promptslim_score"], float)
    again = asyncio.run(
        PromptSlimCompressor(stage=stage).acompress_documents(docs, "How tall is the Eiffel Tower?")
    )
    assert again == out


def test_runnable_with_the_real_prefix_and_history_stages() -> None:
    from promptslim import Pipeline

    messages: list[BaseMessage] = [SystemMessage("You are terse. Today is 2025-03-14.")]
    for i in range(15):
        messages += [
            HumanMessage(f"question {i} " + "word " * 30),
            AIMessage(f"answer {i} " + "word " * 30),
        ]
    messages.append(HumanMessage("the last question?", id="last"))
    slimmer = PromptSlimRunnable(
        stage=Pipeline([_real("prefix")(), _real("history")()]), budget=Budget(total=400)
    )
    out = slimmer.invoke(messages)
    assert isinstance(out, list) and len(out) < len(messages)
    assert out[-1] is messages[-1]


def test_pieces_split_with_their_start_keep_the_one_after_the_best() -> None:
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    from promptslim.stages.retrieval import RetrievalStage

    article = LCDocument(
        page_content=(
            "Cool Hand Luke is an American prison drama film directed by Stuart Rosenberg and "
            "starring Paul Newman, with George Kennedy in a supporting role.\n\n"
            "Warner Bros. opened it in cinemas across the United States on November 1, 1967."
        ),
        metadata={"source": "luke.txt"},
    )
    others = [
        LCDocument(page_content=t, metadata={"source": f"{n}.txt"})
        for n, t in enumerate(
            [
                "Luke Skywalker is the hero of the original Star Wars trilogy.",
                "Cool Hand is a 2009 album by a Swedish jazz trio.",
                "Paul Newman founded a food company that gives its profits to charity.",
                "A prison film is a genre of film about prisoners and their escapes.",
            ]
        )
    ]
    splitter = RecursiveCharacterTextSplitter(chunk_size=160, chunk_overlap=0, add_start_index=True)
    pieces = splitter.split_documents([article, *others])
    assert "1967" in pieces[1].page_content and pieces[1].metadata["start_index"] > 0
    query = "When was Cool Hand Luke with Paul Newman first shown?"
    alone = PromptSlimCompressor(stage=RetrievalStage(scorer="bm25", next_pieces=0))
    kept = [d.page_content for d in alone.compress_documents(pieces, query)]
    assert pieces[1].page_content not in kept
    out = PromptSlimCompressor(stage=RetrievalStage(scorer="bm25")).compress_documents(
        pieces, query
    )
    texts = [d.page_content for d in out]
    assert texts[0] == pieces[0].page_content and pieces[1].page_content in texts
