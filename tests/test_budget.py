import pytest

from promptslim import Budget, BudgetInfeasible, Request, allocate
from promptslim.budget import history_span
from promptslim.tokens import count_request

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


POLICY = (
    "Annual plans can be refunded within 30 days of purchase. After that a pro-rated refund "
    "applies. Contact support to request it."
)


def test_pinned_history_over_its_share_leaves_the_documents_what_is_left() -> None:
    from promptslim import HistoryStage, Pipeline, RetrievalStage

    body = {
        "messages": [
            {"role": "user", "content": "Keep these: " + "alpha beta gamma " * 8, "pinned": True},
            {"role": "assistant", "content": "Noted, I will remember them."},
            {"role": "user", "content": "What is the refund window?"},
        ],
        "documents": [POLICY],
    }

    def fits(total: int) -> bool:
        stages = [HistoryStage(), RetrievalStage(scorer="bm25")]
        pipeline = Pipeline(stages, budget=Budget(total=total))
        try:
            out = pipeline.run(Request.from_openai(body))
        except BudgetInfeasible:
            return False
        assert out.report.tokens_out <= total and out.request.messages[0].pinned
        return True

    # dropping the one unpinned message must be enough: the pinned message is not squeezed
    # into history's share while the document takes the rest (before, this needed 100 tokens)
    without = {**body, "messages": [body["messages"][0], body["messages"][2]]}
    enough = count_request(Request.from_openai(without))
    feasible = [t for t in range(30, 130) if fits(t)]
    assert feasible and feasible[0] <= enough
    assert feasible == list(range(feasible[0], 130))  # and every larger total fits too


def test_history_basis_does_not_see_the_question() -> None:
    body = chat_body(6)
    basis = set()
    for words in (1, 40, 200):
        body["messages"][-1]["content"] = "why " * words
        a = allocate(Request.from_openai(body), Budget(total=400))
        assert a.history is not None and a.history_basis is not None
        assert a.history <= a.history_basis
        basis.add(a.history_basis)
    assert len(basis) == 1


def test_the_prefix_stages_context_block_is_not_charged_to_history() -> None:
    from promptslim import HistoryStage, Pipeline, PrefixStage

    body = chat_body(3)
    body["messages"][0]["content"] = "You are a helpful assistant. Today is 2024-01-02."
    out = Pipeline([PrefixStage(), HistoryStage()], budget=Budget(history=0)).run(
        Request.from_openai(body)
    )
    # the moved date stays with the instructions; the history itself is gone, as asked
    assert [m.role for m in out.request.messages] == ["system", "system", "user"]
    assert "2024-01-02" in out.request.messages[1].text


def test_infeasible_message_says_the_budget_only_when_there_is_one() -> None:
    assert str(BudgetInfeasible("no room", minimum=3)) == "no room (minimum 3 tokens)"
    assert str(BudgetInfeasible("no room", minimum=3, budget=2)).endswith("(minimum 3 tokens, budget 2)")


def test_the_pinned_memo_follows_a_message_list_edited_in_place() -> None:
    # allocate and the history stage share one scan for pinned messages, memoised on the
    # request: a list edited in place (frozen models, mutable list) must be scanned again
    from promptslim import Message
    from promptslim.budget import _any_pinned

    r = _request(turns=6, docs=0)
    start, end = history_span(r)
    assert not _any_pinned(r, start, end)
    original = r.messages[start]
    r.messages[start] = Message(role=original.role, content=original.content, pinned=True)
    assert _any_pinned(r, start, end)
    assert not _any_pinned(r, start + 1, end)  # another span of the same list
    r.messages[start] = original
    assert not _any_pinned(r, start, end)
