"""``gpu_prefill.py``'s configs side: each pipeline config's prompts prepared from a dataset
(on any machine: promptslim is imported here only, as a GPU machine may have just torch and
transformers), and their prefill measured per config with the net TTFT ratio."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from common import machine, with_vectors

__all__ = ["measure_configs", "prepare_prompts"]


def prepare_prompts(spec: str, configs_spec: str, limit: int, vectors: bool) -> dict[str, Any]:
    """Per config: each item's prompt token count after the config, and the time it took.
    With ``vectors``, requests carry their documents' and query's embeddings, as a vector store
    hands them over (computed here, untimed)."""
    from promptslim.backends.embeddings import EmbeddingService
    from promptslim.bench.datasets import load_dataset
    from promptslim.bench.runner import cold_start, parse_configs
    from promptslim.tokens import count_request

    requests = [item.request for item in load_dataset(spec, limit=limit).items]
    if vectors:
        # a private, cacheless service: the pipeline's own embedding cache sees none of it
        store = EmbeddingService(max_seq_length=128, cache_size=0)
        requests = [with_vectors(r, store) for r in requests]
    out: dict[str, Any] = {
        "dataset": spec,
        "items": len(requests),
        "vectors_handed_over": vectors,
        "machine": machine(),
        "configs": {},
    }
    for config in parse_configs(configs_spec):
        row = out["configs"].setdefault(config.label, {"tokens": [], "slim_s": []})
        config.pipeline.run(requests[0])  # loading models and encodings is not per request
        cold_start()  # each config meets the requests unseen
        for request in requests:
            t0 = time.perf_counter()
            result = config.pipeline.run(request)
            row["slim_s"].append(time.perf_counter() - t0)
            row["tokens"].append(count_request(result.request))
    return out


def measure_configs(
    prepared: dict[str, Any], pass_s: Callable[[int], list[float]], lines: list[str]
) -> dict[str, Any]:
    """Prefill of each config's prompts (median of repeats per prompt) and the net TTFT ratio:
    (slimming + prefill) over the baseline's prefill, summed over the items."""
    base_s: list[float] = []
    configs: dict[str, Any] = {}
    for label, row in prepared["configs"].items():
        prefill = [statistics.median(pass_s(n)) for n in row["tokens"]]
        if label == "baseline":
            base_s = prefill
        entry = {
            "tokens_mean": statistics.fmean(row["tokens"]),
            "prefill_ms_p50": 1e3 * statistics.median(prefill),
            "slim_ms_p50": 1e3 * statistics.median(row["slim_s"]),
        }
        if base_s:
            # slimming timed where the prompts were prepared (prompts_machine)
            entry["net_ttft_ratio"] = (sum(row["slim_s"]) + sum(prefill)) / sum(base_s)
        configs[label] = entry
        lines.append(
            f"{label:32} {entry['tokens_mean']:8.0f} {entry['prefill_ms_p50']:15.1f} "
            f"{entry.get('net_ttft_ratio', float('nan')):10.2f}"
        )
    return configs
