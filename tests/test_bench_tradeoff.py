"""The trade-off curves (benchmarks/bench_tradeoff.py) measure what they claim, on the real
pipeline and the committed sample."""

from __future__ import annotations

from pathlib import Path

import bench_tradeoff
import pytest
import shapes_data

from promptslim.bench.datasets import load_dataset

SAMPLE = Path(__file__).parent / "data" / "nq20-dev.jsonl.gz"


@pytest.fixture(scope="module")
def items() -> list[shapes_data.BenchItem]:
    return load_dataset(f"nq:{SAMPLE}", limit=3).items


def test_a_stricter_cut_off_keeps_fewer_tokens(items: list) -> None:
    chunks = [shapes_data.chunked(it, 4, n % 4) for n, it in enumerate(items)]
    points = bench_tradeoff.curve(chunks, bench_tradeoff.pipelines([0.1, 0.9]))
    assert [p["fraction"] for p in points] == [0.1, 0.9]
    lenient, strict = points
    assert 0 < strict["token_ratio"] < lenient["token_ratio"] <= 1
    assert {"mean", "low", "high"} <= set(lenient["evidence"])


def test_headline_reads_the_default_point_and_the_chunk_shapes_alone() -> None:
    def point(fraction: float, evidence: float, ratio: float) -> dict:  # type: ignore[type-arg]
        return {"fraction": fraction, "evidence": {"mean": evidence}, "token_ratio": ratio}

    curves = {
        "passages": [point(0.3, 1.0, 0.5), point(0.5, 0.99, 0.3)],
        "chunks4": [point(0.3, 1.0, 0.4), point(0.5, 0.98, 0.18)],
        "flat4": [point(0.3, 1.0, 0.6), point(0.5, 0.97, 0.25)],
    }
    head = bench_tradeoff.headline(curves, 0.5)
    assert head == {"evidence_min_at_default": 0.97, "token_ratio_chunks_max_at_default": 0.18}


def test_a_file_too_short_for_the_offset_is_read_from_its_first_row(tmp_path: Path) -> None:
    items, offset = bench_tradeoff.rows_from(f"nq:{SAMPLE}", 600, 2)
    assert offset == 0 and len(items) == 2
    skipped, offset = bench_tradeoff.rows_from(f"nq:{SAMPLE}", 5, 2)
    first_seven = load_dataset(f"nq:{SAMPLE}", limit=7).items
    assert offset == 5 and [i.request.query for i in skipped] == [
        i.request.query for i in first_seven[5:]
    ]


def test_the_plot_is_written(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the bench extra draws the plot")
    points = [
        {"fraction": f, "evidence": {"mean": e}, "token_ratio": r}
        for f, e, r in ((0.3, 1.0, 0.4), (0.5, 0.98, 0.2), (0.7, 0.9, 0.1))
    ]
    out = tmp_path / "curves.png"
    bench_tradeoff.plot({"chunks4": points}, 0.5, out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
