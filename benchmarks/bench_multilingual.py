"""Chinese retrieval + extractive compression on ``builtin:rag-zh``.

Per item: the retrieval stage (BM25 only: no dense model) and the extractive compressor, run
as one Pipeline with a documents budget of ``--fraction`` of the item's document tokens.
Reports evidence retention (the gold answer is still in the kept documents: a substring test
on width-folded text, no model needed), the token fraction of the documents kept, and time
per request (p50/p99, ms, wall clock of ``Pipeline.run``, after one warm-up request that loads
jieba). The data are generated in code (``promptslim.bench.datasets``), nothing downloaded.
The goals are ``GOALS["bench_multilingual"]`` in ``benchmarks/summary.py``.

    python benchmarks/bench_multilingual.py --quick --json
"""

from __future__ import annotations

import os
import time
from typing import Any

from common import emit, machine, parser

from promptslim.bench.datasets import load_dataset
from promptslim.pipeline import Pipeline
from promptslim.stages.compress import CompressStage
from promptslim.stages.retrieval import RetrievalStage
from promptslim.stats import spread
from promptslim.text import chinese_segmenter, normalise_width
from promptslim.tokens import count_documents, get_counter
from promptslim.types import Budget


def run(n: int, fraction: float, chinese: str) -> dict[str, Any]:
    items = load_dataset("builtin:rag-zh", limit=n).items
    counter = get_counter()
    segmenter = chinese_segmenter("auto")  # loads jieba now, not inside the first timed request
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
        "budget_fraction": fraction,
        "segmenter": segmenter,
        "dataset": "builtin:rag-zh (generated in code, seed 0, 8 documents per item)",
        "clock": "wall clock of Pipeline.run in this process, after one warm-up request",
        "machine": machine(),
        "load_average_1m": round(os.getloadavg()[0], 2),  # the 2-core box is shared: timings are noisy
    }


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=None, help="items (default 100, 30 with --quick)")
    p.add_argument("--fraction", type=float, default=0.3, help="documents budget / document tokens")
    args = p.parse_args()
    n = args.n or (30 if args.quick else 100)
    result = run(n, args.fraction, "auto")
    table = "\n".join(
        f"{k:22} {result[k]}" for k in ("retention", "token_fraction_kept", "p50_ms", "p99_ms", "n", "segmenter")
    )
    emit(result, args, table)


if __name__ == "__main__":
    main()
