"""The held-out check (benchmarks/bench_heldout.py) reads what it claims: every ranked shape of
both suites, on the rows asked for, and a headline from the default's worst shape."""

from __future__ import annotations

from pathlib import Path

import bench_heldout
import bench_shapes
import common
import pytest
import structured_data
from inline_data import INLINE

from promptslim.bench.datasets import BenchItem, load_dataset

SAMPLE = Path(__file__).parent / "data" / "nq20-dev.jsonl.gz"


@pytest.fixture(scope="module")
def nq() -> list[BenchItem]:
    return load_dataset(f"nq:{SAMPLE}", limit=3).items


def test_every_ranked_shape_of_both_suites_is_read(nq: list[BenchItem]) -> None:
    shapes, chunks = bench_heldout.shapes_of(nq, 2, seed=1)
    suite = bench_shapes.build_shapes(nq, [])
    structured = structured_data.build(nq, 2, seed=1)
    kept_whole = set(structured_data.ASKED) | set(INLINE)
    assert set(shapes) == set(suite) | (set(structured) - kept_whole)
    assert not kept_whole & set(shapes)
    # the token goal reads the shape suite's chunk shapes alone
    assert chunks == set(suite) - set(bench_shapes.NOT_CHUNKS)
    assert {"chunks4", "llamaindex512"} <= chunks and "passages" not in chunks


def test_the_generated_shapes_come_from_the_seed_asked_for(nq: list[BenchItem]) -> None:
    one, _ = bench_heldout.shapes_of(nq, 2, seed=1)
    again, _ = bench_heldout.shapes_of(nq, 2, seed=1)
    other, _ = bench_heldout.shapes_of(nq, 2, seed=0)
    texts = [[d.text for d in it.request.documents] for it in one["records"]]
    assert texts == [[d.text for d in it.request.documents] for it in again["records"]]
    assert texts != [[d.text for d in it.request.documents] for it in other["records"]]


def test_rows_are_read_from_the_offset_or_from_the_first_when_the_file_is_short() -> None:
    first, at = common.rows_from(f"nq:{SAMPLE}", 0, 3)
    later, offset = common.rows_from(f"nq:{SAMPLE}", 1, 2)
    assert at == 0 and offset == 1
    assert [i.id for i in later] == [i.id for i in first[1:3]]
    short, offset = common.rows_from(f"nq:{SAMPLE}", 800, 2)
    assert offset == 0 and [i.id for i in short] == [i.id for i in first[:2]]


def test_the_headline_names_the_worst_shape_and_reads_chunk_ratios_alone() -> None:
    def result(evidence: float, ratio: float, positions: tuple[float, ...] = ()) -> dict:  # type: ignore[type-arg]
        out = {"evidence": {"mean": evidence}, "token_ratio": ratio}
        if positions:
            out["evidence_by_position"] = {str(i): {"mean": p} for i, p in enumerate(positions)}
        return {"default": out}

    results = {
        "passages": result(0.99, 0.14),
        "chunks4": result(0.98, 0.18, (1.0, 0.96)),
        "records": result(0.97, 0.25),
        "search_text": result(0.95, 0.30),
    }
    head = bench_heldout.headline(results, {"chunks4"})
    assert head == {
        "evidence_min": 0.95,
        "evidence_min_shape": "search_text",
        "evidence_by_position_min": 0.96,
        "token_ratio_chunks_max": 0.18,
    }
    assert bench_heldout.headline({}, {"chunks4"}) == {}
