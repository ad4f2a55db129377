"""Metrics against hand-computed cases; the bootstrap interval against a known truth."""

from __future__ import annotations

import random

import pytest

from promptslim.bench.metrics import (
    best_subspan_em,
    evidence_retention,
    normalize_answer,
    paired_bootstrap_ci,
    percentile,
    percentiles,
    token_f1,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The Eiffel Tower!", "eiffel tower"),
        ("  an  apple,  a pear  ", "apple pear"),
        ("Röntgen's prize", "röntgens prize"),
        ("theory of the case", "theory of case"),  # "the" only as a word
        ("“Quoted” — text", "quoted text"),  # Unicode punctuation too
    ],
)
def test_normalize_answer_is_squad_style(text: str, expected: str) -> None:
    assert normalize_answer(text) == expected


def test_best_subspan_em() -> None:
    assert best_subspan_em("It was Wilhelm Conrad Röntgen, in 1901.", ["Wilhelm Conrad Röntgen"]) == 1.0
    assert best_subspan_em("Röntgen", ["Wilhelm Conrad Röntgen"]) == 0.0
    assert best_subspan_em("the answer is Paris", ["London", "paris"]) == 1.0
    assert best_subspan_em("anything", ["the"]) == 0.0  # a gold that normalises to "" never matches


def test_token_f1_hand_computed() -> None:
    # pred tokens {new, york, city}, gold {new, york}: P = 2/3, R = 1, F1 = 0.8
    assert token_f1("New York City", ["New York"]) == pytest.approx(0.8)
    assert token_f1("Paris", ["London", "Paris"]) == 1.0
    assert token_f1("", ["x"]) == 0.0
    # repeated tokens count once per occurrence: pred [a1, a1], gold [a1]: P = 1/2, R = 1
    assert token_f1("a1 a1", ["a1"]) == pytest.approx(2 / 3)


def test_evidence_retention() -> None:
    assert evidence_retention("Document [1] It was built in 1889.", ["1889"]) == 1.0
    assert evidence_retention("Document [1] It was built long ago.", ["1889"]) == 0.0


def test_paired_bootstrap_covers_the_true_delta() -> None:
    rng = random.Random(1)
    true_delta = 0.3
    control = [rng.gauss(0, 1) for _ in range(400)]
    treatment = [c + true_delta + rng.gauss(0, 0.5) for c in control]
    ci = paired_bootstrap_ci(treatment, control, seed=3)
    assert ci.low < true_delta < ci.high
    assert ci.high - ci.low < 0.25  # pairing removes the per-item spread
    assert paired_bootstrap_ci(treatment, control, seed=3) == ci  # seeded
    with pytest.raises(ValueError):
        paired_bootstrap_ci([1.0], [1.0, 2.0])


def test_percentiles() -> None:
    values = [float(x) for x in range(1, 101)]
    assert percentile(values, 50) == pytest.approx(50.5)
    assert percentiles(values)["p99"] == pytest.approx(99.01)


def test_proportion_ci_is_wilson_and_keeps_width_at_all_successes() -> None:
    from promptslim.stats import proportion_ci

    # Wilson's interval for 8 of 10 at 95 %: 0.490-0.943 (closed form, by hand)
    ci = proportion_ci(8, 10)
    assert ci.mean == 0.8 and ci.n == 10
    assert ci.low == pytest.approx(0.4902, abs=1e-3) and ci.high == pytest.approx(0.9433, abs=1e-3)
    every = proportion_ci(52, 52)
    assert every.high == 1.0 and 0.92 < every.low < 0.94  # a bootstrap of ones gives 1.0-1.0
    with pytest.raises(ValueError, match="successes"):
        proportion_ci(3, 2)
