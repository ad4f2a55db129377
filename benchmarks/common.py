"""Helpers every benchmark script shares: machine description, percentiles, output."""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
SHARED_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
    }
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return info


def summary(samples_ms: Sequence[float]) -> dict[str, float]:
    """p50 / p90 / p99 / min / max and the interquartile range of a list of timings (ms)."""
    xs = sorted(samples_ms)
    if not xs:
        return {}

    def pct(q: float) -> float:
        return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]

    return {
        "n": len(xs),
        "p50": pct(0.5),
        "p90": pct(0.9),
        "p99": pct(0.99),
        "min": xs[0],
        "max": xs[-1],
        "iqr": pct(0.75) - pct(0.25),
        "mean": statistics.fmean(xs),
    }


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="a run under two minutes")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    p.add_argument("--save", metavar="NAME", help="also write results/NAME.json")
    return p


def emit(result: dict[str, Any], args: argparse.Namespace, table: str) -> None:
    """Print the human table, save when asked, and the JSON object last when --json."""
    print(table)
    if args.save:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / f"{args.save}.json").write_text(json.dumps(result, indent=2) + "\n")
    if args.json:
        print(json.dumps(result))
