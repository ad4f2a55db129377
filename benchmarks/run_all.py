"""Run every benchmark, one after the other, and write results/SUMMARY.md against the goals.

    python benchmarks/run_all.py            # full runs
    python benchmarks/run_all.py --quick    # each script's --quick mode

Each script is run with ``--json``; its last stdout line is saved as results/<name>.json and
compared with the goals its issue set. Benchmarks run sequentially so they do not compete for
the CPU; run this on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common import RESULTS, machine

HERE = Path(__file__).resolve().parent

#: script -> [(key path, comparison, goal)]; key paths are dotted into the JSON object
GOALS: dict[str, list[tuple[str, str, float]]] = {
    "bench_overhead": [
        ("pipeline_p99_ms", "<=", 0.3),
        ("count_cold_ms", "<=", 2.0),
        ("count_warm_ms", "<=", 0.1),
    ],
    "bench_prefix": [
        ("stage_p99_ms", "<=", 1.0),
        ("hit_rate_after", ">=", 0.95),
        ("sim_requests_per_s", ">=", 50_000),
    ],
    "bench_history": [
        ("last_p99_ms", "<=", 5.0),
        ("extractive_cold_p99_ms", "<=", 30.0),
        ("extractive_warm_p99_ms", "<=", 1.0),
        ("cache_hit_share_cache_aware", ">=", 0.85),
    ],
    "bench_retrieval": [
        ("bm25_p99_ms", "<=", 3.0),
        ("hybrid_cold_p99_ms", "<=", 150.0),
        ("hybrid_warm_p99_ms", "<=", 10.0),
        ("hybrid_precomputed_p99_ms", "<=", 5.0),
        ("recall_default", ">=", 0.97),
        ("token_fraction_kept", "<=", 0.20),
    ],
    "bench_compress": [
        ("extractive.0.33.retention", ">=", 0.9),
        ("extractive.0.33.p99_ms", "<=", 40.0),
        ("extractive.0.33.net_ratio", "<=", 0.4),
        ("lm_speedup_vs_llmlingua.0.33", ">=", 10.0),
        ("lm_speedup_vs_llmlingua.0.5", ">=", 10.0),
    ],
    "bench_integrations": [
        ("langchain_overhead_ms", "<=", 0.5),
        ("llamaindex_overhead_ms", "<=", 0.5),
    ],
    "bench_multilingual": [
        ("retention", ">=", 0.9),
        ("token_fraction_kept", "<=", 0.35),
        ("p99_ms", "<=", 20.0),
    ],
    "bench_proxy": [
        ("added_ttft_p50_ms", "<=", 1.0),
        ("added_ttft_p99_ms", "<=", 5.0),
        ("errors", "<=", 0),
    ],
    "bench_simulate": [],
    # issue 8: no lost request; RSS flat once caches are full (end within 10 % of half-way)
    "soak": [("errors", "<=", 0), ("rss_growth_second_half", "<=", 0.10)],
}


def lookup(obj: Any, path: str) -> Any:
    # keys may themselves contain dots ("0.33"): match the longest key first
    if not path:
        return obj
    if isinstance(obj, dict):
        for key in sorted(obj, key=len, reverse=True):
            if path == key or path.startswith(key + "."):
                return lookup(obj[key], path[len(key) + 1 :])
    return None


def goal_rows(name: str, result: dict[str, Any], wall: float) -> list[tuple[str, ...]]:
    rows = []
    for key, op, goal in GOALS.get(name, []):
        value = lookup(result, key)
        met = value is not None and (value <= goal if op == "<=" else value >= goal)
        shown = f"{value:.4g}" if isinstance(value, (int, float)) else str(value)
        mode = "quick" if result.get("run_all", {}).get("quick") else "full"
        rows.append(
            (name, mode, key, shown, f"{op} {goal:g}", "yes" if met else "**no**", f"{wall:.0f}")
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", nargs="*", help="run just these scripts (names without .py)")
    ap.add_argument(
        "--keep",
        action="store_true",
        help="with --only: the summary also lists the other scripts from their saved results",
    )
    args = ap.parse_args()
    # ``--only --keep`` with no names rewrites the summary from the saved results alone
    names = list(GOALS) if args.only is None else args.only
    rows = []
    for name in GOALS if args.keep else names:
        if name not in names:
            saved = RESULTS / f"{name}.json"
            if saved.exists():
                result = json.loads(saved.read_text())
                wall = result.get("run_all", {}).get("wall_s", 0.0)
                rows += goal_rows(name, result, wall)
            continue
        cmd = [sys.executable, str(HERE / f"{name}.py"), "--json"] + (
            ["--quick"] if args.quick else []
        )
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE, check=False)
        wall = time.perf_counter() - start
        lines = proc.stdout.strip().splitlines()
        try:
            result = json.loads(lines[-1]) if proc.returncode == 0 and lines else None
        except json.JSONDecodeError:
            result = None
        if result is None:
            print(
                f"{name}: FAILED (exit {proc.returncode})\n{proc.stderr[-2000:]}", file=sys.stderr
            )
            rows.append((name, "", "(failed)", "", "", "", f"{wall:.0f}"))
            continue
        result.setdefault("machine", machine())
        result["run_all"] = {"quick": args.quick, "wall_s": round(wall, 1)}
        (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
        print(f"{name}: {wall:.0f} s", file=sys.stderr)
        rows += goal_rows(name, result, wall)
    info = machine()
    out = [
        "# Benchmark summary",
        "",
        (
            f"Machine: {info.get('cpu_model', info['processor'])}, {info['cpu_count']} CPUs, "
            f"Python {info['python']}, {info['platform']}. Mode per row (a script's --quick or full run). "
            "Each script's JSON beside this file has N, percentiles and spread."
        ),
        "",
        "| benchmark | mode | key | measured | goal | met | wall s |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        *(f"| {' | '.join(r)} |" for r in rows),
        "",
    ]
    # hand-written notes on the runs (what a table cannot say) live beside it and are kept
    notes = RESULTS / "SUMMARY-notes.md"
    if notes.exists():
        out += [notes.read_text(encoding="utf-8").rstrip(), ""]
    (RESULTS / "SUMMARY.md").write_text("\n".join(out))
    print("\n".join(out))


if __name__ == "__main__":
    main()
