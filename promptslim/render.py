"""How what promptslim sends is written: kept documents into the prompt, and bodies as JSON.

One document format, used both for counting a document's tokens and for the message that is sent, so
the budget the stages plan with is the prompt the model gets. The shape is the one of the
"Lost in the Middle" study: ``Document [n](Title: t) text``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from .messages import Document

__all__ = [
    "DOCUMENTS_ROLE",
    "DocumentsPlacement",
    "document_line",
    "insert_documents",
    "json_bytes",
    "render_document",
    "render_documents",
]

#: role of the message that carries the documents (user: every chat template accepts it)
DOCUMENTS_ROLE = "user"

#: where ``insert_documents`` puts the documents (see there)
DocumentsPlacement = Literal["message", "merge"]


def render_document(document: Document, number: int) -> str:
    return document_line(number, document.title, document.text)


def document_line(number: int, title: str | None, text: str) -> str:
    """``render_document`` from the parts (the token counter renders without a Document)."""
    head = f"Document [{number}](Title: {title})" if title else f"Document [{number}]"
    return f"{head} {text}"


def render_documents(documents: Sequence[Document]) -> str:
    return "\n".join(render_document(d, i) for i, d in enumerate(documents, 1))


def insert_documents(
    messages: list[dict[str, Any]],
    documents: Sequence[Document],
    last_user: int | None,
    placement: DocumentsPlacement = "message",
) -> list[dict[str, Any]]:
    """Messages with the documents placed before the last user message (or at the end when
    there is none). The last user message is left as it is (invariant 1).

    ``placement="message"``: a user message of their own just before it. Chat templates that
    require user and assistant turns to alternate (Mistral's, Gemma's, Llama 2's) refuse the
    two user messages in a row this makes. ``"merge"``: appended to the message before it (an
    assistant turn, a tool result, the system prompt), after a blank line, so alternation
    holds and everything before the documents keeps its bytes, prefix cache included; with
    no message before it, a system message of their own opens the conversation.
    """
    if not documents:
        return messages
    text = render_documents(documents)
    at = last_user if last_user is not None else len(messages)
    if placement == "merge":
        if at == 0:
            return [{"role": "system", "content": text}, *messages]
        merged = _appended(messages[at - 1], text)
        return [*messages[: at - 1], merged, *messages[at:]]
    if placement != "message":
        raise ValueError(f"unknown documents placement {placement!r}; known: message, merge")
    block = {"role": DOCUMENTS_ROLE, "content": text}
    return [*messages[:at], block, *messages[at:]]


def _appended(message: dict[str, Any], text: str) -> dict[str, Any]:
    """``message`` with ``text`` after its content: a text part for a list of parts."""
    content = message.get("content")
    if isinstance(content, list):
        return {**message, "content": [*content, {"type": "text", "text": text}]}
    return {**message, "content": f"{content}\n\n{text}" if content else text}


def json_bytes(data: Any, *, indent: int | None = None) -> bytes:
    """``data`` as UTF-8 JSON: raw non-ASCII, unless it holds lone surrogates (valid JSON
    escapes that UTF-8 cannot encode raw); then ``\\u`` escapes, which read back the same, so
    a body goes on unchanged instead of failing."""
    try:
        return json.dumps(data, ensure_ascii=False, indent=indent).encode()
    except UnicodeEncodeError:
        return json.dumps(data, indent=indent).encode()
