"""Tool-result compression on agent traces built from real tool output.

Data (fetched into ``~/.cache/promptslim`` at run time, never committed): PyGithub 2.10.0's
sdist (LGPL) for its ~1,000 recorded GitHub API responses; pip's verbose install log,
pytest ``-v`` output and ``promptslim serve``'s JSON-lines log (600-character lines, one per
request) made on this machine; source files of installed packages. Traces come from
``promptslim.bench.tool_traces`` (one question, 5-30 tool calls, the answer one value in one
result; a log needle's log drawn at random among the logs that have needles).

Configs, side by side on the same traces:

- ``none``: tool results as they are.
- ``tools``: the tools stage (compressed once per result and turn context; memo across turns).
- ``every_turn``: the same compressors run afresh on every request with that request's
  context (the newest tool call's arguments as hints), as a stateless proxy would.
- ``headroom``: headroom-ai's SmartCrusher on JSON results, every request, with the task as
  its query (other results unchanged: it is the JSON peer).

Figures: per content type, ``token_ratio`` (tokens out / in over the distinct results),
``needle_retention`` (the answer still in the result that held it) and ``p99_ms`` per 10k
tokens of tool output (compressing one result, normalised by its tokens, p99 over results of
at least 1,500 characters; ``p99_ms_per_10k`` is each result's first compression, what the
stage pays, ``_steady`` the median of three, which a busy machine's stalls disturb less;
each compressor runs once on a sample before any timing, so the process's first call does
not charge its imports to one result); over whole traces, ``token_ratio`` of the final
request, ``needle_retention`` in it, and ``cache_hit_share`` (prefix-cache hit tokens / prompt
tokens over every turn of 30-call traces, vLLM's block-16 chained hashes, one fresh cache per
trace). Answer quality: ``tools_reader.py`` (SmolLM2 by default, 90 items, 6 with
``--quick``, ``--reader 0`` to skip), ``quality_delta_em`` (compressed minus uncompressed,
paired) and its 95 % interval's ends ``quality_delta_em_low`` / ``_high``: quality is "not
below no compression" while the interval reaches zero (``_high >= 0``), as bench_load reads
its own quality goal. ``indented_records`` (``tools_records.py``): compose files,
Kubernetes manifests, TOML tables, ``git log``, a ``terraform plan``, a ``git diff``, a log of
JSON payloads, a Markdown handbook, a ``pom.xml``, an HTML table, ``pytest`` failures,
``cargo build`` errors, ``nginx -T`` servers and a job's log as one tool result, the answer
a few lines from the name it is asked by (the log: on the one line naming the worker), with
and without the record rules; ``indented_evidence_min`` is the lowest evidence of the
default there.
"""

from __future__ import annotations

import contextlib
import gc
import json
import time
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any

from common import emit, machine, parser
from tools_data import log_summary, logs, trace_sources
from tools_reader import reader_quality
from tools_records import indented_records
from tools_report import table

from promptslim.backends.tools import TOOL_COMPRESSORS, ToolContext
from promptslim.backends.tools.router import route
from promptslim.bench.tool_traces import build_traces, trace_requests
from promptslim.cache import BlockHashCache
from promptslim.stages.tools import ToolsStage, _context
from promptslim.stats import percentile
from promptslim.tokens import get_counter
from promptslim.types import Message, Request

Transform = Callable[[Request], Request]


# ---------------------------------------------------------------- configs


def every_turn(backends: dict[str, Any]) -> Transform:
    def run(request: Request) -> Request:
        calls = [c.function for m in request.messages if m.tool_calls for c in m.tool_calls]
        context = _context(request.effective_query, calls[-1] if calls else None, request.protect)
        messages = list(request.messages)
        for i, m in enumerate(messages):
            if m.role == "tool" and len(m.text) >= 1500:
                out = route(m.text, context, backends)
                if out is not None:
                    messages[i] = m.with_text(out.text)
        return request.replace(messages=messages)

    return run


def headroom() -> Transform | None:
    try:
        from headroom.transforms.smart_crusher import SmartCrusher
    except ImportError:
        return None
    crusher = SmartCrusher()

    def run(request: Request) -> Request:
        messages = list(request.messages)
        for i, m in enumerate(messages):
            if m.role == "tool" and m.text.lstrip()[:1] in "[{":
                messages[i] = m.with_text(
                    crusher.crush(m.text, query=request.effective_query).compressed
                )
        return request.replace(messages=messages)

    return run


def configs() -> dict[str, Callable[[], Transform | None]]:
    def tools() -> Transform:
        stage = ToolsStage(store="memory:268435456")
        return lambda r: stage.run(r).request

    backends = {n: TOOL_COMPRESSORS.get(n)() for n in ("json", "log", "code", "text")}
    return {
        "none": lambda: lambda r: r,
        "tools": tools,
        "every_turn": lambda: every_turn(backends),
        "headroom": headroom,
    }


# ---------------------------------------------------------------- measuring

#: one input per kind, compressed once before anything is timed: a process's first call pays
#: once for lazy imports and first-use set-up, which is no result's cost. The turn's own work
#: (its query's literals and words, first seen with its first result) stays in the timing.
WARM_UP = {
    "json": json.dumps([{"id": i, "state": "open" if i % 9 else "closed"} for i in range(40)]),
    "log": "\n".join(f"step {i} ok" if i % 7 else f"WARNING step {i}" for i in range(60)),
    "code": "\n".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(30)),
    "text": " ".join(f"Sentence {i} is about the warm-up of part {i}." for i in range(40)),
}


class Tokens:
    """Messages tokenised as ``request_tokens`` does, memoised per message text."""

    def __init__(self) -> None:
        self.counter = get_counter()
        self._memo: dict[tuple[str, str], list[int]] = {}

    def message(self, m: Message) -> list[int]:
        key = (m.role, m.text)
        if key not in self._memo:
            self._memo[key] = self.counter.encode(f"<|{m.role}|>\n{m.text}\n")
        return self._memo[key]

    def request(self, r: Request) -> list[int]:
        return [t for m in r.messages for t in self.message(m)]


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    """The cyclic GC paused while one result is timed, as ``timeit`` does: this process holds
    the token lists of every trace, and a full collection over them, started by whichever
    allocation crosses the threshold, is the benchmark's cost, not the compressor's."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def per_type(items: Sequence[Any], tok: Tokens) -> dict[str, Any]:
    """Each distinct result compressed alone in its introducing context, by routed kind."""
    backends = {n: TOOL_COMPRESSORS.get(n)() for n in ("json", "log", "code", "text")}
    for sample in WARM_UP.values():
        route(sample, ToolContext(query="warm up"), backends)
    rows: dict[str, dict[str, list[float]]] = {}
    seen: set[tuple[str, str]] = set()
    for item in items:
        calls: dict[str, Any] = {}
        query = item.request.messages[1].text
        for i, m in enumerate(item.request.messages):
            if m.tool_calls:
                calls.update((c.id, c.function) for c in m.tool_calls)
            if m.role != "tool" or len(m.text) < 1500 or (query, m.text) in seen:
                continue
            seen.add((query, m.text))
            context = _context(query, calls.get(m.tool_call_id or ""), [])
            runs = []
            for _ in range(3):  # the first run is the stage's cost; the median, the steady one
                start = time.perf_counter()
                with _no_gc():
                    out = route(m.text, context, backends)
                runs.append((time.perf_counter() - start) * 1e3)
            ms, steady = runs[0], sorted(runs)[1]
            kind = out.kind if out is not None else "unchanged"
            n_in = tok.counter.count(m.text)
            n_out = tok.counter.count(out.text) if out else n_in
            row = rows.setdefault(
                kind, {"in": [], "out": [], "ms10k": [], "steady10k": [], "needle": []}
            )
            row["in"].append(n_in)
            row["out"].append(n_out)
            row["ms10k"].append(ms * 10_000 / max(1, n_in))
            row["steady10k"].append(steady * 10_000 / max(1, n_in))
            if i == item.metadata["needle_message"]:
                row["needle"].append(float(item.answers[0] in (out.text if out else m.text)))
    return {
        k: {
            "results": len(r["in"]),
            "token_ratio": sum(r["out"]) / max(1, sum(r["in"])),
            "needle_retention": sum(r["needle"]) / len(r["needle"]) if r["needle"] else None,
            "needles": len(r["needle"]),
            "p99_ms_per_10k": percentile(r["ms10k"], 99),
            "p50_ms_per_10k": percentile(r["ms10k"], 50),
            "p99_ms_per_10k_steady": percentile(r["steady10k"], 99),
        }
        for k, r in sorted(rows.items())
    }


def json_side_by_side(items: Sequence[Any], tok: Tokens) -> dict[str, Any]:
    """Every distinct JSON result of 1,500+ characters through our JSON compressor and through
    headroom-ai's SmartCrusher, each with the task as its query (ours also gets the call's
    arguments, as the stage does)."""
    try:
        from headroom.transforms.smart_crusher import SmartCrusher
    except ImportError:
        return {"unavailable": "pip install headroom-ai"}
    crusher = SmartCrusher()
    ours = TOOL_COMPRESSORS.get("json")()
    _ours(ours, WARM_UP["json"], ToolContext(query="warm up"))
    _headroom(crusher, WARM_UP["json"], "warm up")
    rows: dict[str, dict[str, list[float]]] = {
        n: {"in": [], "out": [], "ms10k": [], "needle": []} for n in ("promptslim", "headroom")
    }
    seen: set[str] = set()
    for item in items:
        query = item.request.messages[1].text
        calls = {
            c.id: c.function for m in item.request.messages if m.tool_calls for c in m.tool_calls
        }
        for i, m in enumerate(item.request.messages):
            if m.role != "tool" or len(m.text) < 1500 or m.text[:1] not in "[{" or m.text in seen:
                continue
            seen.add(m.text)
            n_in = tok.counter.count(m.text)
            context = _context(query, calls.get(m.tool_call_id or ""), [])
            runs: tuple[tuple[str, Callable[[], str]], ...] = (
                ("promptslim", partial(_ours, ours, m.text, context)),
                ("headroom", partial(_headroom, crusher, m.text, query)),
            )
            for name, run in runs:
                start = time.perf_counter()
                with _no_gc():
                    text = run()
                ms = (time.perf_counter() - start) * 1e3
                row = rows[name]
                row["in"].append(n_in)
                row["out"].append(tok.counter.count(text))
                row["ms10k"].append(ms * 10_000 / max(1, n_in))
                if i == item.metadata["needle_message"]:
                    row["needle"].append(float(item.answers[0] in text))
    return {
        name: {
            "results": len(r["in"]),
            "token_ratio": sum(r["out"]) / max(1, sum(r["in"])),
            "needle_retention": sum(r["needle"]) / len(r["needle"]) if r["needle"] else None,
            "needles": len(r["needle"]),
            "p50_ms_per_10k": percentile(r["ms10k"], 50),
            "p99_ms_per_10k": percentile(r["ms10k"], 99),
        }
        for name, r in rows.items()
    }


def _ours(compressor: Any, text: str, context: Any) -> str:
    return str((compressor.compress(text, context) or _same(text)).text)


def _headroom(crusher: Any, text: str, query: str) -> str:
    return str(crusher.crush(text, query=query).compressed)


def _same(text: str) -> Any:
    from promptslim.backends.tools import Compressed

    return Compressed(text, (), "json")


def over_traces(
    items: Sequence[Any], transform: Transform, tok: Tokens, *, cache: bool
) -> dict[str, Any]:
    ratios, kept, hit, total, turn_ms = [], [], 0, 0, []
    for item in items:
        model = BlockHashCache(block_size=16)
        requests = trace_requests(item) if cache else [item.request]
        final: Request | None = None
        for r in requests:
            start = time.perf_counter()
            final = transform(r)
            turn_ms.append((time.perf_counter() - start) * 1e3)
            if cache:
                ids = tok.request(final)
                hit += model.observe(ids)
                total += len(ids)
        assert final is not None
        ratios.append(len(tok.request(final)) / max(1, len(tok.request(item.request))))
        kept.append(float(item.answers[0] in "\n".join(m.text for m in final.messages)))
    out: dict[str, Any] = {
        "traces": len(items),
        "token_ratio": sum(ratios) / len(ratios),
        "needle_retention": sum(kept) / len(kept),
        "turn_ms_p50": percentile(turn_ms, 50),
        "turn_ms_p99": percentile(turn_ms, 99),
    }
    if cache:
        out["cache_hit_share"] = hit / max(1, total)
    return out


def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument(
        "--traces", type=int, default=None, help="traces of 5-30 calls (default 200, quick 24)"
    )
    p.add_argument(
        "--reader",
        type=int,
        default=None,
        metavar="N",
        help="answer quality on N short traces (default 90, quick 6; 0: off)",
    )
    p.add_argument("--model", default="hf:default", help="the reader (a promptslim bench backend)")
    args = p.parse_args()
    n = args.traces or (24 if args.quick else 200)
    sources = trace_sources(120)
    items = build_traces(sources, n=n, seed=0, calls=(5, 30))
    long_items = build_traces(
        sources, n=3 if args.quick else 30, seed=1, calls=(30, 30), max_result_chars=30_000
    )
    tok = Tokens()
    result: dict[str, Any] = {"machine": machine(), "traces": n, "long_traces": len(long_items)}
    result["log_lines"] = log_summary(logs())  # the logs the traces drew on, by command
    result["per_type"] = per_type(items, tok)
    result["json_side_by_side"] = json_side_by_side(items, tok)
    result["configs"] = {}
    for name, make in configs().items():
        transform = make()
        if transform is None:
            result["configs"][name] = {"unavailable": "pip install headroom-ai"}
            continue
        row = over_traces(items, transform, tok, cache=False)
        row.update(
            {
                f"long_{k}": v
                for k, v in over_traces(long_items, make() or transform, tok, cache=True).items()
            }
        )
        result["configs"][name] = row
    result["indented_records"] = indented_records(20 if args.quick else 100)
    readers = args.reader if args.reader is not None else (6 if args.quick else 90)
    if readers:
        result["reader"] = reader_quality(sources, readers, args.model)
    result.update(headline(result))
    emit(result, args, table(result))


def headline(result: dict[str, Any]) -> dict[str, Any]:
    """The tools stage's figures the goals read, beside compress-every-turn's hit share."""
    tools, every = result["configs"]["tools"], result["configs"]["every_turn"]
    typed = [r for k, r in result["per_type"].items() if k != "unchanged"]
    out: dict[str, Any] = {
        "token_ratio": tools["token_ratio"],
        "needle_retention": tools["needle_retention"],
        "cache_hit_share": tools["long_cache_hit_share"],
        "cache_hit_share_every_turn": every["long_cache_hit_share"],
        "p99_ms_per_10k": max(r["p99_ms_per_10k"] for r in typed),
        "p99_ms_per_10k_steady": max(r["p99_ms_per_10k_steady"] for r in typed),
    }
    if "indented_records" in result:
        rows = result["indented_records"].values()
        out["indented_evidence_min"] = min(r["default"]["evidence"] for r in rows)
    if "reader" in result:
        out["quality_delta_em"] = result["reader"]["em"]["delta"]
        out["quality_delta_em_low"] = result["reader"]["em"]["ci95"][0]
        out["quality_delta_em_high"] = result["reader"]["em"]["ci95"][1]
    return out


if __name__ == "__main__":
    main()
