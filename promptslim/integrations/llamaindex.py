"""LlamaIndex adapters (llama-index-core 0.14): thin type translation around promptslim stages.

- ``PromptSlimPostprocessor``: a node postprocessor running the retrieval stage (and compress
  with ``compress=True``) over retrieved nodes, sync and async.
- ``slim_chat_history`` / ``aslim_chat_history``: the history stage over ``ChatMessage`` lists.

No logic lives here. Nodes keep their identity: each kept ``NodeWithScore`` wraps the very same
node object (a copy with the same ``node_id`` and metadata only when the compress stage
shortened its text) and carries promptslim's score. Text is never joined and re-split.

    engine = index.as_query_engine(node_postprocessors=[PromptSlimPostprocessor(budget=Budget(documents=800))])
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..errors import BackendUnavailable
from ..stages.base import Stage, index_ahead
from ..tracing import report_figures
from ..types import (
    Budget,
    ContentPart,
    Document,
    FunctionCall,
    Message,
    Report,
    Request,
    Result,
    ToolCall,
)
from ._common import (
    arun_stage,
    check_budget,
    default_stage,
    origin,
    query_messages,
    tag,
    top_k,
    unique_ids,
)

try:
    from llama_index.core.base.llms.types import (
        ChatMessage,
        MessageRole,
        TextBlock,
        ToolCallBlock,
    )
    from llama_index.core.bridge.pydantic import Field
    from llama_index.core.instrumentation import get_dispatcher  # type: ignore[attr-defined]
    from llama_index.core.instrumentation.events import BaseEvent
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore, QueryBundle
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise BackendUnavailable("llama-index-core", extra="llamaindex") from exc

_dispatcher = get_dispatcher(__name__)

__all__ = [
    "PromptSlimPostprocessor",
    "PromptSlimReportEvent",
    "aslim_chat_history",
    "from_llamaindex_messages",
    "report_event",
    "slim_chat_history",
    "to_llamaindex_messages",
]


# ---------------------------------------------------------------- nodes


class PromptSlimReportEvent(BaseEvent):
    """The Report's figures (``promptslim.tracing.report_figures``: counts and sizes, no prompt
    text), dispatched through LlamaIndex's instrumentation after each run of a stage: an event
    handler on the root dispatcher (or a tracing integration) sees it inside the span of the
    postprocessor or memory call that ran the stage."""

    figures: dict[str, Any]
    #: which component ran the stage: "postprocessor" or "memory"
    source: str

    @classmethod
    def class_name(cls) -> str:
        return "PromptSlimReportEvent"


def report_event(report: Report, source: str) -> None:
    """Dispatch ``report``'s figures as a ``PromptSlimReportEvent``."""
    _dispatcher.event(PromptSlimReportEvent(figures=report_figures(report), source=source))


class PromptSlimPostprocessor(BaseNodePostprocessor):
    """Runs a promptslim stage over retrieved nodes.

    ``stage``: any promptslim Stage or Pipeline; default the ``retrieval`` stage (followed by
    ``compress`` when ``compress=True``). ``budget``: passed to the stage (None: the stage's
    own default). ``top_n``: at most that many nodes, the best by score, in the stage's order
    (None: all the stage kept). A kept node's score becomes promptslim's score when the stage
    set one; ``keep_retrieval_score=True`` keeps the retriever's in
    ``node.metadata["retrieval_score"]`` first, as LlamaIndex's rerankers do. A query
    bundle's ``embedding`` is reused by dense scoring instead of embedding the query again.
    ``to_dict()`` keeps everything but ``stage`` (not serialisable: ``from_dict`` builds the
    default one).
    """

    # a Stage is not a serialisable configuration object: kept out of to_dict/to_json
    stage: Any = Field(default=None, exclude=True)
    budget: Budget | None = None
    compress: bool = False
    top_n: int | None = Field(default=None, ge=1)
    keep_retrieval_score: bool = False

    def __init__(self, *, budget: Any = None, **data: Any) -> None:
        super().__init__(budget=check_budget(budget), **data)  # type: ignore[call-arg]

    def model_post_init(self, context: Any, /) -> None:
        if self.stage is None:
            self.stage = default_stage(
                ("retrieval", "compress") if self.compress else ("retrieval",)
            )

    @classmethod
    def class_name(cls) -> str:
        return "PromptSlimPostprocessor"

    @classmethod
    def from_dict(cls, data: dict[str, Any], **kwargs: Any) -> PromptSlimPostprocessor:
        data = {**data, **kwargs}
        data.pop("class_name", None)
        budget = data.pop("budget", None)
        return cls(budget=Budget(**budget) if isinstance(budget, dict) else budget, **data)

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        if not nodes:
            return []
        stage: Stage = self.stage
        request, by_id = _request(nodes, query_bundle)
        return self._nodes(stage.run(request, self.budget), by_id)

    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        if not nodes:
            return []
        request, by_id = _request(nodes, query_bundle)
        return self._nodes(await arun_stage(self.stage, request, self.budget), by_id)

    def index(self, nodes: Sequence[BaseNode | NodeWithScore]) -> int:
        """A vector store's ingest: ``nodes``, as this postprocessor hands them to its stage,
        indexed before a query retrieves them (``Pipeline.index``: the retrieval stage embeds
        their windows into the shared cache, and into the Redis tier that
        ``PROMPTSLIM_EMBEDDING_CACHE`` names). Returns the texts indexed."""
        scored = [n if isinstance(n, NodeWithScore) else NodeWithScore(node=n) for n in nodes]
        return index_ahead(self.stage, _documents(scored)[0])

    def _nodes(self, result: Result, by_id: _Originals) -> list[NodeWithScore]:
        report_event(result.report, "postprocessor")
        kept = top_k(result.request.documents, self.top_n, list(by_id))
        return _nodes(kept, by_id, keep_retrieval_score=self.keep_retrieval_score)


_Originals = dict[str, tuple[NodeWithScore, str]]


def _request(
    nodes: Sequence[NodeWithScore], query_bundle: QueryBundle | None
) -> tuple[Request, _Originals]:
    """The promptslim request, and each node (with the text sent) by the id given to the stage."""
    docs, ids, texts = _documents(nodes)
    query = query_bundle.query_str if query_bundle is not None else None
    # the query's embedding from the vector search, when the retriever kept it on the bundle
    embedding = query_bundle.embedding if query_bundle is not None else None
    request = Request(
        messages=query_messages(query), documents=docs, query=query, query_embedding=embedding
    )
    return request, {doc_id: (n, text) for doc_id, n, text in zip(ids, nodes, texts)}


def _documents(nodes: Sequence[NodeWithScore]) -> tuple[list[Document], list[str], list[str]]:
    """The nodes as the stage reads them, the ids they were given, and their texts."""
    ids = unique_ids(n.node.node_id for n in nodes)
    # the node's own text: metadata is passed as metadata, not pasted into the text
    texts = [n.node.get_content(metadata_mode=MetadataMode.NONE) for n in nodes]
    docs = [
        Document(
            id=doc_id,
            text=text,
            metadata=_placed(n),
            score=n.score,
            embedding=n.node.embedding,  # a vector store's embedding, reused by dense scoring
        )
        for doc_id, text, n in zip(ids, texts, nodes)
    ]
    return docs, ids, texts


def _placed(n: NodeWithScore) -> dict[str, Any]:
    """The node's metadata, with where a splitter cut it from under the retrieval stage's
    default ``piece_keys`` (its source document's id and its start in it) when the node knows
    both and its metadata names neither (a reader's own ``source``, a file that may hold
    several documents, is not mixed with a start in one of them): the stage then keeps the
    node that goes on from the best one (``promptslim.stages.retrieval_pieces``). A copy: the
    node's own metadata stays as it was."""
    node = n.node
    metadata = dict(node.metadata)
    start = getattr(node, "start_char_idx", None)
    placed = "source" in metadata or "start_index" in metadata
    if not placed and node.ref_doc_id is not None and type(start) is int:
        metadata.update(source=node.ref_doc_id, start_index=start)
    return metadata


def _nodes(
    documents: Sequence[Document], by_id: _Originals, *, keep_retrieval_score: bool
) -> list[NodeWithScore]:
    out: list[NodeWithScore] = []
    for kept in documents:
        original, text = by_id[kept.id]
        node = original.node
        if kept.text != text:
            node = node.model_copy()  # same node_id and metadata, shortened text
            node.set_content(kept.text)
        if keep_retrieval_score:  # written into the node, as LlamaIndex's rerankers do
            node.metadata["retrieval_score"] = original.score
        score = kept.score if kept.score is not None else original.score
        out.append(NodeWithScore(node=node, score=score))
    return out


# ---------------------------------------------------------------- chat history


def slim_chat_history(
    messages: Sequence[ChatMessage], *, stage: Stage | None = None, budget: Budget | None = None
) -> list[ChatMessage]:
    """``messages`` through the history stage (or ``stage``): untouched messages come back as
    the same objects, shortened ones as copies keeping their non-text blocks and kwargs.
    ``PromptSlimMemory`` (``promptslim.integrations.llamaindex_memory``) does this as the
    memory of a chat engine or agent."""
    budget = check_budget(budget)
    if not messages:
        return []
    stage = stage or default_stage(("history",))
    result = stage.run(Request(messages=from_llamaindex_messages(messages)), budget)
    report_event(result.report, "memory")
    return to_llamaindex_messages(result.request.messages, messages)


async def aslim_chat_history(
    messages: Sequence[ChatMessage], *, stage: Stage | None = None, budget: Budget | None = None
) -> list[ChatMessage]:
    """``slim_chat_history`` without blocking the event loop."""
    budget = check_budget(budget)
    if not messages:
        return []
    stage = stage or default_stage(("history",))
    request = Request(messages=from_llamaindex_messages(messages))
    result = await arun_stage(stage, request, budget)
    report_event(result.report, "memory")
    return to_llamaindex_messages(result.request.messages, messages)


# ---- LlamaIndex -> promptslim

_ROLES = {"chatbot": "assistant", "model": "assistant"}


def from_llamaindex_messages(messages: Sequence[ChatMessage]) -> list[Message]:
    """LlamaIndex messages as promptslim Messages, tagged with their positions."""
    return [tag(_from_llamaindex(m), i) for i, m in enumerate(messages)]


def _from_llamaindex(message: ChatMessage) -> Message:
    role = _ROLES.get(message.role.value, message.role.value)
    kwargs = message.additional_kwargs
    parts = [
        ContentPart(type="text", text=b.text)
        if isinstance(b, TextBlock)
        else ContentPart(type=b.block_type)
        for b in message.blocks
        if not isinstance(b, ToolCallBlock)
    ]
    # one text block is the common case: plain string content, as an OpenAI body would have it
    content: str | list[ContentPart] = parts
    if len(parts) == 1 and parts[0].text is not None:
        content = parts[0].text
    calls = [_tool_call(c) for c in kwargs.get("tool_calls") or ()]
    calls += [
        ToolCall(
            id=b.tool_call_id or "",
            function=FunctionCall(name=b.tool_name, arguments=_args(b.tool_kwargs)),
        )
        for b in message.blocks
        if isinstance(b, ToolCallBlock)
    ]
    return Message.model_validate(
        {
            "role": role,
            "content": content,
            "name": kwargs.get("name"),
            "tool_calls": calls or None,
            "tool_call_id": kwargs.get("tool_call_id"),
        }
    )


def _tool_call(call: Any) -> ToolCall:
    # OpenAI-style tool calls in additional_kwargs: dicts or the openai SDK's objects
    if isinstance(call, dict):
        function = call.get("function") or {}
        return ToolCall(
            id=call.get("id") or "",
            function=FunctionCall(
                name=function.get("name") or "", arguments=function.get("arguments") or ""
            ),
        )
    return ToolCall(
        id=getattr(call, "id", None) or "",
        function=FunctionCall(
            name=call.function.name or "", arguments=call.function.arguments or ""
        ),
    )


def _args(kwargs: dict[str, Any] | str) -> str:
    return kwargs if isinstance(kwargs, str) else json.dumps(kwargs)


# ---- promptslim -> LlamaIndex


def to_llamaindex_messages(
    messages: Sequence[Message], originals: Sequence[ChatMessage] = ()
) -> list[ChatMessage]:
    """A stage's output as ChatMessages: the original object where the message is unchanged,
    a copy with its text blocks replaced where the text changed, a new message otherwise."""
    out: list[ChatMessage] = []
    for message in messages:
        at = origin(message)
        if at is None or at >= len(originals):
            out.append(_new_llamaindex(message))
            continue
        original = originals[at]
        if message.text == (original.content or ""):
            out.append(original)
        else:
            blocks = [
                TextBlock(text=message.text),
                *(b for b in original.blocks if not isinstance(b, TextBlock)),
            ]
            out.append(original.model_copy(update={"blocks": blocks}))
    return out


def _new_llamaindex(message: Message) -> ChatMessage:
    kwargs: dict[str, Any] = {}
    if message.name is not None:
        kwargs["name"] = message.name
    if message.tool_call_id is not None:
        kwargs["tool_call_id"] = message.tool_call_id
    if message.tool_calls:
        kwargs["tool_calls"] = [c.model_dump() for c in message.tool_calls]
    return ChatMessage(
        role=MessageRole(message.role), content=message.text, additional_kwargs=kwargs
    )
