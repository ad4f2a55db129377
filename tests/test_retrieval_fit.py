"""The documents budget meets long documents (``promptslim.stages.retrieval_fit``): a chosen
document that does not fit whole is cut to its best parts before it is dropped."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from promptslim.bench.datasets import BenchItem, load_dataset
from promptslim.bench.metrics import evidence_retention
from promptslim.errors import ConfigError
from promptslim.reports import StageReport
from promptslim.stages.retrieval import RetrievalStage
from promptslim.stages.retrieval_fit import BARS
from promptslim.tokens import count_document, get_counter
from promptslim.types import Budget, Document, Request

FIT = "its best parts, to fit the documents budget"


@pytest.fixture(scope="module")
def nq(eval_data: Path) -> list[BenchItem]:
    return load_dataset(f"nq:{eval_data / 'nq20-dev.jsonl.gz'}", limit=30).items


def _chunked(item: BenchItem, k: int = 4) -> Request:
    """The item's 20 passages as five chunks of ``k``, each passage under its title line."""
    docs = item.request.documents
    chunks = [
        Document(id=f"c{c}", text="\n\n".join(f"{d.title}\n{d.text}" for d in docs[c : c + k]))
        for c in range(0, len(docs), k)
    ]
    return item.request.replace(documents=chunks)


def _tokens(documents: list[Document]) -> int:
    counter = get_counter()
    return sum(count_document(d, counter) for d in documents)


def _kept(item: BenchItem, stage: RetrievalStage, budget: Budget) -> tuple[float, StageReport]:
    out, report = stage.run_report(_chunked(item), budget)
    assert _tokens(out.documents) <= (budget.documents or 0)
    text = "\n".join(d.text for d in out.documents)
    return evidence_retention(text, item.answers), report


def test_under_a_tight_budget_the_answer_in_a_lower_chunk_is_kept(nq: list[BenchItem]) -> None:
    # 300 tokens of about 2,300: the best chunk's matching parts kept whole left no room for
    # another chunk's, and the answer was often in another chunk
    budget = Budget(documents=300)
    fitted, whole = RetrievalStage(), RetrievalStage(fit_parts=False)
    on = [_kept(item, fitted, budget) for item in nq]
    off = [_kept(item, whole, budget)[0] for item in nq]
    assert sum(e for e, _ in on) >= sum(off) + 2
    assert any(c.reason.endswith(f"({FIT})") for _, r in on for c in r.of_kind("compressed"))


def _bridge() -> Request:
    """Two long documents on one topic; the answer in the second."""
    guide = (
        "Traffic on the Marlow Harbour Bridge is heaviest at dawn, when the bridge opens a lane "
        "to the traffic from the north shore. Wardens direct it from a booth.\n\n"
        "Buses to the old quay cross the harbour bridge every ten minutes, and the lane for "
        "them opens at noon. The timetable is posted at every stop in town.\n\n"
        "Cyclists take the eastern path of the bridge, away from the cars of the main deck and "
        "the wind of the harbour. A lift carries bicycles down to the water.\n\n"
        "Traffic on the Marlow Harbour Bridge eases at night, when the bridge opens its rail "
        "deck to goods trains. Their signals are worked from a cabin.\n\n"
        "The western walkway gives walkers the best view of the regatta in summer. Benches "
        "stand at each pylon, and a kiosk sells tea.\n\n"
        "Fog closes the bridge a few mornings each winter, and the ferries run again. The "
        "closures are announced on the radio."
    )
    story = (
        "Ferries were the only link across the estuary of Marlow for centuries. Engineers "
        "proposed a crossing several times before work began in 1924.\n\n"
        "The Marlow Harbour Bridge was opened to traffic on 19 March 1932, after eight years "
        "of construction. A crowd of thousands watched the first cars cross.\n\n"
        "The steel came from the foundries of the north. The arch was painted grey."
    )
    others = [
        "The Tamar Bridge is a suspension bridge carrying road traffic over the River Tamar.",
        "Marlow hosts a sailing regatta every summer with boats from the whole coast.",
        "The grammar school of Marlow, founded by a merchant's bequest, moved in 1880.",
    ]
    documents = [Document(id="guide", text=guide), Document(id="story", text=story)]
    documents += [Document(id=f"other-{i}", text=t) for i, t in enumerate(others)]
    return Request(
        messages=[{"role": "user", "content": "When did the Marlow Harbour Bridge open?"}],
        query="When did the Marlow Harbour Bridge open to traffic?",
        documents=documents,
    )


def test_a_budget_that_holds_the_chosen_parts_changes_nothing() -> None:
    request = _bridge()
    free, _ = RetrievalStage().run_report(request)
    roomy = Budget(documents=_tokens(free.documents))
    for fit in (True, False):
        out, report = RetrievalStage(fit_parts=fit).run_report(request, roomy)
        assert [(d.id, d.text) for d in out.documents] == [(d.id, d.text) for d in free.documents]
        assert not any(FIT in c.reason for c in report.changes)


def test_the_best_document_is_cut_to_make_room_for_the_next() -> None:
    request = _bridge()
    free, _ = RetrievalStage().run_report(request)
    assert [d.id for d in free.documents] == ["guide", "story"]  # both chosen, guide first
    budget = Budget(documents=_tokens(free.documents) * 4 // 5)
    whole, _ = RetrievalStage(fit_parts=False).run_report(request, budget)
    assert [d.id for d in whole.documents] == ["guide"]  # the story no longer fitted
    out, report = RetrievalStage().run_report(request, budget)
    assert _tokens(out.documents) <= (budget.documents or 0)
    assert [d.id for d in out.documents] == ["guide", "story"]
    assert "19 March 1932" in out.documents[1].text
    (cut,) = [c for c in report.of_kind("compressed") if FIT in c.reason]
    assert cut.target == "document:guide" and cut.tokens > 0
    # what is sent of the guide is the reported spans of it, in their order
    given = request.documents[0].text
    spans = {part["id"]: part["spans"] for part in report.details["kept_parts"]}["guide"]
    assert out.documents[0].text.startswith(given[: spans[0][1]])
    at = 0
    for a, b in spans:
        at = out.documents[0].text.index(given[a:b].strip(), at) + 1
    assert len(out.documents[0].text) < len(whole.documents[0].text)


def test_a_budget_below_any_best_part_keeps_the_best_document_for_later() -> None:
    out, report = RetrievalStage().run_report(_bridge(), Budget(documents=5))
    assert [d.id for d in out.documents] == ["guide"] and report.details["over_budget"] > 0
    assert not any(FIT in c.reason for c in report.changes)


def test_fit_parts_is_a_strict_flag() -> None:
    with pytest.raises(ConfigError) as err:
        RetrievalStage(fit_parts="yes")  # type: ignore[arg-type]
    assert err.value.field == "fit_parts"
    assert BARS[0] == 1.0 and list(BARS) == sorted(BARS, reverse=True)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(share=st.floats(0.02, 1.2), row=st.integers(0, 5))
def test_under_any_budget_kept_parts_are_a_subset_of_the_free_choice(
    nq: list[BenchItem], share: float, row: int
) -> None:
    request = _chunked(nq[row])
    stage = RetrievalStage(scorer="bm25")
    free, free_report = stage.run_report(request)
    budget = Budget(documents=max(1, int(_tokens(free.documents) * share)))
    out, report = stage.run_report(request, budget)
    assert out == stage.run_report(request, budget)[0]  # deterministic
    if "over_budget" not in report.details:
        assert _tokens(out.documents) <= (budget.documents or 0)
    # the budget only takes away: no document, and no part of one, the free choice left out
    chosen = {d.id: d.text for d in free.documents}
    assert {d.id for d in out.documents} <= set(chosen)
    free_spans = {p["id"]: p["spans"] for p in free_report.details.get("kept_parts", [])}
    for part in report.details.get("kept_parts", []):
        if part["id"] in chosen and part["id"] in free_spans:
            inside = [
                any(a >= fa and b <= fb for fa, fb in free_spans[part["id"]])
                for a, b in part["spans"]
            ]
            assert all(inside)
