"""Benchmark output: the only place numbers are formatted.

``write_outputs`` writes ``results.jsonl`` (one row per item and config), ``summary.json``,
``report.md`` (Markdown tables) and ``quality_vs_ttft.png`` (matplotlib, Agg backend: one point
per config, x = median prefill or TTFT, y = mean quality with its 95 % interval).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from ..errors import DatasetError
from .runner import BASELINE, BenchRun, ItemResult

__all__ = [
    "RunLog",
    "format_markdown",
    "plot_quality_vs_ttft",
    "read_rows",
    "row_line",
    "write_outputs",
]


def _num(x: Any, fmt: str = "{:.3f}") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return fmt.format(x)


def _ci(entry: Mapping[str, Any] | None, fmt: str = "{:.2f}", *, signed: bool = False) -> str:
    if not entry or entry.get("n", 0) == 0:
        return "–"
    f = fmt.replace("{:", "{:+") if signed else fmt
    return f"{f.format(entry['mean'])} [{f.format(entry['low'])}, {f.format(entry['high'])}]"


def _first_token_name(summary: Mapping[str, Any]) -> str:
    backend = str(summary.get("backend", {}).get("backend", ""))
    return "TTFT (client clock)" if backend.startswith("openai") else "prefill"


def format_markdown(summary: Mapping[str, Any]) -> str:
    """The summary as Markdown: provenance, a cost table, a quality table, a delta table."""
    configs: Mapping[str, Any] = summary["configs"]
    order: Sequence[str] = summary.get("order", list(configs))
    ft = _first_token_name(summary)
    lines = _provenance(summary)
    lines += _cost_table(configs, order, ft)
    lines += _quality_table(configs, order)
    lines += _delta_table(configs, order, ft)
    errors = [(label, e) for label in order for e in configs[label].get("errors_sample", [])]
    if errors:
        lines += ["", "## Errors (first few per config)", ""]
        lines += [f"- {label}: {e}" for label, e in errors]
    return "\n".join(lines) + "\n"


def _provenance(summary: Mapping[str, Any]) -> list[str]:
    ds = summary.get("dataset", {})
    lines = [
        "# promptslim bench",
        "",
        (
            f"- dataset: `{ds.get('name')}`, {ds.get('items')} items "
            f"({ds.get('skipped', 0)} records skipped)"
        ),
        f"- model: `{json.dumps(summary.get('backend', {}))}`",
        f"- seed: {summary.get('seed')}; wall time: {_num(summary.get('wall_s'), '{:.1f}')} s",
    ]
    if summary.get("machine"):
        lines.append(f"- machine: `{json.dumps(summary['machine'])}`")
    return lines


def _cost_table(configs: Mapping[str, Any], order: Sequence[str], ft: str) -> list[str]:
    lines = [
        "",
        "## Cost",
        "",
        (
            f"Tokens: promptslim's counter (mean per item); model tokens: the model's own "
            f"tokenizer. {ft}: p50/p95 in seconds. Net TTFT ratio: (promptslim time + {ft}) / "
            f"baseline {ft}, median per item and over the whole set."
        ),
        "",
        (
            "| config | n | errors | tokens in | tokens out | ratio | model tokens "
            f"| promptslim ms p50 / p95 | {ft} s p50 / p95 | net TTFT ratio (median / set) |"
        ),
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for label in order:
        c = configs[label]
        slim, first, net = c["slim_ms"], c["first_token_s"], c["net_ttft_ratio"]
        lines.append(
            f"| {label} | {c['n']} | {c['errors']} | {_num(c['tokens_in'], '{:.0f}')} "
            f"| {_num(c['tokens_out'], '{:.0f}')} | {_num(c['token_ratio'], '{:.2f}')} "
            f"| {_num(c['prompt_tokens'], '{:.0f}')} "
            f"| {_num(slim.get('p50'), '{:.1f}')} / {_num(slim.get('p95'), '{:.1f}')} "
            f"| {_num(first.get('p50'))} / {_num(first.get('p95'))} "
            f"| {_num(net.get('median'), '{:.2f}')} / "
            f"{_num(net.get('aggregate'), '{:.2f}')} |"
        )
    return lines


def _quality_table(configs: Mapping[str, Any], order: Sequence[str]) -> list[str]:
    lines = [
        "",
        "## Quality",
        "",
        (
            "Means with bootstrap 95 % intervals. EM: best-subspan exact match; F1: SQuAD token "
            "F1; evidence: a gold answer is still in the context; gold log-prob: "
            "log P(gold answer | prompt)."
        ),
        "",
        "| config | EM | F1 | evidence | gold log-prob |",
        "| --- | --- | --- | --- | --- |",
    ]
    for label in order:
        q = configs[label]["quality"]
        lines.append(
            f"| {label} | {_ci(q.get('em'))} | {_ci(q.get('f1'))} | {_ci(q.get('evidence'))} "
            f"| {_ci(q.get('gold_logprob'))} |"
        )
    return lines


def _delta_table(configs: Mapping[str, Any], order: Sequence[str], ft: str) -> list[str]:
    lines = [
        "",
        "## Deltas against the baseline",
        "",
        "Config minus baseline on the same items, paired bootstrap 95 % intervals.",
        "",
        f"| config | ΔEM | ΔF1 | Δevidence | Δgold log-prob | Δ{ft} s | Δmodel tokens |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for label in order:
        if label == BASELINE:
            continue
        d = configs[label].get("delta_vs_baseline", {})
        lines.append(
            f"| {label} | {_ci(d.get('em'), signed=True)} | {_ci(d.get('f1'), signed=True)} "
            f"| {_ci(d.get('evidence'), signed=True)} | {_ci(d.get('gold_logprob'), signed=True)} "
            f"| {_ci(d.get('first_token_s'), '{:.3f}', signed=True)} "
            f"| {_ci(d.get('prompt_tokens'), '{:.0f}', signed=True)} |"
        )
    return lines


def plot_quality_vs_ttft(
    summary: Mapping[str, Any], path: str | Path, *, metric: str = "em"
) -> bool:
    """One point per config: x = median prefill/TTFT, y = mean ``metric`` with its 95 % interval.
    Returns False (and writes nothing) when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(6.4, 4.4), dpi=120)
    for label in summary.get("order", list(summary["configs"])):
        c = summary["configs"][label]
        x = c["first_token_s"].get("p50")
        q = c["quality"].get(metric)
        if x is None or not q:
            continue
        y, low, high = q["mean"], q["low"], q["high"]
        ax.errorbar([x], [y], yerr=[[max(y - low, 0.0)], [max(high - y, 0.0)]], fmt="o", capsize=4)
        ax.annotate(label, (x, y), textcoords="offset points", xytext=(6, 4), fontsize=8)
    ax.set_xlabel(f"median {_first_token_name(summary)} (s)")
    ax.set_ylabel({"em": "best-subspan EM", "f1": "token F1"}.get(metric, metric) + " (95 % CI)")
    ax.set_title(
        f"quality vs {_first_token_name(summary)} — {summary.get('dataset', {}).get('name', '')}"
    )
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def write_rows(rows: Sequence[ItemResult], path: str | Path) -> None:
    with Path(path).open("w", encoding="utf-8") as f:
        f.writelines(row_line(row) for row in rows)


def row_line(row: ItemResult) -> str:
    """One results.jsonl line (append these as rows finish to make a run resumable)."""
    return json.dumps(row.as_dict(), ensure_ascii=False) + "\n"


def read_rows(path: str | Path) -> list[ItemResult]:
    """The rows of a results.jsonl (or of a run's progress file) written by this version.

    A process killed mid-write leaves a cut last line: it is dropped (that row is run again);
    a bad line anywhere else is an error naming it."""
    # b"\n" only: row_line writes non-ASCII raw, and U+2028, U+2029 or U+0085 in an answer
    # would make str.splitlines() cut that row in two. Split as bytes, decoded line by line:
    # a kill can cut the last line inside a multi-byte character
    lines = Path(path).read_bytes().split(b"\n")
    if lines and not lines[-1]:
        lines.pop()  # the newline that ends the last row
    names = {f.name for f in fields(ItemResult)}
    rows = []
    for number, raw in enumerate(lines, 1):
        try:
            line = raw.decode("utf-8").removesuffix("\r")
            if not line.strip():
                continue
            data = json.loads(line)
            if not isinstance(data, dict) or not names >= data.keys():
                raise ValueError("not a result row of this version")
            rows.append(ItemResult(**data))
        except (ValueError, TypeError) as exc:
            if number == len(lines):
                break
            raise DatasetError(str(exc), path=str(path), line=number) from exc
    return rows


class RunLog:
    """Rows appended to ``OUT/progress.jsonl`` as they finish, so that a long run cut off (a
    closed session, a crash) goes on where it stopped instead of starting over.

    ``resume=True`` reads the rows an earlier run left (``done``, for ``run_bench(done=...)``)
    and the wall time it had spent; otherwise an old progress file is replaced. ``finish()``
    removes the file once ``results.jsonl`` holds every row. ``start``: the run's
    ``time.perf_counter()`` at its start (default: now)."""

    def __init__(
        self, out_dir: str | Path, *, resume: bool = False, start: float | None = None
    ) -> None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        self.path = out / "progress.jsonl"
        self._wall_path = out / "progress-wall.txt"
        self.done: list[ItemResult] = []
        self.previous_wall_s = 0.0
        if resume and self.path.exists():
            self.done = read_rows(self.path)
            if self.done and self._wall_path.exists():
                self.previous_wall_s = float(self._wall_path.read_text(encoding="utf-8"))
        # rewritten with what is kept, so a line cut by a kill does not stay mid-file
        self.path.write_text("".join(row_line(r) for r in self.done), encoding="utf-8")
        self._file = self.path.open("a", encoding="utf-8")
        self._start = time.perf_counter() if start is None else start

    def finished_items(self, configs: int) -> int:
        """Items with a row for each of ``configs`` configs (what ``run_bench`` will skip)."""
        rows: dict[str, int] = {}
        for r in self.done:
            rows[r.item_id] = rows.get(r.item_id, 0) + 1
        return sum(n >= configs for n in rows.values())

    def wall_s(self) -> float:
        """Wall time of this run and the runs it resumed."""
        return self.previous_wall_s + time.perf_counter() - self._start

    def write(self, row: ItemResult) -> None:
        self._file.write(row_line(row))
        self._file.flush()
        self._wall_path.write_text(f"{self.wall_s():.3f}", encoding="utf-8")

    def close(self) -> None:
        self._file.close()

    def finish(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)
        self._wall_path.unlink(missing_ok=True)


def write_outputs(run: BenchRun, out_dir: str | Path) -> dict[str, Path]:
    """Write the four outputs into ``out_dir`` (created); returns their paths by name."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "results": out / "results.jsonl",
        "summary": out / "summary.json",
        "report": out / "report.md",
        "plot": out / "quality_vs_ttft.png",
    }
    write_rows(run.rows, paths["results"])
    paths["summary"].write_text(
        json.dumps(_jsonable(run.summary), indent=2, ensure_ascii=False) + "\n"
    )
    paths["report"].write_text(format_markdown(run.summary), encoding="utf-8")
    if not plot_quality_vs_ttft(run.summary, paths["plot"]):
        del paths["plot"]
    return paths


def _jsonable(value: Any) -> Any:
    """NaN is not JSON: write null."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value
