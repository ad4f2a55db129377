"""Splitting a Budget among the prompt's segments.

A prompt has three parts: the *fixed* part (the stable prefix, the last user message and
anything after it, and message overhead — promptslim never cuts these), the *history* between
them, and the *documents*. ``allocate`` says how many tokens history and documents may use.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import BudgetInfeasible
from .tokens import (
    MESSAGE_OVERHEAD,
    REPLY_PRIMING,
    TokenCounter,
    count_document,
    get_counter,
    message_counts,
)
from .types import Budget, Request

__all__ = ["Allocation", "allocate", "history_span"]


@dataclass(frozen=True)
class Allocation:
    """Token caps for the reducible segments; None means unlimited.

    ``history`` caps the sum of ``count_message`` over the history messages; ``documents`` caps
    the sum of ``count_document`` over the documents. ``fixed`` is what neither may touch.
    """

    fixed: int
    history: int | None
    documents: int | None
    history_needed: int
    documents_needed: int


def history_span(request: Request) -> tuple[int, int]:
    """``(start, end)``: the messages between the stable prefix and the last user message."""
    start = request.prefix_end()
    last = request.last_user_index()
    end = last if last is not None and last >= start else len(request.messages)
    return start, end


def allocate(request: Request, budget: Budget, counter: TokenCounter | None = None) -> Allocation:
    """Split ``budget`` for ``request``. Raises BudgetInfeasible when even the fixed part is over."""
    counter = counter or get_counter(request.tokenizer)
    start, end = history_span(request)
    # memoised on the request: the stage's tokens_in counted them already
    message_tokens = message_counts(request, counter)
    fixed = REPLY_PRIMING + sum(message_tokens[:start]) + sum(message_tokens[end:])
    if request.documents:
        fixed += MESSAGE_OVERHEAD
    need_h = sum(message_tokens[start:end])
    need_d = sum(count_document(d, counter) for d in request.documents)
    if budget.total is None:
        return Allocation(fixed, budget.history, budget.documents, need_h, need_d)
    flexible = budget.total - fixed
    if flexible < 0 and request.compress_last_user:
        # this request lets the compress stage shrink its last user message (counted as fixed
        # here): every other segment gets nothing, and the pipeline's final check says whether
        # that was enough
        return Allocation(fixed, 0, 0, need_h, need_d)
    if flexible < 0:
        raise BudgetInfeasible(
            "the stable prefix and the last user message alone exceed the budget",
            minimum=fixed,
            budget=budget.total,
        )
    want_h = need_h if budget.history is None else min(need_h, budget.history)
    want_d = need_d if budget.documents is None else min(need_d, budget.documents)
    if want_h + want_d <= flexible:
        history, documents = want_h, flexible - want_h
    else:
        # both compete: history gets its share, or more when documents need less than theirs
        history = min(want_h, max(int(flexible * budget.history_share), flexible - want_d))
        documents = flexible - history
    if budget.history is not None:
        history = min(history, budget.history)
    if budget.documents is not None:
        documents = min(documents, budget.documents)
    return Allocation(fixed, history, documents, need_h, need_d)
