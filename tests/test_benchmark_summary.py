"""benchmarks/summary.py: goals as data, the committed SUMMARY.md is exactly what the saved
results give, and the results folder holds one latest run per benchmark."""

from __future__ import annotations

import json
from pathlib import Path

import summary

RESULTS = Path(__file__).resolve().parent.parent / "benchmarks" / "results"


def test_committed_summary_is_regenerated_from_the_saved_results() -> None:
    assert (RESULTS / "SUMMARY.md").read_text(encoding="utf-8") == summary.render(summary.rows())


def test_every_goal_row_names_its_goal_figure_verdict_and_machine(tmp_path: Path) -> None:
    result = {
        "quick": False,
        "machine": {"cpu_model": "Test CPU", "cpu_count": 4},
        "pipeline_p99_ms": 0.2,
        "count_cold_ms": 5.0,
    }
    (tmp_path / "bench_overhead.json").write_text(json.dumps(result))
    rows = [r for r in summary.rows(tmp_path) if r[0] == "bench_overhead"]
    assert rows == [
        ("bench_overhead", "pipeline_p99_ms <= 0.3", "0.2", "yes", "Test CPU, 4 CPUs"),
        ("bench_overhead", "count_cold_ms <= 2", "5", "**no**", "Test CPU, 4 CPUs"),
        (
            "bench_overhead",
            "count_warm_ms <= 0.1",
            "not in the saved run",
            "no",
            "Test CPU, 4 CPUs",
        ),
    ]
    # where the run timed the reference loop, the machine column says how fast the host was
    gauged = {**result, "reference_loop_ms": {"n": 3, "p50": 0.571}}
    (tmp_path / "bench_overhead.json").write_text(json.dumps(gauged))
    machines = {r[4] for r in summary.rows(tmp_path) if r[0] == "bench_overhead"}
    assert machines == {"Test CPU, 4 CPUs, reference loop 0.57 ms"}
    # a benchmark with no saved run is a missed goal, not a missing row
    assert ("bench_prefix", "stage_p99_ms <= 1", "no saved run", "no", "") in summary.rows(tmp_path)


def test_key_paths_may_hold_dots_and_quick_runs_are_marked(tmp_path: Path) -> None:
    result = {"run_all": {"quick": True}, "extractive": {"0.33": {"retention": 0.95}}}
    assert summary.lookup(result, "extractive.0.33.retention") == 0.95
    assert summary.lookup(result, "extractive.0.5.retention") is None
    (tmp_path / "bench_compress.json").write_text(json.dumps(result))
    row = next(r for r in summary.rows(tmp_path) if r[1].startswith("extractive.0.33.retention"))
    assert row[2:4] == ("0.95 (--quick)", "yes")


def test_goals_are_defined_once_and_read_back_by_name() -> None:
    for benchmark, goals in summary.GOALS.items():
        keys = [g.key for g in goals]
        assert len(keys) == len(set(keys)), benchmark
        for g in goals:
            assert g.op in ("<=", ">=") and summary.goal(benchmark, g.key) is g
    assert summary.goal("bench_prefix", "hit_rate_after").met(0.96)
    assert not summary.goal("bench_prefix", "hit_rate_after").met(0.94)


def test_results_hold_one_latest_run_per_benchmark() -> None:
    scripts = {p.stem for p in RESULTS.parent.glob("*.py")}
    for path in RESULTS.glob("*.json"):
        assert path.stem in scripts, f"{path.name} is not the latest run of a benchmark script"
        result = json.loads(path.read_text(encoding="utf-8"))
        assert "machine" in result, f"{path.name} does not say which machine it ran on"
    assert not list(RESULTS.glob("*notes*")), "method notes belong in the benchmark's docstring"
