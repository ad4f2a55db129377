"""History stage: trimming latency, prefix-cache hits over a chat stream, and fact recall.

(a) Latency of ``HistoryStage.run`` trimming a 200-turn conversation with tool calls to a
    2,000-token budget. A *turn* here is one message (user, assistant, tool call or tool result);
    the same figures for 200 *exchanges* (a user message, the reply and any tool round: about
    500 messages) are reported under ``*_200_exchanges``. Every sample runs on freshly built
    Request objects, as a server parses each request anew.
    - ``last``: strategy ``last``, content the token counter has seen before.
    - ``extractive_cold``: the cache-aware default with the extractive summariser on a
      conversation never seen before: every sentence carries a word unique to the sample, so
      the summary cache, the token-count cache and the summariser's per-message analysis cache
      (sentences and their scores, by content) all miss. Each rolling summary step is computed.
    - ``extractive_warm``: the same conversation again (summaries cached); the request is
      parsed anew each time, so per-message token counts memoised on Message objects are not
      reused, only the counter's cache keyed by text.
    - ``extractive_fold_step``: a live conversation replayed request by request with one
      cache; only the requests where the fold point moves (one new summary step) are timed.
    - ``extractive_shared``: a conversation this process never saw, whose summaries another
      process put into a shared ``SqliteSummaryCache`` file (``serve --workers``: a worker's
      first request of a conversation another worker served).
    Beside each cold sample (outside its timing) ``reference_loop_ms`` times a fixed Python
    loop: its spread (``reference_loop_beside_cold``) shows how much the machine's own speed
    moved while the cold samples ran (a shared VM drifts by up to 2x for tens of seconds).
(b) A 50-turn chat stream (1,500-token system prompt, growing history, 4,000-token budget),
    each trimmed prompt tokenised as a server would (``promptslim.cache.request_tokens``) and
    replayed through the vLLM block-16 cache model (``promptslim.cache.BlockHashCache``). Share
    of prompt tokens that are cache hits, per request (mean over the 50 requests; the first is
    always a miss) and token-weighted; cache-aware vs. sliding window (``last``) and
    ``summarize``.
(c) Fact recall: conversations plant facts in their first turns, then talk about other things
    (with distracting numbers and names), then ask about one fact. The share of conversations
    whose answer string survives anywhere in the trimmed prompt, per strategy.

The machine's speed moves in phases (up to 2x, for tens of seconds), and the cold figures are
the most exposed to it: read ``reference_loop_beside_cold`` beside them, and judge a code change
by running the two versions side by side in alternation, not by two runs at different times.
The goals are ``GOALS["bench_history"]`` in ``benchmarks/summary.py``.
"""

from __future__ import annotations

import gc
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

from common import emit, machine, parser, reference_loop_ms
from summary import goal

from promptslim import Budget, Request
from promptslim.backends.summarisers import LRUSummaryCache
from promptslim.backends.summary_store import SqliteSummaryCache
from promptslim.stages.history import HistoryStage
from promptslim.stats import spread
from promptslim.tokens import count_request, get_counter

WORDS = ["cache", "prefill", "token", "budget", "request", "latency", "model", "server", "document", "history", "retrieval", "answer", "question", "system", "prompt", "context", "window", "queue", "batch", "throughput", "user", "assistant", "region", "storage", "limit", "policy", "price", "update", "version", "schema", "field", "value", "number", "deploy", "cluster", "replica", "shard", "index", "migration", "backup", "release", "rollout", "incident", "review"]
NAMES = ["Alice", "Bob", "Chen", "Dmitri", "Eva", "Farah", "Goran", "Hana", "Ivan", "Julia"]


# ---------------------------------------------------------------- conversation generators


def _sentence(rng: random.Random, n: int, nonce: str = "") -> str:
    words = [rng.choice(WORDS) for _ in range(n)]
    if rng.random() < 0.3:
        words.insert(rng.randrange(len(words)), rng.choice(NAMES))
    if rng.random() < 0.3:
        words.insert(rng.randrange(len(words)), str(rng.randint(2, 9999)))
    return nonce + " ".join(words).capitalize() + "."


def _turn(rng: random.Random, t: int, nonce: str, *, tools: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"role": "user", "content": " ".join(_sentence(rng, rng.randint(8, 16), nonce)
                                             for _ in range(rng.randint(1, 3)))}
    ]
    if tools and rng.random() < 0.25:
        cid = f"call_{t}_{nonce.strip()}"
        out.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function",
             "function": {"name": "search", "arguments": f'{{"query": "{rng.choice(WORDS)}"}}'}}]})
        out.append({"role": "tool", "tool_call_id": cid,
                    "content": " ".join(_sentence(rng, 14, nonce) for _ in range(rng.randint(2, 5)))})
    out.append({"role": "assistant", "content": " ".join(
        _sentence(rng, rng.randint(10, 20), nonce) for _ in range(rng.randint(3, 8)))})
    return out


def conversation(seed: int, *, messages: int | None = None, exchanges: int | None = None,
                 nonce: str = "", system_sentences: int = 6) -> list[dict[str, Any]]:
    """System prompt, then turns until ``messages`` messages or ``exchanges`` exchanges, then a
    final user question."""
    rng = random.Random(seed)
    body = [{"role": "system", "content": " ".join(_sentence(rng, 14) for _ in range(system_sentences))}]
    t = 0
    while True:
        turn = _turn(rng, t, nonce, tools=True)
        if messages is not None and len(body) - 1 + len(turn) > messages - 1:
            break
        if exchanges is not None and t >= exchanges:
            break
        body.extend(turn)
        t += 1
    body.append({"role": "user", "content": nonce + "What should we do next about the rollout?"})
    return body


def _nonce(i: int) -> str:
    """A word unique to sample ``i`` (letters only: a digit would make every sentence look
    like it carries a number), so its content is new to every cache."""
    letters = ""
    i += 1
    while i:
        i, r = divmod(i, 26)
        letters += chr(ord("a") + r)
    return f"zq{letters} "


def parse(body: list[dict[str, Any]]) -> Request:
    return Request.from_openai({"model": "m", "messages": body})


# ---------------------------------------------------------------- (a) latency


def time_runs(stage: HistoryStage, bodies: list[list[dict[str, Any]]], budget: Budget) -> list[float]:
    requests = [parse(b) for b in bodies]
    gc.collect()
    gc.disable()
    try:
        out = []
        for r in requests:
            t = time.perf_counter()
            stage.run(r, budget)
            out.append((time.perf_counter() - t) * 1e3)
        return out
    finally:
        gc.enable()


def latency(size: dict[str, int], n: int, n_cold: int) -> dict[str, Any]:
    budget = Budget(total=2000)
    body = conversation(1, **size)
    messages = len(body)
    tokens = count_request(parse(body))
    last = HistoryStage(strategy="last")
    time_runs(last, [body] * 20, budget)  # warm-up: the counter has seen this content
    last_ms = time_runs(last, [body] * n, budget)
    # cold: a conversation never seen before, each sample with its own (empty) summary cache
    cold_ms: list[float] = []
    gauge: list[float] = []  # the machine's speed beside each cold sample (not timed in it)
    for i in range(n_cold):
        stage = HistoryStage(summary_cache=LRUSummaryCache())
        gauge.append(reference_loop_ms())
        cold_ms += time_runs(stage, [conversation(1000 + i, nonce=_nonce(i), **size)], budget)
    # a live conversation: every prefix ending in a user message, in order, one shared cache;
    # the requests where the cache-aware fold point moves pay for one new summary step
    step_ms: list[float] = []
    for i in range(n_cold // 10 or 1):
        grown = conversation(3000 + i, nonce=_nonce(10_000 + i), **size)
        live = HistoryStage(summary_cache=LRUSummaryCache())
        for k in (j for j, m in enumerate(grown) if m["role"] == "user" and j > 0):
            r = parse(grown[: k + 1])
            t = time.perf_counter()
            res = live.run(r, budget)
            ms = (time.perf_counter() - t) * 1e3
            if res.report.stages[0].details.get("summary_cached") is False:
                step_ms.append(ms)
    shared_ms = shared_cache_runs(size, n_cold, budget)
    warm = HistoryStage(summary_cache=LRUSummaryCache())
    time_runs(warm, [body] * 20, budget)
    warm_ms = time_runs(warm, [body] * n, budget)
    out = parse(body)
    res = warm.run(out, budget)
    return {
        "messages": messages,
        "tokens_in": tokens,
        "tokens_out": res.report.tokens_out,
        "last": spread(last_ms),
        "extractive_cold": spread(cold_ms),
        "extractive_warm": spread(warm_ms),
        "extractive_fold_step": spread(step_ms),
        "extractive_shared": spread(shared_ms),
        "reference_loop_beside_cold": spread(gauge),
    }


def _fill_shared(path: str, size: dict[str, int], seeds: list[int], budget: Budget) -> None:
    """Another worker: computes the summaries of these conversations into the SQLite file."""
    stage = HistoryStage(summary_cache=SqliteSummaryCache(path))
    for seed in seeds:
        stage.run(parse(conversation(seed, nonce=_nonce(seed), **size)), budget)


def shared_cache_runs(size: dict[str, int], n: int, budget: Budget) -> list[float]:
    """``extractive_shared``: conversations this process has never seen, whose summaries
    another process (a spawned one: ``serve --workers``' case) already put into a shared
    ``SqliteSummaryCache``. Each sample has a fresh cache object on that file (nothing in
    memory) and text no cache of this process has seen, as on the first request a worker
    gets of a conversation another worker served."""
    import multiprocessing

    base = 7000 if "messages" in size else 107_000  # each size its own, unseen text
    seeds = [base + i for i in range(n)]
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "summaries.db")
        ctx = multiprocessing.get_context("spawn")
        filler = ctx.Process(target=_fill_shared, args=(path, size, seeds, budget))
        filler.start()
        filler.join()
        if filler.exitcode != 0:
            raise RuntimeError(f"the filling process failed ({filler.exitcode})")
        out: list[float] = []
        for seed in seeds:
            stage = HistoryStage(summary_cache=SqliteSummaryCache(path, memory=0))
            out += time_runs(stage, [conversation(seed, nonce=_nonce(seed), **size)], budget)
        return out


# ---------------------------------------------------------------- (b) cache hits


def chat_stream(seed: int, turns: int) -> tuple[dict[str, Any], list[list[dict[str, Any]]]]:
    """A 1,500-token system prompt and ``turns`` requests, each the whole conversation so far
    plus a new user message (the client keeps the full history; promptslim trims it)."""
    rng = random.Random(seed)
    counter = get_counter()
    system_parts: list[str] = []
    while counter.count(" ".join(system_parts)) < 1500:
        system_parts.append(_sentence(rng, 14))
    system = " ".join(system_parts)
    while counter.count(system) > 1500:
        system = system[: -20]
    history: list[dict[str, Any]] = []
    requests = []
    for t in range(turns):
        turn = _turn(rng, t, "", tools=True)
        requests.append([{"role": "system", "content": system}, *history, turn[0]])
        history.extend(turn)  # the reply (and any tool round) arrives after the request
    return {"role": "system", "content": system}, requests


def cache_hits(strategy: str, seeds: list[int], turns: int) -> dict[str, Any]:
    from promptslim.cache import BlockHashCache, request_tokens

    budget = Budget(total=4000)
    per_request: list[float] = []
    hit_total = tok_total = 0
    for seed in seeds:
        cache = BlockHashCache(block_size=16)
        stage = HistoryStage(strategy=strategy, summary_cache=LRUSummaryCache())  # type: ignore[arg-type]
        for body in chat_stream(seed, turns)[1]:
            out = stage.run(parse(body), budget).request
            assert count_request(out) <= 4000
            tokens, _ = request_tokens(out)
            hit = cache.observe(tokens)
            per_request.append(hit / len(tokens))
            hit_total += hit
            tok_total += len(tokens)
    return {
        "mean_per_request": statistics.fmean(per_request),
        "token_weighted": hit_total / tok_total,
        "requests": len(per_request),
    }


# ---------------------------------------------------------------- (c) fact recall

FACTS: list[tuple[Callable[[random.Random], str], str]] = [
    (lambda r: f"{r.randint(1000, 9999)}", "My locker code is {v}, please remember it."),
    (lambda r: f"B-{r.randint(10, 99)}", "The offsite meeting is in room {v}."),
    (lambda r: r.choice(["Marguerite Okafor", "Tobias Lindqvist", "Priya Raman", "Kenji Watanabe"]),
     "Our new account manager is {v}."),
    (lambda r: f"INC-{r.randint(10000, 99999)}", "The incident ticket for the outage is {v}."),
    (lambda r: f"{r.randint(2, 40)} March", "We decided the launch date is {v}."),
]


def fact_conversation(seed: int) -> tuple[list[dict[str, Any]], str]:
    rng = random.Random(seed)
    body: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful assistant."}]
    planted = []
    for make, template in rng.sample(FACTS, 3):
        value = make(rng)
        planted.append((value, template))
        body.append({"role": "user", "content": template.format(v=value)})
        body.append({"role": "assistant", "content": "Noted. " + _sentence(rng, 12)})
    for t in range(rng.randint(25, 40)):
        body.extend(_turn(rng, t, "", tools=True))
    value, template = rng.choice(planted)
    body.append({"role": "user", "content": "Earlier I told you something: " + template.split(" is ")[0] + "?"})
    return body, value


def fact_recall(strategies: list[str], n: int) -> dict[str, float]:
    budget = Budget(total=1500)
    found = dict.fromkeys(strategies, 0)
    for i in range(n):
        body, answer = fact_conversation(5000 + i)
        request = parse(body)
        for strategy in strategies:
            stage = HistoryStage(strategy=strategy, summary_cache=LRUSummaryCache())  # type: ignore[arg-type]
            out = stage.run(request, budget).request
            if any(answer in m.text for m in out.messages):
                found[strategy] += 1
    return {s: found[s] / n for s in strategies}


# ---------------------------------------------------------------- main


def main() -> None:
    args = parser(__doc__.splitlines()[0]).parse_args()
    n, n_cold = (200, 60) if args.quick else (1000, 300)
    stream_seeds = [0, 1, 2] if args.quick else list(range(10))
    n_facts = 40 if args.quick else 200
    started = time.perf_counter()

    lat = latency({"messages": 200}, n, n_cold)
    lat_ex = latency({"exchanges": 200}, n // 2, n_cold // 3)
    hits = {s: cache_hits(s, stream_seeds, 50) for s in ("cache_aware", "last", "summarize")}
    recall = fact_recall(["cache_aware", "summarize", "last"], n_facts)
    result = {
        "benchmark": "bench_history",
        "quick": args.quick,
        "last_p99_ms": p(lat, "last"),
        "extractive_cold_p99_ms": p(lat, "extractive_cold"),
        "extractive_warm_p99_ms": p(lat, "extractive_warm"),
        "cache_hit_share_cache_aware": round(hits["cache_aware"]["mean_per_request"], 4),
        "cache_hit_share_sliding": round(hits["last"]["mean_per_request"], 4),
        "fact_recall": recall,
        "last_p50_ms": p(lat, "last", "p50"),
        "extractive_cold_p50_ms": p(lat, "extractive_cold", "p50"),
        "extractive_warm_p50_ms": p(lat, "extractive_warm", "p50"),
        "extractive_fold_step_p99_ms": p(lat, "extractive_fold_step"),
        "extractive_shared_p50_ms": p(lat, "extractive_shared", "p50"),
        "extractive_shared_p99_ms": p(lat, "extractive_shared"),
        "last_p99_ms_200_exchanges": p(lat_ex, "last"),
        "extractive_cold_p99_ms_200_exchanges": p(lat_ex, "extractive_cold"),
        "extractive_warm_p99_ms_200_exchanges": p(lat_ex, "extractive_warm"),
        "cache_hit_share_summarize": round(hits["summarize"]["mean_per_request"], 4),
        "cache_hits": hits,
        "latency_200_messages": lat,
        "latency_200_exchanges": lat_ex,
        "N": {"latency": n, "latency_cold": n_cold, "stream_conversations": len(stream_seeds),
              "stream_requests": hits["cache_aware"]["requests"], "fact_conversations": n_facts},
        "spread": "p50/p90/p99/min/max/iqr per timing under latency_*",
        "reference_loop_ms": {
            "beside_cold_p50": round(lat["reference_loop_beside_cold"]["p50"], 3),
            "beside_cold_max": round(lat["reference_loop_beside_cold"]["max"], 3),
            "beside_cold_min": round(lat["reference_loop_beside_cold"]["min"], 3),
        },
        "machine": {**machine(), "loadavg_1m_at_end": round(os.getloadavg()[0], 2)},
        "tokenizer": get_counter().name,
        "wall_s": round(time.perf_counter() - started, 1),
    }
    emit(result, args, history_table(lat, lat_ex, hits, recall))


def p(part: dict[str, Any], key: str, q: str = "p99") -> float:
    """One percentile of one timing, in ms, rounded as the result records it."""
    return round(part[key][q], 3)


def history_table(
    lat: dict[str, Any], lat_ex: dict[str, Any], hits: dict[str, Any], recall: dict[str, float]
) -> str:
    return "\n".join([
        f"(a) 200 messages ({lat['tokens_in']} tokens -> {lat['tokens_out']}), budget 2,000:",
        f"    last             p50 {p(lat, 'last', 'p50'):8.3f} ms  p99 {p(lat, 'last'):8.3f} ms ({goal('bench_history', 'last_p99_ms')})",
        f"    extractive cold  p50 {p(lat, 'extractive_cold', 'p50'):8.3f} ms  p99 {p(lat, 'extractive_cold'):8.3f} ms ({goal('bench_history', 'extractive_cold_p99_ms')})",
        f"    extractive warm  p50 {p(lat, 'extractive_warm', 'p50'):8.3f} ms  p99 {p(lat, 'extractive_warm'):8.3f} ms ({goal('bench_history', 'extractive_warm_p99_ms')})",
        (f"    extractive fold step (live conversation, one new summary step) p50 "
        f"{p(lat, 'extractive_fold_step', 'p50')} ms p99 {p(lat, 'extractive_fold_step')} ms"),
        (f"    extractive shared (summaries another process put in a SQLite file) p50 "
        f"{p(lat, 'extractive_shared', 'p50')} ms p99 {p(lat, 'extractive_shared')} ms"),
        (f"    machine speed beside the cold samples (a fixed Python loop): min "
        f"{p(lat, 'reference_loop_beside_cold', 'min')} ms, p50 "
        f"{p(lat, 'reference_loop_beside_cold', 'p50')} ms, max "
        f"{p(lat, 'reference_loop_beside_cold', 'max')} ms"),
        (f"    200 exchanges ({lat_ex['messages']} messages, {lat_ex['tokens_in']} tokens): last p99 "
        f"{p(lat_ex, 'last')} ms, cold p99 {p(lat_ex, 'extractive_cold')} ms, warm p99 {p(lat_ex, 'extractive_warm')} ms"),
        ("(b) vLLM block-16 cache hits, 50-turn stream, 1,500-token system, budget 4,000 "
        "(mean per request / token-weighted):"),
        *(f"    {s:12s} {h['mean_per_request']:.3f} / {h['token_weighted']:.3f}" for s, h in hits.items()),
        "(c) fact recall (answer string survives trimming to 1,500 tokens):",
        *(f"    {s:12s} {v:.3f}" for s, v in recall.items()),
    ])


if __name__ == "__main__":
    main()
