"""``bench_compress.py``'s figures from its per-item records: one (compressor, rate) entry, and
a native compressor against llmlingua on the items both ran."""

from __future__ import annotations

import statistics
from typing import Any

from promptslim.stats import percentile

RATES = (0.5, 0.33)
#: per (compressor, rate): per-item records, in row order
Records = dict[tuple[str, float], list[dict[str, Any]]]


def entry(recs: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(recs)
    times = [r["ms"] for r in recs]
    entry: dict[str, Any] = {
        "rate": round(statistics.mean(r["rate"] for r in recs), 4),
        "retention": round(sum(r["kept"] for r in recs) / n, 4),
        "p50_ms": round(percentile(times, 50), 2),
        "p99_ms": round(percentile(times, 99), 2),
        "p50_cpu_ms": round(percentile([r["cpu_ms"] for r in recs], 50), 2),
        "net_ratio": None,
        "n": n,
    }
    measured = [r for r in recs if "net" in r]
    if measured:
        entry["net_ratio"] = round(statistics.median(r["net"] for r in measured), 3)
        entry["prefill_original_s"] = round(
            statistics.median(r["prefill_original_s"] for r in measured), 3
        )
        entry["prefill_compressed_s"] = round(
            statistics.median(r["prefill_compressed_s"] for r in measured), 3
        )
        entry["prefill_n"] = len(measured)
    return entry


def versus(records: Records, shared: int, native: str = "lm") -> dict[str, Any]:
    """``native`` (lm or lm_fp32) against llmlingua on the items both ran (the first
    ``shared`` rows)."""
    speedup: dict[str, float | None] = {}
    speedup_cpu: dict[str, float | None] = {}
    detail: dict[str, Any] = {}
    for rate in RATES:
        lm_recs, ll_recs = records[(native, rate)][:shared], records[("llmlingua", rate)][:shared]
        if not lm_recs or not ll_recs:
            speedup[str(rate)] = speedup_cpu[str(rate)] = None
            continue
        med = {
            k: statistics.median(r[k] for r in ll_recs) / statistics.median(r[k] for r in lm_recs)
            for k in ("ms", "cpu_ms")
        }
        speedup[str(rate)], speedup_cpu[str(rate)] = round(med["ms"], 2), round(med["cpu_ms"], 2)
        detail[str(rate)] = {
            name: {
                "rate": round(statistics.mean(r["rate"] for r in recs), 4),
                "retention": round(sum(r["kept"] for r in recs) / len(recs), 4),
                "p50_ms": round(statistics.median(r["ms"] for r in recs), 2),
            }
            for name, recs in ((native, lm_recs), ("llmlingua", ll_recs))
        } | {"n": len(lm_recs)}
    return {
        f"{native}_speedup_vs_llmlingua": speedup,
        f"{native}_speedup_vs_llmlingua_cpu": speedup_cpu,
        f"{native}_vs_llmlingua": detail,
    }
