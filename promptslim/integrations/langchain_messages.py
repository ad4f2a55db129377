"""LangChain <-> promptslim messages, for the Runnable and the agent middleware.

Messages a stage left alone map back to the very same LangChain objects (``_common``'s origin
tags), changed ones to copies with only their content replaced (ids, tool calls,
``additional_kwargs`` kept), new ones (a summary, moved volatile content) to new messages.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..errors import BackendUnavailable, InvalidRequest
from ..types import ContentPart, FunctionCall, Message, ToolCall
from ._common import origin, tag

try:
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        ChatMessage,
        FunctionMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
    )
    from pydantic import ValidationError as _ValidationError
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise BackendUnavailable("langchain-core", extra="langchain") from exc

__all__ = ["from_langchain_messages", "to_langchain_messages"]


# ---- LangChain -> promptslim

_ROLES = {
    "human": "user",
    "ai": "assistant",
    "system": "system",
    "tool": "tool",
    "function": "function",
}


def from_langchain_messages(messages: Sequence[BaseMessage]) -> list[Message]:
    """LangChain messages as promptslim Messages, each tagged with its position so that
    ``to_langchain_messages`` can map a stage's output back to the original objects."""
    return [tag(_from_langchain(m, i), i) for i, m in enumerate(messages)]


def _from_langchain(message: BaseMessage, i: int) -> Message:
    fields: dict[str, Any] = {"role": _role(message, i), "content": _content(message.content)}
    if message.name is not None:
        fields["name"] = message.name
    if isinstance(message, AIMessage):
        calls = [
            ToolCall(
                id=c["id"] or "",
                function=FunctionCall(name=c["name"], arguments=json.dumps(c["args"])),
            )
            for c in message.tool_calls
        ]
        # malformed calls the model produced are still prompt tokens: keep them, args as written
        calls += [
            ToolCall(
                id=c["id"] or "",
                function=FunctionCall(name=c["name"] or "", arguments=c["args"] or ""),
            )
            for c in message.invalid_tool_calls
        ]
        if calls:
            fields["tool_calls"] = calls
    elif isinstance(message, ToolMessage):
        fields["tool_call_id"] = message.tool_call_id
    try:
        return Message.model_validate(fields)
    except _ValidationError as exc:
        raise InvalidRequest(str(exc.errors()[0]["msg"]), field=f"messages[{i}]") from exc


def _role(message: BaseMessage, i: int) -> str:
    if isinstance(message, SystemMessage):
        # langchain-openai marks developer messages this way
        developer = message.additional_kwargs.get("__openai_role__") == "developer"
        return "developer" if developer else "system"
    if isinstance(message, ChatMessage):
        role = {"human": "user", "ai": "assistant"}.get(message.role, message.role)
        if role not in ("system", "developer", "user", "assistant", "tool", "function"):
            raise InvalidRequest(
                f"unknown chat message role {message.role!r}", field=f"messages[{i}].role"
            )
        return role
    mapped = _ROLES.get(message.type)
    if mapped is None:
        raise InvalidRequest(f"unsupported message type {message.type!r}", field=f"messages[{i}]")
    return mapped


def _content(content: str | list[str | dict[str, Any]]) -> str | list[ContentPart]:
    if isinstance(content, str):
        return content
    # a bare string part is a text part; dict parts keep every key (ContentPart allows extras)
    return [
        ContentPart(type="text", text=p) if isinstance(p, str) else ContentPart.model_validate(p)
        for p in content
    ]


# ---- promptslim -> LangChain


def to_langchain_messages(
    messages: Sequence[Message], originals: Sequence[BaseMessage] = ()
) -> list[BaseMessage]:
    """A stage's output messages as LangChain messages: the original object where the stage
    left a message alone, a copy with new content where it changed the text, a new message
    where the stage made one (a summary, moved volatile content)."""
    out: list[BaseMessage] = []
    for message in messages:
        at = origin(message)
        if at is None or at >= len(originals):
            out.append(_new_langchain(message))
            continue
        original = originals[at]
        content = _lc_content(message.content)
        if content == _lc_content(_content(original.content)):
            out.append(original)  # unchanged: the very same object, every field intact
        else:
            out.append(original.model_copy(update={"content": content}))
    return out


def _lc_content(content: str | list[ContentPart] | None) -> str | list[str | dict[str, Any]]:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return [p.model_dump(exclude_unset=True) for p in content]


def _new_langchain(message: Message) -> BaseMessage:
    content = _lc_content(message.content)
    name = message.name
    if message.role == "system":
        return SystemMessage(content=content, name=name)
    if message.role == "developer":
        return SystemMessage(
            content=content, name=name, additional_kwargs={"__openai_role__": "developer"}
        )
    if message.role == "user":
        return HumanMessage(content=content, name=name)
    if message.role == "assistant":
        calls, invalid = [], []
        for call in message.tool_calls or ():
            try:
                args = json.loads(call.payload or "{}")
            except ValueError:
                args = None
            if isinstance(args, dict):
                calls.append({"name": call.name, "args": args, "id": call.id or None})
            else:
                invalid.append(
                    {
                        "name": call.name,
                        "args": call.payload,
                        "id": call.id or None,
                        "error": None,
                    }
                )
        return AIMessage(content=content, name=name, tool_calls=calls, invalid_tool_calls=invalid)
    if message.role == "tool":
        return ToolMessage(content=content, name=name, tool_call_id=message.tool_call_id or "")
    return FunctionMessage(content=content, name=name or "")
