"""Load-test reports: ``loadtest.json``, a Markdown summary and a percentile plot.
matplotlib is imported only when a plot is drawn."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["format_markdown", "plot_percentiles", "write_report"]


def _row(label: str, s: Mapping[str, float]) -> str:
    if not s.get("n"):
        return f"| {label} | 0 | – | – | – | – | – | – |"
    cells = " | ".join(f"{s[k]:.1f}" for k in ("p50", "p90", "p95", "p99", "max", "mean"))
    return f"| {label} | {int(s['n'])} | {cells} |"


_HEADER = (
    "| metric | n | p50 | p90 | p95 | p99 | max | mean |\n"
    "| --- | --- | --- | --- | --- | --- | --- | --- |"
)


def format_markdown(result: Mapping[str, Any]) -> str:
    """Tables for people: per config, latency percentiles (ms), per bucket TTFT, rates."""
    o = result["options"]
    load = f"concurrency {o['concurrency']}" if o["rate"] is None else f"rate {o['rate']}/s"
    lines = [
        f"# promptslim loadtest: {o['url']}",
        "",
        f"{o['dataset']}, {o['requests']} requests, {load}",
        "",
    ]
    for label, run in result["configs"].items():
        lines += _config_section(label, run)
    return "\n".join(lines)


def _config_section(label: str, run: Mapping[str, Any]) -> list[str]:
    s = run["summary"]
    lines = [f"## {label}", "", _HEADER]
    lines += [_row(k, s[k]) for k in ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms", "sched_delay_ms")]
    lines += [_row(f"phase {k}", v) for k, v in s["phases_ms"].items()]
    lines += [
        "",
        "| prompt tokens | requests | TTFT p50 | TTFT p99 | E2E p99 |",
        "| --- | --- | --- | --- | --- |",
    ]
    for bucket, b in s["by_prompt_bucket"].items():
        t, e = b["ttft_ms"], b["e2el_ms"]
        if t.get("n"):
            lines.append(
                f"| {bucket} | {b['requests']} | {t['p50']:.1f} | {t['p99']:.1f} | {e['p99']:.1f} |"
            )
        else:
            lines.append(f"| {bucket} | {b['requests']} | – | – | – |")
    lines += ["", *_notes(run), ""]
    return lines


def _notes(run: Mapping[str, Any]) -> list[str]:
    """The bullet lines under a config's tables: rates, throughput, goodput, warnings."""
    s, c = run["summary"], run["client"]
    lines = [
        (
            f"- completed {s['completed']}/{s['requests']}; error rate {s['error_rate']:.1%}, "
            f"timeout rate {s['timeout_rate']:.1%}, cancelled {s['cancelled']}, "
            f"sent again after a kept-alive connection closed under them {s.get('retried', 0)}"
        ),
        (
            f"- throughput {s['request_throughput']:.2f} req/s, {s['output_token_throughput']:.1f} "
            f"output tok/s, {s['total_token_throughput']:.1f} total tok/s over {s['duration_s']:.1f} s"
        ),
    ]
    if "goodput" in s:
        lines.append(
            f"- goodput {s['goodput']:.2f} req/s with TTFT <= {s['slo_ttft_ms']:g} ms "
            f"({s['slo_attainment']:.1%} of requests)"
        )
    buf = s["buffering"]
    if buf["buffered"]:
        lines.append(
            f"- **buffered stream**: {buf['bunched']} of {buf['streams_checked']} streams "
            f"delivered their tokens within {buf['window_ms']:g} ms of the first after a long "
            "wait; something between the server and this client (a proxy, gateway or "
            "client) holds tokens back, so TTFT here is not the server's"
        )
    lag = c["loop_lag_ms"]
    lines.append(
        f"- client overhead: CPU {c['cpu_share']:.0%} of one core, event-loop lag p50 "
        f"{lag['p50']:.2f} ms, p99 {lag['p99']:.2f} ms, max {lag['max']:.1f} ms"
        + ("; **the client may be the bottleneck**" if c["client_bound"] else "")
    )
    cut = run.get("cut", {})
    if c["time_limit_reached"] or cut.get("not_sent"):
        lines.append(
            f"- stopped at its share of the time limit ({cut.get('share_s', 0):g} s): "
            f"{cut.get('cancelled_in_flight', 0)} cancelled in flight, "
            f"{cut.get('not_sent', 0)} not sent"
        )
    return lines


def plot_percentiles(result: Mapping[str, Any], path: str | Path) -> None:
    """TTFT, ITL and E2E at P50/P90/P95/P99/max, a line per config, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")  # files only: never open a window
    import matplotlib.pyplot as plt

    keys = ("p50", "p90", "p95", "p99", "max")
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.8))
    for ax, metric in zip(axes, ("ttft_ms", "itl_ms", "e2el_ms"), strict=True):
        for label, run in result["configs"].items():
            s = run["summary"][metric]
            if s.get("n"):
                ax.plot(list(keys), [s[k] for k in keys], marker="o", label=label)
        ax.set_title(metric.replace("_ms", "").upper())
        ax.set_ylabel("ms (client clock)")
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:  # nothing succeeded: no lines, no legend
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(result: Mapping[str, Any], out: str | Path) -> dict[str, Path]:
    """``loadtest.json``, ``loadtest.md`` and ``loadtest.png`` in ``out`` (created)."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {k: folder / f"loadtest.{k}" for k in ("json", "md", "png")}
    paths["json"].write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    paths["md"].write_text(format_markdown(result), encoding="utf-8")
    plot_percentiles(result, paths["png"])
    return paths
