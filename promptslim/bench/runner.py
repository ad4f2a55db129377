"""Side-by-side benchmark runs: every config on the same items, in one run.

Configs are named by a small spec language (``parse_configs``)::

    baseline                          the request as it came (no stages)
    prefix | history | retrieval | compress     one stage with its defaults
    compress:extractive@0.33          STAGE[:OPTION...][@RATE]
    retrieval:scorer=bm25:max_k=5     OPTION is KEY=VALUE, or a bare VALUE for the stage's
                                      main choice (compressor, scorer, strategy, policy...)
    prefix+retrieval+compress@0.5     stages chained into one pipeline
    full                              prefix+history+retrieval+compress with defaults
    path/to/pipeline.json             a pipeline config file (JSON, TOML or YAML)

For each item, every config runs back to back (so load drift hits them alike): the pipeline
slims the request, the model backend measures the slimmed prompt, the metrics score the answer.
Results are numbers; ``report`` formats them.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ..errors import BackendError, BackendUnavailable, ConfigError, PromptSlimError
from ..pipeline import Pipeline
from ..registry import STAGES
from ..stats import mean_ci, paired_bootstrap_ci, percentile
from ..tokens import count_documents, count_message, get_counter
from ..types import Request
from .backends import Measurement, ModelBackend
from .datasets import BenchItem, LoadedDataset
from .metrics import best_subspan_em, evidence_retention, token_f1

__all__ = [
    "BASELINE",
    "BenchConfig",
    "BenchRun",
    "ItemResult",
    "Progress",
    "build_config",
    "parse_configs",
    "run_bench",
    "summarise",
]

BASELINE = "baseline"
FULL_STAGES = ("prefix", "history", "retrieval", "compress")
#: keyword a bare ``:VALUE`` sets, the first one the stage accepts
MAIN_OPTIONS = ("compressor", "scorer", "strategy", "policy", "summariser", "method", "mode")
#: keyword ``@RATE`` sets
RATE_OPTIONS = ("rate", "ratio")


# ---------------------------------------------------------------- configs


@dataclass(frozen=True)
class BenchConfig:
    """A named pipeline to benchmark; the baseline has no stages."""

    label: str
    pipeline: Pipeline


def _value(text: str) -> Any:
    """``0.33`` -> float, ``true`` -> bool, ``[1,2]`` -> list; anything else stays a string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _stage_class(name: str, spec: str) -> type:
    if name not in STAGES:
        raise ConfigError(
            f"unknown stage {name!r} in {spec!r}; known: {', '.join(STAGES.names())}",
            field="configs",
        )
    try:
        return STAGES.get(name)
    except ImportError as exc:
        # a built-in stage whose module is not in this checkout yet
        raise ConfigError(
            f"stage {name!r} in {spec!r} is not importable yet ({exc})", field="configs"
        ) from exc


def _accepted(cls: type) -> list[str]:
    import inspect

    return [
        p
        for p, s in inspect.signature(cls.__init__).parameters.items()  # type: ignore[misc]
        if p != "self" and s.kind not in (s.VAR_KEYWORD, s.VAR_POSITIONAL)
    ]


def _build_stage(part: str, spec: str) -> Any:
    body, at, rate = part.partition("@")
    name, *options = body.split(":")
    cls = _stage_class(name, spec)
    accepted = _accepted(cls)
    kwargs: dict[str, Any] = {}
    for option in options:
        key, eq, value = option.partition("=")
        if not eq:
            main = next((k for k in MAIN_OPTIONS if k in accepted), None)
            if main is None:
                raise ConfigError(
                    f"stage {name!r} has no main option for {option!r} in {spec!r}; use KEY=VALUE "
                    f"(options: {', '.join(accepted) or 'none'})",
                    field="configs",
                )
            key, value = main, option
        if key not in accepted:
            raise ConfigError(
                f"unknown option {key!r} for stage {name!r} in {spec!r}; "
                f"known: {', '.join(accepted) or 'none'}",
                field="configs",
            )
        kwargs[key] = _value(value)
    if at:
        rate_key = next((k for k in RATE_OPTIONS if k in accepted), None)
        if rate_key is None:
            raise ConfigError(f"stage {name!r} takes no @RATE (in {spec!r})", field="configs")
        try:
            kwargs[rate_key] = float(rate)
        except ValueError:
            raise ConfigError(f"bad rate {rate!r} in {spec!r}: expected a number", field="configs") from None
    try:
        return cls(**kwargs)
    except ConfigError as exc:
        raise ConfigError(f"{spec!r}: {exc}", field="configs") from exc
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{spec!r}: {exc}", field="configs") from exc


def build_config(spec: str) -> BenchConfig:
    """One config from its spec (see the module docstring)."""
    spec = spec.strip()
    if not spec:
        raise ConfigError("empty config name", field="configs")
    if spec == BASELINE:
        return BenchConfig(BASELINE, Pipeline([]))
    path = Path(spec)
    if path.suffix in (".json", ".toml", ".yaml", ".yml") or path.is_file():
        return BenchConfig(path.stem, Pipeline.from_config(path))
    parts = list(FULL_STAGES) if spec == "full" else spec.split("+")
    return BenchConfig(spec, Pipeline([_build_stage(p, spec) for p in parts]))


def parse_configs(text: str | Sequence[str]) -> list[BenchConfig]:
    """Configs from ``"baseline,prefix,..."``; the baseline is added first if missing (every
    delta is against it). Labels must be unique."""
    specs = [s.strip() for s in text.split(",")] if isinstance(text, str) else list(text)
    specs = [s for s in specs if s]
    if BASELINE not in specs:
        specs.insert(0, BASELINE)
    configs = [build_config(s) for s in specs]
    labels = [c.label for c in configs]
    dupes = sorted({x for x in labels if labels.count(x) > 1})
    if dupes:
        raise ConfigError(f"config given twice: {', '.join(dupes)}", field="configs")
    return configs


# ---------------------------------------------------------------- per-item results


@dataclass
class ItemResult:
    """One item under one config. Times in seconds; None where not measured."""

    config: str
    item_id: str
    error: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    segments_in: dict[str, int] = field(default_factory=dict)
    segments_out: dict[str, int] = field(default_factory=dict)
    slim_s: float = 0.0
    prompt_tokens: int | None = None
    prefill_s: float | None = None
    ttft_s: float | None = None
    generate_s: float | None = None
    cached_tokens: int | None = None
    #: (slim time + first-token time) / the baseline's first-token time on the same item
    net_ttft_ratio: float | None = None
    em: float | None = None
    f1: float | None = None
    evidence: float | None = None
    gold_logprob: float | None = None
    prediction: str | None = None
    #: the config sent the model a prompt byte-identical to an earlier config's on this item,
    #: so that config's measurement stands for this one too (see ``run_item``)
    reused_measurement: bool = False

    @property
    def first_token_s(self) -> float | None:
        return self.prefill_s if self.prefill_s is not None else self.ttft_s

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def segment_tokens(request: Request) -> dict[str, int]:
    """Tokens per segment: the stable prefix, the history between it and the last user
    message, the documents, and the last user message (the query)."""
    counter = get_counter(request.tokenizer)
    messages = request.messages
    prefix_end = request.prefix_end()
    last = request.last_user_index()
    query = count_message(messages[last], counter) if last is not None else 0
    history = sum(
        count_message(m, counter) for i, m in enumerate(messages) if i >= prefix_end and i != last
    )
    return {
        "prefix": sum(count_message(m, counter) for m in messages[:prefix_end]),
        "history": history,
        "documents": count_documents(request.documents, counter),
        "query": query,
    }


def _context_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """Everything the model reads except the last user message (the question): where the
    evidence must survive."""
    last = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=None)
    parts: list[str] = []
    for i, m in enumerate(messages):
        if i == last:
            continue
        content = m.get("content")
        if isinstance(content, list):
            content = "\n".join(p.get("text") or "" for p in content if isinstance(p, dict))
        parts.append(content or "")
        for call in m.get("tool_calls") or ():
            parts.append(str(call.get("function", {}).get("arguments", "")))
    return "\n".join(parts)


def run_item(
    item: BenchItem,
    config: BenchConfig,
    backend: ModelBackend,
    measured: dict[str, Measurement] | None = None,
) -> ItemResult:
    """Slim, measure and score one item under one config; failures become ``error``.

    ``measured`` (one dict per item, shared by its configs) maps a prompt's canonical JSON to
    its model measurement. A config whose prompt is byte-identical to one already measured
    (a stage with nothing to do on this item) reuses it instead of paying for the model again:
    greedy decoding gives the same answer, and a second prefill would only be another sample of
    the same timing -- or, on a server with a prefix cache, a cache hit the first config paid
    for. The row says so (``reused_measurement``); the slimming time is always its own."""
    row = ItemResult(config=config.label, item_id=item.id)
    row.segments_in = segment_tokens(item.request)
    try:
        # every config meets the item's documents unseen: otherwise a config run after another
        # would find its embeddings cached and look cheaper than it is per new request
        _clear_embedding_caches()
        start = time.perf_counter()
        result = config.pipeline.run(item.request)
        row.slim_s = time.perf_counter() - start
    except PromptSlimError as exc:
        row.error = f"{type(exc).__name__}: {exc}"
        return row
    row.tokens_in = result.report.tokens_in
    row.tokens_out = result.report.tokens_out
    row.segments_out = segment_tokens(result.request)
    messages = result.to_openai()["messages"]
    row.evidence = evidence_retention(_context_text(messages), item.answers)
    key = json.dumps(messages, sort_keys=True, ensure_ascii=False)
    m = measured.get(key) if measured is not None else None
    if m is not None:
        row.reused_measurement = True
    else:
        try:
            m = backend.measure(messages, answers=item.answers)
        except BackendError as exc:
            row.error = f"{type(exc).__name__}: {exc}"
            return row
        if measured is not None:
            measured[key] = m
    row.prompt_tokens = m.prompt_tokens
    row.prefill_s, row.ttft_s, row.generate_s = m.prefill_s, m.ttft_s, m.generate_s
    row.cached_tokens = m.cached_tokens
    row.gold_logprob = m.gold_logprob
    row.prediction = m.answer
    row.em = best_subspan_em(m.answer, item.answers)
    row.f1 = token_f1(m.answer, item.answers)
    return row


# ---------------------------------------------------------------- progress


class Progress:
    """A progress bar over a run's steps (tqdm) on a stream, stderr by default:
    ``label [done/total] pct elapsed ETA note``. Redrawn in place; a log file gets each redraw."""

    #: the line tqdm draws: counts first, so a log line reads the same as a terminal's
    FORMAT = (
        "{desc} [{n_fmt}/{total_fmt}] {percentage:3.0f}% elapsed {elapsed} ETA {remaining}{postfix}"
    )

    def __init__(self, total: int, *, stream: TextIO | None = None, label: str = "bench") -> None:
        try:
            from tqdm import tqdm
        except ImportError as exc:
            raise BackendUnavailable("tqdm (for the bench progress bar)", extra="bench") from exc
        self.total = total
        self._bar = tqdm(
            total=total,
            desc=label,
            file=stream if stream is not None else sys.stderr,
            bar_format=self.FORMAT,
            mininterval=0,  # one redraw a step: a step is a whole item run, seconds apart
            dynamic_ncols=False,
            leave=True,
        )

    @property
    def done(self) -> int:
        return int(self._bar.n)

    def restart(self) -> None:
        """Time the ETA from now (after a warm-up that is not one of the steps)."""
        self._bar.reset(total=self.total)

    def step(self, note: str = "") -> None:
        self._bar.set_postfix_str(note, refresh=False)
        self._bar.update(1)
        if self.done >= self.total:
            self._bar.close()


# ---------------------------------------------------------------- a run


@dataclass
class BenchRun:
    """Everything a run produced: per-item rows, the aggregate summary, and provenance."""

    rows: list[ItemResult]
    summary: dict[str, Any]


def run_bench(
    dataset: LoadedDataset,
    backend: ModelBackend,
    configs: Sequence[BenchConfig],
    *,
    seed: int = 0,
    progress: Progress | None = None,
    on_row: Callable[[ItemResult], None] | None = None,
    meta: Mapping[str, Any] | None = None,
    warm_up: bool = True,
    done: Sequence[ItemResult] = (),
) -> BenchRun:
    """Run every config on every item (configs back to back per item); summarise.

    Each pipeline first runs once on the first item, unrecorded: models a stage loads on first
    use (embedders, scorers) load once per process in a service, so they are not per-request
    cost.

    ``done``: rows from an earlier, interrupted run of the same command (``read_rows``). An item
    with a row for every config is not run again and its rows count in the summary; an item
    only partly done is run again whole, so each item's configs stay back to back."""
    labels = [c.label for c in configs]
    finished = _finished_items(done, labels)
    rows: list[ItemResult] = [r for r in done if r.item_id in finished and r.config in labels]
    todo = [item for item in dataset.items if item.id not in finished]
    if warm_up and todo:
        for config in configs:
            try:
                config.pipeline.run(todo[0].request)
            except PromptSlimError:
                pass  # the real run records it
    if progress is not None:
        progress.restart()  # the ETA is about items, not the warm-up
    for item in todo:
        baseline_first: float | None = None
        measured: dict[str, Measurement] = {}
        for config in configs:
            row = run_item(item, config, backend, measured)
            if config.label == BASELINE:
                baseline_first = row.first_token_s
            first = row.first_token_s
            if first is not None and baseline_first:
                row.net_ttft_ratio = (row.slim_s + first) / baseline_first
            rows.append(row)
            if on_row is not None:
                on_row(row)
            if progress is not None:
                progress.step(f"{item.id} {config.label}" + (" (error)" if row.error else ""))
    summary = summarise(rows, labels, seed=seed)
    summary["dataset"] = {"name": dataset.name, "items": len(dataset.items), "skipped": dataset.skipped}
    if finished:
        summary["resumed_items"] = len({r.item_id for r in rows} & finished)
    summary["backend"] = backend.describe()
    summary["seed"] = seed
    summary.update(meta or {})
    return BenchRun(rows, summary)


def _finished_items(rows: Sequence[ItemResult], labels: Sequence[str]) -> set[str]:
    """Ids of the items that have a row for every label."""
    seen: dict[str, set[str]] = {}
    for r in rows:
        seen.setdefault(r.item_id, set()).add(r.config)
    want = set(labels)
    return {item for item, got in seen.items() if want <= got}


def _clear_embedding_caches() -> None:
    import sys

    embeddings = sys.modules.get("promptslim.backends.embeddings")
    if embeddings is not None:  # never import it (and torch) just to clear it
        embeddings.EmbeddingService.clear_all_caches()


# ---------------------------------------------------------------- aggregation

#: quality metrics compared against the baseline (higher is better)
QUALITY = ("em", "f1", "evidence", "gold_logprob")


def _values(rows: Sequence[ItemResult], attr: str) -> list[float]:
    out = []
    for r in rows:
        v = getattr(r, attr)
        if v is not None:
            out.append(float(v))
    return out


def _paired(
    rows: Sequence[ItemResult], base: Mapping[str, ItemResult], attr: str
) -> tuple[list[float], list[float]]:
    treat, ctrl = [], []
    for r in rows:
        b = base.get(r.item_id)
        x = getattr(r, attr) if attr != "first_token_s" else r.first_token_s
        y = (getattr(b, attr) if attr != "first_token_s" else b.first_token_s) if b else None
        if x is not None and y is not None:
            treat.append(float(x))
            ctrl.append(float(y))
    return treat, ctrl


def summarise(rows: Sequence[ItemResult], labels: Sequence[str], *, seed: int = 0) -> dict[str, Any]:
    """Per config: counts, token reduction, timing percentiles, quality means with 95 %
    intervals, and deltas against the baseline with paired bootstrap 95 % intervals."""
    base = {r.item_id: r for r in rows if r.config == BASELINE and r.error is None}
    configs: dict[str, Any] = {}
    for label in labels:
        mine = [r for r in rows if r.config == label]
        ok = [r for r in mine if r.error is None]
        first = [r.first_token_s for r in ok if r.first_token_s is not None]
        slim = _values(ok, "slim_s")
        tokens_in = sum(r.tokens_in for r in ok)
        tokens_out = sum(r.tokens_out for r in ok)
        entry: dict[str, Any] = {
            "n": len(ok),
            "errors": len(mine) - len(ok),
            "tokens_in": tokens_in / len(ok) if ok else None,
            "tokens_out": tokens_out / len(ok) if ok else None,
            "token_ratio": tokens_out / tokens_in if tokens_in else None,
            "prompt_tokens": _mean(_values(ok, "prompt_tokens")),
            "segments_out": _segment_means(ok),
            "slim_ms": {k: v * 1e3 for k, v in _pcts(slim).items()},
            "first_token_s": _pcts(first),
            "generate_s": _pcts(_values(ok, "generate_s")),
            "cached_tokens": _mean(_values(ok, "cached_tokens")),
            "net_ttft_ratio": {
                "median": percentile(_values(ok, "net_ttft_ratio"), 50),
                "aggregate": _aggregate_ratio(ok, base),
            },
            "quality": {
                q: mean_ci(_values(ok, q), seed=seed).as_dict() for q in QUALITY if _values(ok, q)
            },
            "errors_sample": [r.error for r in mine if r.error][:3],
        }
        if label != BASELINE and base:
            deltas = {}
            for q in (*QUALITY, "first_token_s", "prompt_tokens"):
                treat, ctrl = _paired(ok, base, q)
                if treat:
                    deltas[q] = paired_bootstrap_ci(treat, ctrl, seed=seed).as_dict()
            entry["delta_vs_baseline"] = deltas
        configs[label] = entry
    return {"configs": configs, "order": list(labels)}


def _aggregate_ratio(rows: Sequence[ItemResult], base: Mapping[str, ItemResult]) -> float | None:
    """(total slim time + total first-token time) / total baseline first-token time, over the
    items both have: what the whole set costs, slimming included."""
    num = den = 0.0
    for r in rows:
        b = base.get(r.item_id)
        if r.first_token_s is None or b is None or b.first_token_s is None:
            continue
        num += r.slim_s + r.first_token_s
        den += b.first_token_s
    return num / den if den > 0 else None


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _pcts(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {}
    return {"p50": percentile(values, 50), "p95": percentile(values, 95), "p99": percentile(values, 99)}


def _segment_means(rows: Sequence[ItemResult]) -> dict[str, float]:
    if not rows:
        return {}
    keys = sorted({k for r in rows for k in r.segments_out})
    return {k: sum(r.segments_out.get(k, 0) for r in rows) / len(rows) for k in keys}
