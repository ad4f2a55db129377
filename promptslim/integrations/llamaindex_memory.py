"""promptslim's history stage as a LlamaIndex memory (llama-index-core 0.14).

    memory = PromptSlimMemory.from_defaults(budget=Budget(history=2000))
    engine = SimpleChatEngine.from_defaults(llm=llm, memory=memory)
    agent = FunctionAgent(tools=..., llm=llm)  ;  await agent.run(msg, memory=memory)

It is a ``BaseChatStoreMemory``, as LlamaIndex's ``ChatMemoryBuffer`` is: the chat store
keeps the whole conversation (``get_all``); ``get`` / ``aget`` return it slimmed by the stage
(default ``history``): turns and tool calls kept together, pinned messages kept, what goes
summarised or dropped in cache-friendly steps, instead of the buffer's cut at a token limit.
Untouched messages come back as the very same objects. Each slimming dispatches a
``PromptSlimReportEvent`` (the Report's figures) through LlamaIndex's instrumentation.
"""

from __future__ import annotations

from typing import Any

from ..errors import BackendUnavailable
from ..types import Budget, Request
from ._common import arun_stage, check_budget, default_stage

try:
    from llama_index.core.base.llms.types import ChatMessage
    from llama_index.core.bridge.pydantic import Field
    from llama_index.core.memory.types import DEFAULT_CHAT_STORE_KEY, BaseChatStoreMemory
    from llama_index.core.storage.chat_store import BaseChatStore, SimpleChatStore

    from .llamaindex import from_llamaindex_messages, report_event, to_llamaindex_messages
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise BackendUnavailable("llama-index-core", extra="llamaindex") from exc

__all__ = ["PromptSlimMemory"]


class PromptSlimMemory(BaseChatStoreMemory):
    """A chat memory whose ``get`` is the conversation through a promptslim stage.

    ``stage``: any promptslim Stage or Pipeline (default ``history``). ``budget``: passed to
    the stage; a ``total`` is reduced by the ``initial_token_count`` a chat engine passes for
    its prefix messages. ``to_dict()`` keeps the budget and the chat store (the stage is not
    serialisable: ``from_dict`` builds the default one).
    """

    stage: Any = Field(default=None, exclude=True)
    budget: Budget | None = None

    def __init__(self, *, budget: Any = None, **data: Any) -> None:
        super().__init__(budget=check_budget(budget), **data)  # type: ignore[call-arg]

    def model_post_init(self, context: Any, /) -> None:
        if self.stage is None:
            self.stage = default_stage(("history",))

    @classmethod
    def class_name(cls) -> str:
        return "PromptSlimMemory"

    @classmethod
    def from_defaults(  # type: ignore[override]
        cls,
        chat_history: list[ChatMessage] | None = None,
        llm: Any = None,
        *,
        stage: Any = None,
        budget: Budget | None = None,
        chat_store: BaseChatStore | None = None,
        chat_store_key: str = DEFAULT_CHAT_STORE_KEY,
    ) -> PromptSlimMemory:
        """A memory over ``chat_store`` (default a new SimpleChatStore) holding
        ``chat_history``. ``llm`` is accepted as LlamaIndex's memories accept it, unused:
        the budget is promptslim's."""
        chat_store = chat_store or SimpleChatStore()
        if chat_history is not None:
            chat_store.set_messages(chat_store_key, chat_history)
        return cls(stage=stage, budget=budget, chat_store=chat_store, chat_store_key=chat_store_key)

    @classmethod
    def from_dict(cls, data: dict[str, Any], **kwargs: Any) -> PromptSlimMemory:
        from llama_index.core.storage.chat_store.loading import load_chat_store

        data = {**data, **kwargs}
        data.pop("class_name", None)
        if isinstance(data.get("chat_store"), dict):
            data["chat_store"] = load_chat_store(data["chat_store"])
        budget = data.pop("budget", None)
        return cls(budget=Budget(**budget) if isinstance(budget, dict) else budget, **data)

    # ---- reading

    def get(
        self, input: str | None = None, initial_token_count: int = 0, **kwargs: Any
    ) -> list[ChatMessage]:
        """The conversation, slimmed to the budget."""
        messages = self.get_all()
        if not messages:
            return []
        request = Request(messages=from_llamaindex_messages(messages))
        result = self.stage.run(request, self._budget(initial_token_count))
        report_event(result.report, "memory")
        return to_llamaindex_messages(result.request.messages, messages)

    async def aget(
        self, input: str | None = None, initial_token_count: int = 0, **kwargs: Any
    ) -> list[ChatMessage]:
        """``get`` without blocking the event loop."""
        messages = await self.aget_all()
        if not messages:
            return []
        request = Request(messages=from_llamaindex_messages(messages))
        result = await arun_stage(self.stage, request, self._budget(initial_token_count))
        report_event(result.report, "memory")
        return to_llamaindex_messages(result.request.messages, messages)

    def _budget(self, initial_token_count: int) -> Budget | None:
        # the chat engine's prefix messages are sent too: they come out of a total budget
        budget = self.budget
        if budget is None or budget.total is None or initial_token_count <= 0:
            return budget
        return budget.model_copy(update={"total": max(budget.total - initial_token_count, 1)})
