"""Load-test aggregates: vLLM ``bench serve`` names in ms, overall and per prompt-length bucket,
rates, throughput, goodput under a TTFT SLO and the buffering verdict."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..stats import percentiles
from .records import RequestRecord

__all__ = ["BUCKET_EDGES", "QUANTILES", "bucket_label", "summarise"]

#: prompt-length bucket edges (tokens): a long-prompt tail hides in an overall percentile
BUCKET_EDGES: tuple[int, ...] = (256, 512, 1024, 2048, 4096, 8192)
QUANTILES: tuple[float, ...] = (50, 90, 95, 99)


def _stats_ms(values_s: Sequence[float]) -> dict[str, float]:
    if not values_s:
        return {"n": 0}
    ms = [v * 1000 for v in values_s]
    out: dict[str, float] = {"n": len(ms), "mean": sum(ms) / len(ms)}
    out.update(percentiles(ms, QUANTILES))
    out["max"] = max(ms)
    return out


def bucket_label(tokens: int) -> str:
    low = 0
    for edge in BUCKET_EDGES:
        if tokens < edge:
            return f"{low}-{edge - 1}"
        low = edge
    return f">={low}"


def _latency(records: Sequence[RequestRecord]) -> dict[str, dict[str, float]]:
    ok = [r for r in records if r.status == "ok"]
    return {
        "ttft_ms": _stats_ms([r.ttft_s for r in ok if r.ttft_s is not None]),
        "tpot_ms": _stats_ms([t for r in ok if (t := r.tpot_s) is not None]),
        "itl_ms": _stats_ms([x for r in ok for x in r.itl_s]),
        "e2el_ms": _stats_ms([r.e2e_s for r in ok if r.e2e_s is not None]),
    }


def summarise(
    records: Sequence[RequestRecord],
    *,
    wall_s: float,
    slo_ttft_ms: float | None = None,
    bunch_window_ms: float = 5.0,
) -> dict[str, Any]:
    """Numbers only (ms for latencies): percentiles overall and per prompt-length bucket,
    error and timeout rates, throughput, goodput under the TTFT SLO, buffering verdict."""
    n = len(records)
    ok = [r for r in records if r.status == "ok"]
    out_tokens = sum(r.output_tokens for r in ok)
    in_tokens = sum(r.prompt_tokens for r in ok)
    buckets: dict[str, list[RequestRecord]] = {}
    for r in sorted(records, key=lambda r: r.prompt_tokens):
        buckets.setdefault(bucket_label(r.prompt_tokens), []).append(r)
    verdicts = [v for r in ok if (v := r.bunched(bunch_window_ms / 1000)) is not None]
    bunched = sum(verdicts)
    summary: dict[str, Any] = {
        "requests": n,
        "completed": len(ok),
        "error_rate": sum(r.status == "error" for r in records) / n if n else 0.0,
        "timeout_rate": sum(r.status == "timeout" for r in records) / n if n else 0.0,
        "cancelled": sum(r.status == "cancelled" for r in records),
        "retried": sum(r.retries > 0 for r in records),
        "duration_s": wall_s,
        "request_throughput": len(ok) / wall_s if wall_s > 0 else 0.0,
        "output_token_throughput": out_tokens / wall_s if wall_s > 0 else 0.0,
        "total_token_throughput": (in_tokens + out_tokens) / wall_s if wall_s > 0 else 0.0,
        "prompt_tokens_mean": in_tokens / len(ok) if ok else 0.0,
        **_latency(records),
        "sched_delay_ms": _stats_ms([r.sched_delay_s for r in records if r.status != "cancelled"]),
        "slim_ms": _stats_ms([r.slim_s for r in records]),
        "phases_ms": {
            "connect": _stats_ms([r.connect_s for r in ok if r.connect_s is not None]),
            "request_sent": _stats_ms(
                [r.request_sent_s for r in ok if r.request_sent_s is not None]
            ),
            "first_byte": _stats_ms([r.first_byte_s for r in ok if r.first_byte_s is not None]),
            "first_token": _stats_ms([r.ttft_s for r in ok if r.ttft_s is not None]),
        },
        "by_prompt_bucket": {
            label: {"requests": len(rs), **_latency(rs)} for label, rs in buckets.items()
        },
        "buffering": {
            "streams_checked": len(verdicts),
            "bunched": bunched,
            # most streams bunched: something between server and client holds tokens back
            "buffered": bool(verdicts) and bunched >= 0.5 * len(verdicts),
            "window_ms": bunch_window_ms,
        },
    }
    if slo_ttft_ms is not None:
        good = [r for r in ok if r.ttft_s is not None and r.ttft_s * 1000 <= slo_ttft_ms]
        summary["slo_ttft_ms"] = slo_ttft_ms
        summary["goodput"] = len(good) / wall_s if wall_s > 0 else 0.0
        summary["slo_attainment"] = len(good) / n if n else 0.0
    return summary
