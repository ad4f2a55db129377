"""Answer-quality metrics and the statistics the reports use.

- ``normalize_answer``: SQuAD-style (lowercase, drop punctuation and the articles a/an/the,
  squeeze whitespace), as the "Lost in the Middle" study and SQuAD's scorer do.
- ``best_subspan_em``: 1.0 when a normalised gold answer occurs in the normalised prediction
  (the study's QA metric; a long, rambling prediction is not penalised).
- ``token_f1``: SQuAD token-overlap F1, best over the gold answers; Chinese (CJK) text counts
  characters as tokens, as CMRC-style Chinese QA evaluations do, Latin words stay words.
- ``evidence_retention``: 1.0 when a gold answer is still in the prompt text (needs no model).
- ``paired_bootstrap_ci``: mean of paired deltas with a seeded percentile-bootstrap interval.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..text import normalise_width

__all__ = [
    "Interval",
    "best_subspan_em",
    "evidence_retention",
    "normalize_answer",
    "paired_bootstrap_ci",
    "percentile",
    "percentiles",
    "token_f1",
]

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
# spaces next to a CJK character carry no meaning in Chinese ("北京 市" is "北京市")
_SPACE_BY_CJK = re.compile(f"(?<=[{_CJK}])\\s+|\\s+(?=[{_CJK}])")
_ANSWER_TOKEN = re.compile(f"[{_CJK}]|[^\\s{_CJK}]+")
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lowercase, delete punctuation, remove articles, squeeze spaces.

    Unicode punctuation (category P*) is removed too, and text is NFC-normalised first so a
    precomposed and a combining "ö" compare equal."""
    # full-width letters and digits fold to half-width (text.normalise_width): "１２３" is "123"
    text = normalise_width(unicodedata.normalize("NFC", text)).lower()
    text = "".join(
        ch for ch in text if ch not in _PUNCTUATION and not unicodedata.category(ch).startswith("P")
    )
    text = _ARTICLES.sub(" ", text)
    return _SPACE_BY_CJK.sub("", " ".join(text.split()))


def best_subspan_em(prediction: str, answers: Iterable[str]) -> float:
    """1.0 when any normalised gold answer is a substring of the normalised prediction."""
    pred = normalize_answer(prediction)
    for answer in answers:
        gold = normalize_answer(answer)
        if gold and gold in pred:
            return 1.0
    return 0.0


def _f1(prediction: str, answer: str) -> float:
    pred_tokens = _ANSWER_TOKEN.findall(normalize_answer(prediction))
    gold_tokens = _ANSWER_TOKEN.findall(normalize_answer(answer))
    if not pred_tokens or not gold_tokens:
        # SQuAD: two empty answers agree, one empty one does not
        return float(pred_tokens == gold_tokens)
    common = Counter(pred_tokens) & Counter(gold_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred_tokens)
    recall = same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, answers: Iterable[str]) -> float:
    """SQuAD token F1 of the prediction against the best-matching gold answer."""
    return max((_f1(prediction, a) for a in answers), default=0.0)


def evidence_retention(prompt_text: str, answers: Iterable[str]) -> float:
    """1.0 when a gold answer still occurs in the prompt (both normalised), else 0.0."""
    return best_subspan_em(prompt_text, answers)


# ---------------------------------------------------------------- statistics


@dataclass(frozen=True)
class Interval:
    """A point estimate with its confidence interval."""

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
    import numpy as np

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


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100, linear interpolation); NaN for no values."""
    import numpy as np

    if len(values) == 0:
        return float("nan")
    return float(np.percentile(np.asarray(values, dtype=float), q))


def percentiles(values: Sequence[float], qs: Sequence[float] = (50, 95, 99)) -> dict[str, float]:
    """``{"p50": ..., "p95": ..., "p99": ...}`` of ``values``."""
    return {f"p{q:g}": percentile(values, q) for q in qs}
