"""A search's passages among tool results (a JSON document list or a fetched page:
``backends.tools.documents``; prose in blank-line blocks: ``backends.tools.passages``) chosen
as the retrieval stage chooses a request's documents.

An agent that searches gets back what a RAG request carries: passages, the answer anywhere in
one of them. The JSON crusher keeps an array's ends, the items that repeat the query's words
and the head of each long string, and the text compressor picks sentences by their words:
right for API records and logs, and they lose the answer of a search. So the passages go to a
``RetrievalStage`` instead (the same scorers, cut-offs and selection inside a passage,
configured by the tools stage's ``documents`` option), with the turn's query and the tool
call's arguments as its query. Its choice is written back in place, every item and stretch
left out marked and stored like the compressors' elisions.

The tools stage's contract holds: what is read is fixed when the result first appears (its
text, the turn's query, the call's arguments), and the stage's memo answers every later turn
with the same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..backends.tools import Compressed, ToolContext
from ..backends.tools.documents import (
    MIN_ITEMS,
    DocumentList,
    find_documents,
    literal_items,
    parse_json,
)
from ..backends.tools.prose import Found
from ..errors import ConfigError
from ..messages import Document, Message
from ..request import Request
from .retrieval import RetrievalStage
from .retrieval_lists import PREVIOUS_KEY
from .retrieval_options import RetrievalOptions

__all__ = ["ToolDocuments"]

#: a document list the warm-up runs, so that the first search result does not load the model
_WARM_UP = json.dumps(
    [
        {
            "title": f"Warm-up {i}",
            "text": f"Passage {i} of the warm-up loads the scorer before any request does, so "
            "that the first search a request carries costs what the next ones do: the model "
            "is read from disk once, here.",
        }
        for i in range(MIN_ITEMS)
    ]
)


class ToolDocuments:
    """Choose what a search's passages keep with a ``RetrievalStage(**options)``."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        try:
            RetrievalOptions.parse(**options)  # an unknown key is named, not a TypeError
        except ConfigError as exc:
            field = f"documents.{exc.field}" if exc.field else "documents"
            raise ConfigError(exc.reason, field=field) from exc
        self.stage = RetrievalStage(**options)

    def compress(
        self, found: Found, context: ToolContext, warnings: list[str] | None = None
    ) -> Compressed | None:
        """The result with only what the retrieval stage keeps of ``found`` (a JSON document
        list or a text's passages) and the items that hold a literal of the turn; None when
        there is no query to rank by or everything is kept. The stage's warnings (a scorer
        that fell back) go to ``warnings``."""
        query = _query(context)
        if not query:
            return None
        docs = _documents(found)
        request = Request(
            messages=[Message(role="user", content=query)],
            documents=docs,
            protect=list(context.protect),
        )
        out, report = self.stage.run_report(request)
        if warnings is not None:
            warnings.extend(report.warnings)
        kept = _kept(found, out.documents, report.details)
        for i in literal_items(found, context):
            kept.setdefault(i, None)  # named, it stays; kept already, as the ranking cut it
        return found.render(kept)

    def warm_up(self) -> None:
        """Load the scorer's model now (``Pipeline.warm_up``), not on the first search."""
        found = find_documents(parse_json(_WARM_UP), _WARM_UP)
        if found is not None:
            self.compress(found, ToolContext(query="what does the warm-up load"))


def _documents(found: Found) -> list[Document]:
    """The items of ``found`` with a body, as documents. A JSON list whose items have no titles
    (a chat channel's history) is one text in order: each item goes on from the one before
    (``PREVIOUS_KEY``), as such a list among a request's documents does."""
    untitled = isinstance(found, DocumentList) and not any(found.titles)
    docs: list[Document] = []
    for i, (body, title) in enumerate(zip(found.bodies, found.titles)):
        if body.strip():
            meta = {"title": title} if title else {}
            if untitled and docs:
                meta[PREVIOUS_KEY] = docs[-1].id
            docs.append(Document(id=str(i), text=body, metadata=meta))
    return docs


def _query(context: ToolContext) -> str:
    """The turn's query and the call's arguments that it does not already hold (a search
    tool's query is often the user's question rephrased). The first hint is the function's
    name (``tools._context``), which says nothing about what a passage must hold."""
    parts = [context.query.strip()]
    for hint in context.hints[1:]:
        if hint.strip() and hint not in context.query:
            parts.append(hint.strip())
    return "\n".join(p for p in parts if p)


def _kept(
    found: Found, documents: list[Document], details: Mapping[str, Any]
) -> dict[int, list[tuple[int, int]] | None]:
    """What of each item stays: None for the whole item, else the spans of its body. Items
    without a body were no document: they stay."""
    spans = {part["id"]: part["spans"] for part in details.get("kept_parts", [])}
    kept: dict[int, list[tuple[int, int]] | None] = {
        i: None for i, body in enumerate(found.bodies) if not body.strip()
    }
    for d in documents:
        i = int(d.id)
        cut = spans.get(d.id)
        # a body shortened other than by selection (there is none without piece metadata)
        # stays whole rather than be guessed at
        kept[i] = [(s, e) for s, e in cut] if cut and d.text != found.bodies[i] else None
    return kept
