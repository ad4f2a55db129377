"""Shape suite: does the answer survive on the documents users actually send?

Built from an NQ file in the "Lost in the Middle" format (question, answers, ctxs with title,
text and isgold; ``--data PATH``, default ``nq20-dev.jsonl.gz`` in ``$PROMPTSLIM_DATA_DIR``, or
the committed sample when that is not set), every item is re-cut into the shapes RAG systems send:

- ``passages``: the 20 passages as they are (title as ``Document.title``);
- ``chunks2`` / ``chunks4`` / ``chunks8``: the passages joined k to a chunk (each passage a
  paragraph: its title on a line, then its text), the gold passage at chunk position
  ``item index mod k``, so every position is measured on its own share of the items;
- ``langchain1000``: the passages concatenated in their order and re-split by LangChain's
  ``RecursiveCharacterTextSplitter`` (1,000 characters, overlap 200);
- ``llamaindex512`` / ``llamaindex1024``: the same text re-split by LlamaIndex's
  ``SentenceSplitter`` (``chunk_size`` 512 / 1,024 tokens, its default overlap);
- ``lines4`` / ``wrapped4`` / ``flat4``: ``chunks4`` as other loaders lay the same text out:
  one paragraph a line (single line breaks, no blank lines: web scrapes, many databases),
  hard-wrapped at 80 columns with no blank lines (PDF and plain-text extraction: a line break
  mostly falls inside a sentence), and every run of whitespace collapsed to one space
  (loaders that normalise whitespace: no structure left to read);
- ``template4`` / ``follow_up4``: ``chunks4`` with the question put as a conversation puts it
  and no ``Request.query`` given (the proxy's case): inside one of three prompt templates
  (instructions before, after or around it), or in the user turn before a follow-up that names
  nothing ("Can you check again?"); the ``vectors`` config's query vector is the question's,
  as a retriever searches with the question;
- ``pooled8``: a request four times that size: the item's passages and the candidates of
  the next three items (their gold passages left out), shuffled, eight to a chunk (about ten
  chunks, 8,400 tokens), the gold passage at chunk position ``item index mod 8``: more
  windows than the model reads in one request (``retrieval:max_windows``);
- ``kv75``: the key-value file (``--kv PATH``, default ``kv75-dev.jsonl.gz`` beside it), one
  pair per document.

Per shape and config: ``evidence`` (a gold answer still in what the model reads, with a
bootstrap CI), ``token_ratio`` (document tokens kept / given, mean over items),
``cold_p50_ms`` / ``cold_p99_ms`` (one ``Pipeline.run`` after ``bench.runner.cold_start``:
embeddings and every memo of text emptied, so each config meets the item's documents unseen,
the one run after another on the same item included; word stems stay, as in any serving
process), and ``evidence_by_position`` for the chunk shapes. ``reference_loop_ms``: a fixed
Python loop timed once per item, outside the timings: how fast the host ran Python, the gauge
to compare these timings with another run's by (shared VMs differ by up to 2x).
Configs, side by side on the same items in one run (interleaved per item):

- ``default``: the full default pipeline (``full``: prefix, history, retrieval, compress);
- ``vectors``: the same on requests that carry a vector store's embeddings (each document's,
  MiniLM float at its full 256 word pieces, and the query's; computed outside the timings):
  what a production retriever hands over; ``vectors_lexical``: with
  ``retrieval:store_windows=lexical`` (those documents' later windows by BM25 alone);
  ``vectors_static``: with ``retrieval:store_windows=static`` (those windows by static vectors
  distilled from the model, beside BM25);
  ``indexed``: ``vectors``, and the store's ingest ran ``RetrievalStage.index`` on the
  documents beforehand, into a Redis tier (a ``redis-server`` on 127.0.0.1, emptied before each
  item and on only for this config): the request reads its windows' vectors from Redis, and
  the store's query vector meets them, so it embeds nothing (without ``redis-server``,
  ``indexed_skipped`` says so);
- ``bm25``: ``retrieval:scorer=bm25``;
- ``dense_topk``: plain dense top-k, what a user has without promptslim: MiniLM at its full
  length (256 word pieces) over each whole document, k = a fifth of the candidates;
- ``longllmlingua``: ``compress:llmlingua@0.2`` on the first ``--llmlingua N`` items of each
  shape (default 2; ``--quick``: one item of the first shape; 15 s to minutes an item on a
  CPU), after the other configs, through ``shapes_lingua`` (in ``.venv-lingua`` where this
  interpreter cannot import llmlingua); without it ``llmlingua_skipped`` says why.

``--config LABEL=SPEC`` adds any runner spec (``retrieval:window_chars=400``) to compare
settings side by side. Usage::

    python benchmarks/bench_shapes.py --quick --json
    python benchmarks/bench_shapes.py --data my.jsonl.gz --items 300 --save bench_shapes
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import data_file, emit, machine, parser, reference_loop_ms
from shapes_configs import Prepared, configs, redis_tier
from shapes_data import build_shapes
from shapes_lingua import longllmlingua

from promptslim.bench.datasets import BenchItem, load_dataset
from promptslim.bench.metrics import evidence_retention, mean_ci
from promptslim.bench.runner import _context_text, cold_start
from promptslim.pipeline import Pipeline
from promptslim.stats import percentile, spread
from promptslim.tokens import count_documents, get_counter
from promptslim.types import Document

# ---------------------------------------------------------------- configs


def warm_up(runs: dict[str, Callable[[Any], Any]], item: BenchItem) -> None:
    """What a server does before its first request (``promptslim serve`` warms up unless told
    not to): each pipeline's ``warm_up`` (the models, the token counter, jieba's dictionary),
    then one request. What loads once per process is not what "cold" measures: jieba's
    dictionary alone took 0.6-1.1 s, counted in whichever item first held a Han character."""
    for run in runs.values():
        bound = run.run if isinstance(run, Prepared) else run
        pipeline = getattr(bound, "__self__", None)  # a Pipeline's bound ``run``
        if isinstance(pipeline, Pipeline):
            pipeline.warm_up()
        if isinstance(run, Prepared):  # the Redis tier's connection too, for ``indexed``
            request = run.prepare(item)
            with run.ingested(request):
                run(request)
        else:
            run(item.request)


# ---------------------------------------------------------------- measuring


def measure(
    item: BenchItem, run: Callable[[Any], Any], prepared: dict[int, Any] | None = None
) -> dict[str, float]:
    """One timed cold run of ``item``; ``prepared`` holds what each ``prepare`` made of this
    item (configs with the same vector store share it)."""
    request = item.request
    if isinstance(run, Prepared):
        prepared = {} if prepared is None else prepared
        if id(run.prepare) not in prepared:
            prepared[id(run.prepare)] = run.prepare(item)
        request = prepared[id(run.prepare)]
    with run.ingested(request) if isinstance(run, Prepared) else nullcontext():
        cold_start()
        start = time.perf_counter()
        result = run(request)
        ms = (time.perf_counter() - start) * 1e3
    return row(item, result.request.documents, result.to_openai()["messages"], ms)


def row(item: BenchItem, kept: list[Document], messages: list[Any], ms: float) -> dict[str, float]:
    """One measured request: time, document tokens kept / given (a request without documents:
    tool-message tokens, or with no tool message the last user message's), evidence in what
    is sent (with ``metadata["also_answers"]``, an answer of each set)."""
    counter = get_counter(item.request.tokenizer)
    given = count_documents(item.request.documents, counter)
    if given:
        ratio = count_documents(kept, counter) / given
    else:
        sent = item.request.to_openai()["messages"]
        ratio = _context_tokens(messages, counter) / max(1, _context_tokens(sent, counter))
    text = _evidence_text(item, messages)
    evidence = evidence_retention(text, item.answers)
    if "also_answers" in item.metadata:  # an ask of two questions: an answer to each
        evidence *= evidence_retention(text, item.metadata["also_answers"])
    return {"ms": ms, "ratio": ratio, "evidence": evidence}


def _evidence_text(item: BenchItem, messages: list[Any]) -> str:
    """What the model reads but the question: every message but the last user one, and that
    one too, less the question, where the item's context is written into it (no documents, no
    tool message: ``metadata["question"]`` names the question)."""
    text = _context_text(messages)
    question = item.metadata.get("question")
    if item.request.documents or not question or any(m.get("role") == "tool" for m in messages):
        return text
    last = [m.get("content") or "" for m in messages if m.get("role") == "user"][-1:]
    return "\n".join([text, *(str(c).replace(question, "") for c in last)])


def _context_tokens(messages: list[Any], counter: Any) -> int:
    """The tokens of the tool messages, or where there is none, of the last user message."""
    chosen = [m for m in messages if m.get("role") == "tool"]
    chosen = chosen or [m for m in messages if m.get("role") == "user"][-1:]
    return sum(counter.count(m.get("content") or "") for m in chosen)


def summarise(rows: list[dict[str, float]], positions: list[int | None]) -> dict[str, Any]:
    evidence = [r["evidence"] for r in rows]
    out: dict[str, Any] = {
        "n": len(rows),
        "evidence": mean_ci(evidence).as_dict(),
        "token_ratio": sum(r["ratio"] for r in rows) / max(1, len(rows)),
        "cold_p50_ms": percentile([r["ms"] for r in rows], 50),
        "cold_p99_ms": percentile([r["ms"] for r in rows], 99),
    }
    if any(p is not None for p in positions):
        by: dict[int, list[float]] = {}
        for r, p in zip(rows, positions):
            if p is not None:
                by.setdefault(p, []).append(r["evidence"])
        out["evidence_by_position"] = {str(p): mean_ci(v).as_dict() for p, v in sorted(by.items())}
    return out


def run_suite(
    shapes: dict[str, list[BenchItem]],
    runs: dict[str, Callable[[Any], Any]],
    gauge: list[float] | None = None,
) -> dict[str, dict[str, Any]]:
    """Every config on every item of every shape; ``gauge`` gets ``reference_loop_ms`` once
    per item, outside the timings (how fast the machine ran Python meanwhile)."""
    results: dict[str, dict[str, Any]] = {}
    for shape, items in shapes.items():
        rows: dict[str, list[dict[str, float]]] = {label: [] for label in runs}
        for item in items:
            if gauge is not None:
                gauge.append(reference_loop_ms())
            prepared: dict[int, Any] = {}
            for label, run in runs.items():  # interleaved: drift hits every config alike
                rows[label].append(measure(item, run, prepared))
        positions = [item.metadata.get("position") for item in items]
        results[shape] = {label: summarise(rows[label], positions) for label in runs}
        print(f"{shape}: done", file=sys.stderr)
    return results


def add_longllmlingua(
    results: dict[str, dict[str, Any]], shapes: dict[str, list[BenchItem]], n: int, *, quick: bool
) -> str | None:
    """LongLLMLingua on the first ``n`` items of each shape (``quick``: of the first shape),
    its row beside the others (``shapes_lingua``: here, or in the lingua environment); or why
    it was skipped."""
    if n <= 0:
        return "not asked for (--llmlingua 0, or --only without longllmlingua)"
    picked = {shape: items[:n] for shape, items in list(shapes.items())[: 1 if quick else None]}
    records = longllmlingua({s: [it.request for it in items] for s, items in picked.items()})
    if isinstance(records, str):
        print(f"longllmlingua skipped: {records}", file=sys.stderr)
        return records
    for shape, items in picked.items():
        rows = [
            row(it, [Document.model_validate(d) for d in r["documents"]], r["messages"], r["ms"])
            for it, r in zip(items, records.get(shape, []))
        ]
        positions = [it.metadata.get("position") for it in items]
        results[shape]["longllmlingua"] = summarise(rows, positions)
    return None


def table(results: dict[str, dict[str, Any]]) -> str:
    lines = [
        "| shape | config | n | evidence [95% CI] | token ratio | cold p50 ms | cold p99 ms | by position |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for shape, by_config in results.items():
        for label, r in by_config.items():
            e = r["evidence"]
            pos = " / ".join(f"{v['mean']:.2f}" for v in r.get("evidence_by_position", {}).values())
            lines.append(
                f"| {shape} | {label} | {r['n']} | {e['mean']:.3f} [{e['low']:.3f}, "
                f"{e['high']:.3f}] | {r['token_ratio']:.3f} | {r['cold_p50_ms']:.1f} | "
                f"{r['cold_p99_ms']:.1f} | {pos} |"
            )
    return "\n".join(lines)


def dataset_path(flag: str | None, name: str) -> Path:
    path = Path(flag) if flag else data_file(name)
    if not path.is_file():
        raise SystemExit(f"no dataset at {path}: give its path, or set PROMPTSLIM_DATA_DIR")
    return path


def main() -> None:
    p = parser(__doc__.split("\n")[0])
    p.add_argument("--data", "--dataset", dest="data", help="NQ-format jsonl(.gz)")
    p.add_argument("--kv", help="kv-format jsonl(.gz); 'none' skips the kv75 shape")
    p.add_argument("--items", type=int, default=200, help="NQ items (kv: the same, at most)")
    p.add_argument("--shapes", help="comma-separated shape names (default: all)")
    p.add_argument("--llmlingua", type=int, metavar="N", help="LongLLMLingua on N items a shape")
    p.add_argument("--config", action="append", default=[], metavar="LABEL=SPEC")
    p.add_argument("--only", help="comma-separated config labels to run (default: all)")
    args = p.parse_args()
    n = 5 if args.quick else args.items  # --quick: a smoke check under two minutes
    nq = load_dataset(f"nq:{dataset_path(args.data, 'nq20-dev.jsonl.gz')}", limit=n)
    kv = (
        []
        if args.kv == "none"
        else load_dataset(f"kv:{dataset_path(args.kv, 'kv75-dev.jsonl.gz')}", limit=n).items
    )
    shapes = build_shapes(nq.items, kv)
    if args.shapes:
        wanted = args.shapes.split(",")
        shapes = {k: v for k, v in shapes.items() if k in wanted}
    only = args.only.split(",") if args.only else None
    with redis_tier(only is None or "indexed" in only) as (redis_url, indexed_skipped):
        runs = configs(args.config, redis_url)
        if only is not None:
            runs = {k: v for k, v in runs.items() if k in only}
        warm_up(runs, shapes[next(iter(shapes))][0])
        gauge: list[float] = []
        results = run_suite(shapes, runs, gauge)
    lingua = args.llmlingua if args.llmlingua is not None else (1 if args.quick else 2)
    if args.only and "longllmlingua" not in args.only.split(","):
        lingua = 0
    lingua_skipped = add_longllmlingua(results, shapes, lingua, quick=args.quick)
    out = {
        "benchmark": "bench_shapes",
        "machine": machine(),
        # a fixed Python loop's time beside the items: how fast this host ran Python, to
        # compare the timings with another run's (shared VMs differ by up to 2x)
        "reference_loop_ms": {k: round(v, 3) for k, v in spread(gauge).items()},
        "data": nq.name,
        "items": n,
        "skipped": nq.skipped,
        "shapes": results,
        **headline(results),
        "llmlingua_skipped": lingua_skipped,
        "indexed_skipped": indexed_skipped,
    }
    emit(out, args, table(results))


#: shapes outside the chunk shapes' token-ratio goal: flat text has no line break left to find
#: a passage's edges by, so its ratio is reported on its own
NOT_CHUNKS = ("passages", "kv75", "flat4")
#: shapes larger than the ~2,300 tokens of documents the cost goals are set for
LARGE_SHAPES = ("pooled8",)


def headline(results: dict[str, Any]) -> dict[str, Any]:
    """The default config's figures the goals read: the worst shape's evidence (overall and at
    any gold position), the largest token ratio of the chunk shapes (every layout but flat
    text, reported on its own) and the passages', and the passages' cold p99 (about 2,300
    tokens of documents); and the worst shape's cold p99 when the documents carry a vector
    store's embeddings, with and without their windows indexed, over the shapes of that size
    (not ``LARGE_SHAPES``)."""
    rows = {shape: r["default"] for shape, r in results.items() if "default" in r}
    if not rows:
        return {}
    positions = [
        p["mean"] for r in rows.values() for p in r.get("evidence_by_position", {}).values()
    ]
    chunk_ratios = [r["token_ratio"] for s, r in rows.items() if s not in NOT_CHUNKS]
    out: dict[str, Any] = {
        "evidence_min": min(r["evidence"]["mean"] for r in rows.values()),
        "evidence_by_position_min": min(positions, default=None),
        "token_ratio_chunks_max": max(chunk_ratios, default=None),
    }
    if "flat4" in rows:
        out["token_ratio_flat"] = rows["flat4"]["token_ratio"]
    if "passages" in rows:
        out["token_ratio_passages"] = rows["passages"]["token_ratio"]
        out["cold_p99_ms_passages"] = rows["passages"]["cold_p99_ms"]
    # the cost when the documents come with a vector store's embeddings (goal: 15 ms, set
    # for the suite's ~2,300 tokens of documents: a pooled request is four times that)
    for label in ("vectors", "vectors_lexical", "vectors_static", "indexed"):
        p99s = [
            r[label]["cold_p99_ms"]
            for shape, r in results.items()
            if label in r and shape not in LARGE_SHAPES
        ]
        out[f"cold_p99_ms_{label}_max"] = max(p99s, default=None)
    return out


if __name__ == "__main__":
    main()
