"""benchmarks/scenario_h200.py on a small stream: the seed's question put to the planner
(``--plan``), a config file ``promptslim bench`` can read, and the verdicts on both halves of
the goal, quality read from a real bench summary."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from promptslim.pipeline import Pipeline

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "scenario_h200.py"
QUALITY = ROOT / "benchmarks" / "results" / "scenario_quality"


def test_planned_config_is_written_simulated_and_judged(tmp_path: Path) -> None:
    planned = tmp_path / "scenario_planned.json"
    # the committed bench summaries: one ran scenario_pipeline.json, the other a config named
    # scenario_planned, so each verdict finds its own. The planned one is read with its EM
    # delta moved to -13 points [-30, 0] (the capped plan's chat figure before 2026-12-01), so
    # that a verdict that fails on quality is checked too
    summary = json.loads((QUALITY / "planned_chat" / "summary.json").read_text())
    summary["configs"]["scenario_planned"]["delta_vs_baseline"]["em"].update(
        mean=-0.133, low=-0.30, high=0.0
    )
    worse = tmp_path / "planned_chat_summary.json"
    worse.write_text(json.dumps(summary))
    args = [
        sys.executable, str(SCRIPT), "--quick", "--json", "--items", "4", "--requests", "64",
        "--concurrency", "16", "--no-vectors", "--plan", "2", "--plan-config", str(planned),
        "--bench-summary", str(QUALITY / "chat" / "summary.json"), "--bench-summary", str(worse),
    ]  # fmt: skip
    done = subprocess.run(args, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    plan = result["plan"]
    base = result["configs"]["baseline"]
    # the SLO is the baseline's P99 halved, and the written file is the config that was run
    assert plan["slo_p99_s"] * 2 == base["ttft_s"]["p99"]
    config = json.loads(planned.read_text())
    assert config == plan["config"] and config["budget"]["total"] == plan["total"]
    assert Pipeline.from_config(planned).budget.total == plan["total"]
    # under the budget the planned stream is shorter than the default pipeline's
    tokens = {k: c["mean_prompt_tokens"] for k, c in result["configs"].items()}
    assert tokens["promptslim_planned"] <= tokens["promptslim"] <= tokens["baseline"]
    verdicts = result["verdicts"]
    assert set(verdicts) == {"promptslim", "promptslim_planned"}
    for label, v in verdicts.items():
        assert v["quality_datasets"] == ["builtin:chat"], label
        assert v["met_p99"] == (result["p_ratio_by_config"][label]["p99"] >= 2.0)
    # read from the summaries: the default config's chat EM delta is 0, the planned one's -13
    assert verdicts["promptslim"]["met_quality"] is True
    planned_em = [q for q in result["quality"] if q["config"] == "scenario_planned"]
    assert [round(q["delta_points"]["mean"], 1) for q in planned_em] == [-13.3]
    assert verdicts["promptslim_planned"]["met_quality"] is False
    assert result["met_goal"] == verdicts["promptslim"]["met_p99"]
