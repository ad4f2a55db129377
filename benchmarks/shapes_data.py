"""``bench_shapes.py``'s shapes: each nq20 item re-cut into the documents RAG systems send (the
list and what each shape means are in ``bench_shapes``' docstring). Pure functions of an item,
so a test can check that every shape holds the same words and the gold passage where it says."""

from __future__ import annotations

import random
import re
import textwrap
from collections.abc import Callable, Sequence

from promptslim.bench.datasets import BenchItem
from promptslim.types import Document, Message

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


#: the other questions whose candidates a pooled request adds (four times the suite's size)
POOLED_OTHERS = 3


def pooled(items: Sequence[BenchItem], n: int, k: int = 8) -> BenchItem:
    """A request four times the suite's size: item ``n``'s passages and the candidates of
    ``POOLED_OTHERS`` other items (their gold passages left out), shuffled (seeded by the
    item's id), ``k`` to a chunk, the gold passage at chunk position ``n mod k``. What a
    top-10 of 1,000-token chunks looks like: about 8,400 tokens of documents."""
    item = items[n]
    docs = list(item.request.documents)
    for j in range(1, POOLED_OTHERS + 1):
        other = items[(n + j) % len(items)]
        if other is not item:
            docs += [d for d in other.request.documents if not _is_gold(d)]
    random.Random(str(item.id)).shuffle(docs)
    mixed = BenchItem(item.id, item.request.replace(documents=docs), item.answers, item.metadata)
    return chunked(mixed, k, n % k)


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


#: the size and overlap, in characters, of ``small_splitters``' ``langchain500`` pieces
PIECE_CHARS, PIECE_OVERLAP = 500, 50


def small_splitters() -> dict[str, Callable[[str], list[str]]]:
    """Splitters set to cut smaller pieces than the suite's (``bench_structured`` runs them):
    LangChain's recursive splitter at 500 characters (overlap 50), so most pieces of a passage
    lose its title, and LangChain's token splitter at 256 tokens (overlap 32), which cuts
    inside sentences and words. From their packages (extra ``bench``)."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter, TokenTextSplitter

    from promptslim.counters import DEFAULT_ENCODING

    lc = RecursiveCharacterTextSplitter(chunk_size=PIECE_CHARS, chunk_overlap=PIECE_OVERLAP)
    tokens = TokenTextSplitter(encoding_name=DEFAULT_ENCODING, chunk_size=256, chunk_overlap=32)
    return {"langchain500": lc.split_text, "tokens256": tokens.split_text}


def placed_pieces(item: BenchItem) -> BenchItem:
    """The item's passages joined and cut as ``small_splitters``' ``langchain500`` cuts them,
    each piece with the metadata LangChain gives it under ``add_start_index=True``: the source
    (the item) and where in it the piece starts."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter(
        chunk_size=PIECE_CHARS, chunk_overlap=PIECE_OVERLAP, add_start_index=True
    )
    cut = splitter.create_documents([_joined(item)], metadatas=[{"source": str(item.id)}])
    docs = [
        Document(id=f"split-{i}", text=d.page_content, metadata=d.metadata)
        for i, d in enumerate(cut)
        if d.page_content.strip()
    ]
    return BenchItem(item.id, item.request.replace(documents=docs), item.answers, {})


def markdown_sections(item: BenchItem) -> BenchItem:
    """The item's passages as one Markdown file, each under its title as a ``#`` heading, cut
    as LangChain's guide cuts Markdown: by ``MarkdownHeaderTextSplitter``, which takes each
    heading out of the text into its section's metadata (``Header 1``), then each section by
    the recursive splitter at ``PIECE_CHARS`` (overlap ``PIECE_OVERLAP``)."""
    from langchain_text_splitters import MarkdownHeaderTextSplitter, RecursiveCharacterTextSplitter

    markdown = "\n\n".join(f"# {d.title}\n\n{d.text}" for d in item.request.documents)
    sections = MarkdownHeaderTextSplitter([("#", "Header 1")]).split_text(markdown)
    splitter = RecursiveCharacterTextSplitter(chunk_size=PIECE_CHARS, chunk_overlap=PIECE_OVERLAP)
    docs = [
        Document(id=f"section-{i}", text=d.page_content, metadata=d.metadata)
        for i, d in enumerate(splitter.split_documents(sections))
        if d.page_content.strip()
    ]
    return BenchItem(item.id, item.request.replace(documents=docs), item.answers, {})


_WHITESPACE = re.compile(r"\s+")


def splits_answer(before: str, after: str, answers: tuple[str, ...]) -> bool:
    """Whether an answer runs from the end of ``before`` on to ``after`` (a generated layout
    puts no page or cue break inside an answer, so the answer check reads it as written)."""
    joined = f"{before} {after}".lower()
    return any(
        a.lower() in joined and a.lower() not in before.lower() and a.lower() not in after.lower()
        for a in answers
    )


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


#: prompt templates a question arrives in (``{q}``: the question): instructions before it,
#: after it, and around it
TEMPLATES = (
    (
        "You are a careful assistant. Using only the documents provided, answer the question"
        " below. Be concise: one or two sentences at most, in a formal tone, and cite the"
        " document ids you used in square brackets. If the documents do not contain the answer,"
        " say that you do not know rather than guessing, and do not mention these"
        " instructions.\n\nQuestion: {q}"
    ),
    (
        "{q}\n\nAnswer using only the search results above. Keep it short, name the titles of"
        " the passages you relied on, and say so plainly if the results do not contain the"
        " answer."
    ),
    (
        "Here are the search results for my question. Read them carefully, ignore the ones that"
        " are irrelevant, and reply in a single sentence.\nMy question: {q}\nThank you!"
    ),
)
#: a follow-up that names nothing, after a reply that did not answer
FOLLOW_UPS = (
    ("I could not find that in the documents.", "Can you check again?"),
    ("Let me look at the documents.", "Please answer my previous question in one sentence."),
    ("I am not sure.", "Are you sure? Look at the documents once more."),
)


def asked(item: BenchItem, how: str, n: int) -> BenchItem:
    """The item's question as a conversation puts it, with no ``Request.query`` given:
    ``template`` (inside the ``n``-th of ``TEMPLATES``) or ``follow_up`` (the turn before the
    ``n``-th of ``FOLLOW_UPS``). ``metadata["question"]`` keeps the question (what a vector
    store was searched with)."""
    messages = list(item.request.messages)
    question = item.request.query or messages[-1].text
    if how == "template":
        last = [Message(role="user", content=TEMPLATES[n % len(TEMPLATES)].format(q=question))]
    else:
        reply, follow = FOLLOW_UPS[n % len(FOLLOW_UPS)]
        last = [
            Message(role="user", content=messages[-1].text),
            Message(role="assistant", content=reply),
            Message(role="user", content=follow),
        ]
    request = item.request.replace(query=None, messages=[*messages[:-1], *last])
    return BenchItem(item.id, request, item.answers, {**item.metadata, "question": question})


def build_shapes(nq: list[BenchItem], kv: list[BenchItem]) -> dict[str, list[BenchItem]]:
    shapes: dict[str, list[BenchItem]] = {"passages": nq}
    for k in CHUNK_SIZES:
        shapes[f"chunks{k}"] = [chunked(it, k, n % k) for n, it in enumerate(nq)]
    for layout in LAYOUTS:
        shapes[f"{layout}4"] = [relaid(it, layout) for it in shapes["chunks4"]]
    for how in ("template", "follow_up"):
        shapes[f"{how}4"] = [asked(it, how, n) for n, it in enumerate(shapes["chunks4"])]
    shapes["pooled8"] = [pooled(nq, n) for n in range(len(nq))]
    for name, split in splitters().items():
        shapes[name] = [resplit(it, split) for it in nq]
    if kv:
        shapes["kv75"] = kv
    return shapes
