"""bench_load's contract keys count every A/B phase: failures in a closed-loop level are not
hidden by the open loop the latency ratios come from."""

from __future__ import annotations

from typing import Any

from load_report import CONFIGS, headline


def phase(completed: int, errors: int, timeouts: int = 0, requests: int = 24) -> dict[str, Any]:
    ttft = {"p50": 1.0, "p95": 2.0, "p99": 3.0}
    quality = {"quality_delta": {"mean": 0.0, "low": 0.0, "high": 0.0, "n": requests}}
    return {
        k: {
            "ttft_s": ttft,
            "error_rate": errors / requests if k == "baseline" else 0.0,
            "timeout_rate": timeouts / requests if k == "baseline" else 0.0,
            "completed": completed if k == "baseline" else requests,
            "requests": requests,
            "quality": quality,
        }
        for k in CONFIGS
    }


def result(closed: dict[str, Any], open_: dict[str, Any]) -> dict[str, Any]:
    short = {"p50": 1.0, "p99": 2.0}
    return {
        "closed": closed,
        "open": open_,
        "priority": {
            "fifo": {"short": short, "long": short},
            "priority": {"short": short, "long": short},
        },
        "simulator": {},
    }


def test_closed_loop_failures_reach_the_headline() -> None:
    head = headline(result({"4": phase(18, 4, timeouts=2)}, phase(36, 0, requests=36)))
    assert head["completed_share"] == 18 / 24
    assert head["error_rate"]["baseline"] == 6 / 60  # 4 errors and 2 timeouts in 24 + 36
    assert head["error_rate"]["proxy"] == 0.0


def test_a_clean_run_completes_everything() -> None:
    head = headline(result({"4": phase(24, 0)}, phase(36, 0, requests=36)))
    assert head["completed_share"] == 1.0
    assert head["error_rate"] == {k: 0.0 for k in CONFIGS}
