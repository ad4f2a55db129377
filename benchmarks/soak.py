"""Soak: many mixed requests through the default pipeline; errors, latency, memory, cache sizes.

``Pipeline.default(budget=Budget(total=BUDGET))`` (prefix, history, retrieval with the default
hybrid BM25 + MiniLM scorer, extractive compress) runs serially over a deterministic stream of
three request kinds, in rotation:

- ``rag``: a short chat plus 8 documents: 4 from a popular pool of 400 (cache hits) and 4 never
  seen before (embedding and token-count cache misses, so those caches fill and then evict).
  ``--quick`` (10,000 requests) uses 1 new + 7 popular documents instead (each new document
  costs a cold MiniLM embedding); the JSON says so in ``quick_changes``. Even so, --quick does
  NOT fit in two minutes on the 2-core dev box: 3,000 requests ran at ~29/s there, and a full
  --quick run was stopped unfinished after 10 minutes;
- ``tools``: a long chat (12-24 turns) with assistant tool calls and tool results, cut by the
  history stage, which summarises what it drops (the summary cache fills);
- ``volatile``: a system prompt with a date, a time and a session UUID (moved out by the
  prefix stage; 1 of 3000 templates, so the prefix memos fill), tools schema, a few turns.

Every text is generated from the request's index, so a run is reproducible and texts are
distinct (cache sizes grow until their bounds). Timed per request: ``Request.from_openai`` plus
``Pipeline.run`` (what a caller pays), one thread. Memory: the process's resident set
(``VmRSS``) after the first request (model loaded: ``rss_start_mb``), at the half-way point and
at the end; peak from ``getrusage``. The memory goal is that RSS is flat once the caches are full:
``rss_growth_second_half`` = (end - half) / half <= 0.10.

Goals: errors = 0, rss_growth_second_half <= 0.10.
"""

from __future__ import annotations

import gc
import json
import math
import random
import resource
import time
import traceback
from collections import Counter
from typing import Any

from common import emit, machine, parser, summary

from promptslim import Budget, Pipeline, Request
from promptslim import text as _text
from promptslim import tokens as _tokens
from promptslim.backends import summarisers as _summarisers
from promptslim.backends.embeddings import _services
from promptslim.stages import retrieval as _retrieval
from promptslim.stages.history import DEFAULT_SUMMARY_CACHE
from promptslim.stages.prefix import PrefixStage
from promptslim.tokens import get_counter

BUDGET = 1500
DOCS_PER_RAG = 8
#: documents never seen before in each rag request (each costs a MiniLM embedding)
NEW_DOCS = 4
#: --quick: 1 new document per rag request instead of 4 (a cold MiniLM embedding is the dominant
#: cost); recorded in the JSON as ``quick_changes``. Measured: ~29 requests/s on the 2-core box,
#: yet a 10,000-request run was still going after 10 minutes (stopped): not two
NEW_DOCS_QUICK = 1
POPULAR_DOCS = 400
SYSTEM_TEMPLATES = 3000

# a vocabulary of made-up words from syllables: many distinct token sequences, like real text
_SYL = ["ka", "lo", "mi", "ter", "van", "pul", "sor", "ine", "dra", "que", "bel", "tho", "rix", "nam", "ost", "wey"]  # fmt: skip
_WORDS = [a + b + c for a in _SYL for b in _SYL for c in ("", "s", "ed", "ing")][:900]
_COMMON = ["the", "a", "of", "to", "and", "in", "is", "for", "with", "on", "that", "by", "price", "region", "limit", "cache", "order", "account", "service", "report"]  # fmt: skip


def _sentence(rng: random.Random, n: int) -> str:
    words = [rng.choice(_COMMON) if rng.random() < 0.4 else rng.choice(_WORDS) for _ in range(n)]
    return " ".join(words).capitalize() + "."


def _paragraph(rng: random.Random, sentences: int) -> str:
    return " ".join(_sentence(rng, rng.randint(8, 16)) for _ in range(sentences))


def _document(k: int) -> dict[str, Any]:
    rng = random.Random(("doc", k).__repr__())
    return {
        "id": f"doc-{k}",
        "text": _paragraph(rng, rng.randint(3, 5)),
        "metadata": {"title": f"Note {k}"},
    }


_TOOLS = [
    {"type": "function", "function": {"name": "lookup_order", "description": "Find an order by id.",
     "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}},
    {"type": "function", "function": {"name": "search_kb", "description": "Search the knowledge base.",
     "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "k": {"type": "integer"}}}}},
]  # fmt: skip


def _rag(i: int, rng: random.Random, fresh: int, new_docs: int) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Answer from the notes. Cite note titles."}
    ]
    for _ in range(rng.randint(0, 3)):
        messages.append({"role": "user", "content": _sentence(rng, 12)[:-1] + "?"})
        messages.append({"role": "assistant", "content": _paragraph(rng, 2)})
    messages.append({"role": "user", "content": f"Request {i}: " + _sentence(rng, 10)[:-1] + "?"})
    popular = rng.sample(range(POPULAR_DOCS), DOCS_PER_RAG - new_docs)
    new = range(POPULAR_DOCS + fresh, POPULAR_DOCS + fresh + new_docs)
    docs = [_document(k) for k in (*popular, *new)]
    rng.shuffle(docs)
    return {"model": "m", "messages": messages, "documents": docs}


def _tools_chat(i: int, rng: random.Random) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a support agent. Use the tools."}
    ]
    for t in range(rng.randint(12, 24)):
        messages.append({"role": "user", "content": f"({i}.{t}) " + _sentence(rng, 14)})
        if rng.random() < 0.5:
            call_id = f"call_{i}_{t}"
            args = json.dumps({"order_id": f"A-{rng.randint(10_000, 99_999)}"})
            messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": "lookup_order", "arguments": args}}]})  # fmt: skip
            messages.append({"role": "tool", "tool_call_id": call_id, "content": json.dumps(
                {"status": rng.choice(["shipped", "held", "lost"]), "note": _sentence(rng, 12)})})  # fmt: skip
        messages.append({"role": "assistant", "content": _paragraph(rng, rng.randint(1, 3))})
    messages.append(
        {"role": "user", "content": f"Summing up request {i}: " + _sentence(rng, 8)[:-1] + "?"}
    )
    return {"model": "m", "messages": messages, "tools": _TOOLS}


def _volatile(i: int, rng: random.Random) -> dict[str, Any]:
    t = rng.randrange(SYSTEM_TEMPLATES)
    trng = random.Random(("system", t).__repr__())
    day, hour = 1 + i % 28, i % 24
    uid = f"{rng.getrandbits(32):08x}-{rng.getrandbits(16):04x}-4{rng.getrandbits(12):03x}-a{rng.getrandbits(12):03x}-{rng.getrandbits(48):012x}"
    system = (
        f"You are assistant {t}. {_paragraph(trng, 4)}\n"
        f"Today is 2025-03-{day:02d} {hour:02d}:{i % 60:02d} UTC. Session {uid}.\n"
        f"Rules: {_paragraph(trng, 3)}"
    )
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for _ in range(rng.randint(1, 4)):
        messages.append({"role": "user", "content": _sentence(rng, 10)})
        messages.append({"role": "assistant", "content": _paragraph(rng, 2)})
    messages.append({"role": "user", "content": f"Volatile {i}: " + _sentence(rng, 9)[:-1] + "?"})
    return {"model": "m", "messages": messages, "tools": _TOOLS if t % 2 else None}


def make_body(i: int, new_docs: int = NEW_DOCS) -> tuple[str, dict[str, Any]]:
    """Request ``i`` of the stream: its kind and OpenAI body (same i, same bytes)."""
    rng = random.Random(i)
    kind = ("rag", "tools", "volatile")[i % 3]
    if kind == "rag":
        # fresh documents never repeat: request i's new ids follow the previous rag request's
        return kind, _rag(i, rng, fresh=(i // 3) * new_docs, new_docs=new_docs)
    if kind == "tools":
        return kind, _tools_chat(i, rng)
    body = _volatile(i, rng)
    if body["tools"] is None:
        del body["tools"]
    return kind, body


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
    "tokens._document_tokens": _tokens._document_tokens,
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


def _full(sizes: dict[str, Any] | None) -> dict[str, bool] | None:
    if sizes is None:
        return None
    memo = sizes["prefix_memo"]
    return {
        "token_counter": sizes["token_counter"]["size"] >= sizes["token_counter"]["maxsize"],
        "embeddings": all(e["size"] >= e["maxsize"] for e in sizes["embeddings"]),
        "summaries": sizes["summaries"]["size"] >= (sizes["summaries"]["maxsize"] or float("inf")),
        "prefix_memo": memo["analysed"] >= memo["maxsize"],
    }


def main() -> None:
    ap = parser(__doc__.splitlines()[0])
    ap.add_argument(
        "-n", type=int, help="number of requests (default 100,000; 10,000 with --quick)"
    )
    args = ap.parse_args()
    n = args.n or (10_000 if args.quick else 100_000)
    new_docs = NEW_DOCS_QUICK if args.quick else NEW_DOCS
    rss_import = rss_mb()
    pipeline = Pipeline.default(budget=Budget(total=BUDGET))

    # warm-up (request 0 again in the stream): loads MiniLM and tiktoken before rss_start
    pipeline.run(Request.from_openai(make_body(0, new_docs)[1]))
    gc.collect()
    rss_start = rss_mb()
    caches = {"start": cache_sizes(pipeline)}
    latencies: list[float] = []
    by_kind: dict[str, list[float]] = {"rag": [], "tools": [], "volatile": []}
    errors: Counter[str] = Counter()
    first_errors: list[str] = []
    fallbacks = 0
    rss_half = float("nan")
    rss_samples: list[tuple[int, float]] = []
    start = time.perf_counter()
    for i in range(n):
        kind, body = make_body(i, new_docs)
        t0 = time.perf_counter()
        try:
            out = pipeline.run(Request.from_openai(body))
        except Exception as exc:  # noqa: BLE001  (any failure is a lost request: count it, keep going)
            errors[type(exc).__name__] += 1
            if len(first_errors) < 5:
                first_errors.append(
                    f"request {i} ({kind}): " + traceback.format_exc(limit=3)[-600:]
                )
            continue
        ms = (time.perf_counter() - t0) * 1e3
        latencies.append(ms)
        by_kind[kind].append(ms)
        fallbacks += any("fallback" in s.details for s in out.report.stages)
        if (i + 1) % max(1, n // 20) == 0:
            rss_samples.append((i + 1, round(rss_mb(), 1)))
        if i + 1 == n // 2:
            gc.collect()
            rss_half = rss_mb()
            caches["half"] = cache_sizes(pipeline)
    wall = time.perf_counter() - start
    gc.collect()
    rss_end = rss_mb()
    caches["end"] = cache_sizes(pipeline)

    lat = summary(latencies)
    growth = None if math.isnan(rss_half) else (rss_end - rss_half) / rss_half
    result: dict[str, Any] = {
        "benchmark": "soak",
        "N": n,
        "quick": args.quick,
        "requests": n,
        "errors": sum(errors.values()),
        "errors_by_type": dict(errors),
        "first_errors": first_errors,
        "fallbacks": fallbacks,
        "requests_per_s": round(n / wall, 1),
        "wall_s": round(wall, 1),
        "p50_ms": round(lat.get("p50", float("nan")), 3),
        "p99_ms": round(lat.get("p99", float("nan")), 3),
        "latency_ms": lat,
        "latency_ms_by_kind": {k: summary(v) for k, v in by_kind.items()},
        "rss_import_mb": round(rss_import, 1),
        "rss_start_mb": round(rss_start, 1),
        "rss_half_mb": round(rss_half, 1),
        "rss_end_mb": round(rss_end, 1),
        "rss_peak_mb": round(peak_rss_mb(), 1),
        "rss_growth_second_half": round(growth, 4) if growth is not None else None,
        # which bounded caches had reached their bound by the half-way point (memory can only be
        # expected flat from there on for those that had)
        "caches_full_at_half": _full(caches.get("half")),
        "rss_samples_mb": rss_samples,
        "caches": caches,
        "config": {
            "pipeline": "Pipeline.default (prefix, history, retrieval scorer=hybrid/MiniLM, compress)",
            "budget_total": BUDGET,
            "kinds": "rag, tools, volatile in rotation",
            "docs_per_rag_request": DOCS_PER_RAG,
            "new_docs_per_rag_request": new_docs,
            "popular_docs": POPULAR_DOCS,
            "system_templates": SYSTEM_TEMPLATES,
            "timed": "Request.from_openai + Pipeline.run, one thread",
            "rss_start": "VmRSS after one warm-up request (models loaded), before the stream",
        },
        "machine": machine(),
    }
    if args.quick:
        result["quick_changes"] = (
            f"{n:,} requests instead of 100,000, and {NEW_DOCS_QUICK} new document per rag request "
            f"instead of {NEW_DOCS} ({DOCS_PER_RAG - NEW_DOCS_QUICK} from the popular pool): fewer cold "
            "MiniLM embeddings per request (a 10,000 run on 2 cores did not finish in 10 min)"
        )
    table = "\n".join([
        (
            f"soak: {n} requests, {result['errors']} errors, {result['requests_per_s']} req/s, "
            f"p50 {result['p50_ms']} ms, p99 {result['p99_ms']} ms"
        ),
        (
            f"RSS MB: start {result['rss_start_mb']}, half {result['rss_half_mb']}, "
            f"end {result['rss_end_mb']}, peak {result['rss_peak_mb']} "
            f"(second-half growth {result['rss_growth_second_half']})"
        ),
        "caches at end: " + json.dumps(caches["end"]),
    ])  # fmt: skip
    emit(result, args, table)


if __name__ == "__main__":
    main()
