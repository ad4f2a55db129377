"""LangChain 1.x agent middleware: promptslim slims every model request of ``create_agent``.

    from langchain.agents import create_agent
    agent = create_agent(model, tools, middleware=[PromptSlimMiddleware(budget=Budget(total=6000))])

``wrap_model_call`` / ``awrap_model_call`` put the request's system message and messages (and
its tools, for counting) through the stage -- default ``prefix`` then ``history`` (then
``compress`` with ``compress=True``), or any Pipeline, a tool-output stage included -- and
call the model with what comes out. The agent's state keeps the whole conversation: only what
is sent is slimmed, again on each call, deterministically, so consecutive calls share their
prefix. Messages the stage left alone are sent as the very same objects.

The Report's figures (``promptslim.tracing.report_figures``: counts and sizes, no prompt text)
go into the model's ``AIMessage.response_metadata["promptslim"]`` and, as the custom event
``promptslim.report``, to the run's callback handlers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ..errors import BackendUnavailable
from ..stages.base import Stage
from ..tracing import report_figures
from ..types import Budget, Report, Request, Result
from ._common import REPORT_EVENT, arun_stage, check_budget, default_stage

try:
    from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
    from langchain_core.callbacks import BaseCallbackManager
    from langchain_core.callbacks.manager import adispatch_custom_event, dispatch_custom_event
    from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
    from langchain_core.runnables.config import ensure_config
    from langchain_core.utils.function_calling import convert_to_openai_tool

    from .langchain_messages import from_langchain_messages, to_langchain_messages
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise BackendUnavailable("langchain (1.x, for agent middleware)", extra="langchain") from exc

__all__ = ["METADATA_KEY", "PromptSlimMiddleware"]

#: the key of ``AIMessage.response_metadata`` that holds the Report's figures
METADATA_KEY = "promptslim"


class PromptSlimMiddleware(AgentMiddleware):
    """Slims each model request of an agent (see the module docstring).

    ``stage``: any promptslim Stage or Pipeline; default ``prefix`` then ``history`` (then
    ``compress`` when ``compress=True``). ``budget``: passed to the stage (None: the stage's
    own default); it covers the tools' schemas too, as the model's prompt does.
    """

    def __init__(
        self,
        *,
        stage: Stage | None = None,
        budget: Budget | None = None,
        compress: bool = False,
    ) -> None:
        super().__init__()
        self.budget = check_budget(budget)
        names = ("prefix", "history", "compress") if compress else ("prefix", "history")
        self.stage: Stage = stage if stage is not None else default_stage(names)

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse:
        originals, slim_request = _request(request)
        result = self.stage.run(slim_request, self.budget)
        figures = _report_event(result.report)
        response: ModelResponse = _with_figures(
            handler(_slimmed(request, originals, result)), figures
        )
        return response

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse:
        originals, slim_request = _request(request)
        result = await arun_stage(self.stage, slim_request, self.budget)
        figures = await _areport_event(result.report)
        response = await handler(_slimmed(request, originals, result))
        tagged: ModelResponse = _with_figures(response, figures)
        return tagged


# ---------------------------------------------------------------- translation


def _request(request: ModelRequest) -> tuple[list[BaseMessage], Request]:
    """The messages as sent (system message first), and the promptslim Request of them."""
    originals: list[BaseMessage] = list(request.messages)
    if request.system_message is not None:
        originals.insert(0, request.system_message)
    tools = [_tool_schema(t) for t in request.tools] or None
    return originals, Request(messages=from_langchain_messages(originals), tools=tools)


def _tool_schema(tool: Any) -> dict[str, Any]:
    # a provider's built-in tool ({"type": "web_search"}) is sent as it is
    if isinstance(tool, dict) and "function" not in tool and "name" not in tool:
        return tool
    schema: dict[str, Any] = convert_to_openai_tool(tool)
    return schema


def _slimmed(request: ModelRequest, originals: list[BaseMessage], result: Result) -> ModelRequest:
    messages = to_langchain_messages(result.request.messages, originals)
    system = None
    if request.system_message is not None and messages and isinstance(messages[0], SystemMessage):
        system, messages = messages[0], messages[1:]
    if system is request.system_message and _same(messages, request.messages):
        return request  # nothing changed: the request as it came
    return request.override(system_message=system, messages=messages)  # type: ignore[arg-type]


def _same(a: list[BaseMessage], b: list[Any]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


# ---------------------------------------------------------------- the report


def _with_figures(response: Any, figures: dict[str, Any]) -> Any:
    """The model's response with the figures in each AIMessage's ``response_metadata`` (a
    copy: a fake or caching model may hand out the same message object again)."""
    if isinstance(response, AIMessage):
        return _tagged(response, figures)
    if isinstance(response, ModelResponse):
        tagged = [_tagged(m, figures) if isinstance(m, AIMessage) else m for m in response.result]
        return ModelResponse(result=tagged, structured_response=response.structured_response)
    return response  # an ExtendedModelResponse from inner middleware: left as it is


def _tagged(message: AIMessage, figures: dict[str, Any]) -> AIMessage:
    metadata = {**message.response_metadata, METADATA_KEY: figures}
    return message.model_copy(update={"response_metadata": metadata})


def _listening() -> bool:
    # the model node's own callbacks, from the run's context; no handler, no event
    callbacks = ensure_config().get("callbacks")
    return isinstance(callbacks, BaseCallbackManager) and bool(callbacks.handlers)


def _report_event(report: Report) -> dict[str, Any]:
    figures = report_figures(report)
    if _listening():
        dispatch_custom_event(REPORT_EVENT, figures)
    return figures


async def _areport_event(report: Report) -> dict[str, Any]:
    figures = report_figures(report)
    if _listening():
        await adispatch_custom_event(REPORT_EVENT, figures)
    return figures
