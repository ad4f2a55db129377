"""What both adapters share: stage defaults, sync/async stage calls, document ids and message
origins. Light on purpose (promptslim only): the framework modules import it, nothing else does.

Message origins. An adapter converts framework messages to promptslim ``Message`` objects and
must map the stage's output back without losing framework-only fields (LangChain message ids,
``additional_kwargs``, ``response_metadata``; LlamaIndex blocks...). Stages keep a message they
did not touch as the same object, and change one with ``model_copy`` (``Message.with_text``),
which carries a message's private attributes. So the adapter tags each input message with
its position (``Message._origin``, declared for this): an output message carrying the tag is the input message at that
position (possibly with new text); one without it is new (a summary, moved volatile content).
This needs no text matching and no cooperation from the stages.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence

from ..errors import ConfigError
from ..pipeline import Pipeline
from ..registry import STAGES
from ..stages.base import Stage
from ..types import Budget, Document, Message, Request, Result

__all__ = [
    "REPORT_EVENT",
    "arun_stage",
    "check_budget",
    "default_stage",
    "origin",
    "query_messages",
    "tag",
    "top_k",
    "unique_ids",
]


#: the name under which the adapters hand the Report's figures to a framework's tracers
REPORT_EVENT = "promptslim.report"


# ---------------------------------------------------------------- stages


def default_stage(names: Sequence[str]) -> Stage:
    """The named built-in stages with their defaults: one stage alone, several as a Pipeline."""
    stages: list[Stage] = [STAGES.get(name)() for name in names]
    return stages[0] if len(stages) == 1 else Pipeline(stages)


def check_budget(budget: object, *, field: str = "budget") -> Budget | None:
    """``budget`` when it is a Budget or None; else the ConfigError a Pipeline gives (a dict
    would otherwise fail deep inside a stage with an AttributeError)."""
    if budget is None or isinstance(budget, Budget):
        return budget
    raise ConfigError(
        f"expected a Budget, got {type(budget).__name__}; build one with Budget(**options)",
        field=field,
    )


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


def top_k(documents: Sequence[Document], k: int | None, ids: Sequence[str]) -> list[Document]:
    """The ``k`` best of the stage's kept ``documents`` by score, in the stage's order.

    Cutting the stage's output at ``k`` would keep whatever its order put first: under the
    ``edges`` order (best first, second best last) the first two are the best and the
    fifth. The best ``k`` keep their relative order instead, which for each built-in order
    (score, original, edges) is that order applied to them alone. Equal scores go by input
    position (``ids``); without scores the stage's own first ``k`` are kept."""
    if k is None or k >= len(documents):
        return list(documents)
    if any(d.score is None for d in documents):
        return list(documents)[:k]
    position = {doc_id: i for i, doc_id in enumerate(ids)}
    ranked = sorted(
        range(len(documents)),
        key=lambda i: (-(documents[i].score or 0.0), position.get(documents[i].id, i)),
    )
    best = set(ranked[:k])
    return [d for i, d in enumerate(documents) if i in best]


def query_messages(query: str | None) -> list[Message]:
    """The query as the last user message, so the request looks like the prompt it becomes
    (documents are rendered just before the last user message) and a total budget counts it."""
    return [Message(role="user", content=query)] if query else []


# ---------------------------------------------------------------- message origins


def tag(message: Message, index: int) -> Message:
    """Mark ``message`` as the input message at ``index`` (see the module docstring)."""
    message._origin = index
    return message


def origin(message: Message) -> int | None:
    """The input position a stage's output message came from; None for a new message."""
    return message._origin
