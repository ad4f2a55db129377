"""The piece after a kept one. A splitter cuts one source into pieces, and a passage that names
its subject in one piece often states the answer in the next, which never names it: the
question's words find the first piece and miss the second. Where the documents' metadata
places them in their source (``piece_keys``: LangChain's ``source`` and ``start_index``, which
its splitters write under ``add_start_index=True``; the LlamaIndex integration fills them from
a node's source document and start), the piece that goes on from each of the ``next_pieces``
best kept documents is kept too, up to ``window_chars`` of its opening (the whole piece when
it is no longer). Text alone cannot say that two pieces are neighbours (a splitter's cut
between paragraphs repeats nothing), but for one piece: a heading a splitter cut off on its
own (a section longer than its pieces: ``retrieval_cutoff.headings``), which says nothing
itself. Without that metadata, the document after such a heading in the request goes on from
it: pieces sent in their source's order are, and in a retriever's ranking the opening kept is
another piece's, a few tokens spent for nothing."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from itertools import pairwise
from typing import TYPE_CHECKING

from ..tokens import count_document
from ..types import Document
from .base import StageLog
from .retrieval_options import RetrievalOptions
from .retrieval_targets import CUT_OFF, HARD_CAP, document_target, drop
from .window_select import selected_text

if TYPE_CHECKING:
    from .retrieval_scoring import Parts

__all__ = ["CUT_OFF", "SENTENCE_CHARS", "keep_next_pieces", "next_piece_of"]

#: characters a splitter may strip between one piece's end and the next one's start
_GAP = 16
#: the text the items kept before a best one hold at most (``_items_before``), one more item
#: aside: a sentence's worth (the tools stage's prose test asks a passage for as much)
SENTENCE_CHARS = 100
#: what a piece kept beside a best one is, by its side of it, in the report's reasons
_HOW = {"after": "the next piece of", "before": "the item before"}


def next_piece_of(
    documents: Sequence[Document],
    valid: Sequence[int],
    keys: tuple[str, str],
    headings: Collection[int] = (),
    follows: Mapping[int, int] | None = None,
) -> dict[int, int]:
    """For each document of ``valid`` that ``keys`` (source, start) place in a source, the
    document that goes on from it: the same source, starting after its start and at most
    ``_GAP`` characters past its end (an overlap or the whitespace a splitter strips). A
    document of ``headings`` that nothing places goes on in the document after it, when that
    one is not placed either, as an item of ``follows`` (an untitled list's) goes on in the
    one it names."""
    placed: dict[str, list[tuple[int, int]]] = {}
    unplaced: set[int] = set()
    for i in valid:
        meta = documents[i].metadata
        source, start = meta.get(keys[0]), meta.get(keys[1])
        if source is None or type(start) is not int:  # a bool is no position
            unplaced.add(i)
            continue
        placed.setdefault(str(source), []).append((start, i))
    # a heading a splitter cut off on its own heads the piece cut after it, and pieces come in
    # their source's order unless a retriever ranked them: then the next is another's opening
    following = {i: i + 1 for i in headings if i in unplaced and i + 1 in unplaced}
    following |= {i: j for i, j in (follows or {}).items() if i in unplaced and j in unplaced}
    for pieces in placed.values():
        pieces.sort()
        for (start, i), (after, j) in pairwise(pieces):
            if start < after <= start + len(documents[i].text) + _GAP:
                following[i] = j
    return following


def keep_next_pieces(
    options: RetrievalOptions,
    selected: list[int],
    documents: Sequence[Document],
    valid: list[int],
    parts: Parts | None,
    tokens: list[int],
    trimmed: dict[int, str],
    log: StageLog,
    headings: Collection[int] = (),
    follows: Mapping[int, int] | None = None,
) -> list[int]:
    """``selected`` and, after it, the next piece of each of its ``next_pieces`` best that the
    relevance cut-off or ``max_k`` dropped (never one dropped as a near-duplicate or by MMR;
    ``headings``: the documents that are a heading alone, for ``next_piece_of``; ``follows``:
    the items of an untitled list, each going on from the one before, ``_going_on``, and the
    items before each best, ``_items_before``); ``tokens`` and ``trimmed`` updated, the piece's
    drop record replaced by what was kept of it and why. ``max_k`` stays a hard cap: at it,
    the next piece of a best one takes the place of the last selected document that is
    neither one of those best nor a piece kept beside one; the others only fill places left."""
    if not options.next_pieces or not selected:
        return selected
    following = next_piece_of(documents, valid, options.piece_keys, headings, follows)
    out = list(selected)
    best = selected[: options.next_pieces]
    anchors = set(best)
    pairs = _pairs(best, following, follows or {}, documents, options.window_chars or 0)
    for i, j, side in pairs:
        if j in out:
            continue
        target, anchor = document_target(documents, j), document_target(documents, i)
        record = _drop_record(log, target)
        if record is None:
            continue
        how = _HOW[side]
        if i in best and side == "after":  # the next piece may take another's place at max_k
            if not _room(options, out, anchors, (documents, tokens), log, f"{how} {anchor}"):
                continue
        elif options.max_k is not None and len(out) >= options.max_k:
            continue  # the items after the next, and the items before, only fill places left
        del log.changes[record]
        out.append(j)
        anchors.add(j)
        key = "next_pieces" if side == "after" else "items_before"
        log.details.setdefault(key, []).append({"id": documents[j].id, side: anchor})
        text = _opening(options, documents[j].text, parts, valid.index(j))
        if text is None:
            continue
        n = count_document(documents[j].model_copy(update={"text": text}), log.counter)
        reason = f"{how} {anchor}: its opening kept"
        log.change("compressed", target, tokens=tokens[j] - n, reason=reason)
        tokens[j], trimmed[j] = n, text
    return out


def _pairs(
    best: Sequence[int],
    following: Mapping[int, int],
    follows: Mapping[int, int],
    documents: Sequence[Document],
    limit: int,
) -> list[tuple[int, int, str]]:
    """Each piece to keep beside one of ``best``: (the piece it is next to, it, its side).
    For each best, the next piece, then the items before, then the later items, the order
    in which they take the places left at ``max_k``."""
    before = {j: i for i, j in follows.items()}
    pairs: list[tuple[int, int, str]] = []
    for first in best:
        walk = [(i, j, "after") for i, j in _going_on(first, following, follows, documents, limit)]
        back = [(i, j, "before") for i, j in _items_before(first, before, documents, limit)]
        pairs += walk[:1] + back + walk[1:]
    return pairs


def _going_on(
    i: int,
    following: Mapping[int, int],
    follows: Mapping[int, int],
    documents: Sequence[Document],
    limit: int,
) -> Iterator[tuple[int, int]]:
    """The pieces that go on from ``i``, each after the one before it: the next one, and
    where they are a list's items read as one text (``follows``: a chat's messages, a
    sentence or two each), the ones after it while the text they hold stays under ``limit``
    characters, as the sentence after a window is kept with it."""
    before, j, held = i, following.get(i), 0
    while j is not None:
        yield before, j
        held += len(documents[j].text)
        if held >= limit or j not in follows:
            return
        before, j = j, follows[j]


def _items_before(
    i: int, before: Mapping[int, int], documents: Sequence[Document], limit: int
) -> Iterator[tuple[int, int]]:
    """The items of an untitled list before ``i`` (``before``: each item's previous one),
    each after the one it precedes, until their text reaches ``SENTENCE_CHARS``: a chat
    message often names the subject that the next one's "she" or "it" stands for, and short
    messages cut one sentence in two or three, as the sentence before a window is kept with
    it. An item over ``limit`` characters (a passage of its own) is not kept for this."""
    held, j = 0, before.get(i)
    while j is not None and held < SENTENCE_CHARS and len(documents[j].text) <= limit:
        yield i, j
        held += len(documents[j].text)
        i, j = j, before.get(j)


def _room(
    options: RetrievalOptions,
    out: list[int],
    anchors: set[int],
    counted: tuple[Sequence[Document], list[int]],
    log: StageLog,
    taker: str,
) -> bool:
    """Whether ``out`` has room for one more under ``max_k``, making it when it can: the last
    document of ``out`` outside ``anchors`` is dropped (``counted``: the documents and their
    tokens), its report saying for what (``taker``, as "the next piece of document:a")."""
    if options.max_k is None or len(out) < options.max_k:
        return True
    spare = next((k for k in reversed(out) if k not in anchors), None)
    if spare is None:
        return False
    out.remove(spare)
    reason = f"{HARD_CAP} max_k={options.max_k}: its place went to {taker}"
    documents, tokens = counted
    drop(log, documents, spare, tokens[spare], None, reason)
    return True


def _drop_record(log: StageLog, target: str) -> int | None:
    """Where ``target``'s drop by the relevance cut-off or the hard cap is in ``log``; None
    when it was dropped for another reason (a near-duplicate stays dropped) or not at all."""
    for at, change in enumerate(log.changes):
        if change.kind == "dropped" and change.target == target:
            return at if change.reason.startswith((CUT_OFF, HARD_CAP)) else None
    return None


def _opening(options: RetrievalOptions, text: str, parts: Parts | None, row: int) -> str | None:
    """The units of a document's opening up to ``window_chars`` (at least its first), as
    selection joins kept units; None when that is the whole document."""
    if parts is None or options.window_chars is None:
        return None
    units = parts[0].units[row]
    keep = [
        u == 0 or unit.end - units[0].start <= options.window_chars for u, unit in enumerate(units)
    ]
    return None if all(keep) else selected_text(text, units, keep)
