"""The shape suite's shapes (benchmarks/shapes_data.py) are what they claim to be."""

from __future__ import annotations

from pathlib import Path

import bench_shapes
import pytest
import shapes_configs
import shapes_data

from promptslim.bench.datasets import load_dataset
from promptslim.bench.runner import build_config

SAMPLE = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def items() -> list[shapes_data.BenchItem]:
    return load_dataset(f"nq:{SAMPLE / 'nq20-dev.jsonl.gz'}", limit=4).items


@pytest.mark.parametrize("k", shapes_data.CHUNK_SIZES)
def test_chunks_put_the_gold_passage_at_each_position(items: list, k: int) -> None:
    for item in items:
        gold = next(d for d in item.request.documents if d.metadata.get("isgold"))
        for position in range(k):
            shaped = shapes_data.chunked(item, k, position)
            docs = shaped.request.documents
            assert len(docs) == -(-len(item.request.documents) // k)
            (chunk,) = [d for d in docs if d.metadata["isgold"]]
            paragraphs = chunk.text.split("\n\n")
            assert paragraphs[position] == f"{gold.title}\n{gold.text}"
            assert shaped.metadata["position"] == position
            # every passage is in exactly one chunk
            assert sum(len(d.text.split("\n\n")) for d in docs) == len(item.request.documents)


def test_pooled_requests_hold_one_gold_passage_among_other_questions_candidates(
    items: list,
) -> None:
    for n, item in enumerate(items):
        shaped = shapes_data.pooled(items, n)
        docs = shaped.request.documents
        paragraphs = [p for d in docs for p in d.text.split("\n\n")]
        others = [items[(n + j) % len(items)] for j in range(1, shapes_data.POOLED_OTHERS + 1)]
        expected = len(item.request.documents) + sum(
            sum(not d.metadata.get("isgold") for d in o.request.documents) for o in others
        )
        assert len(paragraphs) == expected  # the item's passages and the others' candidates
        assert len(docs) == -(-expected // 8)
        gold = next(d for d in item.request.documents if d.metadata.get("isgold"))
        (chunk,) = [d for d in docs if d.metadata["isgold"]]
        assert chunk.text.split("\n\n")[n % 8] == f"{gold.title}\n{gold.text}"
        assert shapes_data.pooled(items, n).request == shaped.request  # seeded: the same


@pytest.mark.parametrize("layout", list(shapes_data.LAYOUTS))
def test_layouts_keep_the_words_their_order_and_the_gold_position(items: list, layout: str) -> None:
    for n, item in enumerate(items):
        chunks = shapes_data.chunked(item, 4, n % 4)
        shaped = shapes_data.relaid(chunks, layout)
        assert shaped.metadata == chunks.metadata
        for before, after in zip(chunks.request.documents, shaped.request.documents):
            assert after.text.split() == before.text.split()
            assert after.metadata == before.metadata
            if layout == "lines":
                assert "\n\n" not in after.text
                assert after.text.count("\n") == before.text.count("\n") - before.text.count("\n\n")
            elif layout == "wrapped":
                assert "\n\n" not in after.text
                lines = after.text.split("\n")
                assert all(len(x) <= shapes_data.WRAP_COLUMNS or " " not in x for x in lines)
            else:
                assert "\n" not in after.text


@pytest.mark.parametrize("how", ["template", "follow_up"])
def test_asked_shapes_put_the_question_in_the_conversation_only(items: list, how: str) -> None:
    for n, item in enumerate(items):
        chunks = shapes_data.chunked(item, 4, n % 4)
        shaped = shapes_data.asked(chunks, how, n)
        request = shaped.request
        assert request.query is None and item.request.query
        assert shaped.metadata == {**chunks.metadata, "question": item.request.query}
        assert request.documents == chunks.request.documents
        assert request.messages[0] == chunks.request.messages[0]  # the system prompt
        users = [m.text for m in request.messages if m.role == "user"]
        if how == "template":
            assert len(users) == 1 and item.request.query in users[0]
            assert users[0] != item.request.query  # instructions around it
        else:
            assert users[0] == chunks.request.messages[-1].text
            assert item.request.query not in users[-1]  # the last turn names nothing
            assert [m.role for m in request.messages[-3:]] == ["user", "assistant", "user"]


def test_splitter_shapes_come_from_the_real_splitters(items: list) -> None:
    split = shapes_data.splitters()
    for name in ("langchain1000", "llamaindex512", "llamaindex1024"):
        shaped = shapes_data.resplit(items[0], split[name])
        assert len(shaped.request.documents) > 1
        joined = shapes_data._joined(items[0])
        for d in shaped.request.documents:
            assert d.text.split()[0] in joined
    lc = shapes_data.resplit(items[0], split["langchain1000"]).request.documents
    assert max(len(d.text) for d in lc) <= 1000


def test_summary_has_the_keys_per_shape() -> None:
    rows = [
        {"ms": 10.0, "ratio": 0.2, "evidence": 1.0},
        {"ms": 20.0, "ratio": 0.1, "evidence": 0.0},
    ]
    out = bench_shapes.summarise(rows, [0, 1])
    assert out["evidence"]["mean"] == 0.5 and "low" in out["evidence"]
    assert set(out) >= {"evidence", "token_ratio", "cold_p50_ms", "cold_p99_ms"}
    assert set(out["evidence_by_position"]) == {"0", "1"}


def test_headline_reads_the_worst_shape_and_keeps_large_shapes_out_of_the_cost_goal() -> None:
    def row(evidence: float, ratio: float, p99: float) -> dict:  # type: ignore[type-arg]
        return {"evidence": {"mean": evidence}, "token_ratio": ratio, "cold_p99_ms": p99}

    results = {
        "passages": {"default": row(1.0, 0.14, 90.0), "vectors": row(1.0, 0.14, 20.0)},
        "chunks4": {
            "default": row(0.98, 0.18, 120.0),
            "vectors": row(1.0, 0.19, 110.0),
            "indexed": row(1.0, 0.19, 14.0),
        },
        "pooled8": {
            "default": row(0.99, 0.08, 240.0),
            "vectors": row(0.99, 0.08, 220.0),
            "indexed": row(0.99, 0.08, 40.0),
        },
    }
    head = bench_shapes.headline(results)
    assert head["evidence_min"] == 0.98
    assert head["token_ratio_chunks_max"] == 0.18  # pooled8 is a chunk shape
    assert head["cold_p99_ms_passages"] == 90.0
    assert "pooled8" in bench_shapes.LARGE_SHAPES
    assert head["cold_p99_ms_vectors_max"] == 110.0  # the goal's size: not pooled8's 220
    assert head["cold_p99_ms_indexed_max"] == 14.0


@pytest.mark.slow
def test_warm_up_loads_what_a_process_loads_once(items: list) -> None:
    # jieba's dictionary (0.6-1.1 s) once counted as the cold time of the first item that
    # held a Han character; the warm-up takes it, as a server's start-up does
    from promptslim import text

    runs = {"default": build_config("full").pipeline.run}
    bench_shapes.warm_up(runs, items[0])
    assert "tokenizer" in text._jieba_state or "missing" in text._jieba_state


def test_longllmlingua_row_is_skipped_with_its_reason_without_a_lingua_environment(
    items: list, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from promptslim.backends.compress.lingua import llmlingua_unavailable

    if llmlingua_unavailable() is None:
        pytest.skip("llmlingua imports here: the row runs in this interpreter")
    monkeypatch.setenv("PROMPTSLIM_LINGUA_PYTHON", str(tmp_path / "no-such-python"))
    shapes = {"passages": items}
    results: dict = {"passages": {}}
    reason = bench_shapes.add_longllmlingua(results, shapes, 1, quick=True)
    assert reason is not None and "no lingua environment" in reason
    assert "longllmlingua" not in results["passages"]
    assert bench_shapes.add_longllmlingua(results, shapes, 0, quick=True) is not None


@pytest.mark.slow
def test_the_indexed_config_reads_the_windows_from_redis_and_embeds_nothing(
    items: list,
) -> None:
    from promptslim.backends.shared_stats import STORE_STATS
    from tests.redis_server import redis_server_available

    if not redis_server_available():
        pytest.skip("redis-server is not installed (scripts/setup.sh installs it)")
    shaped = shapes_data.chunked(items[0], 4, 0)
    with shapes_configs.redis_tier(True) as (url, skipped):
        assert skipped is None and url is not None
        runs = shapes_configs.configs([], url)
        indexed, vectors = runs["indexed"], runs["vectors"]
        request = indexed.prepare(shaped)  # the store's vectors
        with indexed.ingested(request):  # the store's ingest indexed the windows into Redis
            bench_shapes.cold_start()  # this process's own caches emptied, as measure() does
            before = STORE_STATS.counts.get("computed_embedding", 0)
            got = indexed(request)
            # the store's query vector meets the windows (torch's int8 embeds its own query)
            service = indexed.stage.get_scorer().service()
            query = 0 if service.near_float else 1
            assert STORE_STATS.counts.get("computed_embedding", 0) - before == query
        bench_shapes.cold_start()
        assert got.to_openai() == vectors(request).to_openai()  # the index changes no output


def test_plain_dense_top_k_embeds_an_ask_of_several_questions_as_one(items: list) -> None:
    # the baseline is a vector store's answer: one query vector, nothing of promptslim's asks
    request = items[0].request.replace(query="Who wrote it? And when was Gettysburg fought?")
    stage = shapes_configs.dense_topk()(request).report.stages[0]
    assert "questions" not in stage.details
    assert stage.details["kept"] == round(len(request.documents) / 5)
