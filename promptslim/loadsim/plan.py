"""From a TTFT SLO to a Budget: the largest prompt per request that the simulated server serves
within ``ttft_p99_s`` at a given concurrency, split across the prompt's segments.

The search caps every prompt of the stream at ``B`` tokens (its first ``B``, so the stable
prefix and its cache hits are kept, as promptslim keeps them) and binary-searches the largest
``B`` whose simulated TTFT P99 meets the SLO. Capping is a stand-in for what the pipeline does
to reach ``B``; it costs one simulation per step instead of one pipeline run per request.

``B`` is then split: the fixed part (stable prefix and the last user message, which promptslim
never cuts) as the dataset has it, and the rest between history and documents in the
proportion the dataset uses them. ``Plan.config()`` is a pipeline config that
``Pipeline.from_config`` accepts: the total, and the split as the history share of what the
fixed part leaves (a share, so that a request lacking one segment passes its part on).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import BudgetInfeasible, ConfigError
from .costmodel import CostModel
from .engine import ServerConfig, SimRequest, simulate_server

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["PLAN_STAGES", "Plan", "dataset_profile", "plan_budget", "write_config"]

#: the stages a planned config runs, in pipeline order
PLAN_STAGES: tuple[str, ...] = ("prefix", "history", "retrieval", "compress")


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
    unconstrained: bool  # the SLO holds even with the prompts uncapped

    def config(self) -> dict[str, Any]:
        """A pipeline config: the Budget and the stages that meet it.

        The split goes in as ``history_share``, not as hard caps: the SLO bounds each request's
        total, and a request without documents (a chat turn in a stream that mixes chat and
        RAG) may then give their share to its history, and the other way round."""
        reducible = self.history + self.documents
        share = self.history / reducible if reducible else 0.5
        return {
            "budget": {"total": self.total, "history_share": round(share, 3)},
            "stages": [{"name": name} for name in PLAN_STAGES],
            "on_infeasible": "raise",
        }

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _p99(
    prompts: Sequence[npt.NDArray[np.uint64]],
    cap: int,
    *,
    cost: CostModel,
    server: ServerConfig,
    concurrency: int,
    output_tokens: int,
) -> float:
    from ..bench.metrics import percentile

    reqs = [SimRequest(p[:cap], output_tokens) for p in prompts]
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
) -> Plan:
    """The largest per-request budget meeting ``slo_p99_s`` (see the module docstring).

    ``segments``: mean tokens per segment of the dataset (``prefix``, ``history``,
    ``documents``, ``query``, as ``promptslim.bench.runner.segment_tokens`` counts them).
    Raises ``BudgetInfeasible`` when even the fixed part alone misses the SLO.
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
    }
    fixed = max(1, round(segments.get("prefix", 0) + segments.get("query", 0)))
    longest = max(len(p) for p in prompts)
    p99_long = _p99(prompts, longest, **kw)
    if p99_long <= slo_p99_s:
        return _split(longest, fixed, p99_long, slo_p99_s, concurrency, segments, True)
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
    return _split(lo, fixed, best, slo_p99_s, concurrency, segments, False)


def _split(
    total: int,
    fixed: int,
    p99: float,
    slo: float,
    concurrency: int,
    segments: Mapping[str, float],
    unconstrained: bool,
) -> Plan:
    prefix = round(segments.get("prefix", 0))
    query = round(segments.get("query", 0))
    reducible = max(0, total - max(fixed, prefix + query))
    want_h, want_d = segments.get("history", 0.0), segments.get("documents", 0.0)
    share = want_h / (want_h + want_d) if want_h + want_d > 0 else 0.5
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
    )


def write_config(config: Mapping[str, Any], path: str | Path) -> None:
    """Write a pipeline config as JSON, or TOML when ``path`` ends in ``.toml``."""
    import json

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
    from ..bench.datasets import load_dataset
    from ..bench.runner import segment_tokens
    from .workload import load_prompts

    prompts = load_prompts(
        dataset, configs=["baseline"], requests=requests, seed=seed, max_items=max_items
    )["baseline"]
    items = load_dataset(dataset, limit=min(requests, max_items), seed=seed).items
    counts = [segment_tokens(item.request) for item in items]
    means = {k: sum(c[k] for c in counts) / len(counts) for k in counts[0]}
    return prompts, means
