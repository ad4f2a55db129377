"""benchmarks/validate_simulator.py's arithmetic, without a server: the spread a fit carries,
predictions drawn from it, and which fit the goal is judged on. (The run against the real
llama.cpp server is the benchmark itself; its results are committed beside it.)"""

from __future__ import annotations

import importlib
import statistics
from types import ModuleType
from typing import Any

import pytest

from promptslim.loadsim import CostModel, ServerTiming


@pytest.fixture(scope="module")
def vs() -> ModuleType:
    return importlib.import_module("validate_simulator")


def _records(n: int, *, ttft: float = 1.0) -> list[dict[str, Any]]:
    return [
        {"index": i, "prompt_tokens": 100, "output_tokens": 1, "ttft_s": ttft, "tpot_s": None}
        for i in range(n)
    ]


def test_spread_is_each_requests_cost_over_the_median(vs: ModuleType) -> None:
    timings = [ServerTiming(prefill_s=t, prefill_tokens=100) for t in (0.9, 1.0, 1.0, 1.3)]
    spread = vs.spread_of([(_records(4), timings)])
    assert statistics.median(spread) == pytest.approx(1.0)
    assert spread == pytest.approx([0.9, 1.0, 1.0, 1.3])
    # without server timings for every round, the client's TTFT per token stands in
    recs = _records(2)
    recs[1]["ttft_s"] = 2.0
    assert vs.spread_of([(recs, None)]) == pytest.approx([2 / 3, 4 / 3])


def test_prediction_with_a_spread_has_the_tail_the_curve_alone_lacks(vs: ModuleType) -> None:
    cost = CostModel(b=0.01)  # 1 s for a 100-token prompt
    records = _records(16)
    curve = vs._p(vs.simulate(records, cost, concurrency=1, template_tokens=0))
    flat = vs.predict(records, cost, concurrency=1, template_tokens=0, spread=[1.0])
    assert flat == pytest.approx(curve)
    assert curve["p99"] == pytest.approx(1.0)
    wide = vs.predict(records, cost, concurrency=1, template_tokens=0, spread=[0.9, 1.0, 1.5])
    # one request in three at 1.5x: the P99 of 16 is nearly always one of them
    assert 1.4 < wide["p99"] <= 1.5
    assert wide["p50"] == pytest.approx(1.0, abs=0.1)


def _row(p50: float, p99: float, bracket: float | None) -> dict[str, Any]:
    err = {"p50": p50, "p99": p99}
    return {
        "rel_error": err,
        "bracketing_fit": None if bracket is None else {"rel_error": {"p50": 0.0, "p99": bracket}},
    }


def test_goal_is_judged_on_the_bracketing_fit_when_the_run_has_one(vs: ModuleType) -> None:
    def result(rows: dict[str, Any]) -> dict[str, Any]:
        return vs._result(["python", "-m", "x"], {}, rows, 0.0, 16, 1000, 4)

    drifted = {"1": _row(0.0, -0.05, None), **{c: _row(0.2, 0.25, 0.08) for c in "248"}}
    r = result(drifted)
    assert r["judged_on"] == "bracketing fit"
    assert r["max_abs_rel_error"] == pytest.approx(0.25)
    assert r["max_abs_rel_error_bracketing"] == pytest.approx(0.08)
    assert r["met"] is True
    # level 1 is judged too (on the first fit: it is that fit's own data)
    r = result({**drifted, "1": _row(0.0, -0.2, None)})
    assert r["met"] is False
    # a bracketing error over the goal fails, however good the first fit
    r = result({**drifted, "4": _row(0.0, 0.0, 0.16)})
    assert r["met"] is False
    # no calibration rounds: the first fit is all there is
    r = result({"1": _row(0.0, 0.0, None), **{c: _row(0.1, 0.1, None) for c in "248"}})
    assert r["judged_on"] == "first fit" and r["met"] is True
    # a level not run is not met
    assert result({"1": _row(0.0, 0.0, None), "2": _row(0.0, 0.0, 0.0)})["met"] is False
