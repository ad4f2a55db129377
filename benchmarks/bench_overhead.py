"""Overhead of the bare pipeline and of token counting.

A 3k-token request with 20 documents and a 20-turn history goes through a Pipeline of four
pass-through stages. Timed:

- ``pipeline_*``: ``Pipeline.run`` on freshly parsed Request objects whose texts the counter
  has seen before (a new request with a familiar system prompt and documents: the common case;
  first-time tokenisation is ``count_cold``). The first stage counts the request (LRU hits);
  the others reuse the total memoised on it. OpenTelemetry spans are started only when a
  tracer provider is configured; ``otel`` in the result says which case was timed;
- ``count_cold_ms``: ``count_request`` on a request whose every text is new (tiktoken runs);
- ``count_warm_ms``: ``count_request`` on a fresh object whose texts were seen (LRU hits).

The goals are ``GOALS["bench_overhead"]`` in ``benchmarks/summary.py``.
"""

from __future__ import annotations

import gc
import random
import time

from common import emit, machine, parser
from summary import goal

from promptslim import Budget, PassThrough, Pipeline, Request, count_request, get_counter
from promptslim.stats import spread

WORDS = ["cache", "prefill", "token", "budget", "request", "latency", "model", "server", "document", "history", "retrieval", "answer", "question", "system", "prompt", "context", "window", "queue", "batch", "throughput", "user", "assistant", "region", "storage", "limit", "policy", "price", "update", "version", "schema", "field", "value", "number"]


def make_body(seed: int, nonce: str = "") -> dict:
    rng = random.Random(seed)

    def sentence(n: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."

    system = nonce + " ".join(sentence(14) for _ in range(12))
    messages = [{"role": "system", "content": system}]
    for turn in range(20):
        messages.append({"role": "user", "content": nonce + sentence(12)})
        messages.append({"role": "assistant", "content": nonce + sentence(25)})
    messages.append({"role": "user", "content": "What is the storage limit per region?"})
    documents = [
        {"id": f"d{i}", "text": nonce + " ".join(sentence(15) for _ in range(4)),
         "metadata": {"title": f"Doc {i}"}}
        for i in range(20)
    ]
    return {"model": "m", "messages": messages, "documents": documents}


def otel_state() -> str:
    """Whether the timed runs started spans: they cost microseconds a stage when they do."""
    import importlib.util

    from promptslim.pipeline import _tracer

    if importlib.util.find_spec("opentelemetry") is None:
        return "not installed"
    return "spans started" if _tracer() is not None else "installed, no tracer provider: no spans"


def main() -> None:
    args = parser(__doc__.splitlines()[0]).parse_args()
    n = 300 if args.quick else 3000
    body = make_body(0)
    pipeline = Pipeline([PassThrough() for _ in range(4)], budget=Budget(total=100_000))
    counter = get_counter()
    tokens = count_request(Request.from_openai(body), counter)

    # fresh objects, familiar content
    requests = [Request.from_openai(body) for _ in range(n)]
    for r in requests[:20]:
        pipeline.run(r)
    gc.collect()
    gc.disable()
    pipe_ms = []
    for r in requests:
        t = time.perf_counter()
        pipeline.run(r)
        pipe_ms.append((time.perf_counter() - t) * 1e3)
    gc.enable()

    warm_ms, cold_ms = [], []
    fresh = [Request.from_openai(body) for _ in range(n)]
    for r in fresh:
        t = time.perf_counter()
        count_request(r, counter)
        warm_ms.append((time.perf_counter() - t) * 1e3)
    cold_n = 50 if args.quick else 300
    unseen = [Request.from_openai(make_body(0, nonce=f"n{i} ")) for i in range(cold_n)]
    for r in unseen:
        t = time.perf_counter()
        count_request(r, counter)
        cold_ms.append((time.perf_counter() - t) * 1e3)

    pipe, warm, cold = spread(pipe_ms), spread(warm_ms), spread(cold_ms)
    result = {
        "benchmark": "bench_overhead",
        "machine": machine(),
        "tokenizer": counter.name,
        "otel": otel_state(),
        "request_tokens": tokens,
        "stages": 4,
        "n": n,
        "pipeline_p50_ms": round(pipe["p50"], 4),
        "pipeline_p99_ms": round(pipe["p99"], 4),
        "count_cold_ms": round(cold["p50"], 4),
        "count_warm_ms": round(warm["p50"], 4),
        "count_cold_p99_ms": round(cold["p99"], 4),
        "count_warm_p99_ms": round(warm["p99"], 4),
        "pipeline": pipe,
        "count_cold": cold,
        "count_warm": warm,
    }
    table = "\n".join([
        f"request: {tokens} tokens, 20 documents, 20 turns; {n} runs; 4 pass-through stages",
        f"pipeline     p50 {pipe['p50']:.4f} ms  p99 {pipe['p99']:.4f} ms  ({goal('bench_overhead', 'pipeline_p99_ms')})",
        f"count cold   p50 {cold['p50']:.4f} ms  p99 {cold['p99']:.4f} ms  ({goal('bench_overhead', 'count_cold_ms')}: the p50)",
        f"count warm   p50 {warm['p50']:.4f} ms  p99 {warm['p99']:.4f} ms  ({goal('bench_overhead', 'count_warm_ms')}: the p50)",
    ])
    emit(result, args, table)


if __name__ == "__main__":
    main()
