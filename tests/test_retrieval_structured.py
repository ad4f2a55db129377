"""Retrieval on documents that are records, not prose: JSON exports, tables, log chunks. A
record deep inside one is read like any sentence, and documents of one layout with different
values are not taken for copies of each other."""

from __future__ import annotations

import json

import pytest

from promptslim.stages.retrieval import RetrievalStage
from promptslim.stages.windows import SCORING_CHARS_PER_WINDOW, split_windows
from promptslim.types import Document, Message, Request

QUESTION = "What is the monthly recurring revenue (mrr) of Globex Corporation?"
ANSWER = "48250"


def customers(batch: int, *, globex_at: int | None = None) -> str:
    """A JSON export of 25 customer records; Globex's record at ``globex_at``."""
    records: list[dict[str, object]] = [
        {
            "id": f"cust-{batch}-{j}",
            "name": f"Customer {batch}-{j}",
            "plan": ("basic", "pro")[(batch + j) % 2],
            "mrr": 10 + (batch * 31 + j * 17) % 490,
        }
        for j in range(25)
    ]
    if globex_at is not None:
        records[globex_at] = {
            "id": f"cust-{batch}-{globex_at}",
            "name": "Globex Corporation",
            "plan": "enterprise",
            "mrr": int(ANSWER),
        }
    return json.dumps(records, indent=2)


def request(texts: list[str]) -> Request:
    return Request(
        messages=[
            Message(role="system", content="Answer from the documents."),
            Message(role="user", content=QUESTION),
        ],
        documents=[Document(id=f"j{i}", text=t) for i, t in enumerate(texts)],
    )


def exports(*, minified: bool = False) -> list[str]:
    texts = [customers(i, globex_at=19 if i == 5 else None) for i in range(8)]
    return [json.dumps(json.loads(t), separators=(",", ":")) for t in texts] if minified else texts


@pytest.mark.parametrize("minified", [False, True])
def test_a_huge_unit_is_scored_in_parts_over_the_same_units(minified: bool) -> None:
    # one JSON document is one unit (never cut): its text is scored in parts of about a
    # window, every part over that one unit, and no part's text is lost or runs long
    text = exports(minified=minified)[5]
    windowed = split_windows([text], [None], window_chars=200, overlap=1, max_windows=64)
    size = windowed.window_chars
    assert len(text) > SCORING_CHARS_PER_WINDOW * size
    assert windowed.units == [[windowed.units[0][0]]]
    parts = windowed.windows
    assert len(parts) > 1 and [w.part for w in parts] == list(range(len(parts)))
    assert all((w.first, w.last) == (0, 1) for w in parts)
    assert all(len(w.text) <= 2 * size for w in parts)
    assert "".join(w.text for w in parts) == text
    assert [w.later for w in parts] == [False] + [True] * (len(parts) - 1)


@pytest.mark.parametrize("scorer", ["hybrid", "bm25"])
def test_a_record_past_the_head_of_a_json_document_keeps_its_document(scorer: str) -> None:
    # Globex is the 20th record, about 2,000 characters in: past what one window's scoring
    # text used to read; the document holding it goes first, whole and byte-exact
    texts = exports()
    assert texts[5].index("Globex") > SCORING_CHARS_PER_WINDOW * 600
    out = RetrievalStage(scorer=scorer).run(request(texts))
    kept = {d.id: d.text for d in out.documents}
    assert out.documents[0].id == "j5"
    assert kept["j5"] == texts[5]


def test_records_of_one_layout_are_not_near_duplicates_by_embedding() -> None:
    # the exports embed alike (cosine over 0.95) though no record is shared: a near-duplicate
    # by embedding must also share its words, so the dense scorer, which cannot tell them
    # apart, keeps them all rather than one at random
    out = RetrievalStage(scorer="dense", cutoff="none", max_k=None).run(request(exports()))
    reasons = [c.reason for c in out.report.stages[0].changes]
    assert not any("near-duplicate" in r for r in reasons)
    assert "j5" in {d.id for d in out.documents}


def test_a_copy_of_an_export_is_still_a_near_duplicate_by_embedding() -> None:
    texts = exports()
    copy = texts[5].replace('"plan": "enterprise"', '"plan": "Enterprise"')
    out = RetrievalStage(scorer="dense", cutoff="none", max_k=None).run(request([*texts, copy]))
    ids = {d.id for d in out.documents}
    assert len(ids & {"j5", "j8"}) == 1
    assert any(
        "near-duplicate" in c.reason and "embedding" in c.reason
        for c in out.report.stages[0].changes
    )


# ---------------------------------------------------------------- near-equal dense scores


def modules(*, with_retry: int) -> list[Document]:
    """Six code files of look-alike helpers; one also defines ``retry_delay``."""
    docs = []
    for i in range(6):
        body = "\n\n".join(
            f'def helper_{i}_{k}(x):\n    """Helper {k} of module {i}."""\n    return x * {k} + {i}\n'
            for k in range(40)
        )
        if i == with_retry:
            body += (
                '\n\ndef retry_delay(attempt):\n    """Seconds to wait before retry number '
                '``attempt``: exponential backoff capped at 30."""\n'
                "    return min(30, 0.5 * 2 ** attempt)\n"
            )
        docs.append(Document(id=f"c{i}", text=f"```python\n{body}```"))
    return docs


def test_near_equal_similarities_do_not_outvote_the_one_lexical_match() -> None:
    # every window of these files is 0.02-0.10 from the question by cosine: noise, which
    # min-max scaling alone stretched to BM25's full range, so all six files passed the
    # cut-off; scaled as if spread DENSE_MIN_SPREAD, the one file that names it stays alone
    question = "How is the retry delay computed, and what is its cap?"
    req = Request(
        messages=[Message(role="user", content=question)], documents=modules(with_retry=2)
    )
    # windows of 700 characters: every part of these files is read by the model (30 windows),
    # and each holds several helpers, so every window is about as near the question
    assert [d.id for d in RetrievalStage(window_chars=700).run(req).documents] == ["c2"]
    off = RetrievalStage(window_chars=700, dense_min_spread=0.0).run(req)
    assert len(off.documents) > 1  # the floor is what tells them apart


def test_minmax_floor_scales_a_narrow_spread_down_and_leaves_a_wide_one() -> None:
    import numpy as np

    from promptslim.backends.scorers import minmax, weighted_fusion

    narrow = np.array([0.02, 0.05, 0.08])
    assert np.allclose(minmax(narrow, 0.15), [0.0, 0.2, 0.4])
    wide = np.array([0.1, 0.4, 0.7])
    assert np.allclose(minmax(wide, 0.15), minmax(wide))
    assert np.allclose(weighted_fusion([wide, narrow], [0.5, 0.5], (0.0, 0.15)), [0.0, 0.35, 0.7])


@pytest.mark.parametrize("value", [-0.1, 2.5])
def test_dense_min_spread_is_validated(value: float) -> None:
    from promptslim.backends.scorers import HybridScorer
    from promptslim.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        RetrievalStage(dense_min_spread=value)
    assert err.value.field == "dense_min_spread"
    with pytest.raises(ConfigError):
        HybridScorer(dense_min_spread=value)
