"""``validate_simulator.py``'s prediction side: the same closed-loop stream through
``simulate_server`` on a batch-1 server, each request's service cost drawn from the measured
spread, and the fits over concurrency-1 rounds."""

from __future__ import annotations

import statistics
from typing import Any

from promptslim.loadsim import (
    CostModel,
    ServerConfig,
    ServerTiming,
    SimRequest,
    fit_single_stream,
    simulate_server,
)
from promptslim.stats import percentile

__all__ = [
    "REPLICAS",
    "detail",
    "fit_rounds",
    "p50_p99",
    "predict",
    "rel_error",
    "simulate",
    "spread_of",
]

#: simulations per prediction, service costs drawn from the measured spread
REPLICAS = 400


def simulate(
    records: list[dict[str, Any]],
    cost: CostModel,
    *,
    concurrency: int,
    template_tokens: int,
    spread: list[float] | None = None,
    seed: int = 0,
) -> list[float]:
    """TTFTs of the same closed-loop stream on a batch-1 server with ``cost``; with ``spread``,
    each request's ``cost_scale`` is drawn from it (with replacement)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    ordered = sorted(records, key=lambda r: r["index"])  # the order the clients sent them
    scales = rng.choice(spread, size=len(ordered)) if spread else [1.0] * len(ordered)
    reqs = [
        # random ids: no two prompts share a block, as the unique first line ensures for real
        SimRequest(
            rng.integers(0, 2**40, size=r["prompt_tokens"] + template_tokens, dtype=np.uint64),
            max(1, r["output_tokens"]),
            float(k),
        )
        for r, k in zip(ordered, scales, strict=True)
    ]
    server = ServerConfig(
        max_num_seqs=1, max_batched_tokens=1 << 20, chunked_prefill=False, prefix_cache=False
    )
    run = simulate_server(reqs, cost=cost, server=server, concurrency=concurrency)
    return [t.ttft_s for t in run.requests]


def predict(
    records: list[dict[str, Any]],
    cost: CostModel,
    *,
    concurrency: int,
    template_tokens: int,
    spread: list[float],
) -> dict[str, float]:
    """The P50 and P99 the simulator expects for this stream: their mean over ``REPLICAS``
    runs, each request's service cost drawn from ``spread``. A P99 over 16 requests is the
    tail of the service times as much as of the queue; the curve alone (every request at its
    median cost) cannot produce it, even at concurrency 1."""
    runs = [
        p50_p99(
            simulate(
                records,
                cost,
                concurrency=concurrency,
                template_tokens=template_tokens,
                spread=spread,
                seed=seed,
            )
        )
        for seed in range(REPLICAS)
    ]
    return {q: statistics.fmean(r[q] for r in runs) for q in ("p50", "p99")}


def spread_of(rounds: list[tuple[list[dict[str, Any]], list[ServerTiming] | None]]) -> list[float]:
    """Each concurrency-1 request's prefill cost per token relative to the median of them:
    from the server's own prompt-eval timings when every round has them, else from the
    client's TTFT."""
    if all(timings for _, timings in rounds):
        costs = [t.prefill_s / t.prefill_tokens for _, timings in rounds for t in timings or ()]
    else:
        costs = [r["ttft_s"] / r["prompt_tokens"] for recs, _ in rounds for r in recs]
    mid = statistics.median(costs)
    return [c / mid for c in costs]


def detail(records: list[dict[str, Any]], simulated: list[float]) -> list[list[float]]:
    ordered = sorted(records, key=lambda r: r["index"])
    t0 = min(r["sent_clock_s"] for r in ordered)
    return [
        [round(r["sent_clock_s"] - t0, 3), round(r["ttft_s"], 3), round(s, 3)]
        for r, s in zip(ordered, simulated, strict=True)
    ]


def p50_p99(values: list[float]) -> dict[str, float]:
    return {"p50": percentile(values, 50), "p99": percentile(values, 99)}


def rel_error(sim: dict[str, float], meas: dict[str, float]) -> dict[str, float]:
    return {q: (sim[q] - meas[q]) / meas[q] for q in meas}


def fit_rounds(rounds: list[tuple[list[dict[str, Any]], list[ServerTiming] | None]]) -> Any:
    """``fit_single_stream`` over concurrency-1 rounds pooled (server timings used only when
    every round has them)."""
    records = [r for recs, _ in rounds for r in recs]
    paired = (
        [t for _, timings in rounds for t in timings or ()]
        if all(timings for _, timings in rounds)
        else None
    )
    return fit_single_stream(
        [r["prompt_tokens"] for r in records],
        [r["ttft_s"] for r in records],
        [r["tpot_s"] for r in records],
        paired,
    )
