"""The Pipeline: stages in sequence, itself a Stage.

It times each stage, checks that no stage touched the stable prefix (invariant 7), enforces
the total budget at the end (invariant 3), and merges the stage reports into one Report.
With an OpenTelemetry tracer provider set, a run is one span with a child per stage
(promptslim/tracing.py: sizes, counts and timings only, never prompt text).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import BudgetInfeasible, ConfigError, InvalidRequest, PromptSlimError
from .registry import STAGES
from .stages.base import BaseStage, Stage, index_ahead, prefix_figures
from .stages.retrieval_inline import inline_for
from .tokens import count_request, get_counter
from .tracing import run_stage as _run_traced
from .tracing import traced as _traced
from .tracing import tracer as _tracer
from .types import Budget, Document, Report, Request, Result, StageReport, trusted
from .validation import invalid_from_validation

__all__ = ["DEFAULT_STAGES", "Pipeline", "PipelineConfig", "StageSpec"]

#: the built-in stages of the default pipeline, in order
# tools before history: history folds turns by their tokens, so it should see tool results as
# they will be sent (compressed once, the same bytes every turn), not as they came back
DEFAULT_STAGES: tuple[str, ...] = ("prefix", "tools", "history", "retrieval", "compress")

OnInfeasible = Literal["raise", "best_effort"]


class StageSpec(BaseModel):
    """``{"name": "history", ...options}``: the options are the stage's ``__init__`` arguments."""

    model_config = ConfigDict(extra="allow")
    name: str


class PipelineConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    budget: Budget = Field(default_factory=Budget)
    stages: list[StageSpec] = Field(default_factory=list)
    on_infeasible: OnInfeasible = "raise"


#: how often best_effort runs the stages again under a larger total a stage named
_BEST_EFFORT_RETRIES = 4


class Pipeline:
    """Stages run in order; a Pipeline is a Stage, so pipelines nest.

    ``on_infeasible="raise"`` (default) raises BudgetInfeasible when the result is over
    ``budget.total``; ``"best_effort"`` returns it and records the overflow in
    ``Report.degraded``. A stage that cannot meet its own share raises on its own, except that
    under ``"best_effort"`` a total smaller than what must be kept (a stage's BudgetInfeasible
    about the total) is not a refusal: the stages run again under the minimum it names, so the
    request goes as small as they can make it, its overflow recorded the same way.
    """

    name = "pipeline"

    def __init__(
        self,
        stages: Sequence[Stage] = (),
        *,
        budget: Budget | None = None,
        on_infeasible: OnInfeasible = "raise",
    ) -> None:
        self.stages = list(stages)
        self.budget = _check_budget(budget) or Budget()
        self.on_infeasible = on_infeasible

    # ---- construction

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | str | Path) -> Pipeline:
        """Build from a dict, or a JSON / TOML / YAML file, of the shape
        ``{"budget": {...}, "stages": [{"name": "prefix", ...}, ...]}``."""
        data = _read_config(config) if isinstance(config, (str, Path)) else config
        try:
            parsed = PipelineConfig.model_validate(data)
        except ValidationError as exc:
            err = invalid_from_validation(exc)
            raise ConfigError(err.reason, field=err.field) from exc
        stages = [_build_stage(spec, i) for i, spec in enumerate(parsed.stages)]
        return cls(stages, budget=parsed.budget, on_infeasible=parsed.on_infeasible)

    @classmethod
    def default(
        cls, *, budget: Budget | None = None, on_infeasible: OnInfeasible = "raise"
    ) -> Pipeline:
        """Every built-in stage with its defaults."""
        stages = [STAGES.get(n)() for n in DEFAULT_STAGES]
        return cls(stages, budget=budget, on_infeasible=on_infeasible)

    def to_config(self) -> dict[str, Any]:
        """The configuration as a dict ``from_config`` accepts (built-in stages only)."""
        stages = []
        for stage in self.stages:
            params = stage.get_params() if hasattr(stage, "get_params") else {}
            stages.append({"name": stage.name, **params})
        return {
            "budget": self.budget.model_dump(exclude_defaults=True),
            "stages": stages,
            "on_infeasible": self.on_infeasible,
        }

    # ---- running

    def run(self, request: Request, budget: Budget | None = None) -> Result:
        if not isinstance(request, Request):
            raise InvalidRequest(
                f"expected a Request, got {type(request).__name__}; "
                "build one with Request.from_openai(body)",
                field="request",
            )
        budget = _check_budget(budget) or self.budget
        tracer = _tracer()
        if tracer is None:
            return self._run_all(request, budget, None)
        run = lambda: self._run_all(request, budget, tracer)
        return _traced(tracer, "promptslim.pipeline", run, lambda result: result.report)

    def _run_all(self, request: Request, budget: Budget, tracer: Any) -> Result:
        start = time.perf_counter()
        attempt = budget
        for _ in range(_BEST_EFFORT_RETRIES):  # a later stage may name a larger minimum
            try:
                return self._run(request, budget, attempt, start, tracer)
            except BudgetInfeasible as exc:
                total = attempt.total
                if self.on_infeasible != "best_effort" or total is None or exc.budget != total:
                    raise
                if exc.minimum <= total:
                    raise
                attempt = attempt.model_copy(update={"total": exc.minimum})
        return self._run(request, budget, attempt, start, tracer)

    def _run(
        self, request: Request, budget: Budget, attempt: Budget, start: float, tracer: Any
    ) -> Result:
        """The stages under ``attempt`` (``budget`` itself, or under best_effort a larger total
        than it: see the class docstring); over-budget checks against ``budget``."""
        original = request
        inline = inline_for(self.stages, request)  # as documents through every stage
        request = request if inline is None else inline.request
        reports: list[StageReport] = []
        warnings = list(request.warnings)
        fingerprint = cacheable = None
        for stage in self.stages:
            request, parts = _run_stage(stage, request, attempt, tracer)
            stage_reports, stage_warnings, stage_fingerprint, stage_cacheable = parts
            reports.extend(stage_reports)
            warnings.extend(stage_warnings)
            fingerprint = stage_fingerprint or fingerprint
            cacheable = stage_cacheable if stage_cacheable is not None else cacheable
        # the stages counted already; count here only what no stage saw (the stages saw an
        # inline block as documents)
        if reports and inline is None:
            tokens_in = reports[0].tokens_in
        else:
            tokens_in = count_request(original, get_counter(original.tokenizer))
        tokens_out = reports[-1].tokens_out if reports else tokens_in
        if inline is not None:
            request, tokens_out = inline.finish(request, reports)
        degraded = None
        if budget.total is not None and tokens_out > budget.total:
            if self.on_infeasible == "raise":
                raise BudgetInfeasible(
                    "the stages could not fit the prompt into the budget",
                    minimum=tokens_out,
                    budget=budget.total,
                )
            degraded = f"over budget by {tokens_out - budget.total} tokens (best_effort)"
            warnings.append(degraded)
        if budget.history is not None or budget.documents is not None:
            warnings.extend(_over_caps(request, budget))
        report = trusted(
            Report,
            stages=reports,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            ms=(time.perf_counter() - start) * 1e3,
            warnings=warnings,
            prefix_fingerprint=fingerprint,
            cacheable_tokens=cacheable,
            degraded=degraded,
        )
        if request.warnings:
            request = request.replace(warnings=[])  # now in the report
        return trusted(Result, request=request, report=report)

    async def arun(self, request: Request, budget: Budget | None = None) -> Result:
        """``run`` in a worker thread, so the event loop is not blocked by CPU work."""
        return await asyncio.to_thread(self.run, request, budget)

    def warm_up(self) -> float:
        """Run each stage once on a small built-in request, under a budget tight enough that
        each has work (history over its share, documents over theirs, one of them Chinese), so what
        stages load on first use -- the token counter, embedding and LM models, jieba's
        dictionary -- loads now and not on a user's first request; then a stage's own
        ``warm_up`` method, where it has one, loads what the sample does not reach (the
        retrieval stage's static vectors). Returns the seconds it took. An error here is not
        raised: the first real request will meet and report it."""
        start = time.perf_counter()
        sample, budget = _warm_up_request(), Budget(history=48, documents=48)
        for stage in self.stages:  # each on the whole sample: an earlier one may leave no work
            try:
                stage.run(sample, budget)
                warm = getattr(stage, "warm_up", None)
                if callable(warm):
                    warm()
            except Exception:  # noqa: BLE001, S112  (loading is the point; requests report errors)
                continue
        return time.perf_counter() - start

    def index(self, documents: Iterable[Document | dict[str, Any]]) -> int:
        """What the stages can compute from documents before a request carries them, done now
        (a vector store's ingest): each stage with an ``index`` method gets the documents (the
        retrieval stage embeds their windows into the shared cache: ``RetrievalStage.index``;
        a nested Pipeline passes them on). Returns the texts indexed; 0 when no stage has
        anything to compute ahead."""
        docs = list(documents)
        return sum(index_ahead(stage, docs) for stage in self.stages)

    def __repr__(self) -> str:
        return f"Pipeline({self.stages!r}, budget={self.budget!r})"


# ---------------------------------------------------------------- helpers


def _run_stage(
    stage: Stage, request: Request, budget: Budget, tracer: Any
) -> tuple[Request, tuple[Any, ...]]:
    """One stage's output request and its (stage reports, warnings, prefix fingerprint,
    cacheable tokens), after checking it left the frozen prefix alone (invariant 7)."""
    if tracer is None and isinstance(stage, BaseStage):
        out, stage_report = stage.run_report(request, budget)
        _check_prefix_kept(request, out, stage.name)
        return out, ([stage_report], stage_report.warnings, *prefix_figures(stage_report))
    result = (
        stage.run(request, budget)
        if tracer is None
        else _run_traced(tracer, stage, request, budget)
    )
    _check_prefix_kept(request, result.request, stage.name)
    r = result.report
    return result.request, (r.stages, r.warnings, r.prefix_fingerprint, r.cacheable_tokens)


def _over_caps(request: Request, budget: Budget) -> list[str]:
    """A warning per segment cap the output is over: the stage that enforces it (history,
    retrieval, compress) is not in the pipeline, or could not meet it."""
    from .budget import history_span
    from .tokens import count_document, message_counts

    counter = get_counter(request.tokenizer)
    out = []
    if budget.history is not None:
        start, end = history_span(request)
        used = sum(message_counts(request, counter)[start:end])
        if used > budget.history:
            out.append(f"history uses {used} tokens, over budget.history ({budget.history})")
    if budget.documents is not None:
        used = sum(count_document(d, counter) for d in request.documents)
        if used > budget.documents:
            out.append(f"documents use {used} tokens, over budget.documents ({budget.documents})")
    return out


def _check_budget(budget: Budget | None) -> Budget | None:
    # a Stage takes a Budget, never a dict: say so here rather than fail deep in a stage
    if budget is not None and not isinstance(budget, Budget):
        raise ConfigError(
            f"expected a Budget, got {type(budget).__name__}; build one with Budget(**options)",
            field="budget",
        )
    return budget


def _warm_up_request() -> Request:
    turns = []
    for i in range(4):
        turns += [
            {"role": "user", "content": f"Step {i + 1}: the order 7731-{i} was shipped to Lisbon "
             "on Tuesday; please note the tracking number and remind me about it later."},
            {"role": "assistant", "content": f"Noted: order 7731-{i}, shipped to Lisbon on "
             "Tuesday. I will remind you about the tracking number when you ask."},
        ]  # fmt: skip
    return Request.from_openai(
        {
            "model": "warm-up",
            "messages": [
                {"role": "system", "content": "You are a support assistant. Today is "
                 "2026-01-14. Answer from the documents and the conversation."},
                *turns,
                {"role": "user", "content": "What is the refund window for annual plans?"},
            ],
            "documents": [
                {"id": "policy", "text": "Annual plans can be refunded in full within 30 days "
                 "of purchase. After 30 days a pro-rated refund is offered for the unused "
                 "months, minus a processing fee of 5 percent, on request to support."},
                {"id": "zh", "text": "年度套餐在购买后三十天内可以全额退款。三十天之后，"
                 "未使用的月份可以按比例退款，需要扣除百分之五的手续费。"},
                {"id": "shipping", "text": "Orders ship from Lisbon within two working days. "
                 "Tracking numbers arrive by email once the parcel leaves the warehouse."},
            ],
        }
    )  # fmt: skip


def _read_config(path: str | Path) -> Any:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config: {exc.strerror}", field=str(path)) from exc
    try:
        if path.suffix == ".toml":
            try:
                import tomllib
            except ImportError:  # Python 3.10
                import tomli as tomllib  # type: ignore[no-redef,unused-ignore]
            return tomllib.loads(text)
        if path.suffix in (".yaml", ".yml"):
            try:
                import yaml
            except ImportError as exc:
                raise ConfigError(
                    "YAML configs need PyYAML: pip install 'promptslim[config]'", field=str(path)
                ) from exc
            return yaml.safe_load(text)
        return json.loads(text)
    except ConfigError:
        raise
    except Exception as exc:  # each parser has its own error type; all mean "unreadable"
        raise ConfigError(f"cannot parse config: {_one_line(exc)}", field=str(path)) from exc


def _one_line(exc: Exception) -> str:
    """A parser's error as one line (PyYAML's quote the offending lines, with a caret)."""
    mark, problem = getattr(exc, "problem_mark", None), getattr(exc, "problem", None)
    if mark is not None and problem:
        context = getattr(exc, "context", None)
        what = f"{context}, {problem}" if context else problem
        return f"{what} at line {mark.line + 1}, column {mark.column + 1}"
    return " ".join(str(exc).split())


def _build_stage(spec: StageSpec, i: int) -> Stage:
    """The stage named by ``spec``, built by its constructor: the single entry point, which
    validates with the stage's own options model (``stages/*_options.py``); what it raises
    names the key, here under ``stages[i]``."""
    cls = STAGES.get(spec.name, field=f"stages[{i}].name")
    options = dict(spec.model_extra or {})
    params = inspect.signature(cls).parameters
    accepted = {p for p, s in params.items() if s.kind is not s.VAR_KEYWORD}
    for key in options:
        if key not in accepted:
            raise ConfigError(
                f"unknown option for stage {spec.name!r}; known: {', '.join(sorted(accepted)) or '(none)'}",
                field=f"stages[{i}].{key}",
            )
    try:
        stage: Stage = cls(**options)
    except ConfigError as exc:
        field = f"stages[{i}]" + (f".{exc.field}" if exc.field else "")
        raise ConfigError(exc.reason, field=field) from exc
    except ValidationError as exc:  # a stage of the caller's that validates with pydantic
        err = invalid_from_validation(exc, root=f"stages[{i}]")
        raise ConfigError(err.reason, field=err.field) from exc
    except (TypeError, ValueError) as exc:  # a stage of the caller's that validates by hand
        raise ConfigError(str(exc), field=f"stages[{i}]") from exc
    return stage


def _check_prefix_kept(before: Request, after: Request, stage: str) -> None:
    """Invariant 7: once a stage has frozen the prefix, later stages leave its bytes alone."""
    n = before.frozen_prefix
    if not n:
        return
    old, new = before.messages[:n], after.messages[:n]
    if len(new) != n or any(a is not b and a != b for a, b in zip(old, new)):
        raise PromptSlimError(f"stage {stage!r} changed the frozen stable prefix")
