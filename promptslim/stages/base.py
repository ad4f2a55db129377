"""The Stage protocol and the base class the built-in stages share.

A stage has one required method, ``run(request, budget) -> Result``. ``BaseStage`` does the
bookkeeping every stage needs (timing, token counts, the StageReport) so a stage only writes
``apply``, which returns the new Request and records what it did in a ``StageLog``::

    class Shout(BaseStage):
        name = "shout"

        def apply(self, request, budget, log):
            log.warning("all caps")
            return request.replace(messages=[m.with_text(m.text.upper()) for m in request.messages])
"""

from __future__ import annotations

import concurrent.futures
import inspect
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Protocol, TypeVar, runtime_checkable

from ..errors import (
    BackendError,
    BackendUnavailable,
    BudgetInfeasible,
    InvalidRequest,
    StageTimeout,
)
from ..tokens import TokenCounter, count_request, get_counter
from ..types import Budget, Change, Document, Report, Request, Result, StageReport, trusted

__all__ = [
    "BaseStage",
    "PassThrough",
    "Stage",
    "StageLog",
    "index_ahead",
    "result_of",
    "run_with_fallback",
]

T = TypeVar("T")


@runtime_checkable
class Stage(Protocol):
    """Anything with a ``name`` and ``run(request, budget) -> Result`` is a stage."""

    name: str

    def run(self, request: Request, budget: Budget | None = None) -> Result: ...


class StageLog:
    """What a stage records while it runs; becomes its StageReport."""

    __slots__ = ("changes", "counter", "details", "warnings")

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self.changes: list[Change] = []
        self.warnings: list[str] = []
        self.details: dict[str, Any] = {}

    def change(
        self,
        kind: str,
        target: str,
        *,
        tokens: int = 0,
        reason: str = "",
        score: float | None = None,
    ) -> None:
        self.changes.append(
            Change(kind=kind, target=target, tokens=tokens, reason=reason, score=score)  # type: ignore[arg-type]
        )

    def warning(self, message: str) -> None:
        self.warnings.append(message)


# ---------------------------------------------------------------- degradation

# Primaries with a time limit run here so the caller can stop waiting; a primary that overran
# finishes in the background and its result is discarded (Python threads cannot be killed).
_limit_pool: concurrent.futures.ThreadPoolExecutor | None = None
_limit_pool_guard = threading.Lock()


def _pool() -> concurrent.futures.ThreadPoolExecutor:
    global _limit_pool
    with _limit_pool_guard:
        if _limit_pool is None:
            _limit_pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=32, thread_name_prefix="promptslim-limited"
            )
        return _limit_pool


def run_with_fallback(
    primary: Callable[[], T],
    fallback: Callable[[], T],
    *,
    backend: str,
    fallback_name: str,
    log: StageLog,
    extra: str | None = None,
    strict: bool = False,
    time_limit_ms: float | None = None,
) -> T:
    """``primary()``, or ``fallback()`` when the primary backend is missing, fails or runs past
    ``time_limit_ms``: the request is never lost to an optional backend (docs/architecture.md).

    The fallback is recorded as a warning and in ``log.details["fallback"]``. With ``strict``
    the error is raised instead, mapped into the promptslim tree: ``BackendUnavailable`` for a
    missing extra, ``StageTimeout`` for the time limit, ``BackendError`` for anything else.
    Errors about the input or the budget (``InvalidRequest``, ``BudgetInfeasible``) are never
    masked: the cheaper path would fail on them too.
    """
    try:
        if time_limit_ms is None:
            return primary()
        future = _pool().submit(primary)
        try:
            return future.result(timeout=time_limit_ms / 1e3)
        except concurrent.futures.TimeoutError:
            future.cancel()  # a no-op once it runs; then its result is simply dropped
            raise StageTimeout(backend, limit_ms=time_limit_ms) from None
    except (InvalidRequest, BudgetInfeasible):
        raise
    except Exception as exc:  # any backend failure degrades, by design
        error = _as_backend_error(exc, backend, extra or backend)
        if strict:
            if error is exc:
                raise
            raise error from exc
        # one wording for every cause; the error says which (missing extra, time limit...)
        log.warning(f"{backend} failed ({error}); used {fallback_name}")
        log.details["fallback"] = {
            "backend": backend,
            "used": fallback_name,
            "error": type(error).__name__,
        }
        return fallback()


def prefix_figures(report: StageReport) -> tuple[str | None, int | None]:
    """The prefix-cache figures a stage leaves in its details (the prefix stage's fingerprint,
    the tokens a prefix cache can reuse), which its Report carries at the top level."""
    return report.details.get("fingerprint"), report.details.get("cacheable_tokens")


def _as_backend_error(exc: Exception, backend: str, extra: str) -> Exception:
    if isinstance(exc, (BackendError, BackendUnavailable)):
        return exc
    if isinstance(exc, ImportError):  # an extra that is not installed, or a broken install
        return BackendUnavailable(f"{exc.name or backend} (for {backend})", extra=extra)
    return BackendError(f"{type(exc).__name__}: {exc}", backend=backend)


class BaseStage(ABC):
    """Timing, token counting and reporting around ``apply``; config read back from ``__init__``.

    Every setting is an explicit keyword argument of ``__init__`` stored under the same name,
    so ``get_params()`` can read the configuration back (and ``==``/``repr`` use it).
    """

    name: ClassVar[str]

    @abstractmethod
    def apply(self, request: Request, budget: Budget, log: StageLog) -> Request:
        """Return the transformed request; record changes and warnings in ``log``."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # a stage is run through run_report (by its own run and by a Pipeline): a subclass
        # that customises run alone gets a run_report that goes through that run
        if "run" in cls.__dict__ and "run_report" not in cls.__dict__:
            # what BaseStage.run builds on stays the inherited run_report (no loop through run)
            cls._inner_report = cls.run_report
            cls.run_report = _report_via_run  # type: ignore[method-assign]

    def run(self, request: Request, budget: Budget | None = None) -> Result:
        out, report = self._inner_report(request, budget)
        return result_of(out, report)

    def run_report(
        self, request: Request, budget: Budget | None = None
    ) -> tuple[Request, StageReport]:
        """``run`` without the Result and Report around it: the new request and this stage's
        StageReport. What a Pipeline calls, since it would take that Result apart at once
        (building the two costs as much as the rest of a bare stage). Override this, or
        ``apply``, to change what a stage does; ``run`` is this plus ``result_of``."""
        counter = get_counter(request.tokenizer)
        start = time.perf_counter()
        # both counts are memoised on the request, so in a pipeline this tokens_in is the
        # previous stage's tokens_out, and a stage that returns its input costs no recount;
        # the memo notices a list edited in place, which request identity would not
        tokens_in = count_request(request, counter)
        log = StageLog(counter)
        out = self.apply(request, budget or Budget(), log)
        ms = (time.perf_counter() - start) * 1e3
        report = trusted(
            StageReport,
            stage=self.name,
            tokens_in=tokens_in,
            tokens_out=count_request(out, counter),
            ms=ms,
            changes=log.changes,
            warnings=log.warnings,
            details=log.details,
        )
        return out, report

    #: the run_report that ``run`` builds on (see ``__init_subclass__``)
    _inner_report = run_report

    # ---- configuration

    def get_params(self) -> dict[str, Any]:
        """The ``__init__`` keyword arguments as currently set (sklearn's ``get_params``)."""
        params = inspect.signature(type(self).__init__).parameters
        return {
            p: getattr(self, p)
            for p, spec in params.items()
            if p != "self" and spec.kind not in (spec.VAR_POSITIONAL, spec.VAR_KEYWORD)
        }

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.get_params() == other.get_params()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"


def index_ahead(stage: Stage, documents: Sequence[Document | dict[str, Any]]) -> int:
    """``documents`` handed to ``stage``'s ``index`` method, when it has one (a vector store's
    ingest: ``RetrievalStage.index``, ``Pipeline.index``): the texts it indexed; 0 for a stage
    with nothing to compute before a request carries them."""
    index = getattr(stage, "index", None)
    return int(index(documents)) if callable(index) else 0


def result_of(out: Request, report: StageReport) -> Result:
    """The Result of one stage's run: its output request and a Report of its StageReport."""
    fingerprint, cacheable = prefix_figures(report)
    # trusted(): these values are ours and already typed
    return trusted(
        Result,
        request=out,
        report=trusted(
            Report,
            stages=[report],
            tokens_in=report.tokens_in,
            tokens_out=report.tokens_out,
            ms=report.ms,
            warnings=list(report.warnings),
            prefix_fingerprint=fingerprint,
            cacheable_tokens=cacheable,
            degraded=None,
        ),
    )


def _report_via_run(
    self: BaseStage, request: Request, budget: Budget | None = None
) -> tuple[Request, StageReport]:
    """``run_report`` of a stage that customised ``run``: its own run's Result, taken apart
    (its Report's figures kept in the StageReport's details, where ``prefix_figures`` reads
    them)."""
    result = self.run(request, budget)
    report = result.report.stages[-1] if result.report.stages else None
    if report is None or len(result.report.stages) != 1:
        raise TypeError(f"{type(self).__name__}.run must report exactly one stage")
    if result.report.prefix_fingerprint is not None:
        report.details.setdefault("fingerprint", result.report.prefix_fingerprint)
    if result.report.cacheable_tokens is not None:
        report.details["cacheable_tokens"] = result.report.cacheable_tokens
    return result.request, report


class PassThrough(BaseStage):
    """Changes nothing. The overhead benchmark's baseline, and a seam for tests."""

    name = "passthrough"

    def __init__(self) -> None:
        pass

    def apply(self, request: Request, budget: Budget, log: StageLog) -> Request:
        return request
