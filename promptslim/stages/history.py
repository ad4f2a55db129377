"""The history stage: fit the conversation into its share of the budget, cache-friendly.

What it works on is the *history span*: the messages between the stable prefix
(``request.prefix_end()``, never touched — invariant 7) and the last user message (never touched
— invariant 1); anything after the last user message (an agent's pending tool round) is kept too.

Units. A tool round — an assistant message with ``tool_calls`` and the tool results that follow
it — is one *atom* (invariant 4). With ``start_on="user"`` (default) the unit of trimming is a
whole turn: a user message and every atom up to the next user message, so whatever is kept
after trimming starts with a user message, never with an assistant reply or an orphan tool
result. With ``start_on="any"`` the unit is the atom. Pinned messages (``Message.pinned``, the
first user message with ``pin_first_user=True``, and the prefix stage's moved-volatile context
message, which it pins) always stay, in their original order; pinning an atom's message pins
the whole atom. Units are only ever removed from the *front* of the span: the kept history is a
suffix of units, plus the pinned atoms that came before it.

Strategies.

- ``last``: keep the newest units that fit; drop the rest.
- ``summarize``: keep the newest units that fit next to a summary message; the dropped units
  are summarised into it. The cut moves with every new turn (a sliding window), so the summary
  and every message after it change on every request: a prefix-cache miss after the pinned part.
- ``cache_aware`` (default): the same summary-plus-recent-turns shape, but the fold point only
  moves in discrete steps, so consecutive requests share everything up to the newest turn and
  the summary message stays byte-identical until the next step.

The cache-aware fold rule (stateless: decided from the request alone, so request N and N+1 of
a conversation agree without the library remembering anything):

1. ``avail`` = the history cap from ``allocate`` minus the pinned messages' tokens: what this
   request's history may use. The grid is laid on a steadier figure, ``basis``: the cap the
   request would get if its last user message took no tokens (``Allocation.history_basis``,
   less the pinned tokens), rounded *down* to a coarse grid (8 steps per power of two: 2,460
   becomes 2,304). Questions differ in length from request to request; ``basis`` does not
   see them, so consecutive requests agree on the grid and on the summary's size.
2. ``room`` = ``avail`` minus the summary message's reserve (``summary_tokens``, at most a
   quarter of ``basis`` and half of ``avail``, plus the header and message overhead).
3. Grid: walk the units from the start of the span, summing their (unpinned) tokens; a *fold
   boundary* sits at every unit where that running sum crosses a multiple of ``G`` tokens,
   ``G = fold_tokens`` or ``fold_fraction`` of ``basis`` less the reserve. Earlier units
   never change as the conversation grows, so the boundaries never move.
4. The fold point is the first boundary whose suffix (everything from it to the end of the
   span) fits ``room``. With ``fold_fraction=0.5``, each time the kept part overflows the fold
   point jumps by about half of ``room`` at once; between jumps it stays put. Only when the
   newest units alone are too big for any boundary is the smallest fitting unit cut taken.
5. The summary is rolling along the grid: chunk ``j`` (units between boundaries ``j-1`` and
   ``j``) is summarised together with the summary of chunks ``< j``. Each step is cached under
   a hash of the turns it covers (and the summariser's settings), so a fold costs one
   summariser call and everything else is a cache lookup.

Fingerprints. The report's details carry ``message_hashes`` (one 16-hex-digit SHA-256 prefix per
output message) and ``history_fingerprint`` (the same joined by ``"."``). Pass either back as
``run(..., previous=...)`` on the next request and the report states ``unchanged_messages`` and
``unchanged_tokens`` — the leading messages identical to the previous request's, counted at
message granularity (a lower bound on what a prefix cache reuses) — and sets
``Report.cacheable_tokens`` to that count.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate, pairwise
from typing import Any, Literal

from ..backends.shared_stats import degraded_scope
from ..backends.summarisers import (
    ExtractiveSummariser,
    LRUSummaryCache,
    Summariser,
    SummaryCache,
)
from ..backends.summary_store import summary_cache_from_spec
from ..budget import allocate, history_span
from ..errors import BudgetInfeasible
from ..tokens import MESSAGE_OVERHEAD, TokenCounter, count_message, get_counter, message_counts
from ..types import Budget, Message, Request, Result, StageReport
from .base import BaseStage, StageLog, result_of
from .history_hashing import (  # noqa: F401  (re-exported: the stage's fingerprint helpers)
    _FIELD_HASHES,
    _calls_json,
    _wire_text,
    fingerprint,
    message_hash,
    message_hashes,
    unchanged_leading,
)
from .history_keys import _CHUNK_KEYS, _chunk_key, _ChunkKeys, _head_digest  # noqa: F401
from .history_options import MIN_SUMMARY_TOKENS, STRATEGIES, HistoryOptions, Strategy
from .history_summary import SUMMARY_HEADER, RollingSummary, build_summariser
from .history_units import (
    _DROPPABLE,
    _PINNED_TOKENS,
    _atoms,
    _check_feasible,
    _first_fit,
    _pinned,
    _quantize,
    _runs,
    _turn_units,
    _Unit,
    _units,
    _unpinned,
)

__all__ = [
    "DEFAULT_SUMMARY_CACHE",
    "STRATEGIES",
    "SUMMARY_HEADER",
    "HistoryStage",
    "fingerprint",
    "message_hash",
    "message_hashes",
    "unchanged_leading",
]

#: the process-wide summary cache used when a stage is given none
DEFAULT_SUMMARY_CACHE: SummaryCache = LRUSummaryCache(maxsize=4096)


# ---------------------------------------------------------------- the stage


class HistoryStage(BaseStage):
    """Fits the history span into its budget share; see the module docstring for the rules.

    ``summariser`` is a name in ``SUMMARISERS`` (``extractive``, ``lm``, ``openai``) built with
    ``summariser_options``, or a ``Summariser`` instance. ``summary_cache`` is any
    ``SummaryCache`` (default: a process-wide in-memory LRU), or its name in a config:
    ``"memory"`` (that default) or ``"sqlite:PATH"`` (``SqliteSummaryCache``: one file shared
    by every process on the host, such as the workers of ``promptslim serve --workers``). A
    summariser that is missing, fails or exceeds ``time_limit_ms`` (per summariser call) is
    replaced by the extractive one for that request, with a warning; ``strict=True`` raises
    instead.
    """

    name = "history"

    def __init__(
        self,
        *,
        strategy: Strategy = "cache_aware",
        summariser: str | Summariser = "extractive",
        summariser_options: dict[str, Any] | None = None,
        summary_tokens: int = 256,
        fold_fraction: float = 0.5,
        fold_tokens: int | None = None,
        pin_first_user: bool = False,
        start_on: Literal["user", "any"] = "user",
        summary_role: Literal["system", "user", "assistant"] = "system",
        summary_cache: SummaryCache | str | None = None,
        strict: bool = False,
        time_limit_ms: float | None = None,
    ) -> None:
        options = HistoryOptions.parse(
            strategy=strategy,
            summariser=summariser,
            summariser_options=summariser_options,
            summary_tokens=summary_tokens,
            fold_fraction=fold_fraction,
            fold_tokens=fold_tokens,
            pin_first_user=pin_first_user,
            start_on=start_on,
            summary_role=summary_role,
            summary_cache=summary_cache,
            strict=strict,
            time_limit_ms=time_limit_ms,
        )
        # a str is a config's name for one: "memory", "sqlite:PATH"
        if isinstance(options.summary_cache, str):
            cache = summary_cache_from_spec(options.summary_cache)
        else:
            cache = options.summary_cache
        self.strategy = strategy
        self.summariser = summariser
        self.summariser_options = summariser_options
        self.summary_tokens = summary_tokens
        self.fold_fraction = fold_fraction
        self.fold_tokens = fold_tokens
        self.pin_first_user = pin_first_user
        self.start_on = start_on
        self.summary_role = summary_role
        self.summary_cache = summary_cache  # as given: a config string stays one
        self._cache = cache if cache is not None else DEFAULT_SUMMARY_CACHE
        self.strict = strict
        self.time_limit_ms = time_limit_ms
        self._summariser = build_summariser(summariser, summariser_options)
        self._fallback = ExtractiveSummariser()
        self._rolling = RollingSummary(
            self._summariser, self._fallback, self._cache, summary_role, strict, time_limit_ms
        )

    # ---- running

    def run(
        self,
        request: Request,
        budget: Budget | None = None,
        *,
        previous: str | Sequence[str] | None = None,
    ) -> Result:
        """As ``BaseStage.run``; with ``previous`` (the previous request's ``message_hashes`` or
        ``history_fingerprint``; default ``request.previous``) the report also states how many
        leading tokens are unchanged."""
        out, report = HistoryStage.run_report(self, request, budget, previous=previous)
        return result_of(out, report)

    def run_report(
        self,
        request: Request,
        budget: Budget | None = None,
        *,
        previous: str | Sequence[str] | None = None,
    ) -> tuple[Request, StageReport]:
        out, report = super().run_report(request, budget)
        if previous is None:
            previous = request.previous  # how a Pipeline passes it on
        if previous is not None:
            details = report.details
            n, tokens = unchanged_leading(
                previous, out.messages, _counter_of(out), details["message_hashes"]
            )
            details["unchanged_messages"] = n
            details["unchanged_tokens"] = tokens
            details["cacheable_tokens"] = tokens  # Report.cacheable_tokens (prefix_figures)
        return out, report

    def apply(self, request: Request, budget: Budget, log: StageLog) -> Request:
        with degraded_scope() as degraded:  # a shared summary cache that fell back to local
            out = self._trim(request, budget, log)
        if degraded:
            log.details["degraded"] = list(degraded)
            log.warning("summary cache degraded: " + "; ".join(degraded))
        log.details["message_hashes"] = message_hashes(out.messages)
        log.details["history_fingerprint"] = ".".join(log.details["message_hashes"])
        return out

    # ---- planning

    def _trim(self, request: Request, budget: Budget, log: StageLog) -> Request:
        counter = log.counter
        messages = request.messages
        start, end = history_span(request)
        log.details["strategy"] = self.strategy
        # each message's count, as the stage's tokens_in counted them (memoised on the request)
        tokens_of = message_counts(request, counter)
        try:
            alloc = allocate(request, budget, counter)
        except BudgetInfeasible as exc:  # the fixed part alone is over: pinned messages add
            pinned_tokens = sum(
                tokens_of[i] for i in _pinned(request, start, end, self.pin_first_user)
            )
            if not pinned_tokens:
                raise
            raise BudgetInfeasible(
                "the stable prefix, the last user message and the pinned messages alone "
                "exceed the budget",
                minimum=exc.minimum + pinned_tokens,
                budget=exc.budget,
            ) from exc
        if end <= start:
            return request
        pinned = _pinned(request, start, end, self.pin_first_user)
        if alloc.history is None or alloc.history_needed <= alloc.history and not pinned:
            log.details.update(history_cap=alloc.history, folded_units=0, summary_tokens=0)
            return request  # fits as it is: no need to look at units at all
        units = None
        if not pinned and self.start_on == "user":
            units = _turn_units(messages, start, end, tokens_of)
        if units is None:
            units = _units(messages, _atoms(messages, start, end), pinned, self.start_on, tokens_of)
        drops = list(map(_DROPPABLE, units))
        pinned_tokens = sum(map(_PINNED_TOKENS, units))
        droppable = sum(drops)
        cap = alloc.history
        log.details.update(history_cap=cap, pinned_tokens=pinned_tokens, units=len(units))
        if cap is None or pinned_tokens + droppable <= cap:
            log.details.update(folded_units=0, summary_tokens=0)
            return request
        # a last user message the compress stage may shrink is not a fixed cost
        fixed = 0 if request.compress_last_user else alloc.fixed
        _check_feasible(fixed, pinned_tokens, budget)
        # pinned messages stay even when the history share is smaller than they are: the
        # total still fits (checked above) once documents take less
        avail = max(cap, pinned_tokens) - pinned_tokens
        # the same without this request's question: what the cache-aware grid is laid on
        basis = alloc.history_basis
        stable = avail if basis is None else max(avail, basis - pinned_tokens)
        suffix = list(accumulate(reversed(drops), initial=0))[::-1]  # suffix[i]: sum(drops[i:])
        fold, chunks, body_cap, reserve = self._plan(units, suffix, avail, stable, counter)
        log.details.update(folded_units=fold)
        summary = None
        if fold and body_cap:
            summary = self._summary(messages, units, chunks, body_cap, reserve, counter, log)
        return self._assemble(request, start, end, units, fold, summary, tokens_of, log)

    def _plan(
        self,
        units: list[_Unit],
        suffix: list[int],
        avail: int,
        stable: int,
        counter: TokenCounter,
    ) -> tuple[int, list[tuple[int, int]], int, int]:
        """``(fold point in units, summary chunks as unit ranges, summary body cap, reserve)``.

        ``avail`` is what this request's unpinned history may use; ``stable`` the same as if
        its question took no tokens. The cache-aware grid and summary size come from
        ``stable``, rounded: consecutive requests whose questions differ in length then agree
        on both, and only the fold point answers to this request's ``avail``."""
        n = len(units)
        if self.strategy == "last":
            return _first_fit(suffix, avail), [], 0, 0
        basis = _quantize(stable) if self.strategy == "cache_aware" else avail
        # half of the room stays for recent turns, however long the question
        body_cap = min(self.summary_tokens, basis // 4, avail // 2)
        reserve = 0
        if body_cap >= MIN_SUMMARY_TOKENS:
            reserve = MESSAGE_OVERHEAD + counter.count(SUMMARY_HEADER + "\n") + body_cap + 1
        else:
            body_cap = 0
        room = avail - reserve
        if self.strategy == "summarize":
            fold = _first_fit(suffix, room)
            return fold, [(0, fold)], body_cap, reserve
        step = self.fold_tokens or max(1, int(self.fold_fraction * (basis - reserve)))
        boundaries = [0]
        running = 0
        for i in range(n):
            before = running
            running += units[i].droppable
            if running // step > before // step:
                boundaries.append(i + 1)
        on_grid = next((b for b in boundaries if suffix[b] <= room), None)
        # when the newest units alone overflow every boundary, cut off-grid
        fold = on_grid if on_grid is not None else _first_fit(suffix, room)
        edges = sorted({b for b in boundaries if b <= fold} | {fold})
        return fold, list(pairwise(edges)), body_cap, reserve

    # ---- summarising

    def _summary(
        self,
        messages: Sequence[Message],
        units: list[_Unit],
        chunks: list[tuple[int, int]],
        body_cap: int,
        reserve: int,
        counter: TokenCounter,
        log: StageLog,
    ) -> Message | None:
        spans = [_unpinned(units, a, b) for a, b in chunks]
        spans = [s for s in spans if s]
        return self._rolling.message(messages, spans, body_cap, reserve, counter, log)

    # ---- output

    def _assemble(
        self,
        request: Request,
        start: int,
        end: int,
        units: list[_Unit],
        fold: int,
        summary: Message | None,
        tokens_of: Sequence[int],
        log: StageLog,
    ) -> Request:
        messages = request.messages
        # units partition the span in order, so what is kept is messages[cut:end]
        cut = units[fold].first if fold < len(units) else end
        lead: list[int] = []  # pinned atoms of folded units keep their place before the summary
        dropped: list[tuple[int, int]] = [(start, cut)] if start < cut else []
        if any(map(_PINNED_TOKENS, units[:fold])):  # see _unpinned
            folded: list[int] = []
            for unit in units[:fold]:
                for atom, is_pinned in zip(unit.atoms or (), unit.pinned_atoms or ()):
                    (lead if is_pinned else folded).extend(atom)
            dropped = _runs(folded)
        kind = "summarised" if summary is not None else "dropped"
        reason = f"history over budget ({self.strategy})"
        for a, b in dropped:
            log.change(kind, f"messages[{a}:{b}]", tokens=sum(tokens_of[a:b]), reason=reason)
        span = [messages[i] for i in lead]
        if summary is not None:
            span.append(summary)
            log.details["summary_tokens"] = count_message(summary, log.counter)
        else:
            log.details["summary_tokens"] = 0
        log.details["fold_message"] = cut if fold else start
        return request.replace(messages=[*messages[:start], *span, *messages[cut:]])


def _counter_of(request: Request) -> TokenCounter:
    return get_counter(request.tokenizer)
