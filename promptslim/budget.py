"""Splitting a Budget among the prompt's segments.

A prompt has three parts: the *fixed* part (the stable prefix, the last user message and
anything after it, and message overhead — promptslim never cuts these), the *history* between
them, and the *documents*. ``allocate`` says how many tokens history and documents may use.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter

from . import request_memo
from .errors import BudgetInfeasible
from .tokens import (
    MESSAGE_OVERHEAD,
    REPLY_PRIMING,
    TokenCounter,
    count_document,
    count_tools,
    get_counter,
    message_counts,
)
from .types import PREFIX_ROLES, Budget, Message, Request

__all__ = ["Allocation", "allocate", "history_span"]


@dataclass(frozen=True)
class Allocation:
    """Token caps for the reducible segments; None means unlimited.

    ``history`` caps the sum of ``count_message`` over the history messages; ``documents`` caps
    the sum of ``count_document`` over the documents. ``fixed`` is what neither may touch.
    ``history_basis`` is the history cap this request would get if its last user message (and
    anything after it) took no tokens: a figure that stays put while a conversation grows and
    its questions vary in length, for plans that must not move with them (the cache-aware
    fold grid). None when history is uncapped.
    """

    fixed: int
    history: int | None
    documents: int | None
    history_needed: int
    documents_needed: int
    history_basis: int | None = None


def history_span(request: Request) -> tuple[int, int]:
    """``(start, end)``: the messages between the stable prefix and the last user message.

    Pinned system or developer messages right after the prefix (the prefix stage's block of
    values moved out of the system prompt) belong with it: instructions, not history, so they
    are fixed, not charged to the history budget."""
    start = request.prefix_end()
    messages = request.messages
    while start < len(messages) and messages[start].pinned and messages[start].role in PREFIX_ROLES:
        start += 1
    last = request.last_user_index()
    end = last if last is not None and last >= start else len(request.messages)
    return start, end


def _any_pinned(request: Request, start: int, end: int) -> bool:
    """Whether any of ``request.messages[start:end]`` is pinned: one C scan, which cost a
    third of a Python test per message over a long history (most pin nothing). Memoised on
    the request like ``message_counts`` (``allocate`` and the history stage both ask)."""
    messages = request.messages
    memo: tuple[int, int, list[Message], bool] | None = request_memo.get(request, "any_pinned")
    if memo is not None and memo[:2] == (start, end) and memo[2] == messages:
        return memo[3]
    found = any(map(_PINNED, messages[start:end]))
    request_memo.put(request, "any_pinned", (start, end, messages[:], found))
    return found


_PINNED = attrgetter("pinned")


def allocate(request: Request, budget: Budget, counter: TokenCounter | None = None) -> Allocation:
    """Split ``budget`` for ``request``. Raises BudgetInfeasible when even the fixed part is over."""
    counter = counter or get_counter(request.tokenizer)
    start, end = history_span(request)
    # memoised on the request: the stage's tokens_in counted them already
    message_tokens = message_counts(request, counter)
    fixed = REPLY_PRIMING + sum(message_tokens[:start]) + sum(message_tokens[end:])
    fixed += count_tools(request.tools, counter)
    if request.documents:
        fixed += MESSAGE_OVERHEAD
    need_h = sum(message_tokens[start:end])
    need_d = sum(count_document(d, counter) for d in request.documents)
    if budget.total is None:
        return Allocation(
            fixed, budget.history, budget.documents, need_h, need_d, budget.history
        )
    flexible = budget.total - fixed
    if flexible < 0 and request.compress_last_user:
        # this request lets the compress stage shrink its last user message (counted as fixed
        # here): every other segment gets nothing, and the pipeline's final check says whether
        # that was enough
        return Allocation(fixed, 0, 0, need_h, need_d, 0)
    if flexible < 0:
        raise BudgetInfeasible(
            "the stable prefix, the tool schemas and the last user message alone exceed the "
            "budget"
            if request.tools
            else "the stable prefix and the last user message alone exceed the budget",
            minimum=fixed,
            budget=budget.total,
        )
    want_h = need_h if budget.history is None else min(need_h, budget.history)
    want_d = need_d if budget.documents is None else min(need_d, budget.documents)
    history = _history_share(flexible, want_h, want_d, budget.history_share)
    # pinned history messages stay whatever the share (the history stage keeps them), so
    # the documents get what is left after them, not after the share
    if history < want_h and _any_pinned(request, start, end):
        window = request.messages[start:end]
        pinned = sum(n for n, m in zip(message_tokens[start:end], window) if m.pinned)
        history = max(history, min(pinned, want_h))
    documents = flexible - history
    tail = sum(message_tokens[end:])
    basis = _history_share(flexible + tail, flexible + tail, want_d, budget.history_share)
    if budget.history is not None:
        history = min(history, budget.history)
        basis = min(basis, budget.history)
    if budget.documents is not None:
        documents = min(documents, budget.documents)
    return Allocation(fixed, history, documents, need_h, need_d, basis)


def _history_share(flexible: int, want_h: int, want_d: int, share: float) -> int:
    """History's part of ``flexible`` tokens: all it wants when both fit, else its share, or
    more when the documents need less than theirs."""
    if want_h + want_d <= flexible:
        return want_h
    return min(want_h, max(int(flexible * share), flexible - want_d))
