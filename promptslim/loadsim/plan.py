"""From a TTFT SLO to a Budget: the largest prompt per request that the simulated server serves
within ``ttft_p99_s`` at a given concurrency, split across the prompt's segments.

The search binary-searches the largest budget ``B`` whose simulated TTFT P99 meets the SLO.
Each step simulates the stream the pipeline sends at ``B`` (``slim``: the planned stages run
on the dataset's requests under ``B``, see :func:`pipeline_stream`), or, without ``slim``,
every prompt capped at its first ``B`` tokens (so the stable prefix and its cache hits are
kept, as promptslim keeps them). Capping costs one simulation a step instead of one pipeline
run per request, but it is pessimistic: the pipeline reaches ``B`` by relevance and in whole
turns, and sends fewer tokens than ``B`` for many requests. On the seed's scenario
(``benchmarks/scenario_h200.py --plan 2``) the capped plan asked for a P99 2x lower got 3.1x,
paying in answers for the tokens it did not need to cut.

``B`` is then split: the fixed part (stable prefix and the last user message, which promptslim
never cuts) as the dataset has it, and the rest between history and documents in the
proportion the dataset uses them. ``Plan.config()`` is a pipeline config that
``Pipeline.from_config`` accepts: the total, and the split as the history share of what the
fixed part leaves (a share, so that a request lacking one segment passes its part on).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ..bench.datasets import load_dataset
from ..bench.results import segment_tokens
from ..errors import BudgetInfeasible, ConfigError
from ..pipeline import Pipeline
from ..stats import percentile
from ..types import Budget
from .costmodel import CostModel
from .engine import ServerConfig, SimRequest, simulate_server
from .workload import extend_stream, load_prompts, prompt_tokens

__all__ = [
    "PLAN_STAGES",
    "Plan",
    "Slimmer",
    "dataset_profile",
    "pipeline_stream",
    "plan_budget",
    "write_config",
]

#: the stages a planned config runs, in pipeline order
PLAN_STAGES: tuple[str, ...] = ("prefix", "history", "retrieval", "compress")

#: the prompt stream (token arrays) a pipeline sends under a total budget of so many tokens
Slimmer = Callable[[int], "Sequence[npt.NDArray[np.uint64]]"]


@dataclass(frozen=True)
class Plan:
    """A prompt budget per request and the TTFT P99 the simulation gives it (seconds)."""

    total: int
    prefix: int
    query: int
    history: int
    documents: int
    ttft_p99_s: float
    slo_p99_s: float
    concurrency: int
    unconstrained: bool  # the SLO holds at the longest prompt's budget: no budget binds
    search: str = "cap"  # "pipeline": each step simulated what the pipeline sends at the budget
    history_share: float | None = (
        None  # of the flexible part; None: history / (history + documents)
    )

    def config(self) -> dict[str, Any]:
        """A pipeline config: the Budget and the stages that meet it.

        The split goes in as ``history_share``, not as hard caps: the SLO bounds each request's
        total, and a request without documents (a chat turn in a stream that mixes chat and
        RAG) may then give their share to its history, and the other way round. A request whose
        fixed part is over the budget goes as small as the stages make it (``best_effort``), as
        the search simulated it, instead of being refused."""
        share = self.history_share
        if share is None:
            reducible = self.history + self.documents
            share = self.history / reducible if reducible else 0.5
        return _config_for(self.total, share)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _config_for(total: int, share: float) -> dict[str, Any]:
    """The planned stages under a total budget, ``share`` of its flexible part for history."""
    return {
        "budget": {"total": total, "history_share": round(share, 3)},
        "stages": [{"name": name} for name in PLAN_STAGES],
        "on_infeasible": "best_effort",
    }


def _history_share(segments: Mapping[str, float]) -> float:
    """History's part of what history and documents use in the dataset (0.5 with neither),
    rounded as a config writes it: the search runs with the share the config will hold."""
    want_h, want_d = segments.get("history", 0.0), segments.get("documents", 0.0)
    return round(want_h / (want_h + want_d), 3) if want_h + want_d > 0 else 0.5


def _p99(
    prompts: Sequence[npt.NDArray[np.uint64]],
    cap: int,
    *,
    cost: CostModel,
    server: ServerConfig,
    concurrency: int,
    output_tokens: int,
    slim: Slimmer | None = None,
) -> float:
    sent = slim(cap) if slim is not None else [p[:cap] for p in prompts]
    reqs = [SimRequest(p, output_tokens) for p in sent]
    run = simulate_server(reqs, cost=cost, server=server, concurrency=concurrency)
    return percentile([r.ttft_s for r in run.requests], 99)


def plan_budget(
    prompts: Sequence[npt.NDArray[np.uint64]],
    *,
    cost: CostModel,
    slo_p99_s: float,
    concurrency: int,
    segments: Mapping[str, float],
    server: ServerConfig | None = None,
    output_tokens: int = 32,
    slim: Slimmer | None = None,
) -> Plan:
    """The largest per-request budget meeting ``slo_p99_s`` (see the module docstring).

    ``segments``: mean tokens per segment of the dataset (``prefix``, ``history``,
    ``documents``, ``query``, as ``promptslim.bench.results.segment_tokens`` counts them).
    ``slim``: the stream the pipeline sends under a budget (:func:`pipeline_stream`); without
    it ``prompts`` are capped instead. Raises ``BudgetInfeasible`` when even the fixed part
    alone misses the SLO.
    """
    if not 0 < slo_p99_s < float("inf"):
        raise ConfigError(f"expected a TTFT SLO > 0 s, got {slo_p99_s!r}", field="ttft_p99")
    if not prompts:
        raise ConfigError("no prompts to plan with", field="dataset")
    server = server or ServerConfig()
    kw: dict[str, Any] = {
        "cost": cost,
        "server": server,
        "concurrency": concurrency,
        "output_tokens": output_tokens,
        "slim": slim,
    }
    search = "cap" if slim is None else "pipeline"
    fixed = max(1, round(segments.get("prefix", 0) + segments.get("query", 0)))
    longest = max(len(p) for p in prompts)
    p99_long = _p99(prompts, longest, **kw)
    if p99_long <= slo_p99_s:
        return _split(longest, fixed, p99_long, slo_p99_s, concurrency, segments, True, search)
    p99_fixed = _p99(prompts, fixed, **kw)
    if p99_fixed > slo_p99_s:
        raise BudgetInfeasible(
            f"even the fixed part ({fixed} tokens: stable prefix and query) gives a simulated "
            f"TTFT P99 of {p99_fixed:.3f} s at concurrency {concurrency}, over {slo_p99_s} s",
            minimum=fixed,
        )
    lo, hi, best = fixed, longest, p99_fixed  # lo meets the SLO, hi does not
    while hi - lo > 1:  # bounded: log2(longest) simulations
        mid = (lo + hi) // 2
        p99 = _p99(prompts, mid, **kw)
        if p99 <= slo_p99_s:
            lo, best = mid, p99
        else:
            hi = mid
    return _split(lo, fixed, best, slo_p99_s, concurrency, segments, False, search)


def _split(
    total: int,
    fixed: int,
    p99: float,
    slo: float,
    concurrency: int,
    segments: Mapping[str, float],
    unconstrained: bool,
    search: str,
) -> Plan:
    prefix = round(segments.get("prefix", 0))
    query = round(segments.get("query", 0))
    reducible = max(0, total - max(fixed, prefix + query))
    share = _history_share(segments)
    history = round(reducible * share)
    return Plan(
        total=total,
        prefix=prefix,
        query=query,
        history=history,
        documents=reducible - history,
        ttft_p99_s=p99,
        slo_p99_s=slo,
        concurrency=concurrency,
        unconstrained=unconstrained,
        search=search,
        history_share=share,
    )


def pipeline_stream(
    dataset: str,
    *,
    segments: Mapping[str, float],
    requests: int,
    seed: int = 0,
    max_items: int = 200,
    stages: Sequence[Mapping[str, Any]] | None = None,
) -> Slimmer:
    """What ``plan_budget(slim=...)`` simulates at each step: the dataset's requests
    (``max_items`` distinct ones, extended to ``requests`` as ``load_prompts`` extends them)
    run through ``stages`` (default: the planned ones) under a total budget, with history's
    share taken from ``segments``. The stages run under ``on_infeasible="best_effort"``: a
    request whose fixed part the budget cannot hold goes in as small as they make it, as a
    server would be sent it. Each budget's stream is computed once."""
    items = load_dataset(dataset, limit=min(requests, max_items), seed=seed).items
    if not items:
        raise ConfigError(f"no readable items in {dataset!r}", field="dataset")
    share = _history_share(segments)
    config = _config_for(1, share)
    if stages is not None:
        config["stages"] = [dict(stage) for stage in stages]
    pipeline = Pipeline.from_config(config)
    streams: dict[int, list[npt.NDArray[np.uint64]]] = {}

    def slim(total: int) -> list[npt.NDArray[np.uint64]]:
        if total not in streams:
            budget = Budget(total=total, history_share=share)
            sent = [prompt_tokens(pipeline.run(item.request, budget).request) for item in items]
            streams[total] = extend_stream(sent, requests, seed=seed)
        return streams[total]

    return slim


def write_config(config: Mapping[str, Any], path: str | Path) -> None:
    """Write a pipeline config as JSON, or TOML when ``path`` ends in ``.toml``."""
    path = Path(path)
    if path.suffix != ".toml":
        path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        return
    lines = [f"on_infeasible = {json.dumps(config['on_infeasible'])}", "", "[budget]"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in config["budget"].items()]
    for stage in config["stages"]:
        lines += ["", "[[stages]]", *(f"{k} = {json.dumps(v)}" for k, v in stage.items())]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def dataset_profile(
    dataset: str, *, requests: int, seed: int = 0, max_items: int = 200
) -> tuple[list[npt.NDArray[np.uint64]], dict[str, float]]:
    """The baseline prompt stream of ``dataset`` (``requests`` long) and its mean tokens per
    segment: what ``plan_budget`` takes."""
    prompts = load_prompts(
        dataset, configs=["baseline"], requests=requests, seed=seed, max_items=max_items
    )["baseline"]
    items = load_dataset(dataset, limit=min(requests, max_items), seed=seed).items
    counts = [segment_tokens(item.request) for item in items]
    means = {k: sum(c[k] for c in counts) / len(counts) for k in counts[0]}
    return prompts, means
