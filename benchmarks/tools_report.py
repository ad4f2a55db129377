"""``bench_tools.py``'s tables for people."""

from __future__ import annotations

from typing import Any

from tools_records import records_table


def table(result: dict[str, Any]) -> str:
    lines = [
        "| kind | results | token_ratio | needle_retention | p99 ms / 10k tok (first, steady) |",
        "|---|---|---|---|---|",
    ]
    for k, r in result["per_type"].items():
        nr = (
            "-"
            if r["needle_retention"] is None
            else f"{r['needle_retention']:.3f} ({r['needles']})"
        )
        lines.append(
            f"| {k} | {r['results']} | {r['token_ratio']:.3f} | {nr} | "
            f"{r['p99_ms_per_10k']:.2f}, {r['p99_ms_per_10k_steady']:.2f} |"
        )
    side = result.get("json_side_by_side", {})
    if "unavailable" not in side:
        lines += ["", "| JSON results | token_ratio | needle_retention | p50 / p99 ms per 10k |"]
        lines.append("|---|---|---|---|")
        for name, r in side.items():
            nr = (
                "-"
                if r["needle_retention"] is None
                else f"{r['needle_retention']:.3f} ({r['needles']})"
            )
            lines.append(
                f"| {name} | {r['token_ratio']:.3f} | {nr} | "
                f"{r['p50_ms_per_10k']:.2f} / {r['p99_ms_per_10k']:.2f} |"
            )
    lines += [
        "",
        "| config | token_ratio | needle_retention | cache_hit_share (30 calls) | turn p99 ms |",
    ]
    lines.append("|---|---|---|---|---|")
    for name, r in result["configs"].items():
        if "unavailable" in r:
            lines.append(f"| {name} | unavailable: {r['unavailable']} | | | |")
            continue
        lines.append(
            f"| {name} | {r['token_ratio']:.3f} | {r['needle_retention']:.3f} | "
            f"{r['long_cache_hit_share']:.3f} | {r['long_turn_ms_p99']:.1f} |"
        )
    if "indented_records" in result:
        lines += records_table(result["indented_records"])
    if "reader" in result:
        lines += _reader(result["reader"])
    return "\n".join(lines)


def _reader(r: dict[str, Any]) -> list[str]:
    lines = ["", f"reader {r['model']} on {r['items']} traces (tools minus none, paired 95% CI):"]
    for metric, label in (("em", "subspan EM"), ("lp", "gold log-likelihood")):
        m = r[metric]
        lines.append(
            f"- {label}: none {m['none']:.3f}, tools {m['tools']:.3f}, "
            f"delta {m['delta']:+.3f} [{m['ci95'][0]:+.3f}, {m['ci95'][1]:+.3f}]"
        )
    for kind, k in r.get("by_kind", {}).items():
        lines.append(
            f"- {kind} ({k['items']} items): EM none {k['em_none']:.3f}, "
            f"tools {k['em_tools']:.3f}; answer kept {k['needle_kept']:.3f}"
        )
    return lines
