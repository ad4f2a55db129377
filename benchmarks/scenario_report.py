"""The scenario's result as text: the TTFT table per config, the plan, and the verdicts."""

from __future__ import annotations

from typing import Any

from scenario_inputs import GOAL_QUALITY_POINTS

__all__ = ["table"]


def table(result: dict[str, Any]) -> str:
    lines = [
        f"Cost model: {result['cost_source']}",
        "",
        (
            "| config | mean prompt tokens | TTFT P50 (s) | P95 (s) | P99 (s) | queue P99 (s) "
            "| cache hit rate | 1k-token prefill (ms) | P99 ratio |"
        ),
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    ratios = result["p_ratio_by_config"]
    for label, c in result["configs"].items():
        t = c["ttft_s"]
        ratio = f"{ratios[label]['p99']:.2f}x" if label in ratios else "1x"
        lines.append(
            f"| {label} | {c['mean_prompt_tokens']:.0f} | {t['p50']:.3f} | {t['p95']:.3f} "
            f"| {t['p99']:.3f} | {c['queue_s']['p99']:.3f} | {c['cache_hit_rate']:.2f} "
            f"| {c['prefill_1k_tokens_ms']:.1f} | {ratio} |"
        )
    return "\n".join(lines + plan_lines(result) + goal_lines(result))


def plan_lines(result: dict[str, Any]) -> list[str]:
    """What ``promptslim_planned`` is, when the run planned one."""
    lines: list[str] = []
    plan = result.get("plan")
    if plan:
        budget = plan["config"]["budget"]
        lines += [
            "",
            (
                f"promptslim_planned: the seed's question put to `promptslim plan`: the baseline's "
                f"simulated P99 divided by {result['configs']['baseline']['ttft_s']['p99'] / plan['slo_p99_s']:.0f} "
                f"is the SLO ({plan['slo_p99_s']:.3f} s); the plan's budget, total "
                f"{budget['total']} tokens a request (its split of the mean request: history "
                f"{plan['history']}, documents {plan['documents']}; as history_share "
                f"{budget['history_share']}), added to {result['pipeline']}'s stages with "
                "on_infeasible best_effort"
                + (f" (written to {plan['config_file']})" if plan.get("config_file") else "")
                + "."
            ),
        ]
    return lines


def goal_lines(result: dict[str, Any]) -> list[str]:
    """The ratios against the goal, the quality deltas, and each config's verdict."""
    lines: list[str] = []
    goal = result["goal_config"]
    r = result["p_ratio_baseline_over_promptslim"]
    w = result["p_ratio_including_own_time"]
    own = result["slim_ms_this_cpu"][goal]
    lines += [
        "",
        (
            f"Baseline / {goal} TTFT: P50 {r['p50']:.2f}x, P95 {r['p95']:.2f}x, P99 "
            f"{r['p99']:.2f}x (goal P99 >= {result['goal_p99_ratio']:.0f}x: "
            f"{'met' if result['met_p99'] else 'NOT met'}). {result['requests']} requests, "
            f"concurrency {result['concurrency']}, {result['output_tokens']} output tokens each."
        ),
        (
            f"{goal} on this CPU: median {own['p50']:.0f} ms per request. Adding the same quantile "
            f"of it to its TTFT: P50 {w['p50']:.2f}x, P99 {w['p99']:.2f}x "
            f"({'met' if result['met_p99_including_own_time'] else 'NOT met'})."
        ),
    ]
    qualities = result.get("quality") or []
    for q in qualities:
        d = q["delta_points"]
        lines.append(
            f"Quality ({q['metric']}, {q['config']} minus baseline, n={q['n']}, from {q['summary']}): "
            f"{d['mean']:+.1f} points [95 % CI {d['low']:+.1f}, {d['high']:+.1f}] "
            f"(goal >= {q['goal_points']:.0f}: {'met' if q['met'] else 'NOT met'} on the mean, "
            f"{'met' if q['met_by_interval'] else 'not shown'} by the interval)."
        )
    if not qualities:
        lines.append("Quality: no --bench-summary given.")
    lines.append("")
    for label, v in result["verdicts"].items():
        quality = (
            f"quality within {GOAL_QUALITY_POINTS:.0f} point on "
            f"{', '.join(v['quality_datasets'])}: {'met' if v['met_quality'] else 'NOT met'}"
            if v["quality_datasets"]
            else "quality not measured"
        )
        lines.append(
            f"Goal for {label}: P99 {v['p99_ratio']:.2f}x "
            f"({'met' if v['met_p99'] else 'NOT met'}); {quality}."
        )
    lines.append(
        f"Goal (P99 >= {result['goal_p99_ratio']:.0f}x with quality within "
        f"{GOAL_QUALITY_POINTS:.0f} point, on one config): "
        f"{'met' if result['met_goal'] else 'NOT met'}."
    )
    return lines
