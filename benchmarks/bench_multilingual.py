"""Chinese and Hindi retrieval + extractive compression on ``builtin:rag-zh`` and ``rag-hi``.

Per item: the retrieval stage (BM25 only: no dense model) and the extractive compressor, run
as one Pipeline with a documents budget of ``--fraction`` of the item's document tokens.
Reports evidence retention (the gold answer is still in the kept documents: a substring test
on width-folded text, no model needed), the token fraction of the documents kept, and time
per request (p50/p99, ms, wall clock of ``Pipeline.run``, after one warm-up request that loads
jieba), for each set under ``sets``: each language's documents as generated, and joined four
to a chunk (``-chunks4``: the gold document at each position in turn, selection inside the
kept chunk), and those chunks written as JSON Lines by ``json.dumps``' default
(``zh-jsonl4``: every Chinese character a ``\\u`` escape, as a Python tool's export writes it)
or as HTML paragraphs saved as ASCII (``zh-html4``: every Chinese character a decimal
character reference ``&#20013;``, as ``xmlcharrefreplace`` and many CMS exports write it);
the answer counts as the reader reads it, the escapes decoded. The top-level keys are the
worst set's (the lowest retention, the highest token fraction and times). Chinese has no spaces between words (jieba or bigrams find them); Hindi
words carry vowel signs that Python's ``re`` does not count as word characters, and its
sentences end at a danda. The data are generated in code (``promptslim.bench.datasets``),
nothing downloaded. The goals are ``GOALS["bench_multilingual"]`` in ``benchmarks/summary.py``.

Beside them, ``tool_sets``: Chinese search results in a tool message, as an agent's search
tool returns them (the tools stage alone, no budget: it keeps the passages that answer the
turn's question). Each item is ``TOOL_DOCUMENTS`` generated passages (one holds the answer),
written as a JSON list of ``{"title", "content"}`` (``zh-tool-json``), as plain text, the
passages joined by blank lines (``zh-tool-text``), or as JSON Lines, one object a line
(``zh-tool-jsonl``; ``zh-tool-jsonl-ascii`` by ``json.dumps``' default, with escapes), or as
an HTML page saved as ASCII (``zh-tool-html-ascii``). ``tool_retention`` and
``tool_token_fraction_kept`` are the worse set's: retention is the answer still in the tool
message, the fraction that message's tokens kept. Side by side, ``...-compressors``: the same
results with ``tools:documents=false`` (the JSON crusher and the text compressor), where
Chinese results went while their lines, counted in characters, looked too short for prose.

And ``cross_sets``: a question in another language than its documents. The first 52 rows of
nq20-dev (English Wikipedia passages, 20 a question) with the question translated by hand into
Chinese, German, Spanish and French (``tests/data/nq20-dev-translated.json``; ``en`` is the
question as written), through the default retrieval stage (hybrid, the English MiniLM; each
request after ``cold_start``). Retention is the answer still in the kept passages (the NQ
metric, with its Wilson interval as in every set's ``retention_ci``), the fraction their
tokens. ``cross_retention`` is the worst language's; each set is ``cross-LANGUAGE``; side by
side, ``cross-LANGUAGE-ranked``: ``keep_across_languages=False``, every question ranked by BM25
and the English model whatever its language.

    python benchmarks/bench_multilingual.py --quick --json
"""

from __future__ import annotations

import html
import json
import os
import random
import re
import time
from typing import Any

from common import SAMPLE_DATA, data_file, emit, machine, parser
from shapes_data import chunked

from promptslim.bench.datasets import BenchItem, load_dataset
from promptslim.bench.file_datasets import NQ_INSTRUCTION, qa_request
from promptslim.bench.gen_rag import rag_zh_item
from promptslim.bench.metrics import evidence_retention
from promptslim.bench.runner import cold_start
from promptslim.pipeline import Pipeline
from promptslim.stages.compress import CompressStage
from promptslim.stages.retrieval import RetrievalStage
from promptslim.stages.tools import ToolsStage
from promptslim.stats import proportion_ci, spread
from promptslim.text import chinese_segmenter, normalise_width
from promptslim.tokens import count_documents, get_counter
from promptslim.types import Budget, Request

#: set -> (builtin dataset, passages per chunk: None for the documents as generated, and
#: how each chunk is written in ASCII: None as generated, "json" as JSON Lines by
#: ``json.dumps``' default (every Chinese character a ``\uXXXX`` escape), "html" as HTML
#: paragraphs by ``xmlcharrefreplace`` (every Chinese character a ``&#NNNNN;`` reference)
SETS: dict[str, tuple[str, int | None, str | None]] = {
    "zh": ("builtin:rag-zh", None, None),
    "hi": ("builtin:rag-hi", None, None),
    "zh-chunks4": ("builtin:rag-zh", 4, None),
    "hi-chunks4": ("builtin:rag-hi", 4, None),
    "zh-jsonl4": ("builtin:rag-zh", 4, "json"),
    "zh-html4": ("builtin:rag-zh", 4, "html"),
}
_WRITTEN = {"json": "JSON Lines, ASCII", "html": "HTML, ASCII"}


def _ascii(paragraphs: list[str], how: str) -> str:
    """The paragraphs written as ``how`` (``SETS``) says, in ASCII."""
    if how == "json":
        return "\n".join(json.dumps({"text": p}) for p in paragraphs)
    page = "\n".join(f"<p>{html.escape(p)}</p>" for p in paragraphs)
    return page.encode("ascii", "xmlcharrefreplace").decode()


def _written(item: BenchItem, how: str) -> BenchItem:
    """``item`` with each document's paragraphs written as ``how`` says (``SETS``)."""
    docs = [
        d.model_copy(update={"text": _ascii(d.text.split("\n\n"), how)})
        for d in item.request.documents
    ]
    return BenchItem(item.id, item.request.replace(documents=docs), item.answers, item.metadata)


def run_set(
    dataset: str, chunk: int | None, n: int, fraction: float, written: str | None = None
) -> dict[str, Any]:
    items = load_dataset(dataset, limit=n).items
    if chunk:  # the gold document at each position of its chunk in turn, as bench_shapes does
        items = [chunked(item, chunk, i % chunk) for i, item in enumerate(items)]
    if written:
        items = [_written(item, written) for item in items]
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
        if written:  # the answer as the reader reads it, not as it is written
            context = _as_read(context)
        kept += any(normalise_width(a) in context for a in item.answers)
    described = f"{dataset} (generated in code, seed 0, 8 documents per item"
    described += f", {chunk} to a chunk" if chunk else ""
    return _row(kept, fractions, times, described + (f", {_WRITTEN[written]})" if written else ")"))


def _row(kept: float, fractions: list[float], times: list[float], dataset: str) -> dict[str, Any]:
    """A set's figures: ``kept`` of ``len(times)`` items kept their answer."""
    timing = spread(times)
    interval = proportion_ci(round(kept), len(times))
    return {
        "retention": round(kept / len(times), 4),
        "retention_ci": [round(interval.low, 4), round(interval.high, 4)],
        "token_fraction_kept": round(sum(fractions) / len(fractions), 4),
        "p50_ms": round(timing["p50"], 2),
        "p99_ms": round(timing["p99"], 2),
        "n": len(times),
        "dataset": dataset,
    }


_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")

#: passages in one search result of ``tool_sets`` (about 3,500 characters: past the tools
#: stage's ``min_chars``)
TOOL_DOCUMENTS = 40
TOOL_SETS = {
    "zh-tool-json": "json",
    "zh-tool-text": "text",
    "zh-tool-jsonl": "jsonl",
    "zh-tool-jsonl-ascii": "jsonl-ascii",
    "zh-tool-html-ascii": "html-ascii",
}
#: beside each, the tools stage with its passages sent to the JSON and text compressors
#: (``documents=False``), where Chinese results went before they read as prose
BASELINE = "-compressors"


def _tool_request(question: str, result: str) -> Request:
    arguments = json.dumps({"query": question}, ensure_ascii=False)
    call = {"id": "c0", "type": "function", "function": {"name": "search", "arguments": arguments}}
    return Request.from_openai({"messages": [
        {"role": "user", "content": question},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c0", "content": result},
    ]})  # fmt: skip


def _tool_result(shape: str, docs: list[str]) -> str:
    """The passages as the tool writes them (``TOOL_SETS``' shapes)."""
    if shape == "text":
        return "\n\n".join(docs)
    listed = [{"title": f"结果{i + 1}", "content": d} for i, d in enumerate(docs)]
    if shape == "html-ascii":
        page = "\n".join(
            f"<h3>{r['title']}</h3>\n<p>{html.escape(r['content'])}</p>" for r in listed
        )
        return page.encode("ascii", "xmlcharrefreplace").decode()
    if shape == "json":
        return json.dumps(listed, ensure_ascii=False)
    return "\n".join(json.dumps(r, ensure_ascii=shape == "jsonl-ascii") for r in listed)


def _as_read(text: str) -> str:
    """``text`` with JSON's ``\\uXXXX`` escapes and HTML's references decoded (by Python's
    ``html``, not the library's reader): the answer as the reader reads it."""
    return html.unescape(_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text))


def run_tool_set(shape: str, n: int, *, documents: bool = True) -> dict[str, Any]:
    """Chinese search results in a tool message (``TOOL_SETS``), through the tools stage."""
    rng = random.Random(0)
    items = [rag_zh_item(rng, i, n_documents=TOOL_DOCUMENTS) for i in range(n)]
    counter = get_counter()
    pipeline = Pipeline([ToolsStage() if documents else ToolsStage(documents=False)])
    kept = 0
    fractions: list[float] = []
    times: list[float] = []
    for k, item in enumerate(items):
        docs = [d.text for d in item.request.documents]
        result = _tool_result(shape, docs)
        request = _tool_request(item.request.query or "", result)
        if k == 0:
            pipeline.run(request)  # warm-up
        start = time.perf_counter()
        sent = pipeline.run(request).request.messages[-1].text
        times.append((time.perf_counter() - start) * 1e3)
        fractions.append(counter.count(sent) / counter.count(result))
        kept += any(normalise_width(a) in normalise_width(_as_read(sent)) for a in item.answers)
    described = f"rag-zh (generated in code, seed 0, {TOOL_DOCUMENTS} passages a result)"
    return _row(kept, fractions, times, described)


#: the first rows of nq20-dev with their questions translated by hand (the passages stay
#: English): the languages of ``cross_sets``
CROSS_FILE = SAMPLE_DATA / "nq20-dev-translated.json"
CROSS_LANGUAGES = ("en", "zh", "de", "es", "fr")
#: beside each language, the retrieval stage with ``keep_across_languages=False``: ranked by
#: the English model and BM25 whatever the question's language
RANKED = "-ranked"


def run_cross_set(language: str, n: int, *, keep: bool = True) -> dict[str, Any]:
    """nq20-dev's English passages asked in ``language`` through the default retrieval stage
    (hybrid, the English MiniLM), each request cold (``cold_start``)."""
    rows = json.loads(CROSS_FILE.read_text(encoding="utf-8"))["rows"][:n]
    dataset = f"nq:{data_file('nq20-dev.jsonl.gz')}"
    items = load_dataset(dataset, limit=len(rows)).items
    stage = RetrievalStage() if keep else RetrievalStage(keep_across_languages=False)
    pipeline = Pipeline([stage])
    counter = get_counter()
    kept = 0
    fractions: list[float] = []
    times: list[float] = []
    for k, (item, row) in enumerate(zip(items, rows)):
        request = qa_request(NQ_INSTRUCTION, row[language], item.request.documents)
        if k == 0:
            pipeline.run(request)  # warm-up: the model, the language identifier
        cold_start()
        start = time.perf_counter()
        documents = pipeline.run(request).request.documents
        times.append((time.perf_counter() - start) * 1e3)
        given = count_documents(request.documents, counter)
        fractions.append(count_documents(documents, counter) / given)
        context = "\n".join(f"{d.title}\n{d.text}" for d in documents)
        kept += evidence_retention(context, item.answers)
    described = f"{CROSS_FILE.name}: nq20-dev rows 0-{len(rows) - 1}, the question in {language}"
    return _row(kept, fractions, times, described)


def run(n: int, fraction: float) -> dict[str, Any]:
    segmenter = chinese_segmenter("auto")  # loads jieba now, not inside the first timed request
    sets = {
        name: run_set(data, chunk, n, fraction, esc) for name, (data, chunk, esc) in SETS.items()
    }
    rows = sets.values()
    tools = {name: run_tool_set(shape, n) for name, shape in TOOL_SETS.items()}
    baseline = {
        name + BASELINE: run_tool_set(shape, n, documents=False)
        for name, shape in TOOL_SETS.items()
    }
    cross = {f"cross-{lang}": run_cross_set(lang, n) for lang in CROSS_LANGUAGES}
    ranked = {
        f"cross-{lang}{RANKED}": run_cross_set(lang, n, keep=False) for lang in CROSS_LANGUAGES
    }
    return {
        "retention": min(r["retention"] for r in rows),
        "token_fraction_kept": max(r["token_fraction_kept"] for r in rows),
        "p50_ms": max(r["p50_ms"] for r in rows),
        "p99_ms": max(r["p99_ms"] for r in rows),
        "n": sum(r["n"] for r in rows),
        "sets": sets,
        "tool_retention": min(r["retention"] for r in tools.values()),
        "tool_token_fraction_kept": max(r["token_fraction_kept"] for r in tools.values()),
        "tool_sets": tools | baseline,
        "cross_retention": min(r["retention"] for r in cross.values()),
        "cross_token_fraction_en": cross["cross-en"]["token_fraction_kept"],
        "cross_sets": cross | ranked,
        "budget_fraction": fraction,
        "segmenter": segmenter,
        "clock": "wall clock of Pipeline.run in this process, after one warm-up request",
        "machine": machine(),
        "load_average_1m": round(
            os.getloadavg()[0], 2
        ),  # the 2-core box is shared: timings are noisy
    }


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument(
        "--n", type=int, default=None, help="items per set (default 100, 30 with --quick)"
    )
    p.add_argument("--fraction", type=float, default=0.3, help="documents budget / document tokens")
    args = p.parse_args()
    n = args.n or (30 if args.quick else 100)
    result = run(n, args.fraction)
    keys = ("retention", "token_fraction_kept", "p50_ms", "p99_ms", "n")
    table = "\n".join(
        f"{name:10} " + "  ".join(f"{k} {row[k]}" for k in keys)
        for name, row in (result["sets"] | result["tool_sets"] | result["cross_sets"]).items()
    )
    emit(result, args, f"{table}\nsegmenter {result['segmenter']}")


if __name__ == "__main__":
    main()
