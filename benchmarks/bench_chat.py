"""Chat exports as RAG documents: the answer a message or two after the one naming the subject.

Per item (nq20-dev rows from ``--offset``, default 400: rows no other benchmark or design note
reads), the 20 passages joined four to a chunk, each chunk written as a chat channel: the
passage's title, then each of its sentences, one message each, in order (cut where a sentence
ends, never at an initial such as "J.P." or after "St.": no one ends a message there, and the
answer would be cut in two). The forms:

- ``export``: the channel as a messaging API returns its history, a JSON list of
  ``{"type", "user", "text", "ts"}`` objects written in UTF-8 (a document list of untitled
  passages, which the retrieval stage ranks message by message);
- ``log``: the same messages as a chat log's lines, ``[time] <user> text``;
- ``tool``: no documents: an agent's turn that called a ``read_channel`` tool once a channel,
  each result ``{"ok": true, "messages": [...]}`` as in ``export``, compressed by the tools
  stage one result at a time (``token_ratio`` is then tool-message tokens kept / given);
- ``export_short`` and ``tool_short``: as ``export`` and ``tool``, each sentence cut after
  its commas, semicolons and colons into messages of 25 characters or more (about 50 at the
  median), as people write in chat: too short to read as passages by the prose test.

Configs side by side on the same items: ``default`` (the default pipeline), ``without``
(``next_pieces=0`` in the retrieval stage and in the tools stage's ``documents``: no piece is
kept for going on from a kept one, nor the item before it) and ``unpulled`` (``item_pull=0``
there: each message scored by its own words alone, not pulled toward a better neighbour's
score). Figures per form and config:
``evidence`` (the answer in what is sent, mean and 95 % interval), ``token_ratio`` (document
tokens kept / given), ``p50_ms`` / ``p99_ms`` (wall clock of the pipeline, cold: after
``bench.runner.cold_start``, which forgets every text seen, and one warm-up request that loads
the model). ``evidence_export`` / ``token_ratio_export`` and their ``_without`` are the
``export`` form's; ``evidence_log`` / ``token_ratio_log`` the ``log`` form's;
``evidence_tool`` / ``token_ratio_tool`` and their ``_without`` the ``tool`` form's, and
so on for ``export_short`` and ``tool_short``; each with ``_unpulled`` too.

    python benchmarks/bench_chat.py --quick --json
"""

from __future__ import annotations

import json
import random
import re
import time
from typing import Any

from bench_shapes import row
from common import data_file, emit, machine, parser, rows_from

from promptslim.bench.configs import stage_options
from promptslim.bench.datasets import BenchItem
from promptslim.bench.runner import build_config, cold_start
from promptslim.pipeline import Pipeline
from promptslim.stats import mean_ci, percentile
from promptslim.types import Document, Request

CONFIGS = {
    "default": "prefix+tools+history+retrieval+compress",
    "without": "prefix+tools+history+retrieval:next_pieces=0+compress",
    "unpulled": "prefix+tools+history+retrieval:item_pull=0+compress",
}
#: the tools stage's passages ranked the same way, under each config but the default
TOOLS = {
    "without": {"name": "tools", "documents": {"next_pieces": 0}},
    "unpulled": {"name": "tools", "documents": {"item_pull": 0}},
}
FORMS = ("export", "log", "tool", "export_short", "tool_short")
#: a short message's fewest characters: a shorter piece goes with the next one
SHORT_CHARS = 25
# a clause ends at a comma, semicolon or colon before a word, not inside a date or a number
_CLAUSE_END = re.compile(r"(?<=[,;:])\s+(?=[^\W\d])")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[^a-z])")
# no one ends a chat message at an initial ("J.P. Zenger", "Daniel A. Dailey") or after "St."
_NOT_AN_END = re.compile(r"(?:\b[A-Z]|\b(?:St|Mr|Mrs|Ms|Dr|Jr|Sr|Mt|No|vs|Co|Inc|Ltd))\.$")


def _sentences(text: str) -> list[str]:
    """``text`` cut at each sentence end that is not an initial or an abbreviation's point."""
    out: list[str] = []
    for piece in _SENTENCE_END.split(text):
        if out and _NOT_AN_END.search(out[-1]):
            out[-1] = f"{out[-1]} {piece}"
        else:
            out.append(piece)
    return [s for s in out if s.strip()]


def _short(sentence: str) -> list[str]:
    """``sentence`` cut after its commas, semicolons and colons (not in "December 21, 1984"),
    each piece of at least ``SHORT_CHARS`` (a shorter one goes with the next, a short last one
    with the one before)."""
    out: list[str] = []
    held = ""
    for piece in _CLAUSE_END.split(sentence):
        held = f"{held} {piece}" if held else piece
        if len(held) >= SHORT_CHARS:
            out.append(held)
            held = ""
    if held and out:
        out[-1] = f"{out[-1]} {held}"
    elif held:
        out.append(held)
    return out


def _messages(
    docs: list[Document], rng: random.Random, short: bool = False
) -> list[dict[str, str]]:
    """The passages as a channel's messages: each title, then each sentence (or each
    ``_short`` piece of it), in order."""
    out: list[dict[str, str]] = []
    ts = 1_700_000_000
    for d in docs:
        sentences = _sentences(f"{d.title}. {d.text}" if d.title else d.text)
        for sentence in [p for s in sentences for p in _short(s)] if short else sentences:
            ts += rng.randint(5, 300)
            user = f"U0{rng.randint(1000, 9999)}"
            out.append({"type": "message", "user": user, "text": sentence, "ts": f"{ts}.000100"})
    return out


def _written(messages: list[dict[str, str]], form: str) -> str:
    if form == "export":
        return json.dumps(messages, indent=2, ensure_ascii=False)
    return "\n".join(f"[{m['ts']}] <{m['user']}> {m['text']}" for m in messages)


def chat_item(item: BenchItem, form: str, seed: int) -> BenchItem:
    """``item`` with its passages as five chat channels of four passages each, in ``form``."""
    rng = random.Random(seed)
    docs = list(item.request.documents)
    short = form.endswith("_short")
    channels = [_messages(docs[c : c + 4], rng, short) for c in range(0, len(docs), 4)]
    if form.startswith("tool"):
        return _tool_item(item, channels)
    chunks = [
        Document(id=f"channel-{c}", text=_written(messages, form.removesuffix("_short")))
        for c, messages in enumerate(channels)
    ]
    return BenchItem(item.id, item.request.replace(documents=chunks), item.answers, item.metadata)


def _tool_item(item: BenchItem, channels: list[list[dict[str, str]]]) -> BenchItem:
    """The question, then one ``read_channel`` call a channel and its result, no documents."""
    calls, results = [], []
    for c, messages in enumerate(channels):
        arguments = json.dumps({"channel": f"channel-{c}"})
        function = {"name": "read_channel", "arguments": arguments}
        calls.append({"id": f"call-{c}", "type": "function", "function": function})
        content = json.dumps({"ok": True, "messages": messages}, ensure_ascii=False)
        results.append({"role": "tool", "tool_call_id": f"call-{c}", "content": content})
    question = item.request.query or ""
    request = Request.from_openai({"messages": [
        {"role": "user", "content": question},
        {"role": "assistant", "content": None, "tool_calls": calls},
        *results,
    ]})  # fmt: skip
    return BenchItem(item.id, request, item.answers, {**item.metadata, "question": question})


def _pipelines() -> dict[str, Any]:
    """Each config's ``run``; but for the default, its tools stage ranks its passages the
    way its retrieval stage does (``TOOLS``), which the shorthand cannot say."""
    runs = {"default": build_config(CONFIGS["default"]).pipeline.run}
    for name, tools in TOOLS.items():
        stages = [stage_options(part) for part in CONFIGS[name].split("+")]
        stages = [tools if s["name"] == "tools" else s for s in stages]
        runs[name] = Pipeline.from_config({"stages": stages}).run
    return runs


def run(items: list[BenchItem]) -> dict[str, Any]:
    runs = _pipelines()
    for run_config in runs.values():
        run_config(items[0].request)  # warm-up: the model loads here, not in a timed request
    out: dict[str, Any] = {}
    for form in FORMS:
        shaped = [chat_item(item, form, k) for k, item in enumerate(items)]
        for name, run_config in runs.items():
            rows = []
            for item in shaped:
                cold_start()  # each request meets its documents unseen, whatever ran before
                start = time.perf_counter()
                result = run_config(item.request)
                ms = (time.perf_counter() - start) * 1e3
                messages = result.to_openai()["messages"]
                rows.append(row(item, result.request.documents, messages, ms))
            out.setdefault(form, {})[name] = {
                "n": len(rows),
                "evidence": mean_ci([r["evidence"] for r in rows]).as_dict(),
                "token_ratio": round(sum(r["ratio"] for r in rows) / len(rows), 4),
                "p50_ms": round(percentile([r["ms"] for r in rows], 50), 1),
                "p99_ms": round(percentile([r["ms"] for r in rows], 99), 1),
            }
    return out


def _figure(measured: dict[str, Any], figure: str) -> float:
    """A form's figure under one config: for evidence, its mean."""
    value = measured[figure]
    return float(value["mean"] if figure == "evidence" else value)


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=None, help="items (default 200, 25 with --quick)")
    p.add_argument("--offset", type=int, default=400, help="the first row read")
    args = p.parse_args()
    n = args.n or (25 if args.quick else 200)
    nq, offset = rows_from(f"nq:{data_file('nq20-dev.jsonl.gz')}", args.offset, n)
    forms = run(nq)
    result: dict[str, Any] = {
        "forms": forms,
        **{
            f"{figure}_{form}{suffix}": _figure(forms[form][name], figure)
            for form in FORMS
            for name, suffix in (
                ("default", ""),
                ("without", "_without"),
                ("unpulled", "_unpulled"),
            )
            for figure in ("evidence", "token_ratio")
        },
        "n": len(nq),
        "rows": [offset, offset + len(nq)],
        "configs": {**CONFIGS, **{f"{name}_tools": tools for name, tools in TOOLS.items()}},
        "clock": "wall clock of the pipeline, each request after cold_start (models loaded)",
        "machine": machine(),
    }
    table = "\n".join(
        f"{form:7} {name:8} evidence {r['evidence']['mean']:.3f} "
        f"[{r['evidence']['low']:.3f}, {r['evidence']['high']:.3f}] "
        f"token_ratio {r['token_ratio']:.4f} p50 {r['p50_ms']} ms p99 {r['p99_ms']} ms"
        for form, by in forms.items()
        for name, r in by.items()
    )
    emit(result, args, table)


if __name__ == "__main__":
    main()
