"""Statistics for measurements: one definition of a percentile, paired bootstrap intervals,
and the spread summary every benchmark reports.

- ``percentile(values, q)``: the ``q``-th percentile (0-100) by linear interpolation between
  the closest ranks (numpy's default method); NaN for no values. Every percentile the bench
  runner, the load tester, the simulator and the benchmark scripts report is this one.
- ``percentiles(values, qs)``: ``{"p50": ..., "p95": ..., "p99": ...}``.
- ``spread(values)``: n, p50 / p90 / p99, min, max, interquartile range and mean, the summary a
  benchmark's JSON carries for each timed quantity.
- ``paired_bootstrap_ci`` / ``mean_ci``: a mean (of paired differences) with a seeded
  percentile-bootstrap interval; pairing cancels per-item difficulty out of a quality delta.
- ``proportion_ci``: a share of successes with scipy's Wilson score interval, which does not
  collapse to a point when every trial succeeded, as a bootstrap of all ones does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "Interval",
    "mean_ci",
    "paired_bootstrap_ci",
    "percentile",
    "percentiles",
    "proportion_ci",
    "spread",
]


def _array(values: Iterable[float]) -> np.ndarray:
    listed = values if isinstance(values, (Sequence, np.ndarray)) else list(values)
    return np.asarray(listed, dtype=float)


def percentile(values: Iterable[float], q: float) -> float:
    """The ``q``-th percentile (0-100, linear interpolation); NaN for no values."""
    if not 0 <= q <= 100:
        raise ValueError(f"percentile: q must be in [0, 100], got {q}")
    a = _array(values)
    if a.size == 0:
        return float("nan")
    return float(np.percentile(a, q))


def percentiles(values: Iterable[float], qs: Sequence[float] = (50, 95, 99)) -> dict[str, float]:
    """``{"p50": ..., "p95": ..., "p99": ...}`` of ``values`` (``p{q:g}`` for each ``q``)."""
    a = _array(values)
    return {f"p{q:g}": percentile(a, q) for q in qs}


def spread(values: Iterable[float]) -> dict[str, float]:
    """n, p50 / p90 / p99, min, max, interquartile range and mean of ``values``; ``{}`` for
    none (a benchmark that timed nothing reports nothing rather than NaNs)."""
    a = _array(values)
    if a.size == 0:
        return {}
    p25, p50, p75, p90, p99 = np.percentile(a, [25, 50, 75, 90, 99])
    return {
        "n": int(a.size),
        "p50": float(p50),
        "p90": float(p90),
        "p99": float(p99),
        "min": float(a.min()),
        "max": float(a.max()),
        "iqr": float(p75 - p25),
        "mean": float(a.mean()),
    }


@dataclass(frozen=True)
class Interval:
    """A mean and its confidence interval over ``n`` items."""

    mean: float
    low: float
    high: float
    n: int
    confidence: float = 0.95

    def as_dict(self) -> dict[str, float | int]:
        return {"mean": self.mean, "low": self.low, "high": self.high, "n": self.n}


def paired_bootstrap_ci(
    treatment: Sequence[float],
    control: Sequence[float],
    *,
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Interval:
    """Mean of ``treatment[i] - control[i]`` and its percentile-bootstrap interval: items are
    resampled as pairs, so per-item difficulty cancels out. Seeded: the same input gives the
    same interval."""
    if len(treatment) != len(control):
        raise ValueError(f"paired samples differ in length: {len(treatment)} vs {len(control)}")
    deltas = np.asarray(treatment, dtype=float) - np.asarray(control, dtype=float)
    n = len(deltas)
    if n == 0:
        nan = float("nan")
        return Interval(nan, nan, nan, 0, confidence)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(resamples, n))
    means = deltas[idx].mean(axis=1)
    alpha = (1.0 - confidence) / 2
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return Interval(float(deltas.mean()), float(low), float(high), n, confidence)


def mean_ci(
    values: Sequence[float], *, resamples: int = 2000, confidence: float = 0.95, seed: int = 0
) -> Interval:
    """Mean of ``values`` with a bootstrap interval (a paired one against zeros)."""
    return paired_bootstrap_ci(
        values, [0.0] * len(values), resamples=resamples, confidence=confidence, seed=seed
    )


def proportion_ci(successes: int, n: int, *, confidence: float = 0.95) -> Interval:
    """The share ``successes / n`` and its Wilson score interval (scipy's ``binomtest``):
    52 of 52 gives 0.93-1.00, where a bootstrap of 52 ones gives 1.00-1.00."""
    if not 0 <= successes <= n:
        raise ValueError(f"proportion_ci: successes must be in [0, n], got {successes} of {n}")
    if n == 0:
        nan = float("nan")
        return Interval(nan, nan, nan, 0, confidence)
    from scipy.stats import binomtest  # scipy: the bench extra (and sentence-transformers')

    ci = binomtest(successes, n).proportion_ci(confidence_level=confidence, method="wilson")
    return Interval(successes / n, float(ci.low), float(ci.high), n, confidence)
