"""Retrieval on documents that are records, not prose: JSON exports, tables, log chunks. A
record deep inside one is read like any sentence, and documents of one layout with different
values are not taken for copies of each other."""

from __future__ import annotations

import json
import random

import pytest

from promptslim.backends.lexical import bm25_scores
from promptslim.stages.retrieval import RetrievalStage
from promptslim.stages.windows import SCORING_CHARS_PER_WINDOW, split_windows
from promptslim.text import analyse
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


def accounts(seed: int) -> tuple[list[str], int]:
    """Five JSON exports of 40 accounts of one layout; one account is Marguerite Okafor's (in
    which export, returned)."""
    rng = random.Random(seed)
    target, at = rng.randrange(5), rng.randrange(40)
    texts = []
    for d in range(5):
        rows = []
        for k in range(40):
            name = f"{rng.choice(['Ana', 'Bo', 'Chen', 'Dee', 'Eli'])} {rng.choice(['Lee', 'Khan'])}"
            row = {"id": f"u{rng.randint(1000, 9999)}", "name": name, "seats": rng.randint(1, 50)}
            if (d, k) == (target, at):
                row = {"id": "u7311", "name": "Marguerite Okafor", "seats": 340}
            rows.append(row)
        texts.append(json.dumps(rows, indent=2))
    return texts, target


def test_json_exports_of_one_layout_keep_the_export_that_names_the_account() -> None:
    # MiniLM's similarities among these exports spread 0.1-0.25 and can rank the window that
    # names the account near the bottom; stretched to BM25's range (a floor of 0.15), that
    # noise put every export's best window past the cut-off's midpoint on a third of the seeds
    question = "How many seats does Marguerite Okafor's account have?"
    kept = {}
    for seed in range(12):
        texts, target = accounts(seed)
        docs = [Document(id=f"e{i}", text=t) for i, t in enumerate(texts)]
        req = Request(messages=[Message(role="user", content=question)], documents=docs)
        ids = [d.id for d in RetrievalStage().run(req).documents]
        assert ids[0] == f"e{target}", seed  # the answer, first
        kept[seed] = len(ids)
    assert sum(kept.values()) <= 13, kept  # one export each, but for a near tie


@pytest.mark.parametrize("value", [-0.1, 2.5])
def test_dense_min_spread_is_validated(value: float) -> None:
    from promptslim.backends.scorers import HybridScorer
    from promptslim.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        RetrievalStage(dense_min_spread=value)
    assert err.value.field == "dense_min_spread"
    with pytest.raises(ConfigError):
        HybridScorer(dense_min_spread=value)


# ---------------------------------------------------------------- identifiers in table rows


def inventories(seed: int, host: str, ip: str) -> tuple[list[str], int]:
    """Five markdown tables of 40 hosts, each under a header that names ``host`` and ``ip``;
    ``host`` is one row of one table (which, returned)."""
    rng = random.Random(seed)
    target, row = rng.randrange(5), rng.randrange(40)
    texts = []
    for d in range(5):
        lines = [f"## Inventory batch {d}", "", "| host | region | ip | owner | ram_gb |"]
        lines.append("|---|---|---|---|---|")
        for k in range(40):
            name = f"{rng.choice(['db', 'web', 'cache', 'queue'])}-{rng.randint(10, 999)}"
            address = ".".join(str(rng.randint(1, 254)) for _ in range(4))
            if (d, k) == (target, row):
                name, address = host, ip
            region = rng.choice(["us-east-1", "eu-west-2", "ap-south-1"])
            lines.append(f"| {name} | {region} | {address} | team-{rng.randint(1, 20)} | 32 |")
        texts.append("\n".join(lines))
    return texts, target


def test_an_identifier_is_a_term_whole_beside_its_words() -> None:
    assert analyse("host db-4471?") == ["db-4471", "host", "db", "4471"]
    assert analyse("call parse_config, then v2.3.1") == [
        "parse_config", "v2.3.1", "call", "parse", "config", "v2", "3", "1"
    ]  # fmt: skip
    assert analyse("a well-known U.S. state") == ["well", "known", "u", "state"]  # no digit


def test_bm25_ranks_the_row_an_identifier_names_above_every_table_header() -> None:
    # every table's head window holds the header ("host", "ip": terms of 5 of ~25 windows);
    # the row's window holds "db" and "4471", which apart outscored the header about half
    # the time: the compound, in that window alone, tips it
    question = "What is the IP address of host db-4471?"
    for seed in range(20):
        texts, target = inventories(seed, "db-4471", "10.9.3.77")
        windowed = split_windows(texts, [None] * 5, window_chars=600, overlap=1, max_windows=32)
        scores = bm25_scores(question, [w.text for w in windowed.windows])
        best = windowed.windows[int(scores.argmax())]
        assert best.doc == target and "| db-4471 |" in best.text, seed


@pytest.mark.parametrize("seed", [5, 8])
def test_the_row_an_identifier_names_is_kept_in_its_table(seed: int) -> None:
    # tables where the stage kept the right table's head only, and the address was lost
    texts, target = inventories(seed, "db-4471", "10.9.3.77")
    question = "Which region and IP address does host db-4471 have, and which owner?"
    req = Request(
        messages=[Message(role="user", content=question)],
        documents=[Document(id=f"t{i}", text=t) for i, t in enumerate(texts)],
    )
    kept = {d.id: d.text for d in RetrievalStage().run(req).documents}
    assert "| db-4471 | " in kept[f"t{target}"] and "10.9.3.77" in kept[f"t{target}"]
