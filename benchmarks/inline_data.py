"""``bench_structured.py``'s inline shapes: an item's NQ passages written into the user's
message by a prompt template, with no ``Request.documents`` (``INLINE``), as a client that
calls a chat API, or a chain that stuffs its documents into the prompt, sends them:

- ``inline_template4``: four titled passages to a chunk, the chunks inside LlamaIndex's
  question-answering template (``Context information is below.``, fenced by dashes, then
  ``Query:``);
- ``inline_elements``: the 20 passages as the elements of a ``<documents>`` block, each
  ``<document index>`` holding its ``<source>`` (the title) and ``<document_content>``, the
  question after the block (the layout Anthropic's long-context guide gives);
- ``inline_lead_in4``: the chunks of four after "Answer the question based on the following
  documents.", the question last, with no mark of its own.

What is cut is the user's message: ``token_ratio`` is of its tokens, and ``evidence`` is looked
for in what is sent less the question.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from shapes_data import chunked

from promptslim.bench.datasets import BenchItem
from promptslim.types import Message

__all__ = ["INLINE"]

LLAMAINDEX = (
    "Context information is below.\n---------------------\n{c}\n---------------------\n"
    "Given the context information and not prior knowledge, answer the query.\n"
    "Query: {q}\nAnswer: "
)


def _asked(item: BenchItem, text: str) -> BenchItem:
    """``item`` with ``text`` as its user's message, no documents and no ``Request.query``;
    ``metadata["question"]`` keeps the question (the evidence is looked for outside it)."""
    messages = [*item.request.messages[:-1], Message(role="user", content=text)]
    request = item.request.replace(messages=messages, documents=[], query=None)
    return BenchItem(item.id, request, item.answers, {**item.metadata, "question": _question(item)})


def _chunks(item: BenchItem, rng: random.Random) -> str:
    docs = chunked(item, 4, rng.randrange(4)).request.documents
    return "\n\n".join(d.text for d in docs)


def _question(item: BenchItem) -> str:
    return item.request.query or item.request.effective_query


def template4(item: BenchItem, rng: random.Random) -> BenchItem:
    return _asked(item, LLAMAINDEX.format(c=_chunks(item, rng), q=_question(item)))


def elements(item: BenchItem, rng: random.Random) -> BenchItem:
    body = "\n".join(
        f'<document index="{k + 1}">\n<source>{d.title}</source>\n'
        f"<document_content>\n{d.text}\n</document_content>\n</document>"
        for k, d in enumerate(item.request.documents)
    )
    return _asked(item, f"<documents>\n{body}\n</documents>\n\n{_question(item)}")


def lead_in4(item: BenchItem, rng: random.Random) -> BenchItem:
    lead = "Answer the question based on the following documents."
    return _asked(item, f"{lead}\n\n{_chunks(item, rng)}\n\n{_question(item)}")


INLINE: dict[str, Callable[[BenchItem, random.Random], BenchItem]] = {
    "inline_template4": template4,
    "inline_elements": elements,
    "inline_lead_in4": lead_in4,
}
