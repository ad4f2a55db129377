"""The shape suite's shapes (benchmarks/bench_shapes.py) are what they claim to be."""

from __future__ import annotations

from pathlib import Path

import bench_shapes
import pytest

from promptslim.bench.datasets import load_dataset

SAMPLE = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def items() -> list[bench_shapes.BenchItem]:
    return load_dataset(f"nq:{SAMPLE / 'nq20-dev.jsonl.gz'}", limit=4).items


@pytest.mark.parametrize("k", bench_shapes.CHUNK_SIZES)
def test_chunks_put_the_gold_passage_at_each_position(items: list, k: int) -> None:
    for item in items:
        gold = next(d for d in item.request.documents if d.metadata.get("isgold"))
        for position in range(k):
            shaped = bench_shapes.chunked(item, k, position)
            docs = shaped.request.documents
            assert len(docs) == -(-len(item.request.documents) // k)
            (chunk,) = [d for d in docs if d.metadata["isgold"]]
            paragraphs = chunk.text.split("\n\n")
            assert paragraphs[position] == f"{gold.title}\n{gold.text}"
            assert shaped.metadata["position"] == position
            # every passage is in exactly one chunk
            assert sum(len(d.text.split("\n\n")) for d in docs) == len(item.request.documents)


def test_splitter_shapes_come_from_the_real_splitters(items: list) -> None:
    split = bench_shapes.splitters()
    for name in ("langchain1000", "llamaindex512", "llamaindex1024"):
        shaped = bench_shapes.resplit(items[0], split[name])
        assert len(shaped.request.documents) > 1
        joined = bench_shapes._joined(items[0])
        for d in shaped.request.documents:
            assert d.text.split()[0] in joined
    lc = bench_shapes.resplit(items[0], split["langchain1000"]).request.documents
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
