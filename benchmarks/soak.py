"""Soak: many mixed requests through the default pipeline; errors, latency, memory, cache sizes.

``Pipeline.default(budget=Budget(total=BUDGET))`` (prefix, history, retrieval with the default
hybrid BM25 + MiniLM scorer, extractive compress) runs serially over a deterministic stream
shaped like production traffic. Request ``i`` is, by ``i % 3``:

- ``rag`` / ``rag_cold``: a short chat plus 8 retrieved documents. In production RAG the
  documents come from a corpus, so the same passages recur across requests (a Zipf-like
  popularity over ``CORPUS_DOCS`` documents here), and the vector store that found them hands
  over their embeddings (``Document.embedding``) and the query's (``Request.query_embedding``):
  the corpus and each query are embedded by a "vector store" outside the timed part, with the
  same model and truncation as the retrieval stage, in batches of ``CHUNK`` requests. One rag
  request in ``COLD_EVERY`` is ``rag_cold``: a retriever that hands over no vectors, with
  ``NEW_DOCS`` documents never seen before (the cold path: MiniLM embeds the query and those
  documents; its embedding and token-count caches fill and then evict);
- ``chat``: one of ``LIVE_CHATS`` interleaved conversations that grow turn by turn (request
  t of a conversation is request t-1's messages plus a new turn), with tool calls and tool
  results; after ``CHAT_TURNS`` turns the conversation ends and a new one starts in its slot.
  Long ones are cut by the history stage, which summarises what it folds (summary cache);
- ``volatile``: one of ``SYSTEM_TEMPLATES`` system prompts carrying volatile values (date,
  time, session UUID, user name: moved out by the prefix stage), tools, a few turns.

Every text is generated from the request's index, so a run is reproducible. Timed per request:
``Request.from_openai`` plus ``Pipeline.run`` (what a caller pays), one thread; latency is
reported per kind (with 1 request in 60 cold, the overall p99 is the cold path's). Memory: the
process's resident set (``VmRSS``) after the warm-up (MiniLM loaded, corpus embedded, a few
requests: ``rss_start_mb``), at the half-way point and at the end; peak from ``getrusage``. Cache sizes at start, half-way and end show how full each bounded cache is.
The memory goal is that RSS is flat once the caches are full:
``rss_growth_second_half`` = (end - half) / half <= 0.10. ``windows`` gives, for each
twentieth of the run, RSS and the timed part's throughput and CPU per request (does it slow
down as the caches fill?); CPU time is reported next to wall time because on a shared machine
wall time measures the neighbours too.

``--quick`` (10,000 requests) takes under two minutes on an idle machine.
The goals are ``GOALS["soak"]`` in ``benchmarks/summary.py``.
"""

from __future__ import annotations

import gc
import json
import math
import resource
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from common import emit, machine, parser
from soak_stream import (
    BUDGET,
    CHAT_TURNS,
    COLD_EVERY,
    CORPUS_DOCS,
    DOCS_PER_RAG,
    KINDS,
    LIVE_CHATS,
    NEW_DOCS,
    SYSTEM_TEMPLATES,
    WARM_UP_START,
    VectorStore,
    chat_position,
    make_body,
    stream,
)

from promptslim import Budget, Pipeline, Request
from promptslim import counting as _counting
from promptslim import text as _text
from promptslim.backends import summarisers as _summarisers
from promptslim.backends.embeddings import _services
from promptslim.stages import retrieval as _retrieval
from promptslim.stages.history import DEFAULT_SUMMARY_CACHE
from promptslim.stages.prefix import PrefixStage
from promptslim.stages.retrieval import RetrievalStage
from promptslim.stats import spread
from promptslim.tokens import get_counter

__all__ = [
    "BUDGET",
    "CHAT_TURNS",
    "COLD_EVERY",
    "CORPUS_DOCS",
    "DOCS_PER_RAG",
    "LIVE_CHATS",
    "NEW_DOCS",
    "SYSTEM_TEMPLATES",
    "VectorStore",
    "cache_sizes",
    "chat_position",
    "fill",
    "main",
    "make_body",
    "stream",
]


# ---------------------------------------------------------------- measurement


def rss_mb() -> float:
    """Current resident set (VmRSS), not the peak: the peak cannot show memory flattening."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


_MODULE_LRU: dict[str, Any] = {
    "counting._DOCUMENT_TOKENS": _counting._DOCUMENT_TOKENS,
    "text._stem": _text._stem,
    "text._analyse": _text._analyse,
    "retrieval._shingles": _retrieval._shingles,
    "summarisers._score": _summarisers._score,
}


def cache_sizes(pipeline: Pipeline) -> dict[str, Any]:
    info = get_counter().cache_info()  # type: ignore[attr-defined]
    prefix = next(s for s in pipeline.stages if isinstance(s, PrefixStage))
    return {
        "token_counter": {"size": info.currsize, "maxsize": info.maxsize, "hits": info.hits, "misses": info.misses},
        # every shared embedding service (the hybrid scorer's MiniLM one)
        "embeddings": [svc.cache_info() for svc in list(_services.values())],
        "summaries": {
            "size": len(DEFAULT_SUMMARY_CACHE),  # type: ignore[arg-type]
            "maxsize": getattr(DEFAULT_SUMMARY_CACHE, "maxsize", None),
        },
        "prefix_memo": {
            "analysed": len(prefix._memo), "messages": len(prefix._message_memo),
            "fingerprints": len(prefix._fingerprint_memo), "tools": len(prefix._tools_memo),
            "maxsize": prefix.cache_size,
        },
        # module-level functools caches: also bounded, also part of the process's memory
        "module_lru": {
            name: {"size": fn.cache_info().currsize, "maxsize": fn.cache_info().maxsize}
            for name, fn in _MODULE_LRU.items()
        },
    }  # fmt: skip


def fill(sizes: dict[str, Any]) -> dict[str, str]:
    """Each cache as ``"size/maxsize"``: one line per point in time is enough to see it fill."""
    memo = sizes["prefix_memo"]
    out = {
        "token_counter": f"{sizes['token_counter']['size']}/{sizes['token_counter']['maxsize']}",
        "summaries": f"{sizes['summaries']['size']}/{sizes['summaries']['maxsize']}",
        **{
            f"prefix_memo.{k}": f"{memo[k]}/{memo['maxsize']}"
            for k in ("analysed", "messages", "fingerprints", "tools")
        },
        **{name: f"{v['size']}/{v['maxsize']}" for name, v in sizes["module_lru"].items()},
    }
    for j, e in enumerate(sizes["embeddings"]):
        out[f"embeddings[{j}]"] = f"{e['size']}/{e['maxsize']}"
    return out


def _full(sizes: dict[str, Any] | None) -> dict[str, bool] | None:
    if sizes is None:
        return None
    return {name: int(v.split("/")[0]) >= int(v.split("/")[1]) for name, v in fill(sizes).items()}


def _embedded() -> int:
    """Texts the shared embedding services have encoded so far (their cache misses)."""
    return sum(svc.cache_info()["misses"] for svc in list(_services.values()))


@dataclass
class SoakRun:
    """What the timed stream gave: latencies (ms) overall and per kind, failures, memory."""

    latencies: list[float] = field(default_factory=list)
    by_kind: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in KINDS})
    embedded_by_kind: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    first_errors: list[str] = field(default_factory=list)
    fallbacks: int = 0
    rss_half: float = float("nan")
    windows: list[dict[str, float]] = field(default_factory=list)
    caches_half: dict[str, Any] | None = None
    wall: float = 0.0
    cpu_s: float = 0.0


def set_up() -> tuple[Pipeline, VectorStore, float]:
    """The pipeline and the vector store, warmed up; the set-up time in seconds."""
    t_setup = time.perf_counter()
    pipeline = Pipeline.default(budget=Budget(total=BUDGET))
    retrieval = next(s for s in pipeline.stages if isinstance(s, RetrievalStage))
    store = VectorStore(retrieval.max_seq_length)  # loads MiniLM, indexes the corpus
    # warm-up on requests far past the end of the stream (each kind): tiktoken, MiniLM and the
    # lazy imports load before rss_start, and no cache holds a text of the stream
    for _, _, body, qvec in stream(WARM_UP_START + 12, store, start=WARM_UP_START):
        pipeline.run(Request.from_openai(body, query_embedding=qvec))
    gc.collect()
    return pipeline, store, time.perf_counter() - t_setup


def soak_stream(pipeline: Pipeline, store: VectorStore, n: int) -> SoakRun:
    """``n`` requests through ``pipeline``, one after another; only the slimming is timed."""
    run = SoakRun()
    window = max(1, n // 20)
    w_wall = w_cpu = 0.0  # timed work only, in this window
    start = time.perf_counter()
    cpu_start = time.process_time()
    for i, kind, body, qvec in stream(n, store):
        before = _embedded()
        c0 = time.process_time()
        t0 = time.perf_counter()
        try:
            out = pipeline.run(Request.from_openai(body, query_embedding=qvec))
        except Exception as exc:  # noqa: BLE001  (any failure is a lost request: count it, keep going)
            run.errors[type(exc).__name__] += 1
            if len(run.first_errors) < 5:
                run.first_errors.append(
                    f"request {i} ({kind}): " + traceback.format_exc(limit=3)[-600:]
                )
            continue
        ms = (time.perf_counter() - t0) * 1e3
        w_cpu += time.process_time() - c0
        w_wall += ms / 1e3
        run.latencies.append(ms)
        run.by_kind[kind].append(ms)
        run.embedded_by_kind[kind] += _embedded() - before
        run.fallbacks += any("fallback" in s.details for s in out.report.stages)
        if (i + 1) % window == 0:
            run.windows.append({
                "requests": i + 1, "rss_mb": round(rss_mb(), 1),
                "requests_per_s": round(window / max(w_wall, 1e-9), 1),
                "cpu_ms_per_request": round(w_cpu * 1e3 / window, 2),
            })  # fmt: skip
            w_wall = w_cpu = 0.0
        if i + 1 == n // 2:
            gc.collect()
            run.rss_half = rss_mb()
            run.caches_half = cache_sizes(pipeline)
    run.wall = time.perf_counter() - start
    run.cpu_s = time.process_time() - cpu_start
    return run


#: how the run was set up, as the result records it
CONFIG = {
    "pipeline": "Pipeline.default (prefix, history, retrieval scorer=hybrid/MiniLM, compress)",
    "budget_total": BUDGET,
    "kinds": "i % 3: rag (1 in COLD_EVERY rag_cold), chat, volatile",
    "docs_per_rag_request": DOCS_PER_RAG,
    "corpus_docs": CORPUS_DOCS,
    "cold_every": COLD_EVERY,
    "new_docs_per_cold_request": NEW_DOCS,
    "live_chats": LIVE_CHATS,
    "chat_turns": CHAT_TURNS,
    "system_templates": SYSTEM_TEMPLATES,
    "timed": "Request.from_openai + Pipeline.run, one thread",
    "vectors": "rag: Document.embedding and Request.query_embedding from the vector store (untimed); rag_cold: none",
    "rss_start": "VmRSS after MiniLM loaded, the corpus embedded and 12 warm-up requests",
}


def soak_result(
    n: int, quick: bool, run: SoakRun, setup_s: float, rss: dict[str, float],
    caches: dict[str, Any],
) -> dict[str, Any]:  # fmt: skip
    lat = spread(run.latencies)
    rss_half, rss_end = run.rss_half, rss["end"]
    growth = None if math.isnan(rss_half) else (rss_end - rss_half) / rss_half
    return {
        "benchmark": "soak",
        "N": n,
        "quick": quick,
        "requests": n,
        "errors": sum(run.errors.values()),
        "errors_by_type": dict(run.errors),
        "first_errors": run.first_errors,
        "fallbacks": run.fallbacks,
        "requests_per_s": round(n / run.wall, 1),
        "wall_s": round(run.wall, 1),
        "setup_s": round(setup_s, 1),
        # includes the untimed generation and the vector store's query embeddings
        "cpu_s": round(run.cpu_s, 1),
        "p50_ms": round(lat.get("p50", float("nan")), 3),
        "p99_ms": round(lat.get("p99", float("nan")), 3),
        "latency_ms": lat,
        "latency_ms_by_kind": {k: spread(v) for k, v in run.by_kind.items()},
        # texts the pipeline's MiniLM encoded, per kind (the warm rag path should need none
        # once the retrieval stage reuses Request.query_embedding)
        "embedded_texts_by_kind": {k: run.embedded_by_kind[k] for k in KINDS},
        "rss_import_mb": round(rss["import"], 1),
        "rss_start_mb": round(rss["start"], 1),
        "rss_half_mb": round(rss_half, 1),
        "rss_end_mb": round(rss_end, 1),
        "rss_peak_mb": round(peak_rss_mb(), 1),
        "rss_growth_second_half": round(growth, 4) if growth is not None else None,
        # which bounded caches had reached their bound by the half-way point (memory can only be
        # expected flat from there on for those that had; the others hold their working set)
        "caches_full_at_half": _full(caches.get("half")),
        "cache_fill": {point: fill(sizes) for point, sizes in caches.items()},
        "windows": run.windows,
        "caches": caches,
        "config": CONFIG,
        "machine": machine(),
    }


def soak_table(result: dict[str, Any]) -> str:
    return "\n".join([
        (
            f"soak: {result['N']} requests, {result['errors']} errors, {result['requests_per_s']} req/s "
            f"({result['cpu_s']} s CPU, setup {result['setup_s']} s), "
            f"p50 {result['p50_ms']} ms, p99 {result['p99_ms']} ms"
        ),
        "by kind (p50 / p99 ms): " + ", ".join(
            f"{k} {s.get('p50', float('nan')):.1f} / {s.get('p99', float('nan')):.1f}"
            for k, s in result["latency_ms_by_kind"].items()
        ),
        (
            f"RSS MB: start {result['rss_start_mb']}, half {result['rss_half_mb']}, "
            f"end {result['rss_end_mb']}, peak {result['rss_peak_mb']} "
            f"(second-half growth {result['rss_growth_second_half']})"
        ),
        *(f"caches at {point}: " + json.dumps(f) for point, f in result["cache_fill"].items()),
    ])  # fmt: skip


def main() -> None:
    ap = parser(__doc__.splitlines()[0])
    ap.add_argument(
        "-n", "--requests", dest="n", type=int,
        help="number of requests (default 100,000; 10,000 with --quick)",
    )  # fmt: skip
    args = ap.parse_args()
    n = args.n or (10_000 if args.quick else 100_000)
    rss = {"import": rss_mb()}
    pipeline, store, setup_s = set_up()
    rss["start"] = rss_mb()
    caches = {"start": cache_sizes(pipeline)}
    run = soak_stream(pipeline, store, n)
    if run.caches_half is not None:
        caches["half"] = run.caches_half
    gc.collect()
    rss["end"] = rss_mb()
    caches["end"] = cache_sizes(pipeline)
    result = soak_result(n, args.quick, run, setup_s, rss, caches)
    if args.quick:
        result["quick_changes"] = f"{n:,} requests instead of 100,000; nothing else"
    emit(result, args, soak_table(result))


if __name__ == "__main__":
    main()
