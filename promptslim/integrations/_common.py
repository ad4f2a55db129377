"""What both adapters share: stage defaults, sync/async stage calls, document ids and message
origins. Light on purpose (promptslim only): the framework modules import it, nothing else does.

Message origins. An adapter converts framework messages to promptslim ``Message`` objects and
must map the stage's output back without losing framework-only fields (LangChain message ids,
``additional_kwargs``, ``response_metadata``; LlamaIndex blocks...). Stages keep a message they
did not touch as the same object, and change one with ``model_copy`` (``Message.with_text``),
which copies pydantic's private-attribute dict. So the adapter tags each input message with
its position in that dict: an output message carrying the tag is the input message at that
position (possibly with new text); one without it is new (a summary, moved volatile content).
This needs no text matching and no cooperation from the stages.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Any

from ..pipeline import Pipeline
from ..registry import STAGES
from ..stages.base import Stage
from ..types import Budget, Message, Request, Result

__all__ = ["arun_stage", "default_stage", "origin", "query_messages", "tag", "unique_ids"]

_ORIGIN = "_promptslim_origin"


# ---------------------------------------------------------------- stages


def default_stage(names: Sequence[str]) -> Stage:
    """The named built-in stages with their defaults: one stage alone, several as a Pipeline."""
    stages: list[Stage] = [STAGES.get(name)() for name in names]
    return stages[0] if len(stages) == 1 else Pipeline(stages)


async def arun_stage(stage: Stage, request: Request, budget: Budget | None) -> Result:
    """The stage's own ``arun`` when it has one (Pipeline does), else ``run`` in a worker thread
    so a CPU-bound stage never blocks the event loop."""
    arun = getattr(stage, "arun", None)
    if arun is not None:
        result: Result = await arun(request, budget)
        return result
    return await asyncio.to_thread(stage.run, request, budget)


# ---------------------------------------------------------------- documents


def unique_ids(ids: Iterable[str | None]) -> list[str]:
    """Document ids for promptslim: the framework's id where there is one, ``doc-<position>``
    where not; a repeated id gets ``#<position>`` so every document maps back to exactly one
    input (ids are the only link between a stage's output and the framework objects)."""
    out: list[str] = []
    seen: set[str] = set()
    for i, given in enumerate(ids):
        doc_id = given if given else f"doc-{i}"
        if doc_id in seen:
            doc_id = f"{doc_id}#{i}"
        seen.add(doc_id)
        out.append(doc_id)
    return out


def query_messages(query: str | None) -> list[Message]:
    """The query as the last user message, so the request looks like the prompt it becomes
    (documents are rendered just before the last user message) and a total budget counts it."""
    return [Message(role="user", content=query)] if query else []


# ---------------------------------------------------------------- message origins


def tag(message: Message, index: int) -> Message:
    """Mark ``message`` as the input message at ``index`` (see the module docstring)."""
    message.__pydantic_private__[_ORIGIN] = index  # type: ignore[index]
    return message


def origin(message: Message) -> int | None:
    """The input position a stage's output message came from; None for a new message."""
    private: dict[str, Any] | None = message.__pydantic_private__
    return None if private is None else private.get(_ORIGIN)
