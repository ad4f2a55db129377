"""bench_load's simulator plumbing: the closed loop's client timing reaches the simulator."""

from __future__ import annotations

import pytest
from load_model import predict_closed, turnaround

from promptslim.loadsim import CostModel
from promptslim.loadsim.calibrate import SingleStreamFit
from promptslim.loadsim.loadtest import RequestRecord

FIT = SingleStreamFit(
    CostModel(a=0.005, b=0.003, decode_step_s=0.013), template_tokens=40, source="test",
    requests=8,
)  # fmt: skip


def _record(i: int, *, sent: float | None = None, status: str = "ok") -> RequestRecord:
    r = RequestRecord(i, "baseline", prompt_tokens=600, output_tokens=16, status=status)
    r.request_sent_s = sent
    return r


def test_turnaround_is_the_median_send_time_of_the_answered_requests() -> None:
    records = [_record(0, sent=0.001), _record(1, sent=0.004), _record(2, sent=0.002)]
    records.append(_record(3, sent=9.0, status="error"))
    assert turnaround(records) == pytest.approx(0.002)
    assert turnaround([_record(0)]) == 0.0


def test_staggered_clients_are_predicted_one_prefill_after_another() -> None:
    # two clients, two requests each: sent at one instant the first prompts share a step
    # (both wait for 1,280 tokens); staggered, the first is served alone (640 tokens)
    records = [_record(i) for i in range(4)]
    args = {"concurrency": 2, "slots": 4, "block": 4}
    together = predict_closed(records, FIT, **args)
    apart = predict_closed(records, FIT, **args, stagger_s=0.05, think_s=0.002)
    one = FIT.cost.prefill_s(640)
    assert together["p50"] > 1.9 * one
    assert apart["p50"] < together["p50"]
    assert min(apart["p50"], apart["p99"]) >= one - 0.05
