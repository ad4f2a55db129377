"""Side-by-side benchmark runs: every config on the same items, in one run.

Configs are named by the shorthand of ``promptslim.bench.configs`` (``baseline``,
``compress:extractive@0.33``, ``prefix+retrieval``, a config file...). For each item, every
config runs back to back (so load drift hits them alike): the pipeline slims the request, the
model backend measures the slimmed prompt, the metrics score the answer. Results are numbers
(``promptslim.bench.results``); ``report`` formats them.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from ..errors import BackendError, BackendUnavailable, PromptSlimError
from ..memo import clear_memos
from .backends import Measurement, ModelBackend
from .configs import BASELINE, FULL_STAGES, BenchConfig, build_config, parse_configs
from .datasets import BenchItem, LoadedDataset
from .metrics import best_subspan_em, evidence_retention, token_f1
from .results import ItemResult, segment_tokens, summarise

__all__ = [
    "BASELINE",
    "FULL_STAGES",
    "BenchConfig",
    "BenchRun",
    "ItemResult",
    "Progress",
    "build_config",
    "cold_start",
    "parse_configs",
    "run_bench",
    "segment_tokens",
    "summarise",
]


# ---------------------------------------------------------------- one item


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
        cold_start()
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
    summary["dataset"] = {
        "name": dataset.name,
        "items": len(dataset.items),
        "skipped": dataset.skipped,
    }
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


def cold_start() -> None:
    """Forget every text seen so far, as a new process would (models stay loaded): each config
    then meets an item's documents unseen. Otherwise a config run after another would find their
    embeddings, token counts and terms memoised and look cheaper than it is per new request."""
    clear_memos()
    embeddings = sys.modules.get("promptslim.backends.embeddings")
    if embeddings is not None:  # never import it (and torch) just to clear it
        embeddings.EmbeddingService.clear_all_caches()
