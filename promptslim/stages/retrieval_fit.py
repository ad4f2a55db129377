"""What of each chosen document is sent: the parts of a long document that carry the question
(coarse to fine, as LongLLMLingua does it, at extractive speed), and the fit to the documents
budget.

Under a documents budget the chosen documents go best first while they fit. A long document
is not dropped for want of room while a smaller part of it would fit. When the chosen
documents' parts do not all fit, every chosen document first gets its best window (with the
context kept around any window), best document first, as far as the room goes. Then, bar by
bar down the request's scale of window scores (:data:`BARS`), each gets its windows above the
bar where the room allows, best document first, up to what selection inside keeps without a
budget. Under a tight budget the answer is more often in the third document's best window
than in the first document's second one (measured in docs/architecture.md, "Under a documents
budget"). A request whose chosen parts fit is not touched.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..budget import allocate
from ..errors import BudgetInfeasible
from ..tokens import count_document
from ..types import Budget, Document, Request
from .base import StageLog
from .retrieval_options import RetrievalOptions
from .retrieval_pieces import keep_next_pieces
from .retrieval_targets import document_target, drop
from .window_select import Paragraphs, Selection, paragraphs_of, select_parts

if TYPE_CHECKING:
    from ..counters import TokenCounter
    from .retrieval_scoring import Parts

__all__ = ["BARS", "Fitting", "PartsKept", "fit_budget", "select_parts_of", "sent_parts"]

#: the bars, as a fraction of the way from the request's worst window to its best, that a
#: document's windows pass in turn when the chosen parts do not fit the budget (1.0: its best
#: window alone); those at or below the selection's own fraction are left out
BARS = (1.0, 0.9, 0.8, 0.7, 0.6)

# a document's text as one selection keeps it: text, character spans kept, the report's
# summary of them ("1, 4-6 of 12") and its tokens
_Cut = tuple[str, list[list[int]], str, int]


@dataclass
class PartsKept:
    """What selection inside kept of the chosen long documents, by index: the text
    (``texts``, which the piece after a kept one joins) and each one's entry of
    ``details["kept_parts"]``."""

    texts: dict[int, str] = field(default_factory=dict)
    entries: dict[int, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class Fitting:
    """What fitting the budget may cut further: the windows and their scores (``parts``),
    the candidates' rows in them (``valid``), what selection inside kept (``kept``), and
    the documents it leaves as they are (``fixed``: a piece kept for following a kept one,
    whose opening is what stays of it)."""

    parts: Parts
    valid: list[int]
    kept: PartsKept
    fixed: frozenset[int] = frozenset()


def select_parts_of(
    options: RetrievalOptions,
    selected: list[int],
    documents: Sequence[Document],
    valid: list[int],
    parts: Parts,
    tokens: list[int],
    log: StageLog,
) -> PartsKept:
    """Coarse to fine (``window_select.select_parts``): the matching parts of each selected
    long document. ``tokens`` is updated; the report says which sentences stayed."""
    row = {i: j for j, i in enumerate(valid)}
    kept = PartsKept()
    for i in selected:
        cut = _cut(options, documents, i, row[i], parts, None, log.counter)
        if cut is not None:
            _record(log, documents, i, tokens, cut, kept, "the parts that match the query")
    return kept


def _own(options: RetrievalOptions) -> float:
    """The selection's own fraction: ``select_fraction``, else the cut-off's."""
    return options.cutoff_fraction if options.select_fraction is None else options.select_fraction


def _cut(
    options: RetrievalOptions,
    documents: Sequence[Document],
    i: int,
    row: int,
    parts: Parts,
    bar: float | None,
    counter: TokenCounter,
    paragraphs: Paragraphs | None = None,
) -> _Cut | None:
    """Document ``i`` (window row ``row``) as selection keeps it at ``bar`` (None: the
    options' own fraction); None when it stays whole."""
    rule = Selection(
        _own(options) if bar is None else bar,
        options.neighbour_fraction,
        options.context_sentences,
        options.context_after,
        options.record_rest,
    )
    doc = documents[i]
    found = select_parts(
        parts[0], parts[1], row, doc.text, rule, first=not doc.title, paragraphs=paragraphs
    )
    if found is None:
        return None
    text, spans, summary = found
    return text, spans, summary, count_document(doc.model_copy(update={"text": text}), counter)


def _record(
    log: StageLog,
    documents: Sequence[Document],
    i: int,
    tokens: list[int],
    cut: _Cut,
    kept: PartsKept,
    why: str,
) -> None:
    """Document ``i`` cut to ``cut``: its text and tokens, a ``compressed`` change saying
    ``why``, its ``kept_parts`` entry (one a document, its spans the latest)."""
    text, spans, summary, n = cut
    reason = f"kept sentences {summary} ({why})"
    log.change("compressed", document_target(documents, i), tokens=tokens[i] - n, reason=reason)
    entry = kept.entries.get(i)
    if entry is None:
        entry = kept.entries[i] = {"id": documents[i].id, "spans": spans}
        log.details.setdefault("kept_parts", []).append(entry)
    entry["spans"] = spans
    tokens[i] = n
    kept.texts[i] = text


def fit_budget(
    options: RetrievalOptions,
    request: Request,
    budget: Budget,
    selected: list[int],
    documents: Sequence[Document],
    tokens: list[int],
    score_of: dict[int, float],
    log: StageLog,
    fitting: Fitting | None = None,
) -> list[int]:
    """Documents of ``selected``, in order, that fit the documents budget; with ``fitting``,
    long ones first cut to the parts that fit (the module's docstring)."""
    cap = allocate(request, budget, log.counter).documents
    log.details["documents_budget"] = cap
    if cap is None or not selected:
        return selected
    if fitting is not None and sum(tokens[i] for i in selected) > cap:
        # the documents it cut now fit in rank order, and each one it left out is larger
        # than the room left before it then, so the walk below keeps exactly those
        _fill(options, selected, documents, tokens, cap, log, fitting)
    kept: list[int] = []
    used = 0
    first_drop = len(log.changes)  # where selected[0]'s record goes if it does not fit
    for i in selected:
        if used + tokens[i] <= cap:
            kept.append(i)
            used += tokens[i]
        else:
            drop(
                log,
                documents,
                i,
                tokens[i],
                score_of.get(i),
                f"does not fit the documents budget ({cap} tokens)",
            )
    if kept or (budget.documents == 0) or options.min_k == 0:
        return kept
    return _overflow(options, budget, selected, documents, tokens, cap, first_drop, log)


def _overflow(
    options: RetrievalOptions,
    budget: Budget,
    selected: list[int],
    documents: Sequence[Document],
    tokens: list[int],
    cap: int,
    first_drop: int,
    log: StageLog,
) -> list[int]:
    """What is kept when no chosen document fits the budget (``on_overflow``)."""
    best = selected[0]
    if options.on_overflow == "raise":
        over = tokens[best] - cap
        raise BudgetInfeasible(
            f"the best document ({documents[best].id}) alone exceeds the documents budget",
            minimum=budget.total + over if budget.total is not None else tokens[best],
            budget=budget.total if budget.total is not None else cap,
        )
    if options.on_overflow == "drop":
        log.warning(f"no document fits the documents budget of {cap} tokens; none kept")
        return []
    # keep_best: a document that must be shrunk beats no context at all; say so loudly
    # its own record only: ids need not be unique, and a namesake's drop stays reported
    del log.changes[first_drop]
    log.warning(
        f"{document_target(documents, best)} ({tokens[best]} tokens) exceeds the documents budget "
        f"of {cap} tokens; kept for a later stage to compress"
    )
    log.details["over_budget"] = tokens[best] - cap
    return [best]


def _fill(
    options: RetrievalOptions,
    selected: list[int],
    documents: Sequence[Document],
    tokens: list[int],
    cap: int,
    log: StageLog,
    fitting: Fitting,
) -> None:
    """Cut the chosen documents to what fits ``cap``: each one's best window first, then
    bar by bar (the module's docstring); ``tokens``, texts and the report updated."""
    cuts = {i: _ladder(options, documents, i, tokens, log.counter, fitting) for i in selected}
    sizes = {i: [cut[3] for cut in cuts[i]] + [tokens[i]] for i in selected}
    room, step_of = cap, {}
    for i in selected:
        if sizes[i][0] <= room:
            step_of[i] = 0
            room -= sizes[i][0]
    for step in range(1, max(len(s) for s in sizes.values())):
        for i in selected:
            if step_of.get(i) != step - 1 or step >= len(sizes[i]):
                continue
            extra = sizes[i][step] - sizes[i][step - 1]
            if extra <= room:
                step_of[i] = step
                room -= extra
    why = "its best parts, to fit the documents budget"
    for i, step in step_of.items():
        if step < len(cuts[i]):
            _record(log, documents, i, tokens, cuts[i][step], fitting.kept, why)


def _ladder(
    options: RetrievalOptions,
    documents: Sequence[Document],
    i: int,
    tokens: list[int],
    counter: TokenCounter,
    fitting: Fitting,
) -> list[_Cut]:
    """Document ``i`` cut at each bar of :data:`BARS` above the selection's own fraction,
    smallest first, each smaller than the next and than what is kept of it now."""
    if i in fitting.fixed:
        return []
    row = fitting.valid.index(i)
    paragraphs = paragraphs_of(documents[i].text, fitting.parts[0].units[row])
    out: list[_Cut] = []
    for bar in (b for b in BARS if b > _own(options)):
        cut = _cut(options, documents, i, row, fitting.parts, bar, counter, paragraphs)
        if cut is not None and cut[3] < tokens[i] and (not out or cut[3] > out[-1][3]):
            out.append(cut)
    return out


def sent_parts(
    options: RetrievalOptions,
    request: Request,
    budget: Budget,
    selected: list[int],
    documents: Sequence[Document],
    valid: list[int],
    parts: Parts | None,
    tokens: list[int],
    score_of: dict[int, float],
    log: StageLog,
    headings: frozenset[int] = frozenset(),
    follows: Mapping[int, int] | None = None,
) -> tuple[list[int], dict[int, str]]:
    """The chosen documents that go out, best first, and the text of those cut: the parts
    of each that match the query, the piece after the best ones (``headings``: the documents
    that are a heading cut off on its own), all fitted to the documents budget (the module's
    docstring; ``fit_parts``). ``tokens`` is updated."""
    kept_parts, fitting = PartsKept(), None
    if parts is not None and options.select_within:
        kept_parts = select_parts_of(options, selected, documents, valid, parts, tokens, log)
    chosen = keep_next_pieces(
        options, selected, documents, valid, parts, tokens, kept_parts.texts, log, headings, follows
    )
    if parts is not None and options.select_within and options.fit_parts:
        fitting = Fitting(parts, valid, kept_parts, frozenset(chosen) - frozenset(selected))
    kept = fit_budget(options, request, budget, chosen, documents, tokens, score_of, log, fitting)
    return kept, kept_parts.texts
