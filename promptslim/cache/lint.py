"""What breaks prefix caching in a stream of requests (``promptslim lint``).

For each request: the stable prefix's fingerprint after the prefix stage, every volatile value
in the prefix (which changes per request and so invalidates every cache block after it), and
what is not canonical (key order, whitespace). Over the stream: whether the raw prefix varies,
and the prefix-cache hit rate of each cache model before and after the prefix stage. The
findings quote the volatile values themselves: this is a tool a developer runs on their own
traffic, never a log.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..counters import TokenCounter, get_counter
from ..request import Request
from ..stages.prefix import PrefixStage
from ..stages.prefix_canonical import canonicalise_text
from . import default_models
from .simulator import request_tokens, simulate

__all__ = ["LintReport", "lint_requests"]


@dataclass
class LintReport:
    """``findings``: per request, its label and what was found (fingerprint line first)."""

    requests: int = 0
    prefix_varies: bool = False
    #: ``{"before" | "after": {cache model: hit rate}}``
    hit_rate: dict[str, dict[str, float]] = field(default_factory=dict)
    findings: list[tuple[str, list[str]]] = field(default_factory=list)


def lint_requests(
    requests: Iterable[tuple[str, Request]], *, counter: TokenCounter | None = None
) -> LintReport:
    """Lint ``(label, request)`` pairs in order (the order is the cache's)."""
    counter = counter or get_counter()
    flagger, mover = PrefixStage(policy="flag"), PrefixStage()
    streams: dict[str, list[list[int]]] = {"before": [], "after": []}
    points: dict[str, list[list[int] | None]] = {"before": [], "after": []}
    raw_prefixes: set[str] = set()
    report = LintReport()
    for label, request in requests:
        end = request.prefix_end()
        raw = json.dumps([request.tools, [m.to_openai() for m in request.messages[:end]]])
        raw_prefixes.add(hashlib.sha256(raw.encode()).hexdigest())
        moved = mover.run(request)
        report.findings.append(
            (label, _findings(request, flagger, moved.report.prefix_fingerprint))
        )
        for key, sent in (("before", request), ("after", moved.request)):
            tokens, prefix_len = request_tokens(sent, counter)
            streams[key].append(tokens)
            points[key].append([prefix_len] if prefix_len else None)
    report.requests = len(streams["before"])
    report.prefix_varies = len(raw_prefixes) > 1
    report.hit_rate = {key: _hit_rates(streams[key], points[key]) for key in streams}
    return report


def _findings(request: Request, flagger: PrefixStage, fingerprint: str | None) -> list[str]:
    flagged = flagger.run(request).report
    stage = flagged.stages[0]
    lines = [f"stable-prefix fingerprint {fingerprint or '-'}"]
    for v in stage.details["volatile"]:
        message = request.messages[v["message"]]
        content = message.content
        text = content[v["part"]].text or "" if isinstance(content, list) else message.text
        value = canonicalise_text(text)[v["start"] : v["end"]]
        lines.append(
            f"{v['target']}:{v['start']}-{v['end']} {v['kind']} {value!r}: "
            "varies per request, breaks every cache block after it"
        )
    lines += [
        f"{c.target}: not canonical ({c.reason})"
        for c in stage.changes
        if c.kind in ("rewritten", "reordered")
    ]
    lines += [f"warning: {w}" for w in flagged.warnings]
    return lines


def _hit_rates(stream: list[list[int]], points: list[list[int] | None]) -> dict[str, float]:
    models = default_models()
    results = simulate(stream, {k: m for k, m in models.items() if k != "anthropic"})
    results.update(simulate(stream, {"anthropic": models["anthropic"]}, breakpoints=points))
    return {k: r.hit_rate for k, r in results.items()}
