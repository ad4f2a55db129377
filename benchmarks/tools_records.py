"""``bench_tools.py``'s records: ``config_data``'s compose files, Kubernetes manifests, TOML
tables, ``git log`` output and a ``terraform plan``, ``tool_records_data``'s ``git diff``,
log with JSON payloads, Markdown handbook and the rest, and ``tool_named_data``'s ``nginx``
servers, job log and records named by plain words, each sent as one tool result (a call whose
arguments name no file, so the result is routed by its content), the question the turn's user
message.

The answer is a line a few lines from the one naming the question's subject, inside the same
record (indented blocks, a ``[section]`` of flat keys, a commit's header above its message, the
block a comment names, a diff's hunk, a payload below its log line, a Markdown section): the
tools stage must keep the rest of that record, not just the lines around the name. Side by
side on the same items: ``default`` (the tools stage as it comes) and ``records_off`` (the code
and log compressors' ``records=False``: only the lines around each named line; the Markdown
handbook goes to the passage ranking, which that option does not touch, so its two rows are
the same). Figures per shape: ``evidence``
(the answer still in the tool message) with its Wilson 95 % interval, ``token_ratio`` (the
message's tokens out / in), ``kinds`` (which compressor each result went to) and ``p50_ms`` /
``p99_ms`` of the stage's run on the request.
"""

from __future__ import annotations

import json
import random
import time
from typing import Any

from config_data import INDENTED, TOOL_ONLY
from tool_named_data import NAMED_RECORDS
from tool_records_data import TOOL_RECORDS

from promptslim.bench.dataset_base import BenchItem
from promptslim.stages.tools import ToolsStage
from promptslim.stats import percentile, proportion_ci
from promptslim.tokens import get_counter
from promptslim.types import Request

__all__ = ["indented_records"]

#: the tools stage's options per config
CONFIGS: dict[str, dict[str, Any]] = {
    "default": {},
    "records_off": {"options": {"code": {"records": False}, "log": {"records": False}}},
}


def _request(item: BenchItem) -> Request:
    """The item's documents as one tool result, its question the user's turn."""
    question = item.request.messages[-1].text.strip().splitlines()[-1]
    body = "\n---\n".join(d.text for d in item.request.documents)
    call = {"name": "read_config", "arguments": json.dumps({"scope": "all"})}
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are an operations assistant."},
        {"role": "user", "content": question},
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": call}]},
        {"role": "tool", "tool_call_id": "c1", "content": body},
    ]
    return Request.from_openai({"messages": messages})


class _Rows:
    """One config's figures, gathered item by item."""

    def __init__(self) -> None:
        self.kept = 0
        self.ratios: list[float] = []
        self.ms: list[float] = []
        self.kinds: dict[str, int] = {}

    def add(self, item: BenchItem, options: dict[str, Any]) -> None:
        count = get_counter().count
        stage = ToolsStage(**options)  # a fresh memo: every result compressed cold
        request = _request(item)
        start = time.perf_counter()
        out = stage.run(request)
        self.ms.append((time.perf_counter() - start) * 1e3)
        text = out.request.messages[-1].text
        self.kept += all(a in text for a in item.answers)
        self.ratios.append(count(text) / count(request.messages[-1].text))
        for entry in out.report.stages[0].details.get("tools", []) or [{"kind": "unchanged"}]:
            self.kinds[entry["kind"]] = self.kinds.get(entry["kind"], 0) + 1

    def figures(self) -> dict[str, Any]:
        n = len(self.ms)
        ci = proportion_ci(self.kept, n)
        return {
            "n": n,
            "evidence": self.kept / n,
            "evidence_ci95": [ci.low, ci.high],
            "token_ratio": sum(self.ratios) / n,
            "kinds": self.kinds,
            "p50_ms": percentile(self.ms, 50),
            "p99_ms": percentile(self.ms, 99),
        }


def indented_records(n: int, seed: int = 11) -> dict[str, Any]:
    """Each shape's ``n`` items under each config, the same items side by side (the configs'
    order alternating item by item, so neither is always the first to meet a text)."""
    out: dict[str, Any] = {}
    for shape, make in {**INDENTED, **TOOL_ONLY, **TOOL_RECORDS, **NAMED_RECORDS}.items():
        rng = random.Random(seed)
        rows = {name: _Rows() for name in CONFIGS}
        for i in range(n):
            item = make(rng, i)
            names = list(CONFIGS) if i % 2 == 0 else list(reversed(CONFIGS))
            for name in names:
                rows[name].add(item, CONFIGS[name])
        out[shape] = {name: r.figures() for name, r in rows.items()}
    return out


def records_table(rows: dict[str, Any]) -> list[str]:
    """The side-by-side table for people."""
    lines = [
        "",
        "| records as a tool result | config | evidence [95% CI] | token_ratio | kinds |",
        "|---|---|---|---|---|",
    ]
    for shape, configs in rows.items():
        for name, r in configs.items():
            low, high = r["evidence_ci95"]
            lines.append(
                f"| {shape} ({r['n']}) | {name} | {r['evidence']:.3f} [{low:.2f}, {high:.2f}] | "
                f"{r['token_ratio']:.3f} | {r['kinds']} |"
            )
    return lines
