"""LangChain adapters (langchain-core 1.x): thin type translation around promptslim stages.

- ``PromptSlimCompressor``: a ``BaseDocumentCompressor`` running the retrieval stage (and the
  compress stage with ``compress=True``) over retrieved documents.
- ``PromptSlimRetriever``: any retriever followed by that compressor (LangChain's
  ContextualCompressionRetriever pattern, without langchain-classic).
- ``PromptSlimRunnable``: messages (or a ``ChatPromptValue``) in, slimmed messages out, through
  the prefix and history stages (and compress with ``compress=True``): ``slimmer | chat_model``.

No logic lives here: documents keep their identity (``Document.id``, else ``metadata[id_key]``,
else their position) and metadata, and get promptslim's score in ``metadata[score_key]``;
messages the stages did not change come back as the very same LangChain objects, changed ones
as copies with only their content replaced (ids, tool calls, ``additional_kwargs`` kept).

    retriever = PromptSlimRetriever(base_retriever=store.as_retriever(), budget=Budget(documents=800))
    chain = prompt | PromptSlimRunnable(budget=Budget(total=4000)) | chat_model
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import BackendUnavailable
from ..stages.base import Stage, index_ahead
from ..tracing import report_figures
from ..types import Budget, Document, Report, Request
from ._common import (
    REPORT_EVENT,
    arun_stage,
    default_stage,
    query_messages,
    top_k,
    unique_ids,
)

try:
    from langchain_core.callbacks import (
        AsyncCallbackManager,
        AsyncCallbackManagerForChainRun,
        AsyncCallbackManagerForRetrieverRun,
        CallbackManager,
        CallbackManagerForChainRun,
        CallbackManagerForRetrieverRun,
        Callbacks,
    )
    from langchain_core.documents import BaseDocumentCompressor
    from langchain_core.documents import Document as LCDocument
    from langchain_core.messages import BaseMessage, MessageLikeRepresentation, convert_to_messages
    from langchain_core.prompt_values import ChatPromptValue, PromptValue
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import RunnableConfig, RunnableSerializable
    from pydantic import ConfigDict, Field

    from .langchain_messages import from_langchain_messages, to_langchain_messages
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise BackendUnavailable("langchain-core", extra="langchain") from exc

__all__ = [
    "REPORT_EVENT",
    "PromptSlimCompressor",
    "PromptSlimRetriever",
    "PromptSlimRunnable",
    "areport_event",
    "from_langchain_messages",
    "report_event",
    "to_langchain_messages",
]

#: what the Runnable accepts: a prompt value or anything ``convert_to_messages`` reads
MessagesInput = PromptValue | Sequence[MessageLikeRepresentation]
#: what it returns: a ChatPromptValue for a prompt value, else a list of messages
MessagesOutput = ChatPromptValue | list[BaseMessage]


# ---------------------------------------------------------------- the report


def report_event(callbacks: Callbacks, report: Report) -> None:
    """The Report's figures (``promptslim.tracing.report_figures``: counts and sizes, no
    prompt text) to the run's callback handlers, as the custom event ``promptslim.report``:
    what LangChain callbacks and LangSmith-style tracers record. Nothing is built when no
    handler listens."""
    listening = isinstance(callbacks, CallbackManager) and bool(callbacks.handlers)
    if listening and callbacks.parent_run_id is not None:  # type: ignore[union-attr]
        figures = report_figures(report)
        callbacks.on_custom_event(REPORT_EVENT, figures, run_id=callbacks.parent_run_id)  # type: ignore[union-attr]


async def areport_event(callbacks: Callbacks, report: Report) -> None:
    """``report_event`` for an async run's callback manager."""
    if isinstance(callbacks, AsyncCallbackManager) and callbacks.handlers:
        if callbacks.parent_run_id is not None:
            figures = report_figures(report)
            await callbacks.on_custom_event(REPORT_EVENT, figures, run_id=callbacks.parent_run_id)
    else:
        report_event(callbacks, report)


# ---------------------------------------------------------------- documents


class PromptSlimCompressor(BaseDocumentCompressor):
    """Runs a promptslim stage over retrieved documents.

    ``stage``: any promptslim Stage or Pipeline; default the ``retrieval`` stage (followed by
    ``compress`` when ``compress=True``). ``budget``: passed to the stage (None: the stage's
    own default). ``id_key``: metadata key holding a document's id when ``Document.id`` is
    unset. ``score_key``: metadata key the stage's score is written to.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    stage: Stage | None = None
    budget: Budget | None = None
    compress: bool = False
    id_key: str = "id"
    score_key: str = "promptslim_score"

    def model_post_init(self, context: Any, /) -> None:
        if self.stage is None:
            self.stage = default_stage(
                ("retrieval", "compress") if self.compress else ("retrieval",)
            )

    def compress_documents(
        self,
        documents: Sequence[LCDocument],
        query: str,
        callbacks: Callbacks | None = None,
    ) -> Sequence[LCDocument]:
        return self._compress(documents, query, None, callbacks)

    async def acompress_documents(
        self,
        documents: Sequence[LCDocument],
        query: str,
        callbacks: Callbacks | None = None,
    ) -> Sequence[LCDocument]:
        return await self._acompress(documents, query, None, callbacks)

    def index(self, documents: Sequence[LCDocument]) -> int:
        """A vector store's ingest: ``documents``, as this compressor hands them to its stage,
        indexed before a query retrieves them (``Pipeline.index``: the retrieval stage embeds
        their windows into the shared cache, and into the Redis tier that
        ``PROMPTSLIM_EMBEDDING_CACHE`` names). Returns the texts indexed."""
        docs, _ = self._converted(documents)
        return index_ahead(self._stage, docs)

    def _compress(
        self, documents: Sequence[LCDocument], query: str, k: int | None, callbacks: Callbacks
    ) -> list[LCDocument]:
        if not documents:
            return []
        request, by_id = self._request(documents, query)
        result = self._stage.run(request, self.budget)
        report_event(callbacks, result.report)
        return self._documents(top_k(result.request.documents, k, list(by_id)), by_id)

    async def _acompress(
        self, documents: Sequence[LCDocument], query: str, k: int | None, callbacks: Callbacks
    ) -> list[LCDocument]:
        if not documents:
            return []
        request, by_id = self._request(documents, query)
        result = await arun_stage(self._stage, request, self.budget)
        await areport_event(callbacks, result.report)
        return self._documents(top_k(result.request.documents, k, list(by_id)), by_id)

    # ---- translation

    @property
    def _stage(self) -> Stage:
        assert self.stage is not None  # set in model_post_init
        return self.stage

    def _request(
        self, documents: Sequence[LCDocument], query: str
    ) -> tuple[Request, dict[str, LCDocument]]:
        """The promptslim request, and the LangChain documents by the ids given to the stage."""
        docs, ids = self._converted(documents)
        request = Request(messages=query_messages(query), documents=docs, query=query)
        return request, dict(zip(ids, documents))

    def _converted(self, documents: Sequence[LCDocument]) -> tuple[list[Document], list[str]]:
        """The documents as the stage reads them, and the ids they were given."""
        ids = unique_ids(_document_id(d, self.id_key) for d in documents)
        docs = [
            Document(id=doc_id, text=d.page_content, metadata=d.metadata)
            for doc_id, d in zip(ids, documents)
        ]
        return docs, ids

    def _documents(
        self, documents: Sequence[Document], by_id: dict[str, LCDocument]
    ) -> list[LCDocument]:
        out: list[LCDocument] = []
        for kept in documents:
            original = by_id[kept.id]
            metadata = dict(original.metadata)  # a copy: the caller's documents stay as they were
            if kept.score is not None:
                metadata[self.score_key] = kept.score
            out.append(
                LCDocument(
                    page_content=kept.text,  # the compress stage may have shortened it
                    metadata=metadata,
                    id=original.id,
                )
            )
        return out


def _document_id(document: LCDocument, id_key: str) -> str | None:
    if document.id:
        return document.id
    value = document.metadata.get(id_key)
    return None if value is None else str(value)


class PromptSlimRetriever(BaseRetriever):
    """``base_retriever`` followed by ``compressor``; at most ``k`` documents (None: all the
    stage kept): the ``k`` best by score, in the stage's order (``top_k``). ``k`` can also be
    given per call: ``retriever.invoke(query, k=3)``; other keyword arguments go to the base
    retriever. Callback handlers get the stage's figures as a ``promptslim.report`` event."""

    base_retriever: BaseRetriever
    compressor: PromptSlimCompressor = Field(default_factory=PromptSlimCompressor)
    k: int | None = Field(default=None, ge=0)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[LCDocument]:
        k = kwargs.pop("k", self.k)
        docs = self.base_retriever.invoke(
            query, config={"callbacks": run_manager.get_child()}, **kwargs
        )
        return self.compressor._compress(docs, query, k, run_manager.get_child())

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[LCDocument]:
        k = kwargs.pop("k", self.k)
        docs = await self.base_retriever.ainvoke(
            query, config={"callbacks": run_manager.get_child()}, **kwargs
        )
        return await self.compressor._acompress(docs, query, k, run_manager.get_child())


# ---------------------------------------------------------------- messages


class PromptSlimRunnable(RunnableSerializable[MessagesInput, MessagesOutput]):
    """Slims chat messages before a chat model: ``prompt | PromptSlimRunnable() | chat_model``.

    ``stage``: any promptslim Stage or Pipeline; default ``prefix`` then ``history`` (then
    ``compress`` when ``compress=True``). ``budget``: passed to the stage. Returns a
    ``ChatPromptValue`` when given a prompt value, else a list of messages.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    stage: Stage | None = None
    budget: Budget | None = None
    compress: bool = False

    def model_post_init(self, context: Any, /) -> None:
        if self.stage is None:
            names = ("prefix", "history", "compress") if self.compress else ("prefix", "history")
            self.stage = default_stage(names)

    def invoke(
        self, input: MessagesInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> MessagesOutput:
        return self._call_with_config(self._slim, input, config, run_type="prompt")

    async def ainvoke(
        self, input: MessagesInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> MessagesOutput:
        return await self._acall_with_config(self._aslim, input, config, run_type="prompt")

    def _slim(
        self, input: MessagesInput, run_manager: CallbackManagerForChainRun
    ) -> MessagesOutput:
        messages = _as_messages(input)
        if not messages:
            return _like(input, [])
        assert self.stage is not None  # set in model_post_init
        result = self.stage.run(Request(messages=from_langchain_messages(messages)), self.budget)
        report_event(run_manager.get_child(), result.report)
        return _like(input, to_langchain_messages(result.request.messages, messages))

    async def _aslim(
        self, input: MessagesInput, run_manager: AsyncCallbackManagerForChainRun
    ) -> MessagesOutput:
        messages = _as_messages(input)
        if not messages:
            return _like(input, [])
        assert self.stage is not None
        request = Request(messages=from_langchain_messages(messages))
        result = await arun_stage(self.stage, request, self.budget)
        await areport_event(run_manager.get_child(), result.report)
        return _like(input, to_langchain_messages(result.request.messages, messages))


def _as_messages(input: MessagesInput) -> list[BaseMessage]:
    if isinstance(input, PromptValue):
        return input.to_messages()
    return convert_to_messages(input)


def _like(input: MessagesInput, messages: list[BaseMessage]) -> MessagesOutput:
    return ChatPromptValue(messages=messages) if isinstance(input, PromptValue) else messages
