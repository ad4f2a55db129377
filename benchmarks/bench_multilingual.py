"""Chinese and Hindi retrieval + extractive compression on ``builtin:rag-zh`` and ``rag-hi``.

Per item: the retrieval stage (BM25 only: no dense model) and the extractive compressor, run
as one Pipeline with a documents budget of ``--fraction`` of the item's document tokens.
Reports evidence retention (the gold answer is still in the kept documents: a substring test
on width-folded text, no model needed), the token fraction of the documents kept, and time
per request (p50/p99, ms, wall clock of ``Pipeline.run``, after one warm-up request that loads
jieba), for each set under ``sets``: each language's documents as generated, and joined four
to a chunk (``-chunks4``: the gold document at each position in turn, selection inside the
kept chunk). The top-level keys are the worst set's (the lowest retention, the highest token
fraction and times). Chinese has no spaces between words (jieba or bigrams find them); Hindi
words carry vowel signs that Python's ``re`` does not count as word characters, and its
sentences end at a danda. The data are generated in code (``promptslim.bench.datasets``),
nothing downloaded. The goals are ``GOALS["bench_multilingual"]`` in ``benchmarks/summary.py``.

    python benchmarks/bench_multilingual.py --quick --json
"""

from __future__ import annotations

import os
import time
from typing import Any

from common import emit, machine, parser
from shapes_data import chunked

from promptslim.bench.datasets import load_dataset
from promptslim.pipeline import Pipeline
from promptslim.stages.compress import CompressStage
from promptslim.stages.retrieval import RetrievalStage
from promptslim.stats import spread
from promptslim.text import chinese_segmenter, normalise_width
from promptslim.tokens import count_documents, get_counter
from promptslim.types import Budget

#: set -> (builtin dataset, passages per chunk: None for the documents as generated)
SETS: dict[str, tuple[str, int | None]] = {
    "zh": ("builtin:rag-zh", None),
    "hi": ("builtin:rag-hi", None),
    "zh-chunks4": ("builtin:rag-zh", 4),
    "hi-chunks4": ("builtin:rag-hi", 4),
}


def run_set(dataset: str, chunk: int | None, n: int, fraction: float) -> dict[str, Any]:
    items = load_dataset(dataset, limit=n).items
    if chunk:  # the gold document at each position of its chunk in turn, as bench_shapes does
        items = [chunked(item, chunk, i % chunk) for i, item in enumerate(items)]
    counter = get_counter()
    pipeline = Pipeline([RetrievalStage(scorer="bm25"), CompressStage(compressor="extractive")])
    pipeline.run(items[0].request, Budget(documents=200))  # warm-up (imports, numpy)
    kept = 0
    fractions: list[float] = []
    times: list[float] = []
    for item in items:
        before = count_documents(item.request.documents, counter)
        budget = Budget(documents=max(1, int(before * fraction)))
        start = time.perf_counter()
        result = pipeline.run(item.request, budget)
        times.append((time.perf_counter() - start) * 1e3)
        fractions.append(count_documents(result.request.documents, counter) / before)
        context = normalise_width("".join(f"{d.title}\n{d.text}" for d in result.request.documents))
        kept += any(normalise_width(a) in context for a in item.answers)
    timing = spread(times)
    return {
        "retention": round(kept / len(items), 4),
        "token_fraction_kept": round(sum(fractions) / len(fractions), 4),
        "p50_ms": round(timing["p50"], 2),
        "p99_ms": round(timing["p99"], 2),
        "n": len(items),
        "dataset": f"{dataset} (generated in code, seed 0, 8 documents per item"
        + (f", {chunk} to a chunk)" if chunk else ")"),
    }


def run(n: int, fraction: float) -> dict[str, Any]:
    segmenter = chinese_segmenter("auto")  # loads jieba now, not inside the first timed request
    sets = {name: run_set(dataset, chunk, n, fraction) for name, (dataset, chunk) in SETS.items()}
    rows = sets.values()
    return {
        "retention": min(r["retention"] for r in rows),
        "token_fraction_kept": max(r["token_fraction_kept"] for r in rows),
        "p50_ms": max(r["p50_ms"] for r in rows),
        "p99_ms": max(r["p99_ms"] for r in rows),
        "n": sum(r["n"] for r in rows),
        "sets": sets,
        "budget_fraction": fraction,
        "segmenter": segmenter,
        "clock": "wall clock of Pipeline.run in this process, after one warm-up request",
        "machine": machine(),
        "load_average_1m": round(os.getloadavg()[0], 2),  # the 2-core box is shared: timings are noisy
    }


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=None, help="items per set (default 100, 30 with --quick)")
    p.add_argument("--fraction", type=float, default=0.3, help="documents budget / document tokens")
    args = p.parse_args()
    n = args.n or (30 if args.quick else 100)
    result = run(n, args.fraction)
    keys = ("retention", "token_fraction_kept", "p50_ms", "p99_ms", "n")
    table = "\n".join(
        f"{name:10} " + "  ".join(f"{k} {row[k]}" for k in keys)
        for name, row in result["sets"].items()
    )
    emit(result, args, f"{table}\nsegmenter {result['segmenter']}")


if __name__ == "__main__":
    main()
