"""Tokens of messages, documents, tool schemas and whole requests, in one counter.

A message's count is its text's count (memoised by the counter, by the text) plus the
chat-format overhead. A request's per-message counts and total are memoised for the request
object (``promptslim.request_memo``): every stage of a pipeline counts the request it is given,
and a stage that changes nothing hands the same object on. Each memo keeps the lists it counted
and is reused only while the request's lists still hold the same (or equal) items.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from . import request_memo
from .counters import (
    DEFAULT_CACHE_CHARS,
    MESSAGE_OVERHEAD,
    NAME_OVERHEAD,
    REPLY_PRIMING,
    TokenCounter,
    get_counter,
)
from .memo import BoundedCache
from .render import document_line

if TYPE_CHECKING:
    from .types import Document, Message, Request, ToolCall

__all__ = [
    "count_document",
    "count_documents",
    "count_message",
    "count_messages",
    "count_request",
    "count_tools",
    "message_counts",
]


# ---------------------------------------------------------------- messages


def count_message(message: Message, counter: TokenCounter | None = None) -> int:
    """Tokens one message adds to a chat prompt, overhead included."""
    counter = counter or get_counter()
    count = counter.count
    content = message.content
    name = message.name
    calls = message.tool_calls
    if type(content) is str and name is None and calls is None:  # most messages
        return MESSAGE_OVERHEAD + count(content)
    n = MESSAGE_OVERHEAD + count(message.text)
    if name:
        n += NAME_OVERHEAD + count(name)
    if calls:
        n += _calls_tokens(calls, count)
    return n


def _calls_tokens(calls: Sequence[ToolCall], count: Callable[[str], int]) -> int:
    """Tokens of tool calls' function names and arguments, as ``count_message`` adds them."""
    return sum([count(call.name) + count(call.payload) for call in calls])


def count_messages(messages: Iterable[Message], counter: TokenCounter | None = None) -> int:
    """Tokens of a list of messages as a prompt, including the reply priming."""
    return REPLY_PRIMING + sum(_each_message(messages, counter or get_counter()))


def _each_message(messages: Iterable[Message], counter: TokenCounter) -> list[int]:
    count = counter.count
    out: list[int] = []
    # count_message inlined for the common case (a plain string, no name, no tool calls):
    # this loop runs over every message of every request, where call overhead is most of it
    for m in messages:
        content = m.content
        calls = m.tool_calls
        if m.name is not None:
            out.append(count_message(m, counter))
        elif type(content) is str and calls is None:
            out.append(MESSAGE_OVERHEAD + count(content))
        elif content is None and calls:
            # an assistant's tool calls (a tenth of a tool-using history): count_message's
            # sum, its text "" included, without its call and the ``text`` property
            out.append(MESSAGE_OVERHEAD + count("") + _calls_tokens(calls, count))
        else:
            out.append(count_message(m, counter))
    return out


def message_counts(request: Request, counter: TokenCounter | None = None) -> tuple[int, ...]:
    """Each message's ``count_message``, in order; memoised for the request like
    ``count_request`` (which sums them), so the stages that split a budget by message do not
    walk a long history again."""
    counter = counter or get_counter(request.tokenizer)
    messages = request.messages
    memo: tuple[str, list[Message], tuple[int, ...]] | None = request_memo.get(request, "counts")
    if memo is not None and memo[0] == counter.name and memo[1] == messages:
        return memo[2]
    counts = tuple(_each_message(messages, counter))
    request_memo.put(request, "counts", (counter.name, messages[:], counts))
    return counts


# ---------------------------------------------------------------- documents


def count_document(document: Document, counter: TokenCounter | None = None) -> int:
    """Tokens a document adds to the documents message (its rendered line and the newline)."""
    counter = counter or get_counter()
    return _document_tokens(counter, document.title, document.text)


def _document_tokens(counter: TokenCounter, title: str | None, text: str) -> int:
    # memoised by the strings themselves (whose hashes Python keeps): rendering the line
    # anew would copy and hash the whole document on every count
    key = (counter.name, title, text)
    hit = _DOCUMENT_TOKENS.get(key)
    if hit is not None:
        return hit
    # the document's number is a token or two; count it as a two-digit number. Encoded, not
    # counted through the counter's memo: that would keep a copy of the whole rendered
    # document alive beside the document's own text, which this memo's key already holds
    n = len(counter.encode(document_line(10, title, text) + "\n"))
    _DOCUMENT_TOKENS.put(key, n, len(text) + len(title or "") + 1)
    return n


#: documents' counts by (counter, title, text), bounded by the characters they keep alive
_DOCUMENT_TOKENS: BoundedCache[tuple[str, str | None, str], int] = BoundedCache(
    max_entries=16_384, max_size=DEFAULT_CACHE_CHARS
)


def count_documents(documents: Sequence[Document], counter: TokenCounter | None = None) -> int:
    """Tokens of the documents message (0 when there are no documents)."""
    if not documents:
        return 0
    counter = counter or get_counter()
    total = MESSAGE_OVERHEAD + sum([count_document(d, counter) for d in documents])
    if len(documents) >= 1000:  # count_document counts a two-digit number; [1000] may be more
        total += sum(_number_extra(counter, i) for i in range(1000, len(documents) + 1))
    return total


def _number_extra(counter: TokenCounter, number: int) -> int:
    """Tokens document ``number``'s line takes beyond what ``count_document`` counts."""
    return max(0, counter.count(f"Document [{number}]") - counter.count("Document [10]"))


# ---------------------------------------------------------------- requests and tools


def count_request(request: Request, counter: TokenCounter | None = None) -> int:
    """Prompt tokens of the request as it will be sent: messages, the documents message and
    the tool schemas (``count_tools``).

    Memoised for the request while its messages, documents and tools are the objects counted.
    """
    counter = counter or get_counter(request.tokenizer)
    messages, documents, tools = request.messages, request.documents, request.tools
    memo: tuple[str, list[Message], list[Document], Any, int] | None = request_memo.get(
        request, "total"
    )
    # the lists are compared item by item, identity first: a few hundred ns for a long chat.
    # Frozen models cannot be reassigned, but a list field can be edited in place; a memo
    # kept only by request identity would then go stale.
    if (
        memo is not None
        and memo[0] == counter.name
        and memo[1] == messages
        and memo[2] == documents
        and memo[3] is tools
    ):
        return memo[4]
    total = (
        REPLY_PRIMING
        + sum(message_counts(request, counter))
        + count_documents(documents, counter)
        + count_tools(tools, counter)
    )
    request_memo.put(request, "total", (counter.name, messages[:], documents[:], tools, total))
    return total


def count_tools(tools: Sequence[dict[str, Any]] | None, counter: TokenCounter | None = None) -> int:
    """Tokens of the tool schemas: a chat template writes them into the prompt, so they are
    prefill like the messages. Counted as their compact JSON, which is what most templates
    write (the exact wrapping differs by model; the JSON is nearly all of it)."""
    if not tools:
        return 0
    counter = counter or get_counter()
    key = (id(tools), counter.name)
    found = _TOOLS_COUNTS.get(key)
    if found is not None and found[0] is tools:
        return found[1]
    n = counter.count(json.dumps(tools, separators=(",", ":"), ensure_ascii=False))
    _TOOLS_COUNTS.put(key, (tools, n), 1)  # the list is held, so its id is not reused meanwhile
    return n


#: count_tools' memo by list identity: serialising ten schemas costs ~70 us, and one request
#: counts the same list at every stage (the prefix stage's canonical list is even shared
#: between requests). Tool lists are treated as read-only once sent, as the stages do.
_TOOLS_COUNTS: BoundedCache[tuple[int, str], tuple[Any, int]] = BoundedCache(
    max_entries=256, max_size=256
)
