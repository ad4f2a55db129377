import pytest

from promptslim import Budget, BudgetInfeasible, Request, allocate
from promptslim.budget import history_span

from .conftest import chat_body


def _request(turns: int = 5, docs: int = 4) -> Request:
    body = chat_body(turns)
    body["documents"] = [f"document number {i} " * 20 for i in range(docs)]
    return Request.from_openai(body)


def test_no_total_means_only_segment_caps() -> None:
    a = allocate(_request(), Budget(history=50))
    assert a.history == 50 and a.documents is None


def test_everything_fits_gives_needs() -> None:
    r = _request()
    a = allocate(r, Budget(total=100_000))
    assert a.history == a.history_needed
    assert a.fixed + a.history + a.documents == 100_000


def test_competing_segments_split_by_share_and_sum_to_flexible() -> None:
    r = _request(turns=10, docs=10)
    base = allocate(r, Budget())
    total = base.fixed + (base.history_needed + base.documents_needed) // 2
    a = allocate(r, Budget(total=total, history_share=0.5))
    assert a.fixed + a.history + a.documents == total
    assert a.history <= a.history_needed
    assert a.history >= int((total - a.fixed) * 0.5) or a.history == a.history_needed


def test_unused_history_share_flows_to_documents() -> None:
    r = _request(turns=1, docs=10)
    base = allocate(r, Budget())
    total = base.fixed + base.history_needed + base.documents_needed // 2
    a = allocate(r, Budget(total=total, history_share=0.9))
    assert a.history == a.history_needed
    assert a.documents == total - a.fixed - a.history_needed


def test_infeasible_fixed_part_raises_with_minimum() -> None:
    r = _request()
    fixed = allocate(r, Budget()).fixed
    with pytest.raises(BudgetInfeasible) as info:
        allocate(r, Budget(total=fixed - 1))
    assert info.value.minimum == fixed


def test_history_span_is_between_prefix_and_last_user() -> None:
    r = _request(turns=3)
    assert history_span(r) == (1, len(r.messages) - 1)
