"""A JSON document larger than the documents' target is cut along its structure by the
compress stage (``crush_json``), not dropped whole: the record the query names survives."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from promptslim.backends.tools import ToolContext
from promptslim.errors import ConfigError
from promptslim.stages.compress import CompressStage
from promptslim.stages.compress_json import _PASSES
from promptslim.tokens import count_document, get_counter
from promptslim.types import Budget, Document, Request

NAMES = ["Ana Smith", "Bo Lee", "Chen Khan", "Dee Ortiz", "Eli Smith", "Fay Lee"]


def _export(rng: random.Random, n: int, answer_at: int | None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for k in range(n):
        row = {"id": f"u{rng.randint(1000, 9999)}", "name": rng.choice(NAMES)}
        row["seats"] = rng.randint(1, 50)
        if k == answer_at:
            row = {"id": "u7311", "name": "Marguerite Okafor", "seats": 347}
        rows.append(row)
    return rows


def _request(*texts: str, question: str = "How many seats does Marguerite Okafor have?") -> Request:
    return Request.from_openai(
        {
            "model": "m",
            "messages": [
                {"role": "system", "content": "Answer from the documents."},
                {"role": "user", "content": question},
            ],
            "documents": [{"id": f"export-{i}", "text": t} for i, t in enumerate(texts)],
        }
    )


def _run(request: Request, documents: int, **options: Any) -> Any:
    return CompressStage(**options).run(request, Budget(documents=documents))


def _tokens(docs: list[Document]) -> int:
    """What the documents' cap counts: each document's rendered line (not the message)."""
    return sum(count_document(d, get_counter()) for d in docs)


def _records(text: str) -> list[dict[str, Any]]:
    """The objects a (crushed) export still holds; markers are strings among them."""
    return [r for r in json.loads(text) if isinstance(r, dict)]


def test_an_export_over_the_target_keeps_the_named_record_instead_of_going_whole() -> None:
    rows = _export(random.Random(1), 60, answer_at=37)
    text = json.dumps(rows, indent=2)
    request = _request(text)
    assert _tokens(request.documents) > 600

    result = _run(request, 600)
    (doc,) = result.request.documents
    kept = _records(doc.text)
    assert {"id": "u7311", "name": "Marguerite Okafor", "seats": 347} in kept
    assert all(r in rows for r in kept)  # every kept record is one of the export's, unaltered
    assert len(kept) < len(rows) and "elided" in doc.text
    stage = result.report.stages[0]
    assert stage.details["json_crushed"] == 1
    assert [(c.kind, c.reason) for c in stage.changes] == [("compressed", "json")]
    assert _tokens(result.request.documents) <= 600

    # without the cut the export is one protected unit over the target: dropped, answer and all
    off = _run(request, 600, crush_json=False)
    assert off.request.documents == []


def test_an_export_within_the_target_is_kept_byte_for_byte() -> None:
    small = json.dumps(_export(random.Random(2), 6, answer_at=2), indent=2)
    prose = " ".join(f"Sentence {i} says nothing of seats." for i in range(80))
    result = _run(_request(small, prose), 200)
    docs = {d.id: d.text for d in result.request.documents}
    assert docs["export-0"] == small  # it fits alone: kept whole, never cut
    assert "json_crushed" not in result.report.stages[0].details


def test_text_that_opens_with_a_bracket_but_is_not_json_is_left_to_the_compressor() -> None:
    text = "[1] " + " ".join(f"Marguerite Okafor note {i}: seats were counted." for i in range(90))
    result = _run(_request(text), 120)
    assert "json_crushed" not in result.report.stages[0].details
    (doc,) = result.request.documents
    assert "elided" not in doc.text and doc.text in text  # sentences chosen, not a JSON cut
    assert [c.reason for c in result.report.stages[0].changes] == ["extractive"]


def test_the_tighter_pass_runs_when_the_first_cut_is_still_over_the_target() -> None:
    # half the records are in the region the question names: many items hold its literal
    rng = random.Random(3)
    rows = _export(rng, 80, answer_at=None)
    for k, row in enumerate(rows):
        row["region"] = "eu-west-2" if k % 2 else "us-east-1"
    request = _request(json.dumps(rows), question="Which accounts are in eu-west-2?")
    loose = _PASSES[0].compress_json(
        request.documents[0].text, ToolContext(query="Which accounts are in eu-west-2?")
    )
    assert loose is not None
    first = Document(id="export-0", text=loose.text)
    fits = _tokens([first])

    at_first = _run(request, fits).request.documents
    assert [d.text for d in at_first] == [loose.text]  # the first pass fits: it is the answer
    below = _run(request, fits - 1).request.documents
    assert len(below) == 1 and len(below[0].text) < len(loose.text)
    assert _tokens(below) < fits
    assert all(r in rows for r in _records(below[0].text))


def test_an_export_still_over_the_target_after_both_passes_is_dropped_within_budget() -> None:
    rows = [{"id": f"u{k}", "name": "Marguerite Okafor", "seats": k} for k in range(50)]
    result = _run(_request(json.dumps(rows)), 20)
    assert result.request.documents == []
    assert [c.kind for c in result.report.stages[0].changes] == ["dropped"]


def test_a_protected_literal_keeps_its_record() -> None:
    rows = _export(random.Random(4), 60, answer_at=None)
    wanted = rows[41]["id"]
    request = _request(json.dumps(rows), question="Which account is the odd one?")
    request = request.replace(protect=[wanted])
    (doc,) = _run(request, 300).request.documents
    assert rows[41] in _records(doc.text)


def test_crush_json_must_be_a_bool() -> None:
    with pytest.raises(ConfigError) as err:
        CompressStage(crush_json="yes")  # type: ignore[arg-type]
    assert err.value.field == "crush_json"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(min_value=1, max_value=120),
    seed=st.integers(min_value=0, max_value=10_000),
    cap=st.integers(min_value=0, max_value=1_500),
    indent=st.sampled_from([None, 2]),
)
def test_property_budget_kept_records_unaltered_and_deterministic(
    n: int, seed: int, cap: int, indent: int | None
) -> None:
    rng = random.Random(seed)
    rows = _export(rng, n, answer_at=rng.randrange(n))
    request = _request(json.dumps(rows, indent=indent), json.dumps(rows[: n // 2 + 1]))
    first, second = _run(request, cap), _run(request, cap)
    assert first.request == second.request  # same input, same bytes
    assert _tokens(first.request.documents) <= cap
    for doc in first.request.documents:
        assert all(r in rows for r in _records(doc.text))
