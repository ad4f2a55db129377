"""What ``scenario_h200.py`` simulates: the public H200 figures and the Llama-3-8B shape, the
request stream (the bench datasets through each pipeline), the cost model (a measured curve or
the roofline), the KV cache it fits, and the quality delta read from a ``promptslim bench``
summary."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

from common import with_vectors
from summary import goal

from promptslim.loadsim import (
    CostModel,
    Hardware,
    extend_stream,
    prompt_tokens,
    roofline_cost,
)
from promptslim.loadsim.roofline import LLAMA3_8B

GOAL_P99_RATIO = goal("scenario_h200", "p_ratio_baseline_over_promptslim.p99").target
GOAL_QUALITY_POINTS = -1.0
SOURCE_URL = (
    "https://github.com/stas00/ml-engineering/blob/master/insights/when-to-upgrade-gpus/README.md"
)
H200_SXM = Hardware(name="H200 SXM (public figures)", peak_flops=989e12, hbm_bytes_per_s=4.8e12)
H200_HBM_BYTES = 141e9
#: vLLM keeps 90 % of GPU memory for weights + KV cache (gpu_memory_utilization default)
GPU_MEMORY_UTILISATION = 0.9
DATASETS = ("builtin:rag", "builtin:chat")


# ---------------------------------------------------------------- the request stream


def build_streams(
    items: int,
    requests: int,
    seed: int,
    pipelines: dict[str, Any],
    vectors: bool,
    budget: Any = None,
) -> dict[str, Any]:
    """Per config (``baseline`` and one per pipeline): the prompt token arrays (rag and chat
    alternated), the slimming times per pipeline, and the mean tokens per segment of the
    requests as sent (what ``plan_budget`` splits a budget by). ``budget``: run the pipelines
    under it instead of their own."""
    from promptslim.backends.embeddings import EmbeddingService
    from promptslim.bench.datasets import load_dataset
    from promptslim.bench.runner import segment_tokens

    # a private, cacheless service: the pipeline's own embedding cache sees none of it
    store = EmbeddingService(max_seq_length=128, cache_size=0) if vectors else None
    labels = ["baseline", *pipelines]
    per: dict[str, dict[str, list[Any]]] = {label: {} for label in labels}
    slim_s: dict[str, list[float]] = {label: [] for label in pipelines}
    segments: list[dict[str, int]] = []
    half = (requests + len(DATASETS) - 1) // len(DATASETS)
    for spec in DATASETS:
        loaded = load_dataset(spec, limit=items, seed=seed).items
        prompts: dict[str, list[Any]] = {label: [] for label in labels}
        for item in loaded:
            prompts["baseline"].append(prompt_tokens(item.request))
            segments.append(segment_tokens(item.request))
            request = with_vectors(item.request, store) if store is not None else item.request
            for label, pipeline in pipelines.items():
                t0 = time.perf_counter()
                slimmed = pipeline.run(request, budget).request
                slim_s[label].append(time.perf_counter() - t0)
                prompts[label].append(prompt_tokens(slimmed))
        for label in labels:
            per[label][spec] = extend_stream(prompts[label], half, seed=seed)
    streams = {
        label: [p for pair in zip(*by_ds.values(), strict=True) for p in pair][:requests]
        for label, by_ds in per.items()
    }
    means = {k: statistics.fmean(s[k] for s in segments) for k in segments[0]}
    return {"streams": streams, "slim_s": slim_s, "segments": means}


# ---------------------------------------------------------------- the cost model


def load_cost_curve(path: Path) -> tuple[CostModel, str]:
    """A measured prefill curve: gpu_prefill.py JSON (its ``cost_model`` points, or points from
    its per-config medians in older files) or a loadsim cost model file."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(data, dict) and data.get("benchmark") == "gpu_prefill":
        gpu = data.get("gpu", "GPU")
        if isinstance(data.get("cost_model"), dict):
            points = data["cost_model"]["points"]
        else:
            points = [
                [c["tokens_mean"], c["prefill_ms_p50"] / 1000]
                for c in data.get("configs", {}).values()
            ]
        return CostModel.from_dict({"points": points}), (
            f"measured: gpu_prefill.py on {gpu}, {data.get('model', '')} "
            f"({len(points)} prefill points from {path}); decode from the roofline"
        )
    return CostModel.from_dict(data), f"measured: cost model file {path}"


def cost_for(context: float, *, mfu: float, mbu: float, measured: CostModel | None) -> CostModel:
    """Roofline costs for a stream whose sequences hold ``context`` tokens while decoding;
    a measured prefill curve replaces the roofline's prefill terms (and decode, if it has one)."""
    hw = Hardware(H200_SXM.name, H200_SXM.peak_flops, H200_SXM.hbm_bytes_per_s, mfu=mfu, mbu=mbu)
    cost = roofline_cost(LLAMA3_8B, hw, context=context)
    if measured is None:
        return cost
    decode = (
        (measured.decode_step_s, measured.decode_per_seq_s)
        if measured.decode_step_s > 0
        else (cost.decode_step_s, cost.decode_per_seq_s)
    )
    return CostModel(measured.a, measured.b, measured.c, *decode)


def kv_cache_blocks(block_size: int) -> int:
    """Prefix-cache capacity: the KV memory vLLM has beside the weights, in blocks."""
    free = GPU_MEMORY_UTILISATION * H200_HBM_BYTES - LLAMA3_8B.params * LLAMA3_8B.bytes_per_param
    return int(free / LLAMA3_8B.kv_bytes_per_token / block_size)


# ---------------------------------------------------------------- quality from promptslim bench


def quality_delta(path: Path, *, config: str | None, metric: str) -> dict[str, Any]:
    """The config-minus-baseline delta of ``metric`` (in points, x100) with its interval."""
    summary = json.loads(path.read_text(encoding="utf-8"))
    configs = summary.get("configs", {})
    others = [k for k in configs if k != "baseline"]
    label = config or (others[0] if len(others) == 1 else None)
    if label is None or label not in configs:
        raise SystemExit(f"--bench-config: one of {', '.join(others)} (found {config!r})")
    delta = configs[label].get("delta_vs_baseline", {}).get(metric)
    if delta is None:
        raise SystemExit(f"{path}: no {metric} delta for {label!r}")
    points = {k: 100 * delta[k] for k in ("mean", "low", "high")}
    return {
        "summary": str(path),
        "config": label,
        "metric": metric,
        "n": delta.get("n"),
        "delta_points": points,
        "dataset": summary.get("dataset"),
        "backend": summary.get("backend"),
        "goal_points": GOAL_QUALITY_POINTS,
        "met": points["mean"] >= GOAL_QUALITY_POINTS,
        "met_by_interval": points["low"] >= GOAL_QUALITY_POINTS,
    }
