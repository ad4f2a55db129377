"""The soak benchmark's request stream (benchmarks/soak.py): reproducible, and shaped as its
docstring says (documents recur from a corpus, cold documents never do, chats grow turn by turn,
system prompts carry volatile values). No model is loaded here."""

from __future__ import annotations

import json
from collections import Counter

import pytest
import soak

from promptslim import Budget, Pipeline, Request

N = 3 * soak.COLD_EVERY * 40


@pytest.fixture(scope="module")
def stream() -> list[tuple[str, dict]]:
    return [soak.make_body(i) for i in range(N)]


def test_same_index_same_bytes(stream: list[tuple[str, dict]]) -> None:
    for i in (0, 1, 2, 3 * soak.COLD_EVERY - 3, N - 1):
        assert json.dumps(soak.make_body(i)) == json.dumps(stream[i])


def test_kinds_rotate_and_cold_share(stream: list[tuple[str, dict]]) -> None:
    kinds = Counter(kind for kind, _ in stream)
    assert kinds["chat"] == kinds["volatile"] == N // 3
    assert kinds["rag_cold"] == N // 3 // soak.COLD_EVERY
    assert kinds["rag"] + kinds["rag_cold"] == N // 3


def test_documents_recur_from_the_corpus_and_cold_ones_never(
    stream: list[tuple[str, dict]],
) -> None:
    def ids(body: dict) -> list[int]:
        return [int(d["id"][4:]) for d in body["documents"]]

    warm = Counter(k for kind, body in stream if kind == "rag" for k in ids(body))
    assert max(warm) < soak.CORPUS_DOCS
    assert warm.most_common(1)[0][1] > 20  # the popular head recurs
    new = [
        k for kind, body in stream if kind == "rag_cold" for k in ids(body) if k >= soak.CORPUS_DOCS
    ]
    assert len(new) == len(set(new)) == soak.NEW_DOCS * (N // 3 // soak.COLD_EVERY)
    for _, body in stream[::3]:
        assert len(set(ids(body))) == len(body["documents"]) == soak.DOCS_PER_RAG
        assert all("embedding" not in d for d in body["documents"])  # the store adds them


def test_chats_grow_turn_by_turn(stream: list[tuple[str, dict]]) -> None:
    seen: dict[int, list[dict]] = {}
    grown = 0
    for i in range(1, N, 3):
        session, turn = soak.chat_position(i // 3)
        messages = stream[i][1]["messages"]
        assert messages[-1]["role"] == "user"
        if turn == 0:
            assert session not in seen and len(messages) == 2
        elif session in seen:  # the previous turn: the one before this in the stream
            before = seen[session]
            assert messages[: len(before)] == before and len(messages) > len(before) + 1
            grown += 1
        else:  # the stream starts in the middle of the first conversation of each slot
            assert session < soak.LIVE_CHATS and len(messages) >= 2 * turn + 2
        seen[session] = messages
    assert grown > N // 3 // 2


def test_chat_positions_run_each_conversation_once_in_order() -> None:
    last: dict[int, int] = {}
    for c in range(soak.LIVE_CHATS * soak.CHAT_TURNS * 3):
        session, turn = soak.chat_position(c)
        # the first conversation of a slot is joined at a turn that depends on the slot (so
        # they do not all end together); every later one starts at turn 0
        first = turn if session < soak.LIVE_CHATS else 0
        assert turn == last.get(session, first - 1) + 1
        last[session] = turn
    assert len(last) > soak.LIVE_CHATS  # conversations end and new ones take the slots


def test_system_prompts_carry_volatile_values(stream: list[tuple[str, dict]]) -> None:
    systems = [body["messages"][0]["content"] for kind, body in stream if kind == "volatile"]
    assert len(set(systems)) == len(systems)  # every one differs...
    templates = {s.split(".", 1)[0] for s in systems}  # ..."You are assistant <t>"
    assert len(templates) <= soak.SYSTEM_TEMPLATES < len(systems)


def test_cache_fill_reads_every_cache() -> None:
    pipeline = Pipeline.default(budget=Budget(total=soak.BUDGET))
    before = soak.fill(soak.cache_sizes(pipeline))
    pipeline.run(Request.from_openai(soak.make_body(1)[1]))  # a chat: no model needed
    after = soak.fill(soak.cache_sizes(pipeline))
    assert before.keys() == after.keys()
    assert all(len(v.split("/")) == 2 for v in after.values())
    size = {k: int(v.split("/")[0]) for k, v in after.items()}
    assert size["prefix_memo.analysed"] >= 1 and size["token_counter"] >= 1
    full = soak._full(soak.cache_sizes(pipeline))
    assert full is not None and full.keys() == after.keys()
    # this new pipeline's own memos start empty; process-wide caches (the token counter, the
    # summaries) may already be full from whatever ran earlier in this process (the test suite)
    assert not any(v for k, v in full.items() if k.startswith("prefix_memo."))
