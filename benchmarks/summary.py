"""The benchmarks' goals, and results/SUMMARY.md regenerated from the saved results.

    python benchmarks/summary.py          # rewrite results/SUMMARY.md from results/*.json

``GOALS`` is the one place a goal is written down: for each benchmark (the script's name, whose
latest run is ``results/<name>.json``), the figures it is judged on, each a dotted key path into
that JSON, a comparison and a target. The summary has one row per goal: the goal, the figure the
saved run measured, whether it meets the goal, and the machine the run was on. A run made with
``--quick`` says so beside its figure: it is a smoke check, not the benchmark's measurement.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import RESULTS


@dataclass(frozen=True)
class Goal:
    """``key`` (a dotted path into the result; keys may themselves hold dots, "0.33") compared
    with ``target`` by ``op`` (``"<="`` or ``">="``)."""

    key: str
    op: str
    target: float

    def met(self, value: float) -> bool:
        return value <= self.target if self.op == "<=" else value >= self.target

    def __str__(self) -> str:
        return f"{self.key} {self.op} {self.target:g}"


#: benchmark -> its goals
GOALS: dict[str, tuple[Goal, ...]] = {
    "bench_overhead": (
        Goal("pipeline_p99_ms", "<=", 0.3),
        Goal("count_cold_ms", "<=", 2.0),
        Goal("count_warm_ms", "<=", 0.1),
    ),
    "bench_prefix": (
        Goal("stage_p99_ms", "<=", 1.0),
        Goal("hit_rate_after", ">=", 0.95),
        Goal("sim_requests_per_s", ">=", 50_000),
    ),
    "bench_history": (
        Goal("last_p99_ms", "<=", 5.0),
        Goal("extractive_cold_p99_ms", "<=", 30.0),
        Goal("extractive_warm_p99_ms", "<=", 1.0),
        Goal("cache_hit_share_cache_aware", ">=", 0.85),
    ),
    "bench_retrieval": (
        Goal("bm25_p99_ms", "<=", 3.0),
        Goal("hybrid_cold_p99_ms", "<=", 150.0),
        Goal("hybrid_warm_p99_ms", "<=", 10.0),
        Goal("hybrid_precomputed_p99_ms", "<=", 5.0),
        Goal("recall_default", ">=", 0.97),
        Goal("token_fraction_kept", "<=", 0.20),
    ),
    "bench_compress": (
        Goal("extractive.0.33.retention", ">=", 0.9),
        Goal("extractive.0.33.p99_ms", "<=", 40.0),
        Goal("extractive.0.33.net_ratio", "<=", 0.4),
        Goal("lm_speedup_vs_llmlingua.0.33", ">=", 10.0),
        Goal("lm_speedup_vs_llmlingua.0.5", ">=", 10.0),
    ),
    "bench_integrations": (
        Goal("langchain_overhead_ms", "<=", 0.5),
        Goal("llamaindex_overhead_ms", "<=", 0.5),
        Goal("langchain_agent_overhead_ms", "<=", 0.5),
        Goal("llamaindex_memory_overhead_ms", "<=", 0.5),
    ),
    # a chat channel as a RAG document (issue 32's goals for chunk shapes)
    "bench_chat": (
        Goal("evidence_export", ">=", 0.97),
        Goal("evidence_log", ">=", 0.97),
        Goal("token_ratio_export", "<=", 0.2),
        Goal("token_ratio_log", "<=", 0.2),
        Goal("evidence_tool", ">=", 0.97),
        # as bench_tools' tool results
        Goal("token_ratio_tool", "<=", 0.25),
        Goal("evidence_export_short", ">=", 0.97),
        Goal("token_ratio_export_short", "<=", 0.2),
        Goal("evidence_tool_short", ">=", 0.97),
        Goal("token_ratio_tool_short", "<=", 0.25),
    ),
    "bench_multilingual": (
        Goal("retention", ">=", 0.9),
        Goal("token_fraction_kept", "<=", 0.35),
        Goal("p99_ms", "<=", 20.0),
        Goal("tool_retention", ">=", 0.9),
        Goal("cross_retention", ">=", 0.97),
    ),
    # at one stream; at 100 streams on two cores the added time is CPU queueing
    "bench_proxy": (
        Goal("added_ttft_p50_ms", "<=", 2.0),
        Goal("added_ttft_p99_ms", "<=", 5.0),
        Goal("errors", "<=", 0),
    ),
    "bench_simulate": (),
    # the answer kept on every document shape, at a fraction of the tokens, within the TTFT
    # budget (cold: ~2,300 tokens of passages, caches empty)
    "bench_shapes": (
        Goal("evidence_min", ">=", 0.97),
        Goal("evidence_by_position_min", ">=", 0.95),
        Goal("token_ratio_chunks_max", "<=", 0.20),
        Goal("token_ratio_passages", "<=", 0.15),
        Goal("cold_p99_ms_passages", "<=", 150.0),
        Goal("cold_p99_ms_vectors_max", "<=", 15.0),  # documents with a vector store's embeddings
        # the same, the later windows read by static vectors (store_windows="static")
        Goal("cold_p99_ms_vectors_static_max", "<=", 15.0),
        # the same, the documents' windows indexed by the store's ingest (RetrievalStage.index)
        Goal("cold_p99_ms_indexed_max", "<=", 15.0),
    ),
    # the shape suite's evidence goal on shapes it does not have (tables, logs, code, JSON,
    # one long document, untitled chunks, another template, smaller splitters' pieces); no
    # token or time goal: a JSON document is never cut, and tables, logs and JSON are 2-5
    # times the suite's 2,300 tokens
    "bench_structured": (Goal("evidence_min", ">=", 0.97),),
    # the shape suite's goals again at the default cut-off, on rows no default was chosen on
    "bench_tradeoff": (
        Goal("evidence_min_at_default", ">=", 0.97),
        Goal("token_ratio_chunks_max_at_default", "<=", 0.20),
    ),
    # both shape suites' evidence and token goals, the default config on every shape, on rows
    # (and generated items) no default was chosen on
    "bench_heldout": (
        Goal("evidence_min", ">=", 0.97),
        Goal("evidence_by_position_min", ">=", 0.95),
        Goal("token_ratio_chunks_max", "<=", 0.20),
    ),
    # agent traces: a quarter of the tokens, every needle, the prefix cache kept
    "bench_tools": (
        Goal("token_ratio", "<=", 0.25),
        Goal("needle_retention", ">=", 0.98),
        Goal("cache_hit_share", ">=", 0.9),
        Goal("p99_ms_per_10k", "<=", 5.0),
        # not below no compression: the paired interval includes or exceeds zero
        Goal("quality_delta_em_high", ">=", 0.0),
        # compose files, manifests and TOML tables as a tool result: the answer a few lines
        # below the name it is asked by
        Goal("indented_evidence_min", ">=", 0.97),
    ),
    # replicas sharing one Redis: no replica redoes another's work, faults cost no request
    "bench_scaleout": (
        Goal("goals.cold_share_ratio_top", "<=", 0.25),
        Goal("goals.fault_errors", "<=", 0),
        Goal("goals.redis_p99_ms", "<=", 2.0),
        Goal("goals.warm_p99_delta_ms_n1", "<=", 2.0),
        Goal("goals.identical", ">=", 1),
    ),
    # the seed's claim on a real continuous-batching server (llama-server, SmolLM2, CPU)
    "bench_load": (
        Goal("p99_ttft_ratio_client", ">=", 2.0),
        Goal("p99_ttft_ratio_proxy", ">=", 2.0),
        Goal("completed_share", ">=", 1.0),
        Goal("short_p99_ratio_priority", ">=", 2.0),
        Goal("long_p99_ratio_priority", "<=", 1.2),
        Goal("sim_error_max", "<=", 0.15),
        Goal("baseline_p99_over_p50", ">=", 3.0),  # the open loop's load, as the issue sets it
    ),
    # no request lost, and memory flat once the caches are full: the second half of the run
    # ends within 10 % of where it began
    "soak": (Goal("errors", "<=", 0), Goal("rss_growth_second_half", "<=", 0.10)),
    # the simulator's TTFT within 15 % of a real server's at every concurrency level
    "validate_simulator": (Goal("max_abs_rel_error_bracketing", "<=", 0.15),),
    # the seed's question: halve the P99 TTFT of 500 concurrent streams on one H200
    "scenario_h200": (Goal("p_ratio_baseline_over_promptslim.p99", ">=", 2.0),),
}

#: the scripts ``run_all.py`` runs; the others need a model server or a GPU and are run by
#: hand with ``--save NAME`` (see CONTRIBUTING.md)
RUN_ALL = (
    "bench_overhead",
    "bench_prefix",
    "bench_history",
    "bench_retrieval",
    "bench_compress",
    "bench_integrations",
    "bench_multilingual",
    "bench_chat",
    "bench_structured",
    "bench_proxy",
    "bench_simulate",
    "soak",
)


def goal(benchmark: str, key: str) -> Goal:
    """The goal ``benchmark`` has for ``key`` (a script's own report reads its targets here)."""
    for g in GOALS[benchmark]:
        if g.key == key:
            return g
    raise KeyError(f"{benchmark} has no goal for {key!r}")


def lookup(obj: Any, path: str) -> Any:
    """The value at dotted ``path`` in ``obj``; keys may contain dots, so the longest key that
    matches is taken first. None when the path is absent."""
    if not path:
        return obj
    if isinstance(obj, Mapping):
        for key in sorted(obj, key=len, reverse=True):
            if path == key or path.startswith(key + "."):
                return lookup(obj[key], path[len(key) + 1 :])
    return None


def describe_machine(result: Mapping[str, Any]) -> str:
    """``CPU model, N CPUs`` (and the GPU when the run names one) from a result's ``machine``,
    and the median time of ``common.reference_loop_ms`` where the run sampled it: two hosts
    of the same name may run the same code up to 2x apart, and that gauge tells them apart."""
    info = result.get("machine")
    if isinstance(info, str):
        text = info
    elif isinstance(info, Mapping):
        cpu = info.get("cpu_model") or info.get("processor") or info.get("platform", "CPU")
        text = f"{cpu}, {info.get('cpu_count', '?')} CPUs"
    else:
        text = "not recorded"
    gauge = result.get("reference_loop_ms")
    if isinstance(gauge, Mapping):  # bench_history's sits beside its cold samples
        median = gauge.get("p50", gauge.get("beside_cold_p50"))
        if isinstance(median, (int, float)):
            text += f", reference loop {median:.2f} ms"
    return f"{result['gpu']}; {text}" if result.get("gpu") else text


def rows(results: Path = RESULTS) -> list[tuple[str, str, str, str, str]]:
    """One ``(benchmark, goal, figure, met, machine)`` row per goal, from the saved results."""
    out = []
    for name, goals in GOALS.items():
        path = results / f"{name}.json"
        result = json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
        for g in goals:
            if result is None:
                out.append((name, str(g), "no saved run", "no", ""))
                continue
            value = lookup(result, g.key)
            if isinstance(value, bool):  # a yes/no figure: 1 or 0
                value = int(value)
            quick = bool(result.get("quick") or result.get("run_all", {}).get("quick"))
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                figure = f"{value:.4g}" + (" (--quick)" if quick else "")
                met = "yes" if g.met(value) else "**no**"
            else:
                figure, met = "not in the saved run", "no"
            out.append((name, str(g), figure, met, describe_machine(result)))
    return out


def render(table: list[tuple[str, str, str, str, str]]) -> str:
    lines = [
        "# Benchmark summary",
        "",
        "Generated by `benchmarks/summary.py` from the latest run of each benchmark",
        "(`benchmarks/results/<benchmark>.json`, which holds N and the spread of every figure).",
        "Timings depend on the host as much as on the code: where a run timed the fixed Python",
        "loop of `common.reference_loop_ms` beside its samples, the machine column gives its",
        "median, the gauge to compare two runs' timings by.",
        "",
        "| benchmark | goal | figure | met | machine |",
        "| --- | --- | --- | --- | --- |",
        *(f"| {' | '.join(row)} |" for row in table),
        "",
    ]
    return "\n".join(lines)


def write(results: Path = RESULTS) -> str:
    """Rewrite ``results/SUMMARY.md``; returns its text."""
    text = render(rows(results))
    (results / "SUMMARY.md").write_text(text, encoding="utf-8")
    return text


if __name__ == "__main__":
    sys.stdout.write(write())
