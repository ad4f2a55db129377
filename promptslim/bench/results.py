"""A benchmark's numbers: one row per item and config (``ItemResult``), and their aggregate
per config (``summarise``): token reduction, timing percentiles, quality with 95 % intervals,
and paired deltas against the baseline."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..stats import mean_ci, paired_bootstrap_ci, percentile
from ..tokens import count_documents, count_message, get_counter
from ..types import Request
from .configs import BASELINE

__all__ = ["QUALITY", "ItemResult", "segment_tokens", "summarise"]


# ---------------------------------------------------------------- per-item results


@dataclass
class ItemResult:
    """One item under one config. Times in seconds; None where not measured."""

    config: str
    item_id: str
    error: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    segments_in: dict[str, int] = field(default_factory=dict)
    segments_out: dict[str, int] = field(default_factory=dict)
    slim_s: float = 0.0
    prompt_tokens: int | None = None
    prefill_s: float | None = None
    ttft_s: float | None = None
    generate_s: float | None = None
    cached_tokens: int | None = None
    #: (slim time + first-token time) / the baseline's first-token time on the same item
    net_ttft_ratio: float | None = None
    em: float | None = None
    f1: float | None = None
    evidence: float | None = None
    gold_logprob: float | None = None
    prediction: str | None = None
    #: the config sent the model a prompt byte-identical to an earlier config's on this item,
    #: so that config's measurement stands for this one too (see ``run_item``)
    reused_measurement: bool = False

    @property
    def first_token_s(self) -> float | None:
        return self.prefill_s if self.prefill_s is not None else self.ttft_s

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def segment_tokens(request: Request) -> dict[str, int]:
    """Tokens per segment: the stable prefix, the history between it and the last user
    message, the documents, and the last user message (the query)."""
    counter = get_counter(request.tokenizer)
    messages = request.messages
    prefix_end = request.prefix_end()
    last = request.last_user_index()
    query = count_message(messages[last], counter) if last is not None else 0
    history = sum(
        count_message(m, counter) for i, m in enumerate(messages) if i >= prefix_end and i != last
    )
    return {
        "prefix": sum(count_message(m, counter) for m in messages[:prefix_end]),
        "history": history,
        "documents": count_documents(request.documents, counter),
        "query": query,
    }


# ---------------------------------------------------------------- aggregation

#: quality metrics compared against the baseline (higher is better)
QUALITY = ("em", "f1", "evidence", "gold_logprob")


def _values(rows: Sequence[ItemResult], attr: str) -> list[float]:
    out = []
    for r in rows:
        v = getattr(r, attr)
        if v is not None:
            out.append(float(v))
    return out


def _paired(
    rows: Sequence[ItemResult], base: Mapping[str, ItemResult], attr: str
) -> tuple[list[float], list[float]]:
    treat, ctrl = [], []
    for r in rows:
        b = base.get(r.item_id)
        x = getattr(r, attr) if attr != "first_token_s" else r.first_token_s
        y = (getattr(b, attr) if attr != "first_token_s" else b.first_token_s) if b else None
        if x is not None and y is not None:
            treat.append(float(x))
            ctrl.append(float(y))
    return treat, ctrl


def summarise(
    rows: Sequence[ItemResult], labels: Sequence[str], *, seed: int = 0
) -> dict[str, Any]:
    """Per config: counts, token reduction, timing percentiles, quality means with 95 %
    intervals, and deltas against the baseline with paired bootstrap 95 % intervals."""
    base = {r.item_id: r for r in rows if r.config == BASELINE and r.error is None}
    configs: dict[str, Any] = {}
    for label in labels:
        mine = [r for r in rows if r.config == label]
        ok = [r for r in mine if r.error is None]
        first = [r.first_token_s for r in ok if r.first_token_s is not None]
        slim = _values(ok, "slim_s")
        tokens_in = sum(r.tokens_in for r in ok)
        tokens_out = sum(r.tokens_out for r in ok)
        entry: dict[str, Any] = {
            "n": len(ok),
            "errors": len(mine) - len(ok),
            "tokens_in": tokens_in / len(ok) if ok else None,
            "tokens_out": tokens_out / len(ok) if ok else None,
            "token_ratio": tokens_out / tokens_in if tokens_in else None,
            "prompt_tokens": _mean(_values(ok, "prompt_tokens")),
            "segments_out": _segment_means(ok),
            "slim_ms": {k: v * 1e3 for k, v in _pcts(slim).items()},
            "first_token_s": _pcts(first),
            "generate_s": _pcts(_values(ok, "generate_s")),
            "cached_tokens": _mean(_values(ok, "cached_tokens")),
            "net_ttft_ratio": {
                "median": percentile(_values(ok, "net_ttft_ratio"), 50),
                "aggregate": _aggregate_ratio(ok, base),
            },
            "quality": {
                q: mean_ci(_values(ok, q), seed=seed).as_dict() for q in QUALITY if _values(ok, q)
            },
            "errors_sample": [r.error for r in mine if r.error][:3],
        }
        if label != BASELINE and base:
            deltas = {}
            for q in (*QUALITY, "first_token_s", "prompt_tokens"):
                treat, ctrl = _paired(ok, base, q)
                if treat:
                    deltas[q] = paired_bootstrap_ci(treat, ctrl, seed=seed).as_dict()
            entry["delta_vs_baseline"] = deltas
        configs[label] = entry
    return {"configs": configs, "order": list(labels)}


def _aggregate_ratio(rows: Sequence[ItemResult], base: Mapping[str, ItemResult]) -> float | None:
    """(total slim time + total first-token time) / total baseline first-token time, over the
    items both have: what the whole set costs, slimming included."""
    num = den = 0.0
    for r in rows:
        b = base.get(r.item_id)
        if r.first_token_s is None or b is None or b.first_token_s is None:
            continue
        num += r.slim_s + r.first_token_s
        den += b.first_token_s
    return num / den if den > 0 else None


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _pcts(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {}
    return {
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
    }


def _segment_means(rows: Sequence[ItemResult]) -> dict[str, float]:
    if not rows:
        return {}
    keys = sorted({k for r in rows for k in r.segments_out})
    return {k: sum(r.segments_out.get(k, 0) for r in rows) / len(rows) for k in keys}
