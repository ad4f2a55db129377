"""``bench_shapes.py``'s shapes: each nq20 item re-cut into the documents RAG systems send (the
list and what each shape means are in ``bench_shapes``' docstring). Pure functions of an item,
so a test can check that every shape holds the same words and the gold passage where it says."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable

from promptslim.bench.datasets import BenchItem
from promptslim.types import Document

CHUNK_SIZES = (2, 4, 8)


def _paragraph(d: Document) -> str:
    return f"{d.title}\n{d.text}" if d.title else d.text


def _is_gold(d: Document) -> bool:
    return bool(d.metadata.get("isgold"))


def chunked(item: BenchItem, k: int, position: int) -> BenchItem:
    """The item's passages k to a chunk, the gold passage at ``position`` in its chunk (its
    chunk's place among the chunks as the gold passage's place among the passages)."""
    docs = list(item.request.documents)
    gold = next((i for i, d in enumerate(docs) if _is_gold(d)), 0)
    others = [d for i, d in enumerate(docs) if i != gold]
    n_chunks = -(-len(docs) // k)
    at = min(n_chunks - 1, gold * n_chunks // max(1, len(docs)))
    at = min(at, (len(docs) - 1 - position) // k)  # a short last chunk has no such position
    order = others[: at * k + position] + [docs[gold]] + others[at * k + position :]
    chunks = [
        Document(
            id=f"chunk-{c}",
            text="\n\n".join(_paragraph(d) for d in order[c * k : (c + 1) * k]),
            metadata={"isgold": c == at},
        )
        for c in range(n_chunks)
    ]
    request = item.request.replace(documents=chunks)
    return BenchItem(item.id, request, item.answers, {"position": position})


def _joined(item: BenchItem) -> str:
    return "\n\n".join(_paragraph(d) for d in item.request.documents)


def resplit(item: BenchItem, split: Callable[[str], list[str]]) -> BenchItem:
    """The item's passages concatenated and re-cut by a splitter, one document per piece."""
    pieces = [p for p in split(_joined(item)) if p.strip()]
    docs = [Document(id=f"split-{i}", text=p) for i, p in enumerate(pieces)]
    return BenchItem(item.id, item.request.replace(documents=docs), item.answers, {})


def splitters() -> dict[str, Callable[[str], list[str]]]:
    """The real splitters, from their packages (extra ``bench``)."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter
    from llama_index.core.node_parser import SentenceSplitter

    lc = RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=200)
    li512 = SentenceSplitter(chunk_size=512)
    li1024 = SentenceSplitter(chunk_size=1024)
    return {
        "langchain1000": lc.split_text,
        "llamaindex512": li512.split_text,
        "llamaindex1024": li1024.split_text,
    }


_WHITESPACE = re.compile(r"\s+")


def _lines(text: str) -> str:
    return text.replace("\n\n", "\n")


def _wrapped(text: str) -> str:
    # each passage's title stays a line of its own, as a heading does in a PDF
    lines = (line for paragraph in text.split("\n\n") for line in paragraph.split("\n"))
    return "\n".join(
        textwrap.fill(line, WRAP_COLUMNS, break_long_words=False, break_on_hyphens=False)
        for line in lines
    )


def _flat(text: str) -> str:
    return _WHITESPACE.sub(" ", text).strip()


#: the layouts of ``chunks4``'s text that other loaders send (see the module docstring)
LAYOUTS: dict[str, Callable[[str], str]] = {"lines": _lines, "wrapped": _wrapped, "flat": _flat}
WRAP_COLUMNS = 80


def relaid(item: BenchItem, layout: str) -> BenchItem:
    """The item's documents in another layout (``LAYOUTS``), the same words in the same order."""
    lay = LAYOUTS[layout]
    docs = [d.model_copy(update={"text": lay(d.text)}) for d in item.request.documents]
    return BenchItem(item.id, item.request.replace(documents=docs), item.answers, item.metadata)


def build_shapes(nq: list[BenchItem], kv: list[BenchItem]) -> dict[str, list[BenchItem]]:
    shapes: dict[str, list[BenchItem]] = {"passages": nq}
    for k in CHUNK_SIZES:
        shapes[f"chunks{k}"] = [chunked(it, k, n % k) for n, it in enumerate(nq)]
    for layout in LAYOUTS:
        shapes[f"{layout}4"] = [relaid(it, layout) for it in shapes["chunks4"]]
    for name, split in splitters().items():
        shapes[name] = [resplit(it, split) for it in nq]
    if kv:
        shapes["kv75"] = kv
    return shapes
