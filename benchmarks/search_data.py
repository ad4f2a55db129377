"""``bench_structured.py``'s search shapes: an item's NQ passages as a search returned them.

- **in a tool message** (``SEARCH``): the user asks the question, the assistant calls a
  search tool with it, and the tool's message is the item's 20 passages in their order:
  ``search_json`` as a list of ``name``/``url``/``snippet`` objects (Bing's shape),
  ``search_results`` as ``{"query", "results": [{"title", "url", "content", "score"}]}``
  (Tavily's), ``search_snippets`` as ``{"organic": [{"title", "link", "snippet"}]}`` with a
  search engine's snippet of each passage (its sentence that holds an answer, else the one
  with the most of the question's words, cut to ``SNIPPET_CHARS``: Serper's shape),
  ``search_text`` as plain text, the passages' texts joined by blank lines (what LangChain's
  retriever tool sends: no titles), and ``fetch_json``, a fetched page as ``{"url", "title",
  "content"}``, the passages the sections of its content. The request has no documents: what
  is cut is the tool message.
- **among the request's documents** (``LISTED``): a search API's answer put in the request as
  it came, ``list_document`` (one document, Tavily's ``{"query", "results": [...]}``), and
  ``list_chunks4`` (five documents, each a JSON array of four ``{"title", "text"}`` objects,
  as a store that keeps its records as JSON returns them).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable

from promptslim.bench.datasets import BenchItem
from promptslim.types import Document, Request

__all__ = ["LISTED", "SEARCH"]


def _page(title: str) -> str:
    return "https://en.wikipedia.org/wiki/" + title.replace(" ", "_")


def _searched(item: BenchItem, result: object, fetched: str | None = None) -> BenchItem:
    """``item``'s question asked of an assistant that searched (or ``fetched`` a page),
    ``result`` the tool's answer."""
    question = item.request.query or item.request.effective_query
    name, args = ("fetch", {"url": fetched}) if fetched else ("web_search", {"query": question})
    call = {
        "id": "call_0",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }
    messages = [
        {"role": "system", "content": "You answer questions. Search the web when you need to."},
        {"role": "user", "content": question},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_0", "content": _written(result)},
    ]
    request = Request.from_openai({"messages": messages})
    return BenchItem(item.id, request, item.answers, item.metadata)


def _written(result: object) -> str:
    return result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)


def search_json(item: BenchItem, rng: random.Random) -> BenchItem:
    docs = item.request.documents
    hits = [{"name": d.title, "url": _page(d.title or ""), "snippet": d.text} for d in docs]
    return _searched(item, hits)


def search_results(item: BenchItem, rng: random.Random) -> BenchItem:
    docs = item.request.documents
    hits = [
        {"title": d.title, "url": _page(d.title or ""), "content": d.text, "score": 0.9 - i / 50}
        for i, d in enumerate(docs)
    ]
    return _searched(item, {"query": item.request.query, "results": hits, "response_time": 1.2})


#: a search engine's snippet: at most this many characters of a passage
SNIPPET_CHARS = 160
_WORDS = re.compile(r"\w+")


def _snippet(text: str, question: str, answers: tuple[str, ...]) -> str:
    """The passage's sentence that holds an answer (the excerpt an engine shows of the page
    that answers), else the one that shares the most words with the question, cut to
    ``SNIPPET_CHARS`` at a word, the answer kept in it."""
    asked = {w.lower() for w in _WORDS.findall(question) if len(w) > 3}
    sentences = re.split(r"(?<=[.!?])\s+", text)
    best = max(
        sentences,
        key=lambda s: (
            any(a in s for a in answers),
            len(asked & {w.lower() for w in _WORDS.findall(s)}),
        ),
    )
    start = text.index(best)
    held = next((text.index(a, start) for a in answers if a in best), start)
    start = max(start, held + 40 - SNIPPET_CHARS)  # the answer stays inside the cut
    cut = text[start : start + SNIPPET_CHARS]
    return cut if len(cut) < SNIPPET_CHARS else cut.rsplit(" ", 1)[0] + " ..."


def search_snippets(item: BenchItem, rng: random.Random) -> BenchItem:
    question = item.request.query or item.request.effective_query
    hits = [
        {
            "title": d.title,
            "link": _page(d.title or ""),
            "snippet": _snippet(d.text, question, item.answers),
        }
        for d in item.request.documents
    ]
    return _searched(item, {"searchParameters": {"q": question}, "organic": hits})


def search_text(item: BenchItem, rng: random.Random) -> BenchItem:
    return _searched(item, "\n\n".join(d.text for d in item.request.documents))


def fetch_json(item: BenchItem, rng: random.Random) -> BenchItem:
    page = "\n\n".join(f"## {d.title}\n\n{d.text}" for d in item.request.documents)
    url = "https://example.org/reading-list"
    return _searched(item, {"url": url, "title": "Reading list", "content": page}, url)


#: the NQ passages as a search tool's results, by name
SEARCH: dict[str, Callable[[BenchItem, random.Random], BenchItem]] = {
    "search_json": search_json,
    "search_results": search_results,
    "search_snippets": search_snippets,
    "search_text": search_text,
    "fetch_json": fetch_json,
}


def list_document(item: BenchItem, rng: random.Random) -> BenchItem:
    hits = [
        {"title": d.title, "url": _page(d.title or ""), "content": d.text, "score": 0.9 - i / 50}
        for i, d in enumerate(item.request.documents)
    ]
    result = {"query": item.request.query, "results": hits}
    return _as_documents(item, [json.dumps(result, ensure_ascii=False)])


def list_chunks(item: BenchItem, rng: random.Random, k: int = 4) -> BenchItem:
    docs = item.request.documents
    lists = [
        [{"title": d.title, "text": d.text} for d in docs[c : c + k]]
        for c in range(0, len(docs), k)
    ]
    return _as_documents(item, [json.dumps(hits, ensure_ascii=False) for hits in lists])


#: the NQ passages as JSON document lists in the request's documents, by name
LISTED: dict[str, Callable[[BenchItem, random.Random], BenchItem]] = {
    "list_document": list_document,
    "list_chunks4": list_chunks,
}


def _as_documents(item: BenchItem, texts: list[str]) -> BenchItem:
    docs = [Document(id=f"chunk-{c}", text=t) for c, t in enumerate(texts)]
    return BenchItem(item.id, item.request.replace(documents=docs), item.answers, item.metadata)
