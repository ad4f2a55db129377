"""PromptSlimMiddleware in real LangChain 1.x agents (``create_agent``), with LangChain's own
fake chat model recording what it is sent, sync and async."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from promptslim import Budget, ConfigError, PassThrough
from promptslim.integrations.langchain_agents import METADATA_KEY, PromptSlimMiddleware

from .conftest import assert_missing_extra

SYSTEM = "You are a support assistant. Today is 2026-01-14. Answer from the conversation."


class RecordingModel(FakeMessagesListChatModel):
    """LangChain's fake chat model, keeping each list of messages it was called with."""

    sent: list[list[BaseMessage]] = []  # noqa: RUF012 (a pydantic field: copied per instance)

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.sent.append(list(messages))
        return super()._generate(messages, *args, **kwargs)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self  # the fake model answers from its list whatever the tools


class Events(BaseCallbackHandler):
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        self.events.append((name, data))


def history(turns: int = 12) -> list[BaseMessage]:
    messages: list[BaseMessage] = []
    for i in range(turns):
        messages += [
            HumanMessage(f"question {i}: where did order 77{i} ship to, and on which day?"),
            AIMessage(f"answer {i}: order 77{i} shipped to Lisbon on Tuesday, tracking sent."),
        ]
    return [*messages, HumanMessage("Which order did I ask about first?", id="last")]


def agent(middleware: PromptSlimMiddleware, responses: list[BaseMessage], tools: Any = ()) -> Any:
    model = RecordingModel(responses=responses, sent=[])
    built = create_agent(model, tools=list(tools), system_prompt=SYSTEM, middleware=[middleware])
    return built, model


def test_the_model_gets_the_slimmed_conversation_and_the_state_keeps_all_of_it() -> None:
    slim = PromptSlimMiddleware(budget=Budget(history=80))
    built, model = agent(slim, [AIMessage("order 770")])
    messages = history()
    out = built.invoke({"messages": messages})
    sent = model.sent[0]
    assert len(sent) < len(messages) + 1
    assert sent[0].type == "system" and sent[0].text.startswith("You are a support assistant.")
    assert sent[-1] is not None and sent[-1].text == messages[-1].text  # the question unchanged
    assert [m.text for m in out["messages"][: len(messages)]] == [m.text for m in messages]
    figures = out["messages"][-1].response_metadata[METADATA_KEY]
    assert figures["tokens_out"] < figures["tokens_in"]
    assert figures["dropped"] + figures["summarised"] > 0
    assert set(figures["stages"]) == {"prefix", "history"}
    assert figures["cacheable_tokens"] > 0 and figures["degraded"] is False


def test_async_agent_and_callbacks_see_the_figures() -> None:
    handler = Events()
    built, model = agent(PromptSlimMiddleware(budget=Budget(history=80)), [AIMessage("770")])
    out = asyncio.run(built.ainvoke({"messages": history()}, config={"callbacks": [handler]}))
    assert len(model.sent[0]) < len(history()) + 1
    assert [name for name, _ in handler.events] == ["promptslim.report"]
    assert handler.events[0][1] == out["messages"][-1].response_metadata[METADATA_KEY]
    assert "Lisbon" not in repr(handler.events)  # sizes and counts, never prompt text


def test_tool_loop_slims_every_model_call() -> None:
    @tool
    def track(order: str) -> str:
        """Where an order is."""
        return f"order {order} is in Lisbon, out for delivery " + "status ok " * 40

    calls = [
        AIMessage("", tool_calls=[{"name": "track", "args": {"order": "770"}, "id": "c1"}]),
        AIMessage("It is out for delivery."),
    ]
    built, model = agent(PromptSlimMiddleware(budget=Budget(history=120)), calls, tools=[track])
    out = built.invoke({"messages": history()})
    assert len(model.sent) == 2  # the model was called again after the tool ran
    second = model.sent[1]
    # the tool call and its result travel together (invariant 4)
    assert isinstance(second[-1], ToolMessage) and second[-2].tool_calls
    assert out["messages"][-1].text == "It is out for delivery."


def test_a_passthrough_stage_sends_the_request_as_it_came() -> None:
    built, model = agent(PromptSlimMiddleware(stage=PassThrough()), [AIMessage("hi")])
    messages = history(2)
    built.invoke({"messages": messages})
    assert [m.text for m in model.sent[0][1:]] == [m.text for m in messages]


def test_a_dict_budget_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="budget"):
        PromptSlimMiddleware(budget={"history": 10})  # type: ignore[arg-type]


def test_missing_langchain_raises_backend_unavailable() -> None:
    assert_missing_extra(
        "promptslim.integrations.langchain_agents", ["langchain", "langchain.agents"], "langchain"
    )


def test_a_pipeline_with_the_tools_stage_compresses_tool_results_sent() -> None:
    from promptslim import HistoryStage, Pipeline, PrefixStage, ToolsStage

    @tool
    def orders(city: str) -> str:
        """Orders shipped to a city."""
        rows = [
            {"id": f"77{i}", "city": city, "status": "shipped", "day": "Tue"} for i in range(60)
        ]
        return json.dumps(rows)

    calls = [
        AIMessage("", tool_calls=[{"name": "orders", "args": {"city": "Lisbon"}, "id": "c1"}]),
        AIMessage("Sixty orders."),
    ]
    stage = Pipeline([PrefixStage(), ToolsStage(min_chars=500), HistoryStage()])
    slim = PromptSlimMiddleware(stage=stage, budget=Budget(history=2000))
    built, model = agent(slim, calls, tools=[orders])
    out = built.invoke({"messages": [HumanMessage("Which orders went to Lisbon?")]})
    (sent,) = [m for m in model.sent[1] if isinstance(m, ToolMessage)]
    (kept,) = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert len(sent.text) < len(kept.text) / 4  # sent compressed, the state keeps it whole
    assert json.loads(kept.text)[59]["id"] == "7759"
    figures = out["messages"][-1].response_metadata[METADATA_KEY]
    assert list(figures["stages"]) == ["prefix", "tools", "history"]
