"""What the retrieval stage's report calls a document: ``document:{id}``, or
``document:{id}#{index}`` when two documents of the request share an id."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from ..types import Document
from .base import StageLog

__all__ = ["CUT_OFF", "HARD_CAP", "Documents", "document_target", "drop", "drop_empty"]

#: the starts of the reasons a document below the relevance cut-off, or past ``max_k``, is
#: dropped with (the piece after a kept one may be kept all the same: ``retrieval_pieces``)
CUT_OFF = "below the relevance cut-off"
HARD_CAP = "beyond the hard cap"


class Documents(list[Document]):
    """A request's documents, with the ids that two or more of them share, found once per
    request rather than once per report entry."""

    def __init__(self, documents: Sequence[Document]) -> None:
        super().__init__(documents)
        counts = Counter(d.id for d in documents)
        self.shared_ids = frozenset(i for i, n in counts.items() if n > 1)


def document_target(documents: Sequence[Document], i: int) -> str:
    """The report's name for ``documents[i]``: ``document:{id}``, and ``document:{id}#{i}`` (its
    index in the request) when another document of the request has the same id, so the
    report says which of the namesakes was dropped or cut."""
    doc_id = documents[i].id
    if isinstance(documents, Documents):
        shared = doc_id in documents.shared_ids
    else:
        shared = sum(1 for d in documents if d.id == doc_id) > 1
    return f"document:{doc_id}#{i}" if shared else f"document:{doc_id}"


def drop(
    log: StageLog,
    documents: Sequence[Document],
    i: int,
    tokens: int,
    score: float | None,
    reason: str,
) -> None:
    target = document_target(documents, i)
    log.change("dropped", target, tokens=tokens, score=score, reason=reason)


def drop_empty(log: StageLog, documents: Sequence[Document], tokens: Sequence[int]) -> list[int]:
    """The indexes of the documents with text; the others dropped and reported, never fatal."""
    valid = [i for i, d in enumerate(documents) if d.text.strip()]
    for i in sorted(set(range(len(documents))) - set(valid)):
        drop(log, documents, i, tokens[i], None, "empty text")
        log.warning(f"{document_target(documents, i)}: empty text, dropped")
    return valid
