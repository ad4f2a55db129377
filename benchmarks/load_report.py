"""bench_load's report: the contract's headline keys, the Markdown table and the plot
(matplotlib, imported only when it is drawn)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

CONFIGS = ("baseline", "client", "proxy")


def _ratio(a: dict[str, float], b: dict[str, float], q: str = "p99") -> float | None:
    return a[q] / b[q] if a.get(q) and b.get(q) else None


def _sim_errors(result: dict[str, Any]) -> list[float]:
    return [
        abs(v["predicted"][q] - v["measured"][q]) / v["measured"][q]
        for v in result["simulator"].values()
        for q in ("p50", "p99")
        if v["measured"].get(q)
    ]


def _ab_phases(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Every A/B phase run: the closed-loop levels and the open loop."""
    return [*result["closed"].values(), *([result["open"]] if result.get("open") else [])]


def _error_rates(result: dict[str, Any]) -> dict[str, float]:
    """Each config's errors and timeouts over all its requests in every A/B phase, so that a
    phase's failures are not hidden by the phase the latency figures come from."""
    phases = _ab_phases(result)
    return {
        k: sum((p[k]["error_rate"] + p[k]["timeout_rate"]) * p[k]["requests"] for p in phases)
        / sum(p[k]["requests"] for p in phases)
        for k in CONFIGS
    }


def headline(result: dict[str, Any]) -> dict[str, Any]:
    """The contract's keys, from the most loaded phase run (open loop when it ran)."""
    phase = result.get("open") or result["closed"][max(result["closed"], key=int)]
    base = phase["baseline"]["ttft_s"]
    prio = result["priority"]
    sim_err = _sim_errors(result)
    return {
        "p99_ttft_ratio_client": _ratio(base, phase["client"]["ttft_s"]),
        "p99_ttft_ratio_proxy": _ratio(base, phase["proxy"]["ttft_s"]),
        "baseline_p99_over_p50": base["p99"] / base["p50"] if base.get("p50") else None,
        "error_rate": _error_rates(result),
        "quality_delta": {k: phase[k]["quality"]["quality_delta"] for k in ("client", "proxy")},
        "completed_share": min(
            p[k]["completed"] / p[k]["requests"] for p in _ab_phases(result) for k in CONFIGS
        ),
        "short_p99_ratio_priority": _ratio(prio["fifo"]["short"], prio["priority"]["short"]),
        "long_p99_ratio_priority": _ratio(prio["priority"]["long"], prio["fifo"]["long"]),
        "sim_error_max": max(sim_err) if sim_err else None,
        "sim_levels": sorted(int(c) for c in result["simulator"]),
    }


def _phases(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    phases = {f"closed c={c}": p for c, p in result["closed"].items()}
    if "open" in result:
        phases[f"open {result['open']['rate']:.2f}/s"] = result["open"]
    return phases


def table(result: dict[str, Any]) -> str:
    rows = [
        "| phase | config | TTFT p50 s | p95 | p99 | errors | done | prompt tok | cached |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, phase in _phases(result).items():
        for k in (c for c in CONFIGS if c in phase):
            p, t = phase[k], phase[k]["ttft_s"]
            rows.append(
                f"| {name} | {k} | {t.get('p50', 0):.2f} | {t.get('p95', 0):.2f} | "
                f"{t.get('p99', 0):.2f} | {p['error_rate']:.0%} | {p['completed']}/{p['requests']}"
                f" | {p['prompt_tokens_sent']} | {p['server_cached_tokens']} |"
            )
    rows += ["", "| simulator c | measured p50 | predicted | measured p99 | predicted |",
             "| --- | --- | --- | --- | --- |"]  # fmt: skip
    for c, v in result["simulator"].items():
        m, s = v["measured"], v["predicted"]
        rows.append(
            f"| {c} | {m.get('p50', 0):.2f} | {s['p50']:.2f} | {m.get('p99', 0):.2f} | "
            f"{s['p99']:.2f} |"
        )
    prio = result["priority"]
    rows += ["", "| priority | short p50 | short p99 | long p50 | long p99 |", "| --- | --- | --- | --- | --- |"]  # fmt: skip
    for label in ("fifo", "priority"):
        s, lg = prio[label]["short"], prio[label]["long"]
        rows.append(
            f"| {label} | {s.get('p50', 0):.2f} | {s.get('p99', 0):.2f} | "
            f"{lg.get('p50', 0):.2f} | {lg.get('p99', 0):.2f} |"
        )
    rows += ["", *(f"- {k}: {v}" for k, v in result["headline"].items())]
    return "\n".join(rows)


def plot(result: dict[str, Any], path: Path) -> Path:
    """Three panels: TTFT P50/P99 per phase and config; the simulator's P50/P99 against the
    measured ones; short and long requests' P99 without and with priority."""
    import matplotlib

    matplotlib.use("Agg")  # files only: never open a window
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    phases = _phases(result)
    for k, config in enumerate(CONFIGS):
        for q, marker in (("p50", "o"), ("p99", "^")):
            ys = [phases[name][config]["ttft_s"].get(q, 0.0) for name in phases]
            xs = [x + 0.2 * (k - 1) for x in range(len(phases))]
            axes[0].scatter(xs, ys, marker=marker, color=f"C{k}", label=f"{config} {q}")
    axes[0].set_xticks(range(len(phases)), list(phases), fontsize=7)
    axes[0].set_ylabel("TTFT, s (client clock)")
    axes[0].set_title("mixed stream on llama-server")
    levels = sorted(result["simulator"], key=int)
    for q, color in (("p50", "C0"), ("p99", "C3")):
        sim = result["simulator"]
        axes[1].plot([int(c) for c in levels], [sim[c]["measured"].get(q, 0) for c in levels],
                     "o-", color=color, label=f"measured {q}")  # fmt: skip
        axes[1].plot([int(c) for c in levels], [sim[c]["predicted"][q] for c in levels],
                     "x--", color=color, label=f"simulated {q}")  # fmt: skip
    axes[1].set_xlabel("closed-loop concurrency (baseline)")
    axes[1].set_title("simulator, fitted at concurrency 1")
    prio = result["priority"]
    for k, kind in enumerate(("short", "long")):
        ys = [prio[label][kind].get("p99", 0.0) for label in ("fifo", "priority")]
        bars = axes[2].bar([k - 0.2, k + 0.2], ys, width=0.35, color=["C7", "C2"])
    axes[2].legend(bars, ["first come, first served", "priority classes"], fontsize=7)
    axes[2].set_xticks([0, 1], ["short requests", "long requests"])
    axes[2].set_ylabel("P99 TTFT, s (client clock)")
    axes[2].set_title("priority through the proxy")
    for ax in axes[:2]:
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
