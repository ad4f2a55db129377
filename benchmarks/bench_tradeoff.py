"""Trade-off curves: evidence kept against document tokens kept, one curve per document shape.

The shapes are ``bench_shapes.py``'s (passages, chunks of 2 / 4 / 8, other layouts, the
question inside a template or before a follow-up, LangChain's and LlamaIndex's splitters, a
pooled request four times the size, kv75), built from rows the defaults were not chosen on
(``--offset``, default 600: the shape suite reads rows 0-199 and the design notes 100-399; a
file too short for the offset, such as kv75's 100 rows or the committed sample, is read from
its first row, and ``rows`` says which were read).
Each curve moves the retrieval stage's one cut-off, ``cutoff_fraction`` (which documents stay,
and, through ``select_fraction`` left at None, which windows of a kept document stay), from
lenient to strict, in the full default pipeline; the default is marked on each curve. A default
that sits at the knee of every curve is one that was not chosen for one shape.

Per shape and cut-off: ``evidence`` (a gold answer still in what the model reads, with a
bootstrap CI) and ``token_ratio`` (document tokens kept / given, mean over items). Headline:
``evidence_min_at_default`` and ``token_ratio_chunks_max_at_default`` (the same figures as the
shape suite's goals, on these rows). Timing is ``bench_shapes``' business: here the embedding
cache is kept across the cut-offs of an item (the scores do not depend on the cut-off).

    python benchmarks/bench_tradeoff.py --quick --json
    python benchmarks/bench_tradeoff.py --items 200 --save bench_tradeoff   # and results/*.png
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_shapes import NOT_CHUNKS, dataset_path, row
from common import RESULTS, emit, machine, parser, rows_from
from shapes_data import build_shapes

from promptslim.bench.datasets import BenchItem
from promptslim.bench.metrics import mean_ci
from promptslim.bench.runner import build_config
from promptslim.pipeline import Pipeline
from promptslim.stages.retrieval_options import RetrievalOptions

PLOT = "bench_tradeoff.png"
#: the cut-offs each curve goes through, lenient to strict (the default is added)
FRACTIONS = (0.3, 0.4, 0.5, 0.6, 0.7)


def pipelines(fractions: list[float]) -> dict[float, Pipeline]:
    return {
        f: build_config(f"prefix+history+retrieval:cutoff_fraction={f}+compress").pipeline
        for f in fractions
    }


def curve(items: list[BenchItem], runs: dict[float, Pipeline]) -> list[dict[str, Any]]:
    """One point per cut-off over ``items``: evidence (with its CI) and the token ratio."""
    measured: dict[float, list[dict[str, float]]] = {f: [] for f in runs}
    for item in items:  # item-major: the cut-offs share the item's cached embeddings
        for f, pipeline in runs.items():
            result = pipeline.run(item.request)
            kept = result.request.documents
            measured[f].append(row(item, kept, result.to_openai()["messages"], 0.0))
    return [
        {
            "fraction": f,
            "evidence": mean_ci([r["evidence"] for r in rows]).as_dict(),
            "token_ratio": sum(r["ratio"] for r in rows) / max(1, len(rows)),
        }
        for f, rows in measured.items()
    ]


def headline(curves: dict[str, list[dict[str, Any]]], default: float) -> dict[str, Any]:
    at = {s: next(p for p in c if p["fraction"] == default) for s, c in curves.items()}
    chunks = [p["token_ratio"] for s, p in at.items() if s not in NOT_CHUNKS]
    return {
        "evidence_min_at_default": min(p["evidence"]["mean"] for p in at.values()),
        "token_ratio_chunks_max_at_default": max(chunks, default=0.0),
    }


def plot(curves: dict[str, list[dict[str, Any]]], default: float, path: Path) -> None:
    """Evidence against tokens kept, a line per shape, the default ringed."""
    import matplotlib

    matplotlib.use("Agg")  # files only: never open a window
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 6))
    colours = plt.get_cmap("tab20").colors  # one per shape: the default cycle has ten
    for i, (shape, points) in enumerate(curves.items()):
        xs = [p["token_ratio"] for p in points]
        ys = [p["evidence"]["mean"] for p in points]
        colour = colours[i % len(colours)]
        ax.plot(xs, ys, marker="o", markersize=3, linewidth=1, color=colour, label=shape)
        mark = next(p for p in points if p["fraction"] == default)
        ax.plot(
            mark["token_ratio"], mark["evidence"]["mean"], marker="o", markersize=9,
            markerfacecolor="none", markeredgecolor=colour,
        )  # fmt: skip
    ax.set_xlabel("document tokens kept (share of those given)")
    ax.set_ylabel("evidence kept (share of questions)")
    ax.set_title(f"cutoff_fraction {min(FRACTIONS)}-{max(FRACTIONS)}; ringed: default {default}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2, loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def table(curves: dict[str, list[dict[str, Any]]]) -> str:
    fractions = [p["fraction"] for p in next(iter(curves.values()))]
    lines = [
        "| shape | " + " | ".join(f"cut-off {f}" for f in fractions) + " |",
        "| --- |" + " --- |" * len(fractions),
    ]
    for shape, points in curves.items():
        cells = [f"{p['evidence']['mean']:.3f} / {p['token_ratio']:.3f}" for p in points]
        lines.append(f"| {shape} | " + " | ".join(cells) + " |")
    return "evidence / token ratio\n" + "\n".join(lines)


def main() -> None:
    p = parser(__doc__.split("\n")[0])
    p.add_argument("--data", "--dataset", dest="data", help="NQ-format jsonl(.gz)")
    p.add_argument("--kv", help="kv-format jsonl(.gz); 'none' skips the kv75 shape")
    p.add_argument("--items", type=int, default=200, help="NQ items (kv: the same, at most)")
    p.add_argument("--offset", type=int, default=600, help="the first row read")
    p.add_argument("--plot", help=f"write the plot here (default, unless --quick: results/{PLOT})")
    args = p.parse_args()
    n = 4 if args.quick else args.items
    nq, offset = rows_from(f"nq:{dataset_path(args.data, 'nq20-dev.jsonl.gz')}", args.offset, n)
    kv, kv_offset = [], 0
    if args.kv != "none" and not args.quick:  # --quick measures three NQ shapes
        kv_file = f"kv:{dataset_path(args.kv, 'kv75-dev.jsonl.gz')}"
        kv, kv_offset = rows_from(kv_file, args.offset, n)
    shapes = build_shapes(nq, kv)
    if args.quick:
        shapes = {k: shapes[k] for k in ("passages", "chunks4", "llamaindex512")}
    default = RetrievalOptions().cutoff_fraction
    runs = pipelines(sorted({*FRACTIONS, default}))
    curves: dict[str, list[dict[str, Any]]] = {}
    for shape, items in shapes.items():
        curves[shape] = curve(items, runs)
        print(f"{shape}: done", file=sys.stderr)
    # a full run draws beside the saved results (run_all.py saves the JSON); --quick only when asked
    out_plot = Path(args.plot) if args.plot else None if args.quick else RESULTS / PLOT
    if out_plot is not None:
        plot(curves, default, out_plot)
    result = {
        "benchmark": "bench_tradeoff",
        "machine": machine(),
        "rows": {"nq": [offset, offset + len(nq)], "kv": [kv_offset, kv_offset + len(kv)]},
        "items": len(nq),
        "default_fraction": default,
        "shapes": curves,
        **headline(curves, default),
        "plot": out_plot.name if out_plot is not None else None,
    }
    emit(result, args, table(curves))


if __name__ == "__main__":
    main()
