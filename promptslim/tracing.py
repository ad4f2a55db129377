"""What tracers see of a run: OpenTelemetry spans, and the Report's figures for the adapters.

Spans: one ``promptslim.pipeline`` span per Pipeline run, a ``promptslim.<stage>`` child per
stage, each carrying sizes, counts and timings as attributes -- never prompt text
(invariant 8): a stage's string details are left out, except a few that promptslim itself
wrote from a closed set (a strategy name, an error class name). Nothing is started unless an
application has set a tracer provider: without one opentelemetry's tracer is a proxy whose
spans go nowhere, and starting them still costs microseconds a stage. Without opentelemetry
installed nothing is imported at all.

``report_figures`` is the same information as a plain dict, for places that take metadata
rather than spans (LangChain callbacks and response metadata, LlamaIndex instrumentation
events). The proxy's server spans reuse ``tracer`` and ``set_report_attributes``.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from .types import Budget, Report, Request, Result, StageReport

__all__ = [
    "report_figures",
    "run_stage",
    "set_report_attributes",
    "stage_attributes",
    "traced",
    "tracer",
]

T = TypeVar("T")

#: the tracer: None until first looked up, False when opentelemetry is not installed
_otel: Any = None
#: opentelemetry.trace, its ProxyTracer and its ProxyTracerProvider, when it has them
_proxy: tuple[Any, type, type] | None = None

#: change kinds counted in the figures (``Change.kind``)
_KINDS = ("dropped", "summarised", "compressed", "moved", "reordered", "rewritten")
#: string details that are promptslim's own words from a closed set, never the caller's text
_SAFE_STRINGS = frozenset({"strategy", "language_fallback", "summary_fallback"})


def tracer() -> Any:
    """The ``promptslim`` tracer, or None when spans would go nowhere (opentelemetry not
    installed, or no tracer provider set). Asked on every run: an application may set its
    provider after its first request."""
    global _otel, _proxy
    if _otel is None:
        _otel = False
        if importlib.util.find_spec("opentelemetry") is not None:
            from opentelemetry import trace

            tracer_cls = getattr(trace, "ProxyTracer", None)
            provider_cls = getattr(trace, "ProxyTracerProvider", None)
            if tracer_cls is not None and provider_cls is not None:  # else: always trace
                _proxy = (trace, tracer_cls, provider_cls)
            _otel = trace.get_tracer("promptslim")
    if not _otel:
        return None
    if _proxy is not None:
        api, tracer_cls, provider_cls = _proxy
        if isinstance(_otel, tracer_cls) and isinstance(api.get_tracer_provider(), provider_cls):
            return None
    return _otel


# ---------------------------------------------------------------- spans


@contextmanager
def _span(active: Any, name: str) -> Iterator[Any]:
    # start_as_current_span records an escaping exception and sets the ERROR status itself
    with active.start_as_current_span(name) as span:
        yield span


def traced(active: Any, name: str, run: Callable[[], T], report: Callable[[T], Report]) -> T:
    """``run()`` inside a span named ``name`` whose attributes are ``report(result)``'s."""
    with _span(active, name) as span:
        result = run()
        set_report_attributes(span, report(result))
    return result


def run_stage(active: Any, stage: Any, request: Request, budget: Budget) -> Result:
    """``stage.run`` inside its ``promptslim.<name>`` span: the stage's figures, and how many
    documents and messages went in and came out."""
    if stage.name == "pipeline":  # a nested Pipeline opens its own span
        nested: Result = stage.run(request, budget)
        return nested
    with _span(active, f"promptslim.{stage.name}") as span:
        result: Result = stage.run(request, budget)
        set_report_attributes(span, result.report)
        out = result.request
        span.set_attributes(
            {
                "promptslim.documents_in": len(request.documents),
                "promptslim.documents_kept": len(out.documents),
                "promptslim.documents_dropped": max(len(request.documents) - len(out.documents), 0),
                "promptslim.messages_in": len(request.messages),
                "promptslim.messages_out": len(out.messages),
            }
        )
    return result


def set_report_attributes(span: Any, report: Report) -> None:
    """A whole run's figures on ``span`` (a stage's own when the report has one stage)."""
    if len(report.stages) == 1:
        span.set_attributes(stage_attributes(report.stages[0]))
    else:
        span.set_attributes(_flat(report_figures(report, stages=False)))
        span.set_attribute("promptslim.stages", [s.stage for s in report.stages])
    if report.cacheable_tokens is not None:
        span.set_attribute("promptslim.cacheable_tokens", report.cacheable_tokens)
    span.set_attribute("promptslim.degraded", report.degraded is not None)
    if report.degraded is not None:  # promptslim's own words ("over budget by N tokens ...")
        span.set_attribute("promptslim.degraded_reason", report.degraded)


def stage_attributes(stage: StageReport) -> dict[str, Any]:
    """One stage's figures as span attributes: tokens, time, change counts, documents kept
    and dropped, its numeric details, the fallback it took."""
    attrs: dict[str, Any] = {f"promptslim.{k}": v for k, v in _stage_figures(stage).items()}
    for key, value in stage.details.items():
        if isinstance(value, (bool, int, float)) or (
            key in _SAFE_STRINGS and isinstance(value, str)
        ):
            attrs[f"promptslim.{stage.stage}.{key}"] = value
    fallback = stage.details.get("fallback")
    if isinstance(fallback, dict):
        for key in ("backend", "used", "error"):
            if isinstance(fallback.get(key), str):
                attrs[f"promptslim.fallback.{key}"] = fallback[key]
    return attrs


# ---------------------------------------------------------------- figures


def report_figures(report: Report, *, stages: bool = True) -> dict[str, Any]:
    """The Report's figures as a JSON-ready dict, no prompt text: tokens in and out, time,
    cacheable tokens, degraded, how many items (messages, documents) were dropped /
    summarised / compressed..., the stages that fell back to a cheaper backend, and
    (``stages=True``) each stage's own figures."""
    kinds = dict.fromkeys(_KINDS, 0)
    fallbacks: list[str] = []
    for s in report.stages:
        for change in s.changes:
            kinds[change.kind] = kinds.get(change.kind, 0) + _items(change.target)
        if isinstance(s.details.get("fallback"), dict):
            fallbacks.append(s.stage)
    figures: dict[str, Any] = {
        "tokens_in": report.tokens_in,
        "tokens_out": report.tokens_out,
        "ms": round(report.ms, 3),
        "cacheable_tokens": report.cacheable_tokens,
        "degraded": report.degraded is not None,
        **kinds,
        "fallback": fallbacks,
        "warnings": len(report.warnings),
    }
    if stages:
        figures["stages"] = {s.stage: _stage_figures(s) for s in report.stages}
    return figures


def _stage_figures(stage: StageReport) -> dict[str, Any]:
    figures: dict[str, Any] = {
        "tokens_in": stage.tokens_in,
        "tokens_out": stage.tokens_out,
        "ms": round(stage.ms, 3),
    }
    for change in stage.changes:
        key = f"documents_{change.kind}" if change.target.startswith("document:") else change.kind
        figures[key] = figures.get(key, 0) + _items(change.target)
    if isinstance(stage.details.get("cacheable_tokens"), int):
        figures["cacheable_tokens"] = stage.details["cacheable_tokens"]
    figures["warnings"] = len(stage.warnings)
    return figures


def _items(target: str) -> int:
    """How many items a change's target names: ``messages[3:7]`` is four, anything else one."""
    if target.startswith("messages[") and ":" in target:
        start, _, end = target[len("messages[") : -1].partition(":")
        if start.isdigit() and end.isdigit():
            return max(int(end) - int(start), 1)
    return 1


def _flat(figures: dict[str, Any]) -> dict[str, Any]:
    # span attributes are scalars or lists of one scalar type; None is not allowed
    return {
        f"promptslim.{k}": v
        for k, v in figures.items()
        if v is not None and (not isinstance(v, list) or v)
    }
