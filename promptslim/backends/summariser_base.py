"""The summariser interface the history stage calls, and the helpers every summariser shares
(the transcript a model reads, clipping text to a token cap)."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from functools import cache
from typing import Any, ClassVar

from ..memo import BoundedCache
from ..text import split_sentences
from ..tokens import TokenCounter
from ..types import Message

__all__ = ["INSTRUCTION", "Summariser", "clip_to_tokens", "render_transcript"]

#: what the model-based summarisers are asked to do (kept short: small models follow short asks)
INSTRUCTION = (
    "Summarise the conversation below in a few short sentences. Keep every name, number, "
    "identifier, decision and open question. Write only the summary."
)


# ---------------------------------------------------------------- interface


class Summariser(ABC):
    """Turns messages into a summary of at most ``max_tokens`` tokens (in ``counter``).

    ``previous`` is the text of the summary these messages follow (a rolling summary); the
    result must cover both. Implementations are deterministic for the same input and settings,
    raise ``BackendError`` when their backend fails at run time, and keep every setting as an
    explicit keyword argument of ``__init__`` stored under the same name (``cache_id`` reads
    them back, so two differently configured summarisers never share cached summaries).
    """

    name: ClassVar[str]

    @abstractmethod
    def summarise(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int,
        counter: TokenCounter,
        previous: str | None = None,
    ) -> str: ...

    def get_params(self) -> dict[str, Any]:
        return {p: getattr(self, p) for p in _init_params(type(self))}

    def cache_id(self) -> str:
        """Identifies the summariser and the settings that change its output."""
        params = self.get_params()
        values = tuple(params.values())
        types = tuple(map(type, values))
        if _SCALARS.issuperset(types):  # immutable: memoised (it runs on every request)
            return _scalar_cache_id(self.name, tuple(params), values, types)
        return _cache_id(self.name, params)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.get_params() == other.get_params()  # type: ignore[attr-defined,unused-ignore]

    __hash__ = None  # type: ignore[assignment]


def _cache_id(name: str, params: dict[str, Any]) -> str:
    return f"{name}:{json.dumps(params, sort_keys=True, default=str)}"


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _scalar_cache_id(
    name: str, keys: tuple[str, ...], values: tuple[Any, ...], types: tuple[type, ...]
) -> str:
    """``_cache_id`` by the settings' names, values and the values' types (``True == 1`` as a
    key, but JSON writes them apart), memoised: the same few summarisers ask every request."""
    key = (name, keys, values, types)
    found = _SCALAR_IDS.get(key)
    if found is None:
        found = _cache_id(name, dict(zip(keys, values, strict=True)))
        _SCALAR_IDS.put(key, found, len(found) + 1)
    return found


#: summarisers' cache ids by their scalar settings (a handful of configurations per process)
_SCALAR_IDS: BoundedCache[tuple[Any, ...], str] = BoundedCache(
    max_entries=256, max_size=1_000_000
)


@cache
def _init_params(cls: type[Summariser]) -> tuple[str, ...]:
    """The keyword names of ``cls.__init__`` (read once per class: ``cache_id`` runs on every
    request that summarises, and ``inspect.signature`` costs more than the rest of it)."""
    import inspect

    return tuple(p for p in inspect.signature(cls.__init__).parameters if p != "self")


# ---------------------------------------------------------------- shared helpers


def render_transcript(messages: Sequence[Message]) -> list[str]:
    """One line per message, ``role: text``; tool calls shown by name (their JSON arguments are
    rarely worth summary space)."""
    lines: list[str] = []
    for m in messages:
        text = " ".join(m.text.split())
        if m.tool_calls:
            calls = ", ".join(c.name for c in m.tool_calls)
            text = f"{text} [called {calls}]".strip()
        if text:
            lines.append(f"{m.role}: {text}")
    return lines


def clip_to_tokens(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """``text`` cut at a sentence boundary so it fits ``max_tokens`` (models may run long)."""
    if counter.count(text) <= max_tokens:
        return text
    kept = ""
    for span in split_sentences(text):
        candidate = text[: span.end]
        if counter.count(candidate) > max_tokens:
            break
        kept = candidate
    return kept.strip()


def _tail_within(lines: Sequence[str], max_tokens: int, counter: TokenCounter) -> list[str]:
    """The newest lines that fit ``max_tokens`` (older context lives in the previous summary)."""
    kept: list[str] = []
    used = 0
    for line in reversed(lines):
        n = counter.count(line) + 1
        if used + n > max_tokens:
            break
        kept.append(line)
        used += n
    return kept[::-1]
