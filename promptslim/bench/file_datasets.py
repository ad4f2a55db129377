"""Datasets read from files: the "Lost in the Middle" multi-document QA (``nq:``) and
key-value retrieval (``kv:``) sets, LongBench (``longbench:``) and promptslim's own jsonl
(``jsonl:``). Each loader turns one record into a ``BenchItem``; a bad record is skipped."""

from __future__ import annotations

import json
from typing import Any

from ..errors import InvalidRequest
from ..types import Document, Message, Request
from .dataset_base import BenchItem, FileLoader, answers_of, require_str

__all__ = [
    "KV_INSTRUCTION",
    "LONGBENCH_INSTRUCTION",
    "NQ_INSTRUCTION",
    "JsonlLoader",
    "KVLoader",
    "LongBenchLoader",
    "NQLoader",
    "kv_request",
    "qa_request",
    "split_passages",
]

#: the instruction of the "Lost in the Middle" QA prompt (Liu et al. 2023)
NQ_INSTRUCTION = (
    "Write a high-quality answer for the given question using only the provided search results "
    "(some of which might be irrelevant)."
)
#: the instruction of that study's key-value retrieval prompt
KV_INSTRUCTION = "Extract the value corresponding to the specified key in the JSON object below."
LONGBENCH_INSTRUCTION = (
    "Answer the question based on the given passages. Only give the answer, no other words."
)


def qa_request(instruction: str, question: str, documents: list[Document]) -> Request:
    """The "Lost in the Middle" prompt shape: the instruction, the numbered search results
    (rendered by promptslim just before the question), then the question."""
    return Request(
        messages=[
            Message(role="system", content=instruction),
            Message(role="user", content=f"Question: {question}"),
        ],
        documents=documents,
        query=question,
    )


class NQLoader(FileLoader):
    """``nq:PATH``: question, answers, ctxs (title, text, hasanswer, isgold)."""

    kind = "nq"

    def parse(self, record: dict[str, Any], lineno: int) -> BenchItem:
        question = require_str(record, "question")
        answers = answers_of(record.get("answers"))
        ctxs = record.get("ctxs")
        if not isinstance(ctxs, list):
            raise InvalidRequest("expected a list of passages", field="ctxs")
        documents = []
        for i, ctx in enumerate(ctxs):
            if not isinstance(ctx, dict) or not isinstance(ctx.get("text"), str):
                raise InvalidRequest("expected an object with a text", field=f"ctxs[{i}]")
            meta = {k: ctx[k] for k in ("title", "isgold", "hasanswer") if k in ctx}
            documents.append(
                Document(id=str(ctx.get("id", f"ctx-{i}")), text=ctx["text"], metadata=meta)
            )
        meta = {"gold_index": record["gold_index"]} if "gold_index" in record else {}
        return BenchItem(
            self._id(record, lineno), qa_request(NQ_INSTRUCTION, question, documents), answers, meta
        )


def kv_request(pairs: list[tuple[str, str]], key: str) -> Request:
    """One document per pair, written as a JSON member (``"key": "value"``), so retrieval can
    pick pairs like passages; the question is the study's ``Key: "..."`` line."""
    documents = [
        Document(
            id=f"kv-{i}",
            text=f"{json.dumps(k)}: {json.dumps(v)}",
            metadata={"isgold": k == key, "hasanswer": k == key},
        )
        for i, (k, v) in enumerate(pairs)
    ]
    return Request(
        messages=[
            Message(role="system", content=KV_INSTRUCTION),
            Message(role="user", content=f"Key: {json.dumps(key)}\nCorresponding value:"),
        ],
        documents=documents,
        query=key,
        protect=[key],
    )


class KVLoader(FileLoader):
    """``kv:PATH``: ordered_kv_records ([[key, value], ...]), key, value."""

    kind = "kv"

    def parse(self, record: dict[str, Any], lineno: int) -> BenchItem:
        raw = record.get("ordered_kv_records")
        if not isinstance(raw, list) or not all(
            isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in raw
        ):
            raise InvalidRequest(
                "expected a list of [key, value] string pairs", field="ordered_kv_records"
            )
        key = require_str(record, "key")
        value = require_str(record, "value")
        pairs = [(p[0], p[1]) for p in raw]
        return BenchItem(self._id(record, lineno), kv_request(pairs, key), (value,))


def split_passages(text: str, *, max_words: int = 200) -> list[str]:
    """Paragraphs of ``text`` merged up to ``max_words`` words each (a long paragraph is cut at
    word boundaries), so a long context becomes documents that retrieval can rank."""
    passages: list[str] = []
    current: list[str] = []
    for para in (p.strip() for p in text.split("\n")):
        if not para:
            continue
        words = para.split()
        while len(words) > max_words:
            if current:
                passages.append(" ".join(current))
                current = []
            passages.append(" ".join(words[:max_words]))
            words = words[max_words:]
        if current and len(current) + len(words) > max_words:
            passages.append(" ".join(current))
            current = []
        current.extend(words)
    if current:
        passages.append(" ".join(current))
    return passages


class LongBenchLoader(FileLoader):
    """``longbench:PATH``: input (the question), context, answers."""

    kind = "longbench"

    def parse(self, record: dict[str, Any], lineno: int) -> BenchItem:
        question = require_str(record, "input")
        context = require_str(record, "context")
        answers = answers_of(record.get("answers"))
        documents = [Document(id=f"p-{i}", text=t) for i, t in enumerate(split_passages(context))]
        meta: dict[str, Any] = {k: record[k] for k in ("dataset", "length") if k in record}
        return BenchItem(
            self._id(record, lineno),
            qa_request(LONGBENCH_INSTRUCTION, question, documents),
            answers,
            meta,
        )


class JsonlLoader(FileLoader):
    """``jsonl:PATH``: ``{"id"?, "messages": [...], "documents"?: [...], "query"?, "answers": [...]}``
    where messages and documents are what ``Request.from_openai`` reads."""

    kind = "jsonl"

    def parse(self, record: dict[str, Any], lineno: int) -> BenchItem:
        answers = answers_of(record.get("answers"))
        body = {k: v for k, v in record.items() if k not in ("id", "answers", "query", "metadata")}
        options: dict[str, Any] = {}
        if record.get("query") is not None:
            options["query"] = require_str(record, "query")
        request = Request.from_openai(body, **options)
        raw_meta = record.get("metadata")
        meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
        return BenchItem(self._id(record, lineno), request, answers, meta)
