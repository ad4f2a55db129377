"""Answer-quality metrics and the statistics the reports use.

- ``normalize_answer``: SQuAD-style (lowercase, drop punctuation and the articles a/an/the,
  squeeze whitespace), as the "Lost in the Middle" study and SQuAD's scorer do.
- ``best_subspan_em``: 1.0 when a normalised gold answer occurs in the normalised prediction
  (the study's QA metric; a long, rambling prediction is not penalised).
- ``token_f1``: SQuAD token-overlap F1, best over the gold answers; Chinese (CJK) text counts
  characters as tokens, as CMRC-style Chinese QA evaluations do, Latin words stay words.
- ``evidence_retention``: 1.0 when a gold answer is still in the prompt text (needs no model).

The statistics the reports use (``percentile``, ``percentiles``, ``paired_bootstrap_ci``,
``mean_ci``, ``Interval``) live in :mod:`promptslim.stats` and are re-exported here.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from collections.abc import Iterable

from ..stats import Interval, mean_ci, paired_bootstrap_ci, percentile, percentiles
from ..text import normalise_width

__all__ = [
    "Interval",
    "best_subspan_em",
    "evidence_retention",
    "mean_ci",
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
