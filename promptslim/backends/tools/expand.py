"""Bringing elided tool output back: ``expand(id)``, and the ``promptslim_expand`` tool.

The tools stage puts each elided stretch's original in a ``ToolStore`` under its marker's id.
``expand`` reads it back. With ``expand_tool=True`` the stage adds ``EXPAND_TOOL`` to the
request's tools, so the model can ask for a stretch itself; a proxy answers that call with
``answer_expand_call`` (and continues the upstream request with the answer appended)::

    for call in reply_message["tool_calls"]:
        if is_expand_call(call):
            messages.append(answer_expand_call(call, store=store, namespace=tenant))
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ...errors import InvalidRequest
from . import ID_PREFIX
from .store import ToolStore, default_tool_store

__all__ = ["EXPAND_TOOL", "EXPAND_TOOL_NAME", "answer_expand_call", "expand", "is_expand_call"]

EXPAND_TOOL_NAME = "promptslim_expand"

#: the tool definition the stage adds (an OpenAI ``tools`` entry); its bytes never change, so
#: adding it keeps the tools prefix cacheable
EXPAND_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": EXPAND_TOOL_NAME,
        "description": (
            "Some tool output was shortened; each left-out part is marked "
            "'[… N items elided … id=ps…]'. Call this with that id to get "
            "the left-out part back verbatim."
        ),
        "parameters": {
            "type": "object",
            "properties": {"id": {"type": "string", "description": "the id in the marker"}},
            "required": ["id"],
        },
    },
}

_ID = re.compile(rf"{ID_PREFIX}[0-9a-f]{{12}}")


def expand(ident: str, *, store: ToolStore | None = None, namespace: str = "default") -> str:
    """The original text elided under ``ident``. Raises ``InvalidRequest`` (field ``id``) for
    something that is not an elision id, and ``KeyError`` for one the store does not hold
    (never stored here, or evicted)."""
    if not isinstance(ident, str) or not _ID.fullmatch(ident):
        raise InvalidRequest(f"not a promptslim elision id: {ident!r}", field="id")
    value = (store or default_tool_store()).get(namespace, ident)
    if value is None:
        raise KeyError(ident)
    return value.decode("utf-8", "surrogatepass")


def is_expand_call(call: Mapping[str, Any] | Any) -> bool:
    """Whether an assistant tool call (an OpenAI dict or a ``ToolCall``) is ``promptslim_expand``."""
    function = (
        call.get("function") if isinstance(call, Mapping) else getattr(call, "function", None)
    )
    name = (
        function.get("name") if isinstance(function, Mapping) else getattr(function, "name", None)
    )
    return name == EXPAND_TOOL_NAME


def answer_expand_call(
    call: Mapping[str, Any] | Any, *, store: ToolStore | None = None, namespace: str = "default"
) -> dict[str, Any]:
    """The tool message that answers a ``promptslim_expand`` call: the original text, or a
    short explanation the model can act on (an unknown or evicted id, bad arguments). Never
    raises for what the model sent: a proxy appends this and continues the request."""
    as_map = isinstance(call, Mapping)
    call_id = call.get("id") if as_map else getattr(call, "id", None)
    function = call.get("function") if as_map else getattr(call, "function", None)
    raw = (
        function.get("arguments")
        if isinstance(function, Mapping)
        else getattr(function, "arguments", "")
    )
    try:
        args = json.loads(raw or "{}")
        ident = args.get("id") if isinstance(args, dict) else None
        content = expand(str(ident), store=store, namespace=namespace)
    except (ValueError, InvalidRequest):
        content = 'promptslim_expand: the arguments must be {"id": "ps…"} with an id from a marker'
    except KeyError:
        content = "promptslim_expand: that part is no longer stored; ask for the tool call again"
    return {"role": "tool", "tool_call_id": call_id, "content": content}
