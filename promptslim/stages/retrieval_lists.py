"""Request documents that are JSON document lists: their passages ranked as documents.

A document's text may be a search API's answer or a store's export, put in the request as it
came: ``{"results": [{"title": ..., "content": ...}, ...]}``. Scored as one text that cannot
be cut (a JSON value), it was kept or dropped whole: twenty passages sent for the one that
answers. So before ranking, each document that ``find_documents`` reads as a list of passages
(the tools stage's rule: bodies that read as prose and make up most of what a reader reads;
records, tables of ids and logs are not) is replaced by one candidate per passage, which
competes with every other candidate of the request. After it, the passages kept of each list
go back into its JSON in their order, each whole or cut to the parts selection kept, and the
others leave no trace, as a dropped document leaves none. The document then takes the place
of its best passage, with that passage's score, its id and metadata as given.

Not expanded (the document stays one candidate, as before):

- a list whose items keep their place beside a sibling array as long (Chroma's ``ids`` beside
  its ``documents``): dropping items would misalign the two;
- a list whose passages would take the request past ``MAX_CANDIDATES`` candidates;
- any list, under a documents budget: the JSON around the passages (keys, links, scores) is
  not counted by the passages' tokens, and a budget must hold exactly; the compress stage cuts
  a JSON document that does not fit along its structure instead.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING

from ..backends.tools.documents import DocumentList, find_documents, parse_json
from ..budget import allocate
from ..messages import Document
from ..request import Budget, Request
from ..tokens import TokenCounter, count_document
from .base import StageLog

if TYPE_CHECKING:
    from .retrieval_options import RetrievalOptions

__all__ = [
    "MAX_CANDIDATES",
    "PREVIOUS_KEY",
    "ListedDocuments",
    "expand_lists",
    "follows_of",
    "lists_of",
    "pulled",
    "report_lists",
    "sent",
]

#: the most candidates the passages of a request's lists may make, with its other documents
#: (``RequestLimits.max_documents``' default): a list past it stays one candidate, so the
#: ranking's work stays what a request's own documents may ask of it
MAX_CANDIDATES = 5_000
_JSON_START = re.compile(r"\s*[\[{]")
#: the metadata key naming the document a document goes on from, as an untitled list's item
#: goes on from the one before it (the tools stage marks a chat history's messages so)
PREVIOUS_KEY = "previous_id"


@dataclass(frozen=True)
class ListedDocuments:
    """The request's documents with each document list replaced by its passages
    (``documents``), and where each candidate came from (``origin``: the original document's
    index and, for a passage, its item's index in that list)."""

    originals: Sequence[Document]
    lists: dict[int, DocumentList]
    documents: list[Document]
    origin: list[tuple[int, int | None]]

    def sequences(self) -> dict[int, int]:
        """Each passage that another of its list goes on from, and that one: the next item,
        where the list's items have no titles (a chat's messages, a store's untitled chunks,
        a text's paragraphs: one text, cut in order). A search's results each have a title,
        and the next result goes on from nothing."""
        untitled = {d for d, found in self.lists.items() if not any(found.titles)}
        return {
            i: i + 1
            for i, ((doc, item), (after, _)) in enumerate(pairwise(self.origin))
            if item is not None and after == doc and doc in untitled
        }

    def collapse(
        self, ordered: Sequence[int], texts: dict[int, str], scores: dict[int, float]
    ) -> list[Document]:
        """The documents sent: for each candidate of ``ordered`` (indexes into
        ``documents``, in the order they go), the original document, or its list's JSON with
        the passages kept (and its items without a body) at the place of the first of them.
        ``texts``: a candidate's text where selection cut it; ``scores``: each one's score."""
        kept: dict[int, dict[int, str | None]] = {}
        for i in ordered:
            doc, item = self.origin[i]
            if item is not None:
                kept.setdefault(doc, {})[item] = texts.get(i)
        out: list[Document] = []
        placed: set[int] = set()
        for i in ordered:
            doc, item = self.origin[i]
            original = self.originals[doc]
            if item is None:
                out.append(_scored(original, scores[i], texts.get(i)))
            elif doc not in placed:
                placed.add(doc)
                found = self.lists[doc]
                items = kept[doc] | {k: None for k, b in enumerate(found.bodies) if not b.strip()}
                whole = len(items) == len(found.bodies) and all(t is None for t in items.values())
                text = original.text if whole else found.subset(items)
                out.append(_scored(original, scores[i], text))
        return out


def sent(
    documents: Sequence[Document],
    ordered: Sequence[int],
    texts: dict[int, str],
    scores: dict[int, float],
    listed: ListedDocuments | None,
) -> list[Document]:
    """The documents the retrieval stage sends: ``ordered`` (indexes into ``documents``, the
    candidates), each with its score and its text where selection cut it (``texts``), and
    through ``listed.collapse`` where candidates came from document lists."""
    if listed is not None:
        return listed.collapse(ordered, texts, scores)
    return [_scored(documents[i], scores[i], texts.get(i)) for i in ordered]


def report_lists(
    log: StageLog,
    listed: ListedDocuments | None,
    sent: Sequence[Document],
    given: Sequence[Document],
) -> None:
    """Where the candidates came from document lists: how many lists, and the tokens of the
    documents ``sent`` and ``given`` as they are (the JSON around the passages counted)."""
    if listed is not None:
        log.details.update(
            document_lists=len(listed.lists),
            tokens_kept=sum(count_document(d, log.counter) for d in sent),
            tokens_given=sum(count_document(d, log.counter) for d in given),
        )


def _scored(doc: Document, score: float, text: str | None) -> Document:
    update: dict[str, object] = {"score": score}
    if text is not None:
        update["text"] = text
    return doc.model_copy(update=update)


def pulled(
    score_of: dict[int, float], follows: Mapping[int, int], options: RetrievalOptions
) -> dict[int, float]:
    """``score_of`` with each candidate that ``follows`` links to another (an untitled list's
    item, a document naming the one before it) moved ``item_pull`` of the way from its score
    to its better neighbour's, where that one is higher. A chat message is a sentence or two,
    and the one after the message that names the subject states the answer in words of its
    own; the extractive compressor scores a sentence with its neighbour's for that reason.
    No score passes its neighbour's, so the best stays the best, and the rule is invariant
    to shifting and scaling the scores, as the cut-off is."""
    if not options.item_pull or not follows:
        return score_of
    before = {j: i for i, j in follows.items()}
    out = dict(score_of)
    for i, own in score_of.items():
        # a neighbour may be no candidate (an empty document, dropped before scoring)
        near = [score_of[k] for k in (follows.get(i), before.get(i)) if k in score_of]
        best = max(near, default=own)
        if best > own:
            out[i] = own + options.item_pull * (best - own)
    return out


def follows_of(listed: ListedDocuments | None, documents: Sequence[Document]) -> dict[int, int]:
    """Each candidate of ``documents`` that another goes on from, and that one: an untitled
    list's items (``ListedDocuments.sequences``), and a document whose metadata's
    ``PREVIOUS_KEY`` names an earlier candidate's id (the first of that id; a link back to a
    later one is no link, so no walk along the links can go round)."""
    follows = listed.sequences() if listed is not None else {}
    first: dict[str, int] = {}
    for j, doc in enumerate(documents):
        previous = doc.metadata.get(PREVIOUS_KEY)
        i = None if previous is None else first.get(str(previous))
        if i is not None:
            follows.setdefault(i, j)
        first.setdefault(doc.id, j)
    return follows


def lists_of(request: Request, budget: Budget, counter: TokenCounter) -> ListedDocuments | None:
    """``expand_lists`` of the request's documents, but None under a documents budget: a
    budget holds exactly, and the JSON around the passages is not in their tokens."""
    listed = expand_lists(request.documents)
    if listed is not None and allocate(request, budget, counter).documents is not None:
        return None
    return listed


def expand_lists(documents: Sequence[Document]) -> ListedDocuments | None:
    """``documents`` with each document list among them replaced by its passages (the module
    docstring); None when none is one."""
    lists: dict[int, DocumentList] = {}
    candidates = len(documents)
    for i, doc in enumerate(documents):
        found = _document_list(doc.text)
        if found is not None and candidates - 1 + len(found.bodies) <= MAX_CANDIDATES:
            lists[i] = found
            candidates += len(found.bodies) - 1
    if not lists:
        return None
    expanded: list[Document] = []
    origin: list[tuple[int, int | None]] = []
    for i, doc in enumerate(documents):
        found = lists.get(i)
        if found is None:
            expanded.append(doc)
            origin.append((i, None))
            continue
        for k, (body, title) in enumerate(zip(found.bodies, found.titles)):
            if not body.strip():
                continue  # an item without a body is no passage: it goes with the others
            expanded.append(
                Document(id=f"{doc.id}{_item(found, k)}", text=body, metadata=_titled(title))
            )
            origin.append((i, k))
    return ListedDocuments(documents, lists, expanded, origin)


def _document_list(text: str) -> DocumentList | None:
    if not _JSON_START.match(text):
        return None  # most documents: no parse at all, nor a copy of their text
    data = parse_json(text)
    found = None if data is None else find_documents(data, text)
    return None if found is None or found.aligned else found


def _item(found: DocumentList, k: int) -> str:
    """Where item ``k`` is, as the report names a passage (``doc-3$.results[2]``)."""
    return found.where if found.single else f"{found.where}[{k}]"


def _titled(title: str | None) -> dict[str, str]:
    return {"title": title} if title else {}
