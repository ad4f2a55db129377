"""Structured and re-laid documents: is the answer kept on shapes the evaluation set lacks?

The shape suite (``bench_shapes.py``) re-cuts Wikipedia passages; users also send tables, logs,
code and JSON, whole documents, and chunks that lost their page's title. This script measures
the default pipeline on those (``structured_data``, seeded):

- generated records, one fact asked for among look-alikes: ``tables`` (markdown tables of
  hosts, the row of one host), ``logs`` (the one error line of an order), ``code`` (the
  constant one function sets), ``records`` (one account in JSON exports); and indented
  records (``config_data``), where the answering line sits a few lines below the one naming
  the subject: ``configs`` (compose files, one service's timeout) and ``manifests``
  (Kubernetes Deployments, one's memory limit five levels below its name), with
  ``cut_records`` beside the suite's configs (``retrieval:record_rest=false``: a kept window
  alone, not the rest of the record it ends in);
- NQ items (``--data PATH``, default ``nq20-dev.jsonl.gz`` in ``$PROMPTSLIM_DATA_DIR``, or the
  committed sample) re-laid: ``long_document`` (all 20 passages as sections of one document),
  ``untitled4`` (four passages to a chunk with no titles: a passage that never names its
  subject cannot be told apart from its neighbours' subjects), ``template_other4`` (the
  question inside a prompt template the shape suite does not use), ``html4`` (four passages
  to a chunk of a web page whose markup the loader kept), ``langchain500`` (the passages
  joined and cut by LangChain's recursive splitter at 500 characters: most pieces of a
  passage lose its title; ``langchain500_placed``: the same pieces with the source and start
  LangChain records under ``add_start_index=True``, which the retrieval stage reads to keep the
  piece after the best one), ``tokens256`` (cut by LangChain's token splitter at 256
  tokens, inside sentences), ``pages4`` (four titled passages to a chunk as a PDF's
  extracted text: wrapped, in pages under a running head and over a numbered foot, a
  sentence going on past a page's end), ``mail4`` (four passages to a chunk as an e-mail
  thread, each a message's quoted text behind ``> ``, its title the subject: ``mail_data``),
  ``subtitles4`` (four passages to a chunk as caption files under their names, SRT and WebVTT
  in turn, two lines to a timed cue, a sentence going on from cue to cue) and ``meeting4``
  (the same as meeting transcripts in WebVTT, a line a cue after its speaker's name:
  ``caption_data``);
- the NQ items as other retrievers and users send them (``variant_data``):
  ``candidates100`` (a top-100 of titled passages: the item's and four other items'
  candidates), ``duplicates4`` (every chunk of four twice, under two ids), ``sourced4``
  (a loader's source line atop each chunk), ``keywords4`` (the question as search-box
  keywords), ``typos4`` (two typos in the question), ``questions2`` (two questions in one
  ask, ten chunks of the two items' passages; the evidence counts when an answer to each is
  kept) and ``questions2_numbered`` (the same, asked as a numbered list without question
  marks), these two with ``one_ask`` beside the suite's configs
  (``retrieval:each_question=false``: the ask scored as one text);
- an agent's search results (``search_json``, ``search_results``, ``search_snippets``,
  ``search_text``, ``fetch_json``): the NQ passages as a search tool's answer in the tool message (JSON, plain
  text without titles, or one fetched page's content),
  the request without documents. Side by side: ``default`` (the default pipeline, whose tools
  stage sends a document list or a text's passages to a retrieval stage) and ``crusher``
  (``tools:documents=false``: the JSON crusher and the text compressor, by content). Their
  ``token_ratio`` is of the tool message's tokens;
- the same passages as JSON document lists in the request's documents (``list_document``:
  one search API answer; ``list_chunks4``: five JSON arrays of four passages). Side by side:
  ``default`` (each list's passages compete as candidates), ``whole_lists``
  (``retrieval:document_lists=false``: each list one candidate, kept or dropped whole) and
  ``dense_topk``;
- the same chunks of four asked for as a whole (``whole_asks4``: a summary, a translation,
  every person in them...; ``evidence`` is the gold answer still there, ``token_ratio`` what
  of the documents went on). Side by side: ``default`` (such an ask keeps every document)
  and ``ranked`` (``retrieval:whole_asks=false``: ranked against the ask's words).
  ``whole_ask_questions``: how many of the run's NQ questions read as such an ask (each one
  a false alarm, whose request would keep every token);
- the passages written into the user's message by a prompt template, with no documents
  (``inline_template4``, ``inline_elements``, ``inline_lead_in4``: ``inline_data``), their
  ``token_ratio`` of that message's tokens. Side by side: ``default`` (the message sent as
  written: the last user message is the caller's) and ``inline_context``
  (``retrieval:inline_context=true``: the block ranked as documents).

Per shape and config, as in ``bench_shapes``: ``evidence`` (a gold answer still in what the
model reads, bootstrap CI), ``token_ratio`` (document tokens kept / given), ``cold_p50_ms`` /
``cold_p99_ms`` (one ``Pipeline.run`` after ``cold_start``, as there), and beside them
``reference_loop_ms``, how fast the host ran Python (as there). Configs side by side,
interleaved per item: ``default`` (the full pipeline), ``bm25`` (``retrieval:scorer=bm25``)
and ``dense_topk`` (plain dense top-k at the model's full length, a fifth of the candidates:
what a user has without promptslim). The headline is the default's: ``evidence_min`` (the
worst shape, budgeted, whole-ask and inline rows apart), ``token_ratio_max``, ``cold_p99_ms_max``,
and ``evidence_min_budget`` (the budgeted rows' worst). A JSON document that fits is kept whole
(a JSON value is never cut; a JSON list of passages competes by its passages), so ``records``
keeps the documents its question points to.

Under a documents budget of ``BUDGET_DOCUMENTS`` tokens: ``records_budget``, the ``records``
items (less than one export fits), side by side: ``default`` cuts the export along its
structure (``compress:crush_json``, the default) and ``whole_json`` does not
(``compress:crush_json=false``), so the export goes whole; the answer is the account's
``"seats"`` member as JSON writes it with or without the space. ``transcript4_budget``,
``untitled4_budget`` and ``long_document_budget``: those shapes' items (a transcript's
documents are cut into units of about a long sentence: ``UNIT_CHARS``), side by side:
``default`` fits the chosen documents' parts to the budget, each one's best window first,
and ``whole_parts`` (``retrieval:fit_parts=false``) drops a document whose parts do not fit
the room left whole.

    python benchmarks/bench_structured.py --quick --json
"""

from __future__ import annotations

from functools import partial
from typing import Any

from bench_shapes import dataset_path, run_suite, table, warm_up
from common import emit, machine, parser
from config_data import INDENTED
from inline_data import INLINE
from shapes_configs import dense_topk
from structured_data import ASKED, LISTED, SEARCH, build

from promptslim.bench.datasets import load_dataset
from promptslim.bench.runner import build_config
from promptslim.query import asks_for_whole
from promptslim.stats import spread
from promptslim.types import Budget

#: less than one ``records`` export (40 accounts, about 1,000-1,300 tokens), and a fifth of a
#: ``transcript4``, ``untitled4`` or ``long_document`` item's documents
BUDGET_DOCUMENTS = 500
#: beside the default on the prose rows under the budget: a document whose parts do not fit
#: the room left dropped whole, not cut to its best parts first
WHOLE_PARTS = "prefix+history+retrieval:fit_parts=false+compress"
#: the budgeted rows: the shape they run and their configs
BUDGETED = {
    "records_budget": (
        "records",
        {"default": "full", "whole_json": "prefix+history+retrieval+compress:crush_json=false"},
    ),
    "transcript4_budget": ("transcript4", {"default": "full", "whole_parts": WHOLE_PARTS}),
    "untitled4_budget": ("untitled4", {"default": "full", "whole_parts": WHOLE_PARTS}),
    "long_document_budget": ("long_document", {"default": "full", "whole_parts": WHOLE_PARTS}),
}


#: the search-result rows' configs: the default pipeline (its tools stage sends a document
#: list to a retrieval stage) and the tools stage with the JSON crusher alone
SEARCH_CONFIGS = {
    "default": "prefix+tools+history+retrieval+compress",
    "crusher": "prefix+tools:documents=false+history+retrieval+compress",
}


#: the document-list rows' configs: the default (each list's passages compete as candidates),
#: the lists kept as one candidate each, and plain dense top-k
LISTED_CONFIGS = {
    "default": "full",
    "whole_lists": "prefix+history+retrieval:document_lists=false+compress",
}


#: the whole-ask rows' configs: the default (such an ask keeps every document) and the
#: documents ranked against the ask's words as against a question
ASKED_CONFIGS = {
    "default": "full",
    "ranked": "prefix+history+retrieval:whole_asks=false+compress",
}


#: the inline rows' configs: the default (the user's message sent as written: invariant 1) and
#: ``retrieval:inline_context=true`` (the block in it ranked as documents)
INLINE_CONFIGS = {
    "default": "full",
    "inline_context": "prefix+history+retrieval:inline_context=true+compress",
}


#: the rows of asks that hold two questions, and the config they add to the suite's: the ask
#: scored as one text, not each question on its own
QUESTIONS = ("questions2", "questions2_numbered")
QUESTIONS_CONFIGS = {"one_ask": "prefix+history+retrieval:each_question=false+compress"}


#: the indented-record rows, and the config they add to the suite's: a kept window alone, not
#: the rest of the record it ends in
INDENTED_ROWS = tuple(INDENTED)
INDENTED_CONFIGS = {"cut_records": "prefix+history+retrieval:record_rest=false+compress"}


def headline(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The default config's worst shape: evidence, token ratio, cold p99; the budgeted rows
    apart (``evidence_min_budget``): there the caller, not the stage, sets how much is cut;
    and the whole-ask and inline rows left out: there everything is meant to go on (by default
    the user's message goes as written)."""
    apart = {*BUDGETED, *ASKED, *INLINE}
    rows = [r["default"] for s, r in results.items() if "default" in r and s not in apart]
    if not rows:
        return {}
    out = {
        "evidence_min": min(r["evidence"]["mean"] for r in rows),
        "token_ratio_max": max(r["token_ratio"] for r in rows),
        "cold_p99_ms_max": max(r["cold_p99_ms"] for r in rows),
    }
    budgeted = [r["default"] for s, r in results.items() if "default" in r and s in BUDGETED]
    if budgeted:
        out["evidence_min_budget"] = min(r["evidence"]["mean"] for r in budgeted)
    return out


def under_budget(specs: dict[str, str]) -> dict[str, Any]:
    """Each config of ``specs`` (label: config shorthand) run under ``BUDGET_DOCUMENTS``."""
    budget = Budget(documents=BUDGET_DOCUMENTS)
    return {
        label: partial(build_config(spec).pipeline.run, budget=budget)
        for label, spec in specs.items()
    }


def main() -> None:
    p = parser(__doc__.split("\n")[0])
    p.add_argument("--data", "--dataset", dest="data", help="NQ-format jsonl(.gz)")
    p.add_argument("--items", type=int, default=100, help="items a shape")
    p.add_argument("--seed", type=int, default=0, help="the generated records' seed")
    args = p.parse_args()
    n = 5 if args.quick else args.items
    nq = load_dataset(f"nq:{dataset_path(args.data, 'nq20-dev.jsonl.gz')}", limit=n)
    shapes = build(nq.items, n, args.seed)
    runs = {
        "default": build_config("full").pipeline.run,
        "bm25": build_config("retrieval:scorer=bm25").pipeline.run,
        "dense_topk": dense_topk(),
    }
    search = {name: shapes.pop(name) for name in SEARCH}
    listed = {name: shapes.pop(name) for name in LISTED}
    lists = {label: build_config(spec).pipeline.run for label, spec in LISTED_CONFIGS.items()}
    lists["dense_topk"] = runs["dense_topk"]
    asked = {name: shapes.pop(name) for name in ASKED}
    whole = {label: build_config(spec).pipeline.run for label, spec in ASKED_CONFIGS.items()}
    searched = {label: build_config(spec).pipeline.run for label, spec in SEARCH_CONFIGS.items()}
    inline = {name: shapes.pop(name) for name in INLINE}
    questions = {name: shapes.pop(name) for name in QUESTIONS}
    each = runs | {
        label: build_config(spec).pipeline.run for label, spec in QUESTIONS_CONFIGS.items()
    }
    stuffed = {label: build_config(spec).pipeline.run for label, spec in INLINE_CONFIGS.items()}
    indented = {name: shapes.pop(name) for name in INDENTED_ROWS}
    records = runs | {
        label: build_config(spec).pipeline.run for label, spec in INDENTED_CONFIGS.items()
    }
    warm_up(runs, shapes[next(iter(shapes))][0])
    warm_up(searched, search[next(iter(search))][0])
    gauge: list[float] = []  # how fast the host ran Python beside the items (bench_shapes)
    results = run_suite(shapes, runs, gauge)
    results |= run_suite(search, searched, gauge)
    results |= run_suite(listed, lists, gauge)
    results |= run_suite(asked, whole, gauge)
    results |= run_suite(inline, stuffed, gauge)
    results |= run_suite(questions, each, gauge)
    results |= run_suite(indented, records, gauge)
    for row, (shape, specs) in BUDGETED.items():
        results |= run_suite({row: shapes[shape]}, under_budget(specs), gauge)
    out = {
        "benchmark": "bench_structured",
        "machine": machine(),
        "reference_loop_ms": {k: round(v, 3) for k, v in spread(gauge).items()},
        "data": nq.name,
        "items": n,
        "seed": args.seed,
        "shapes": results,
        # questions of the run's items read as asks for the whole (each a false alarm)
        "whole_ask_questions": sum(asks_for_whole(item.request) for item in nq.items),
        **headline(results),
    }
    emit(out, args, table(results))


if __name__ == "__main__":
    main()
