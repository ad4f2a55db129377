"""The soak benchmark's request stream (``benchmarks/soak.py``): deterministic bodies shaped
like production traffic, by ``i % 3`` -- RAG (some cold: documents never seen), a live chat
turn, a request with volatile values in its system prompt -- and the vector store that hands
warm RAG requests their documents' and query's embeddings."""

from __future__ import annotations

import bisect
import itertools
import json
import random
from collections.abc import Iterator
from typing import Any

from promptslim import Document
from promptslim.backends.embeddings import EmbeddingService
from promptslim.stages.retrieval_scoring import scoring_text

BUDGET = 1500
DOCS_PER_RAG = 8
#: documents in the vector store's corpus; popularity falls as 1 / rank (Zipf, s = 1)
CORPUS_DOCS = 500
#: one rag request in COLD_EVERY comes from a retriever without vectors and brings NEW_DOCS
#: documents never seen before (the rest of its 8 from the corpus, without embeddings). Each
#: costs MiniLM about 5-8 texts (the query, the new documents, corpus ones not yet cached):
#: ~100 ms on the idle 2-core box, so 1 in 60 requests keeps --quick within two minutes
COLD_EVERY = 20
NEW_DOCS = 4
#: conversations in flight at once, and turns before one ends and a new one takes its slot
LIVE_CHATS = 40
CHAT_TURNS = 24
SYSTEM_TEMPLATES = 40
#: requests generated (and their queries embedded by the vector store) per batch
CHUNK = 250
KINDS = ("rag", "rag_cold", "chat", "volatile")
WARM_UP_START = 10**9  # index of the first warm-up request: far from any stream's

# a vocabulary of made-up words from syllables: many distinct token sequences, like real text
_SYL = ["ka", "lo", "mi", "ter", "van", "pul", "sor", "ine", "dra", "que", "bel", "tho", "rix", "nam", "ost", "wey"]  # fmt: skip
_WORDS = [a + b + c for a in _SYL for b in _SYL for c in ("", "s", "ed", "ing")][:900]
_COMMON = ["the", "a", "of", "to", "and", "in", "is", "for", "with", "on", "that", "by", "price", "region", "limit", "cache", "order", "account", "service", "report"]  # fmt: skip
_NAMES = ["Ada", "Bo", "Chen", "Dana", "Emeka", "Farah", "Goran", "Hana", "Ivo", "June"]


def _sentence(rng: random.Random, n: int) -> str:
    words = [rng.choice(_COMMON) if rng.random() < 0.4 else rng.choice(_WORDS) for _ in range(n)]
    return " ".join(words).capitalize() + "."


def _paragraph(rng: random.Random, sentences: int) -> str:
    return " ".join(_sentence(rng, rng.randint(8, 16)) for _ in range(sentences))


def _document(k: int) -> dict[str, Any]:
    rng = random.Random(("doc", k).__repr__())
    return {
        "id": f"doc-{k}",
        "text": _paragraph(rng, rng.randint(3, 5)),
        "metadata": {"title": f"Note {k}"},
    }


def _question(rng: random.Random, label: str, words: int) -> str:
    return f"{label}: " + _sentence(rng, words)[:-1] + "?"


def _short_chat(rng: random.Random, system: str, turns: int, last: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for _ in range(turns):
        messages.append({"role": "user", "content": _sentence(rng, 12)})
        messages.append({"role": "assistant", "content": _paragraph(rng, 2)})
    messages.append({"role": "user", "content": last})
    return messages


_TOOLS = [
    {"type": "function", "function": {"name": "lookup_order", "description": "Find an order by id.",
     "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}},
    {"type": "function", "function": {"name": "search_kb", "description": "Search the knowledge base.",
     "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "k": {"type": "integer"}}}}},
]  # fmt: skip

# cumulative Zipf weights over the corpus, for bisect sampling
_ZIPF = list(itertools.accumulate(1.0 / (r + 1) for r in range(CORPUS_DOCS)))


def _popular(rng: random.Random, k: int) -> list[int]:
    """``k`` distinct corpus documents, drawn by popularity."""
    chosen: dict[int, None] = {}
    while len(chosen) < k:
        chosen[bisect.bisect(_ZIPF, rng.random() * _ZIPF[-1])] = None
    return list(chosen)


def _rag(i: int, rng: random.Random) -> tuple[str, dict[str, Any]]:
    r = i // 3  # this request's number among rag requests
    cold = r % COLD_EVERY == COLD_EVERY - 1
    messages = _short_chat(
        rng, "Answer from the notes. Cite note titles.", rng.randint(0, 3),
        _question(rng, f"Request {i}", 10),
    )  # fmt: skip
    if cold:
        # new documents never repeat: cold request c owns ids CORPUS + c*NEW_DOCS ...
        first = CORPUS_DOCS + (r // COLD_EVERY) * NEW_DOCS
        ids = [*_popular(rng, DOCS_PER_RAG - NEW_DOCS), *range(first, first + NEW_DOCS)]
    else:
        ids = _popular(rng, DOCS_PER_RAG)
    docs = [_document(k) for k in ids]
    rng.shuffle(docs)
    return ("rag_cold" if cold else "rag"), {"model": "m", "messages": messages, "documents": docs}


def _turn(session: int, t: int) -> list[dict[str, Any]]:
    """Turn ``t`` of conversation ``session``: a user message, maybe a tool round, a reply."""
    rng = random.Random(("turn", session, t).__repr__())
    out: list[dict[str, Any]] = [
        {"role": "user", "content": f"({session}.{t}) " + _sentence(rng, 14)}
    ]
    if rng.random() < 0.5:
        call_id = f"call_{session}_{t}"
        args = json.dumps({"order_id": f"A-{rng.randint(10_000, 99_999)}"})
        out.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": "lookup_order", "arguments": args}}]})  # fmt: skip
        out.append({"role": "tool", "tool_call_id": call_id, "content": json.dumps(
            {"status": rng.choice(["shipped", "held", "lost"]), "note": _sentence(rng, 12)})})  # fmt: skip
    out.append({"role": "assistant", "content": _paragraph(rng, rng.randint(1, 3))})
    return out


def chat_position(c: int) -> tuple[int, int]:
    """``(conversation, turn)`` of the ``c``-th chat request. Slot ``c % LIVE_CHATS`` serves
    its conversation one turn per round; slots start at different turns so that conversations
    do not all end in the same round."""
    slot = c % LIVE_CHATS
    step = c // LIVE_CHATS + slot * CHAT_TURNS // LIVE_CHATS
    return slot + LIVE_CHATS * (step // CHAT_TURNS), step % CHAT_TURNS


def _chat(i: int) -> dict[str, Any]:
    session, turn = chat_position(i // 3)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a support agent. Use the tools."}
    ]
    for t in range(turn):
        messages.extend(_turn(session, t))
    messages.append(_turn(session, turn)[0])  # this turn's question; its answer comes later
    return {"model": "m", "messages": messages, "tools": _TOOLS}


def _volatile(i: int, rng: random.Random) -> dict[str, Any]:
    t = rng.randrange(SYSTEM_TEMPLATES)
    trng = random.Random(("system", t).__repr__())
    day, hour = 1 + i % 28, i % 24
    uid = f"{rng.getrandbits(32):08x}-{rng.getrandbits(16):04x}-4{rng.getrandbits(12):03x}-a{rng.getrandbits(12):03x}-{rng.getrandbits(48):012x}"
    system = (
        f"You are assistant {t}. {_paragraph(trng, 4)}\n"
        f"Today is 2025-03-{day:02d} {hour:02d}:{i % 60:02d} UTC. Session {uid}. "
        f"The user is {rng.choice(_NAMES)}.\n"
        f"Rules: {_paragraph(trng, 3)}"
    )
    body: dict[str, Any] = {
        "model": "m",
        "messages": _short_chat(rng, system, rng.randint(1, 4), _question(rng, f"Volatile {i}", 9)),
    }
    if t % 2:
        body["tools"] = _TOOLS
    return body


def make_body(i: int) -> tuple[str, dict[str, Any]]:
    """Request ``i`` of the stream: its kind and OpenAI body (same i, same bytes). Documents
    carry no embeddings here; :meth:`VectorStore.attach` adds them to ``rag`` requests."""
    rng = random.Random(i)
    if i % 3 == 0:
        return _rag(i, rng)
    if i % 3 == 1:
        return "chat", _chat(i)
    return "volatile", _volatile(i, rng)


# ---------------------------------------------------------------- the vector store


class VectorStore:
    """What a production retriever hands over with its documents: their embeddings (computed
    once when the corpus was indexed) and the query's (computed to search). Same model and
    truncation as the retrieval stage, so its scores are what the stage would compute; a
    private, cacheless service, so the pipeline's shared embedding cache sees none of it and
    the benchmark's memory does not grow with the queries it has embedded."""

    def __init__(self, max_seq_length: int | None) -> None:
        self.service = EmbeddingService(max_seq_length=max_seq_length, cache_size=0)
        texts = [scoring_text(Document.model_validate(_document(k))) for k in range(CORPUS_DOCS)]  # fmt: skip
        self.vectors = self.service.embed(texts)

    def attach(self, batch: list[tuple[str, dict[str, Any]]]) -> list[list[float] | None]:
        """Give each warm ``rag`` body's documents their vectors, and return the query vector
        of each request (None for the other kinds), embedding the queries in one batch."""
        at = [j for j, (kind, _) in enumerate(batch) if kind == "rag"]
        for j in at:
            for doc in batch[j][1]["documents"]:
                doc["embedding"] = self.vectors[int(doc["id"][4:])].tolist()
        queries = self.service.embed([batch[j][1]["messages"][-1]["content"] for j in at])
        out: list[list[float] | None] = [None] * len(batch)
        for j, vector in zip(at, queries):
            out[j] = vector.tolist()
        return out


def stream(n: int, store: VectorStore, start: int = 0) -> Iterator[tuple[int, str, dict[str, Any], list[float] | None]]:  # fmt: skip
    """``(i, kind, body, query_embedding)`` for requests ``start..n-1``, built ``CHUNK`` at a
    time (untimed) so the store embeds a batch of queries at once."""
    for lo in range(start, n, CHUNK):
        batch = [make_body(i) for i in range(lo, min(n, lo + CHUNK))]
        vectors = store.attach(batch)
        for j, ((kind, body), vector) in enumerate(zip(batch, vectors)):
            yield lo + j, kind, body, vector
