"""benchmarks/gpu_prefill.py end to end on the CPU, at a toy Llama shape (its ``--device cpu``
smoke mode): prompts prepared in one step and measured in another, a curve the scenario's cost
loader reads, the packed-step prediction from the fit. The H200 figures come from the same code
on the GPU (benchmarks/results/gpu_prefill.json)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import gpu_prefill
import pytest
import scenario_h200


@pytest.fixture
def toy_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    small = {
        **gpu_prefill.LLAMA3_8B,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 512,
    }
    monkeypatch.setattr(gpu_prefill, "LLAMA3_8B", small)
    monkeypatch.setattr(gpu_prefill, "CURVE_QUICK", (16, 32, 64))
    monkeypatch.setattr(gpu_prefill, "STEP_TOKENS", 64)
    monkeypatch.setattr(gpu_prefill, "DECODE_CONTEXT", 8)
    monkeypatch.setattr(gpu_prefill, "CACHED", ((0, 16), (32, 16)))


def run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    monkeypatch.setattr(sys, "argv", ["gpu_prefill.py", *argv])
    assert gpu_prefill.main() == 0
    return capsys.readouterr().out


def test_prepare_then_measure_on_cpu(
    toy_shape: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    prompts = tmp_path / "prompts.json"
    configs = "baseline,compress:extractive@0.33"
    run(monkeypatch, capsys, "--write-prompts", str(prompts), "--quick", "--configs", configs)
    prepared = json.loads(prompts.read_text())
    assert prepared["dataset"] == "builtin:rag" and prepared["items"] == 4
    base, slim = (prepared["configs"][k]["tokens"] for k in configs.split(","))
    assert len(base) == len(slim) == 4
    assert all(s < b for s, b in zip(slim, base, strict=True))  # the compressor cut each prompt

    out = run(
        monkeypatch, capsys,
        "--quick", "--json", "--device", "cpu", "--layers", "1", "--prompts", str(prompts),
    )  # fmt: skip
    result = json.loads(out.strip().splitlines()[-1])
    assert result["pass_mode"] == "eager" and result["graph_error"] == "not a CUDA device"
    assert [c["tokens"] for c in result["curve"]] == [16, 32, 64]
    assert [p[0] for p in result["cost_model"]["points"]] == [16, 32, 64]
    assert all(p[1] > 0 for p in result["cost_model"]["points"])
    assert all(p["predicted_ms"] > 0 for p in result["packed"])
    assert [e["sequences"] * e["tokens_each"] for e in result["packed"]] == [64] * 4
    assert all("ms" in d for d in result["decode"]), result["decode"]
    assert [(e["cached_tokens"], e["new_tokens"]) for e in result["cached"]] == [(0, 16), (32, 16)]
    assert all(e["ms"]["p50"] > 0 and e["predicted_ms"] > 0 for e in result["cached"])
    measured = result["datasets"]["builtin:rag"]["configs"]
    assert set(measured) == set(configs.split(","))
    assert measured["baseline"]["tokens_mean"] > measured["compress:extractive@0.33"]["tokens_mean"]

    curve = tmp_path / "curve.json"
    curve.write_text(json.dumps(result))
    cost, source = scenario_h200.load_cost_curve(curve)
    # the toy model's timings are noise-level, so which terms the fit keeps is not asserted
    assert cost.prefill_s(64) > 0 and "3 prefill points" in source
    assert cost.prefill_s(64) == pytest.approx(1e-3 * result["packed"][0]["predicted_ms"])


def test_cost_points_take_the_faster_way_per_length() -> None:
    curve = [
        {"tokens": 64, "eager_ms": {"p50": 20.0}, "graph_ms": {"p50": 8.0}},
        {"tokens": 8192, "eager_ms": {"p50": 250.0}, "graph_ms": {"p50": 330.0}},
        {"tokens": 128, "eager_ms": {"p50": 21.0}},
    ]
    assert gpu_prefill.cost_points(curve) == [[64, 0.008], [8192, 0.25], [128, 0.021]]


def test_sections_pick_what_is_measured(
    toy_shape: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = run(
        monkeypatch, capsys,
        "--quick", "--json", "--device", "cpu", "--layers", "1", "--sections", "curve,cached",
    )  # fmt: skip
    result = json.loads(out.strip().splitlines()[-1])
    assert "curve" in result and "cached" in result
    assert not {"packed", "decode"} & set(result) and result["datasets"] == {}
    with pytest.raises(SystemExit):
        run(monkeypatch, capsys, "--device", "cpu", "--sections", "curve,warp")


def test_without_cuda_it_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = run(monkeypatch, capsys, "--quick", "--json")
    assert json.loads(out.strip().splitlines()[-1]) == {"skipped": "no CUDA device"}
