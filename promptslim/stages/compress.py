"""The compress stage: shrink the dynamic context (documents, optionally older history) to
its budget with a compressor from ``promptslim.backends.compress.COMPRESSORS``.

Never touched: the stable prefix (``messages[:prefix_end()]``) and the last user message
(unless ``Request.compress_last_user``). Protected spans (docs/architecture.md, invariant 5:
code, JSON, ids, numbers, dates, quotes and the caller's ``Request.protect`` literals) are found
here once with ``text.find_protected_spans`` and handed to the compressor, which keeps them
byte-exact.

The target is the tightest of ``rate`` × the documents' tokens, ``target_tokens``, and the
documents cap that ``budget.allocate`` gives when the Budget sets a total or a documents cap.
Documents keep their id, metadata and score; a document compressed to nothing is dropped.
A JSON document larger than the whole target is first cut along its structure (``crush_json``:
``stages.compress_json``): a compressor can only keep such a protected unit whole or drop it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..backends.compress import COMPRESSORS, Compressor, Item
from ..backends.compress.extractive import ExtractiveCompressor
from ..backends.tools import ToolContext
from ..budget import Allocation, allocate, history_span
from ..errors import ConfigError
from ..query import ask_of
from ..text import find_protected_spans
from ..tokens import TokenCounter, count_document, count_message, count_request, message_counts
from ..types import Budget, Document, Message, Request
from .base import BaseStage, StageLog, run_with_fallback
from .compress_json import crush_json_documents
from .compress_options import CompressOptions

__all__ = ["CompressStage"]

# tokenisation at joins can drift a few tokens from the compressor's per-sentence counts:
# re-run with the overshoot taken off the budget, this many times at most
_MAX_RETRIES = 4


class CompressStage(BaseStage):
    """Compress retrieved documents (and, with ``compress_history``, older history messages).

    ``compressor``: a name in ``COMPRESSORS`` (``extractive``, ``lm``, ``llmlingua``...).
    ``options``: keyword arguments for the compressor (``{"model": "path"}``...).
    ``rate``: target share of the documents' tokens to keep, in (0, 1].
    ``target_tokens``: target tokens for the documents.
    ``compress_history``: also compress history messages between the stable prefix and the
    last user message (tool calls and pinned messages are left alone), to ``rate`` or the
    history cap. With neither ``rate``, ``target_tokens`` nor a Budget cap, nothing changes.
    ``strict``: when the compressor is missing, fails or exceeds ``time_limit_ms`` (per call),
    raise instead of falling back to ``extractive`` (the default falls back and warns).
    ``crush_json``: a document that is one JSON object or array larger than the documents'
    whole target keeps the items the query names (and those that stand out), byte-exact, with
    a marker for each run left out, instead of being dropped whole (``stages.compress_json``).
    """

    name = "compress"

    def __init__(
        self,
        *,
        compressor: str = "extractive",
        options: dict[str, Any] | None = None,
        rate: float | None = None,
        target_tokens: int | None = None,
        compress_history: bool = False,
        strict: bool = False,
        time_limit_ms: float | None = None,
        crush_json: bool = True,
    ) -> None:
        CompressOptions.parse(
            compressor=compressor,
            options=options,
            rate=rate,
            target_tokens=target_tokens,
            compress_history=compress_history,
            strict=strict,
            time_limit_ms=time_limit_ms,
            crush_json=crush_json,
        )
        # every setting under its own name, as given: get_params reads them back
        self.compressor = compressor
        self.options = options
        self.rate = rate
        self.target_tokens = target_tokens
        self.compress_history = compress_history
        self.strict = strict
        self.time_limit_ms = time_limit_ms
        self.crush_json = crush_json
        self._backend: Compressor | None = None
        self._fallback = ExtractiveCompressor()

    @property
    def backend(self) -> Compressor:
        """The compressor instance, built on first use (a model loads only when needed)."""
        if self._backend is None:
            cls = COMPRESSORS.get(self.compressor, field="compressor")
            try:
                self._backend = cls(**(self.options or {}))
            except TypeError as exc:
                raise ConfigError(str(exc), field="options") from exc
        return self._backend

    # ---- the stage

    def apply(self, request: Request, budget: Budget, log: StageLog) -> Request:
        counter = log.counter
        capped = (
            budget.total is not None or budget.documents is not None or budget.history is not None
        )
        allocation = allocate(request, budget, counter) if capped else None
        out = request
        if request.documents:
            cap = allocation.documents if allocation else None
            out = out.replace(documents=self._documents(request, cap, counter, log))
        if self.compress_history or request.compress_last_user:
            out = out.replace(messages=self._messages(out, budget, allocation, counter, log))
        return out

    # ---- documents

    def _documents(
        self, request: Request, cap: int | None, counter: TokenCounter, log: StageLog
    ) -> list[Document]:
        docs = request.documents
        before = [count_document(d, counter) for d in docs]
        target = self._target(sum(before), cap)
        log.details["documents_target"] = target
        if target is None or target >= sum(before):
            return docs
        query = ask_of(request).text  # a follow-up's topic is in the turn before it
        given = [d.text for d in docs]
        if self.crush_json:
            context = ToolContext(query=query, protect=tuple(request.protect))
            given = crush_json_documents(given, before, target, context, counter)
            crushed = sum(t != d.text for t, d in zip(given, docs))
            if crushed:
                log.details["json_crushed"] = crushed
        items = [
            Item(
                text=text,
                title=d.title,
                score=d.score,
                overhead=max(0, n - counter.count(d.text)),
                protected=tuple(find_protected_spans(text, extra=request.protect)),
            )
            for d, n, text in zip(docs, before, given)
        ]
        texts = self._fit(items, query, target, counter, _docs_cost(docs, counter), log)
        kept: list[Document] = []
        for d, n, text, cut in zip(docs, before, texts, given):
            if not text:
                log.change(
                    "dropped",
                    f"document:{d.id}",
                    tokens=n,
                    reason=f"{self.compressor}: not relevant enough for the budget",
                )
            elif text == d.text:
                kept.append(d)
            else:
                new = d.model_copy(update={"text": text})
                saved = n - count_document(new, counter)
                reason = "json" if text == cut != d.text else self.compressor
                log.change("compressed", f"document:{d.id}", tokens=saved, reason=reason)
                kept.append(new)
        return kept

    def _target(self, need: int, cap: int | None) -> int | None:
        targets = [t for t in (cap, self.target_tokens) if t is not None]
        if self.rate is not None:
            targets.append(int(self.rate * need))
        return min(targets) if targets else None

    def _fit(
        self,
        items: Sequence[Item],
        query: str,
        target: int,
        counter: TokenCounter,
        cost: Any,
        log: StageLog,
    ) -> list[str]:
        """Compress to ``target``; when joins make the real count overshoot, retry with the
        overshoot off the budget, and as a last resort drop the last kept items."""
        budget = target
        texts: list[str] = []
        for _ in range(_MAX_RETRIES):
            texts = self._compress(items, query, max(0, budget), counter, log)
            over = cost(texts) - target
            if over <= 0:
                return texts
            budget -= over
        texts = list(texts)
        for i in range(len(texts) - 1, -1, -1):
            if cost(texts) <= target:
                break
            texts[i] = ""
        return texts

    def _compress(
        self, items: Sequence[Item], query: str, budget: int, counter: TokenCounter, log: StageLog
    ) -> list[str]:
        """The configured compressor, or extractive when it is missing, fails or is too slow
        (once fallen back, the rest of this request stays on extractive)."""

        def fallback() -> list[str]:
            return self._fallback.compress(items, query=query, budget=budget, counter=counter)

        if self.compressor == "extractive" or "fallback" in log.details:
            backend = self.backend if self.compressor == "extractive" else self._fallback
            return backend.compress(items, query=query, budget=budget, counter=counter)
        return run_with_fallback(
            lambda: self.backend.compress(items, query=query, budget=budget, counter=counter),
            fallback,
            backend=f"compressor {self.compressor!r}",
            fallback_name="extractive",
            extra="lingua" if self.compressor == "llmlingua" else "lm",
            log=log,
            strict=self.strict,
            time_limit_ms=self.time_limit_ms,
        )

    # ---- history

    def _chosen(self, request: Request) -> tuple[list[int], int | None]:
        """The messages this stage may compress (history on request, text only, no tool
        traffic, nothing pinned; the last user message when the caller opted in), and that
        message's index."""
        messages = request.messages
        start, end = history_span(request)
        chosen = [
            i
            for i in range(start, end)
            if self.compress_history
            and not messages[i].pinned
            and not messages[i].tool_calls
            and messages[i].role not in ("tool", "function")
            and messages[i].text
        ]
        last = request.last_user_index()
        if request.compress_last_user and last is not None and last >= start:
            chosen.append(last)
        return chosen, last

    def _messages(
        self,
        request: Request,
        budget: Budget,
        allocation: Allocation | None,
        counter: TokenCounter,
        log: StageLog,
    ) -> list[Message]:
        messages = list(request.messages)
        chosen, last = self._chosen(request)
        if not chosen:
            return messages
        need = sum(count_message(messages[i], counter) for i in chosen)
        history = allocation if self.compress_history else None  # its cap binds span messages
        target = self._target(need, _room(request, budget, history, need, counter))
        log.details["history_target"] = target
        if target is None or target >= need:
            return messages
        items = [
            Item(
                text=messages[i].text,
                overhead=count_message(messages[i], counter) - counter.count(messages[i].text),
                protected=tuple(find_protected_spans(messages[i].text, extra=request.protect)),
            )
            for i in chosen
        ]
        overhead = [it.overhead for it in items]

        def cost(texts: Sequence[str]) -> int:
            # a message is never removed (turn structure): it costs its overhead either way
            return sum(o + counter.count(t) for o, t in zip(overhead, texts))

        texts = self._fit(items, ask_of(request).text, target, counter, cost, log)
        for i, text in zip(chosen, texts):
            if i == last and not text.strip():
                # an empty question is never the answer: the budget check after the stages
                # says the budget is infeasible instead
                log.warning("the last user message cannot shrink to the budget; kept whole")
                continue
            if text != messages[i].text:
                old = count_message(messages[i], counter)
                messages[i] = messages[i].with_text(text)
                log.change(
                    "compressed",
                    f"messages[{i}]",
                    tokens=old - count_message(messages[i], counter),
                    reason=self.compressor,
                )
        return messages


def _room(
    request: Request,
    budget: Budget,
    allocation: Allocation | None,
    need: int,
    counter: TokenCounter,
) -> int | None:
    """What the chosen messages (``need`` tokens now) may use: ``need`` less what the history
    span is over its cap and what the request is over its total (documents already fitted).
    The cap is on the whole span, and the last user message is not in it: so neither the cap
    alone nor ``need`` alone is the chosen messages' target. ``allocation``: None when no span
    message is chosen (the cap is then not theirs to meet). None when nothing caps them."""
    overs: list[int] = []
    if allocation is not None and allocation.history is not None:
        start, end = history_span(request)
        overs.append(sum(message_counts(request, counter)[start:end]) - allocation.history)
    if budget.total is not None:
        overs.append(count_request(request, counter) - budget.total)
    return max(0, need - max(0, *overs)) if overs else None


def _docs_cost(docs: Sequence[Document], counter: TokenCounter) -> Any:
    def cost(texts: Sequence[str]) -> int:
        return sum(
            count_document(d if t == d.text else d.model_copy(update={"text": t}), counter)
            for d, t in zip(docs, texts)
            if t
        )

    return cost
