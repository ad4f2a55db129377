"""The proxy answering the model's ``promptslim_expand`` calls itself.

With the tools stage's ``expand_tool=True`` the model may ask for an elided part of a tool
result. A client knows nothing of that tool, so with ``ServeConfig.answer_expand`` the proxy
answers it: when a non-streamed answer's tool calls are all ``promptslim_expand``, it appends
that assistant message and the originals from the stage's store, and asks the upstream again,
at most ``max_expand_rounds`` times. The client gets the final answer. (A streamed answer is
relayed as it comes, so its expand calls reach the client.)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..backends.tools.expand import is_expand_call
from ..pipeline import Pipeline
from ..stages.tools import ToolsStage

__all__ = ["Expander", "continued_payload", "expand_calls", "find_expander"]

Expander = Callable[[Any], dict[str, Any]]


def find_expander(pipeline: Pipeline | None) -> Expander | None:
    """The ``answer_expand`` of the pipeline's tools stage, when it offers the tool."""
    stages = list(pipeline.stages) if pipeline is not None else []
    while stages:
        stage = stages.pop()
        if isinstance(stage, Pipeline):
            stages.extend(stage.stages)
        elif isinstance(stage, ToolsStage) and stage.expand_tool:
            return stage.answer_expand
    return None


def expand_calls(content: bytes) -> dict[str, Any] | None:
    """The assistant message of a chat completion whose tool calls are all expand calls."""
    try:
        data = json.loads(content)
        message = data["choices"][0]["message"]
        calls = message["tool_calls"]
    except (ValueError, KeyError, IndexError, TypeError, RecursionError):
        return None
    if not isinstance(message, dict) or not isinstance(calls, list) or not calls:
        return None
    return message if all(isinstance(c, dict) and is_expand_call(c) for c in calls) else None


def continued_payload(payload: bytes, message: dict[str, Any], expander: Expander) -> bytes:
    """The request sent upstream, with the model's expand calls and their answers appended."""
    body = json.loads(payload)
    answers = [expander(call) for call in message["tool_calls"]]
    body["messages"] = [*body["messages"], message, *answers]
    return json.dumps(body, ensure_ascii=False).encode()
