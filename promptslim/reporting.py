"""Formatting for people: Reports as text tables. Results carry numbers; formatting lives here."""

from __future__ import annotations

from .types import Report

__all__ = ["format_report_table"]


def format_report_table(report: Report) -> str:
    rows = [("stage", "tokens in", "tokens out", "ms", "changes")]
    for s in report.stages:
        kinds: dict[str, int] = {}
        for c in s.changes:
            kinds[c.kind] = kinds.get(c.kind, 0) + 1
        summary = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) or "-"
        rows.append((s.stage, str(s.tokens_in), str(s.tokens_out), f"{s.ms:.2f}", summary))
    rows.append(
        ("total", str(report.tokens_in), str(report.tokens_out), f"{report.ms:.2f}",
         f"ratio {report.ratio:.3f}")
    )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    if report.prefix_fingerprint:
        lines.append(f"prefix fingerprint: {report.prefix_fingerprint}")
    if report.cacheable_tokens is not None:
        lines.append(f"cacheable leading tokens: {report.cacheable_tokens}")
    for s in report.stages:
        for c in s.changes:
            score = f" score={c.score:.3f}" if c.score is not None else ""
            lines.append(f"  {s.stage}: {c.kind} {c.target} ({c.tokens} tokens){score} {c.reason}".rstrip())
    lines.extend(f"warning: {w}" for w in report.warnings)
    return "\n".join(lines)
