"""Held-out rows: the default pipeline on every shape of both shape suites, on questions no
default was chosen on.

``bench_shapes`` and ``bench_structured`` measure the defaults on nq20-dev's first rows, the
rows every default was chosen beside; ``bench_tradeoff`` re-reads the shape suite's shapes on
rows 600-799. This reads every shape of both suites (``bench_shapes``' passages, chunks,
layouts, templates and splitters; ``bench_structured``'s records, logs, code, untitled chunks,
HTML, small splitters, transcripts, variants, search results in a tool message and document
lists) on rows from ``--offset`` on (default 800: rows 800-999, which the design notes use only
as a last check), the generated shapes drawn from another seed (``--seed``, default 1, where
``bench_structured`` draws seed 0). A file too short for the offset (the committed sample, under
``--quick`` without the data) is read from its first row, and ``rows`` says which were read.
The shapes whose default keeps every document by design (a question that asks for the whole,
context in the user's message) are left out: ``bench_structured`` measures them.

Per shape, the default config (the search shapes: the default pipeline with its tools stage, as
``bench_structured`` runs them): ``evidence`` (a gold answer still in what the model reads,
with a bootstrap CI), ``token_ratio`` (document tokens kept / given; tool-message tokens for the
search shapes), cold p50 / p99 ms, and ``evidence_by_position`` where the shape has one.
Headline: ``evidence_min`` and ``evidence_min_shape`` (the worst shape),
``evidence_by_position_min``, and ``token_ratio_chunks_max`` (the shape suite's chunk shapes,
the figure its token goal reads). Timing is ``bench_shapes``' business; the figures here are
what the defaults keep.

    python benchmarks/bench_heldout.py --quick --json
    python benchmarks/bench_heldout.py --save bench_heldout      # rows 800-999, about 10 min
"""

from __future__ import annotations

import sys
from collections.abc import Collection
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_shapes import NOT_CHUNKS, dataset_path, run_suite, warm_up
from bench_structured import SEARCH_CONFIGS
from common import emit, machine, parser, rows_from
from inline_data import INLINE
from shapes_data import build_shapes
from structured_data import ASKED, SEARCH, build

from promptslim.bench.datasets import BenchItem
from promptslim.bench.runner import build_config
from promptslim.stats import spread

#: the shapes ``--quick`` reads: one of each kind (passages, chunks, a splitter, generated
#: records, a search result in a tool message)
QUICK = ("passages", "chunks4", "llamaindex512", "records", "search_text")


def shapes_of(
    nq: list[BenchItem], n: int, seed: int
) -> tuple[dict[str, list[BenchItem]], set[str]]:
    """Every shape of both suites from ``nq`` (the generated ones: ``n`` items of ``seed``),
    but those whose default keeps every document by design; and the shape suite's chunk
    shapes among them (the ones its token goal reads)."""
    shapes = dict(build_shapes(nq, []))
    chunks = set(shapes) - set(NOT_CHUNKS)
    for name, items in build(nq, n, seed).items():
        if name not in ASKED and name not in INLINE:
            shapes[name] = items
    return shapes, chunks


def headline(results: dict[str, dict[str, Any]], chunk_shapes: Collection[str]) -> dict[str, Any]:
    """The default's worst shape (and its name), its worst gold position, and the largest
    token ratio of ``chunk_shapes``."""
    rows = {shape: r["default"] for shape, r in results.items()}
    if not rows:
        return {}
    worst = min(rows, key=lambda s: (rows[s]["evidence"]["mean"], s))
    positions = [
        p["mean"] for r in rows.values() for p in r.get("evidence_by_position", {}).values()
    ]
    chunks = [r["token_ratio"] for s, r in rows.items() if s in chunk_shapes]
    return {
        "evidence_min": rows[worst]["evidence"]["mean"],
        "evidence_min_shape": worst,
        "evidence_by_position_min": min(positions, default=None),
        "token_ratio_chunks_max": max(chunks, default=None),
    }


def table(results: dict[str, dict[str, Any]]) -> str:
    lines = ["| shape | evidence | token ratio | cold p99 ms |", "| --- | --- | --- | --- |"]
    for shape, r in results.items():
        d = r["default"]
        lines.append(
            f"| {shape} | {d['evidence']['mean']:.3f} | {d['token_ratio']:.3f} "
            f"| {d['cold_p99_ms']:.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    p = parser(__doc__.split("\n")[0])
    p.add_argument("--data", "--dataset", dest="data", help="NQ-format jsonl(.gz)")
    p.add_argument("--items", type=int, default=200, help="items a shape")
    p.add_argument("--offset", type=int, default=800, help="the first row read")
    p.add_argument("--seed", type=int, default=1, help="the generated shapes' seed")
    args = p.parse_args()
    n = 3 if args.quick else args.items
    spec = f"nq:{dataset_path(args.data, 'nq20-dev.jsonl.gz')}"
    nq, offset = rows_from(spec, args.offset, n)
    shapes, chunk_shapes = shapes_of(nq, n, args.seed)
    if args.quick:
        shapes = {k: shapes[k] for k in QUICK}
    search = {name: shapes.pop(name) for name in SEARCH if name in shapes}
    runs = {"default": build_config("full").pipeline.run}
    searched = {"default": build_config(SEARCH_CONFIGS["default"]).pipeline.run}
    warm_up(runs, shapes[next(iter(shapes))][0])
    if search:
        warm_up(searched, search[next(iter(search))][0])
    gauge: list[float] = []  # how fast the host ran Python beside the items (bench_shapes)
    results = run_suite(shapes, runs, gauge) | run_suite(search, searched, gauge)
    out = {
        "benchmark": "bench_heldout",
        "machine": machine(),
        "reference_loop_ms": {k: round(v, 3) for k, v in spread(gauge).items()},
        "rows": [offset, offset + len(nq)],
        "items": len(nq),
        "seed": args.seed,
        "shapes": results,
        **headline(results, chunk_shapes),
    }
    emit(out, args, table(results))


if __name__ == "__main__":
    main()
