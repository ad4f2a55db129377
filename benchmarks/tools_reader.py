"""``bench_tools.py``'s answer quality: a reader model answers each trace's question from the
tool results as they are and through the tools stage, on the same items.

A reader item is a short trace of the same making as the benchmark's (``build_traces``): the
task and the one tool call whose result holds the answer, that result between the stage's
``min_chars`` (so the stage does compress what the reader needs) and ``MAX_CHARS`` characters
(log results are windows of ``LOG_LINES`` lines), each question on each result once. The
kinds take turns (JSON, log, code) while each lasts: the source files hold few functions with
defaults in files this short, so code gives about 10 of 90 items. A
30-call trace would be tens of thousands of tokens, more than SmolLM2 reads well and more
than a CPU prefills in a benchmark's time; these prompts are 800-1,450 SmolLM2 tokens as they
are (1,100 typical; about 850 through the stage), some 4-5 s an item for both on two cores. Distractor results are left out: the stage compresses each result on its own, so what
decides the answer is what compression keeps of the result that holds it, and a distractor
would double each prompt's cost (``CALLS`` sets the trace length).

Figures, tools minus none with paired bootstrap intervals (``promptslim.stats``): best-subspan
EM of the answer, and the gold answer's log-likelihood under the model (the steadier signal
with a 135M reader); per kind, EM under each config and whether the answer's value is still
in the prompt the reader got (``needle_kept``).
"""

from __future__ import annotations

import time
from typing import Any

from promptslim.bench.datasets import BenchItem
from promptslim.bench.tool_traces import TraceSources, build_traces
from promptslim.stages.tools import ToolsStage

#: the longest tool result of a reader item, by kind (the code files are 2,000+ characters)
MAX_CHARS = {"json": 2_600, "log": 2_600, "code": 4_000}
LOG_LINES = 24
MIN_CHARS = 1_500  # the tools stage's default min_chars: shorter results pass untouched
CALLS = (1, 1)
#: answers are short values (a version, a percentage, a name, a date)
MAX_NEW_TOKENS = 16


def reader_items(sources: TraceSources, n: int, *, seed: int = 2) -> list[BenchItem]:
    """``n`` reader items (or fewer), the kinds in turn while each lasts."""
    pools: dict[str, list[BenchItem]] = {}
    for k, kind in enumerate(MAX_CHARS):
        built = build_traces(
            sources,
            n=6 * n,
            seed=seed + k,
            calls=CALLS,
            kinds=(kind,),
            max_result_chars=MAX_CHARS[kind],
            log_lines=LOG_LINES,
        )
        seen: set[tuple[str, str]] = set()  # the same question on the same result: one item
        pools[kind] = []
        for it in built:
            key = (it.request.messages[1].text, _needle_text(it))
            if len(key[1]) >= MIN_CHARS and key not in seen:
                seen.add(key)
                pools[kind].append(it)
    items: list[BenchItem] = []
    for i in range(3 * n):
        pool = pools[list(MAX_CHARS)[i % len(MAX_CHARS)]]
        if i // len(MAX_CHARS) < len(pool):
            items.append(pool[i // len(MAX_CHARS)])
        if len(items) == n:
            break
    return items


def _needle_text(item: BenchItem) -> str:
    index: int = item.metadata["needle_message"]
    return item.request.messages[index].text


def reader_quality(sources: TraceSources, n: int, model: str) -> dict[str, Any]:
    """The reader (a ``promptslim bench`` backend spec) on ``n`` items, none and tools."""
    from promptslim.bench.backends import load_backend
    from promptslim.bench.metrics import best_subspan_em

    start = time.perf_counter()
    items = reader_items(sources, n)
    backend = load_backend(model, device="cpu", repeats=1, max_new_tokens=MAX_NEW_TOKENS)
    stage = ToolsStage(store="memory:268435456")
    scores: dict[str, dict[str, list[float]]] = {
        name: {"em": [], "lp": [], "kept": []} for name in ("none", "tools")
    }
    try:
        for item in items:
            question = item.request.messages[1].text.removeprefix("Task: ")
            ask = {"role": "user", "content": f"Question: {question} Answer with the value only."}
            slim = stage.run(item.request).request
            for name, request in (("none", item.request), ("tools", slim)):
                messages = [m.to_openai() for m in request.messages] + [ask]
                m = backend.measure(messages, answers=list(item.answers))
                row = scores[name]
                row["em"].append(best_subspan_em(m.answer, item.answers))
                row["lp"].append(m.gold_logprob if m.gold_logprob is not None else 0.0)
                needle = request.messages[item.metadata["needle_message"]].text
                row["kept"].append(float(item.answers[0] in needle))
    finally:
        backend.close()
    out = _summary(items, scores, model)
    out["wall_s"] = round(time.perf_counter() - start, 1)
    return out


def _summary(
    items: list[BenchItem], scores: dict[str, dict[str, list[float]]], model: str
) -> dict[str, Any]:
    from promptslim.stats import paired_bootstrap_ci

    n = max(1, len(items))
    out: dict[str, Any] = {"items": len(items), "model": model}
    for metric in ("em", "lp"):
        ci = paired_bootstrap_ci(scores["tools"][metric], scores["none"][metric])
        out[metric] = {
            "none": sum(scores["none"][metric]) / n,
            "tools": sum(scores["tools"][metric]) / n,
            "delta": ci.mean,
            "ci95": [ci.low, ci.high],
        }
    by_kind: dict[str, dict[str, Any]] = {}
    for i, item in enumerate(items):
        row = by_kind.setdefault(
            item.metadata["kind"], {"items": 0, "em_none": 0.0, "em_tools": 0.0, "kept": 0.0}
        )
        row["items"] += 1
        row["em_none"] += scores["none"]["em"][i]
        row["em_tools"] += scores["tools"]["em"][i]
        row["kept"] += scores["tools"]["kept"][i]
    out["by_kind"] = {
        kind: {
            "items": r["items"],
            "em_none": r["em_none"] / r["items"],
            "em_tools": r["em_tools"] / r["items"],
            "needle_kept": r["kept"] / r["items"],
        }
        for kind, r in sorted(by_kind.items())
    }
    return out
