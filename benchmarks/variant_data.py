"""``bench_structured.py``'s variants: the NQ items as other retrievers and other users send them.

The shape suite and the structured shapes vary how the passages are cut and laid out; these
vary what comes around them and how the question is put, each seeded:

- ``candidates100``: about a top-100 of short passages (96): the item's 20 and the 19 other
  candidates of each of the next ``POOLED_OTHERS`` items (their gold passages left out),
  shuffled, each a document with its title: what a first-stage retriever hands a reranker;
- ``duplicates4``: four titled passages to a chunk, every chunk sent twice under two ids
  (two retrievers' results merged, or one index that holds a page twice), shuffled;
- ``sourced4``: four titled passages to a chunk, each chunk opening with the line a loader
  writes of where it came from (source file, chunk number, retrieval score);
- ``keywords4``: four titled passages to a chunk, the question typed into a search box: its
  question and function words (``FUNCTION_WORDS``) left out, the rest in its order;
- ``typos4``: four titled passages to a chunk, the question with two letters swapped in each
  of two of its longer words, as people type;
- ``questions2``: two questions in one ask ("Who got the first Nobel prize in physics? And
  when ...?"), the two items' passages four to a chunk, shuffled, ten chunks; the evidence
  counts only when an answer to each is kept (``metadata["also_answers"]``: the second's);
- ``questions2_numbered``: the same two questions as a numbered list without question marks
  ("1. who got the first nobel prize in physics\n2. when ..."), as lists of questions are
  often typed.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence

from promptslim.bench.datasets import BenchItem
from promptslim.types import Document

__all__ = ["FUNCTION_WORDS", "POOLED_OTHERS", "VARIANTS", "keywords", "typos"]

#: the other items whose candidates ``candidates100`` adds
POOLED_OTHERS = 4

#: what a search-box query leaves out of a question: its question word and function words
#: (a list of its own, not the library's stopwords: the query is the user's, not the analyser's)
FUNCTION_WORDS = frozenset(
    {
        *("a", "an", "the", "of", "in", "on", "at", "to", "for", "from", "by", "with", "about"),
        *("as", "into", "is", "are", "was", "were", "be", "been", "do", "does", "did", "has"),
        *("have", "had", "it", "its", "this", "that", "these", "those", "and", "or"),
        *("who", "whom", "whose", "what", "when", "where", "which", "why", "how"),
    }
)
_WORD = re.compile(r"\w+")


def _titled(d: Document) -> str:
    return f"{d.title}\n{d.text}" if d.title else d.text


def _is_gold(d: Document) -> bool:
    return bool(d.metadata.get("isgold"))


def _chunks(item: BenchItem, k: int = 4) -> list[str]:
    docs = list(item.request.documents)
    return ["\n\n".join(_titled(d) for d in docs[c : c + k]) for c in range(0, len(docs), k)]


def _with(item: BenchItem, docs: list[Document], query: str | None = None) -> BenchItem:
    request = item.request.replace(documents=docs)
    if query is not None:
        request = request.replace(query=query)
    return BenchItem(item.id, request, item.answers, item.metadata)


def _chunked(item: BenchItem, query: str | None = None) -> BenchItem:
    docs = [Document(id=f"chunk-{c}", text=t) for c, t in enumerate(_chunks(item))]
    return _with(item, docs, query)


def candidates100(items: Sequence[BenchItem], n: int, rng: random.Random) -> BenchItem:
    item = items[n]
    docs = list(item.request.documents)
    others = dict.fromkeys((n + j) % len(items) for j in range(1, POOLED_OTHERS + 1))
    for j in others:  # fewer where there are fewer items
        if j != n:
            docs += [d for d in items[j].request.documents if not _is_gold(d)]
    rng.shuffle(docs)
    return _with(item, [d.model_copy(update={"id": f"passage-{i}"}) for i, d in enumerate(docs)])


def duplicates(items: Sequence[BenchItem], n: int, rng: random.Random) -> BenchItem:
    chunks = _chunks(items[n])
    docs = [Document(id=f"{via}-{c}", text=t) for via in ("a", "b") for c, t in enumerate(chunks)]
    rng.shuffle(docs)
    return _with(items[n], docs)


def sourced(items: Sequence[BenchItem], n: int, rng: random.Random) -> BenchItem:
    chunks = _chunks(items[n])
    docs = [
        Document(
            id=f"chunk-{c}",
            text=f"source: exports/wiki-{rng.randrange(10_000):04d}.jsonl | chunk {c + 1} of "
            f"{len(chunks)} | score {rng.uniform(0.55, 0.95):.3f}\n{t}",
        )
        for c, t in enumerate(chunks)
    ]
    return _with(items[n], docs)


def keywords(question: str) -> str:
    """``question`` as typed into a search box: without its question and function words."""
    kept = [w for w in _WORD.findall(question) if w.lower() not in FUNCTION_WORDS]
    return " ".join(kept) or question


def typos(question: str, rng: random.Random, words: int = 2) -> str:
    """``question`` with two neighbouring letters swapped in ``words`` of its words of five
    letters or more (fewer where it has fewer)."""
    parts = question.split(" ")
    long = [i for i, w in enumerate(parts) if len(w) >= 5 and w.isalpha()]
    for i in rng.sample(long, min(words, len(long))):
        w = parts[i]
        # the first letter stays, as in most typos; "tt" swapped would change nothing
        at = rng.choice([a for a in range(1, len(w) - 1) if w[a] != w[a + 1]] or [0])
        parts[i] = w[:at] + w[at + 1] + w[at] + w[at + 2 :]
    return " ".join(parts)


def keyworded(items: Sequence[BenchItem], n: int, rng: random.Random) -> BenchItem:
    return _chunked(items[n], keywords(items[n].request.query or ""))


def misspelt(items: Sequence[BenchItem], n: int, rng: random.Random) -> BenchItem:
    return _chunked(items[n], typos(items[n].request.query or "", rng))


def _asked(question: str) -> str:
    """An NQ question (lower case, no mark) as a person writes it in a message."""
    question = question.strip().rstrip("?").strip()
    return f"{question[:1].upper()}{question[1:]}?"


def two_questions(items: Sequence[BenchItem], n: int, rng: random.Random) -> BenchItem:
    item, other = items[n], items[(n + 1) % len(items)]
    docs = [*item.request.documents, *other.request.documents]
    rng.shuffle(docs)
    texts = ["\n\n".join(_titled(d) for d in docs[c : c + 4]) for c in range(0, len(docs), 4)]
    chunks = [Document(id=f"chunk-{c}", text=t) for c, t in enumerate(texts)]
    first, second = _asked(item.request.query or ""), _asked(other.request.query or "")
    query = f"{first} And {second[:1].lower()}{second[1:]}"
    request = item.request.replace(documents=chunks, query=query)
    metadata = {**item.metadata, "also_answers": tuple(other.answers)}
    return BenchItem(item.id, request, item.answers, metadata)


def numbered_questions(items: Sequence[BenchItem], n: int, rng: random.Random) -> BenchItem:
    """``two_questions``, the two asked as a numbered list without question marks."""
    asked = two_questions(items, n, rng)
    first, second = (items[i].request.query or "" for i in (n, (n + 1) % len(items)))
    query = f"1. {first.strip()}\n2. {second.strip()}"
    return BenchItem(asked.id, asked.request.replace(query=query), asked.answers, asked.metadata)


#: the variants by name: each builds item ``n`` of ``items`` (some read its neighbours)
VARIANTS: dict[str, Callable[[Sequence[BenchItem], int, random.Random], BenchItem]] = {
    "candidates100": candidates100,
    "duplicates4": duplicates,
    "sourced4": sourced,
    "keywords4": keyworded,
    "typos4": misspelt,
    "questions2": two_questions,
    "questions2_numbered": numbered_questions,
}
