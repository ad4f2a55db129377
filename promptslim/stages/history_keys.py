"""Summary-cache keys of history chunks, memoised by the chunks' identity.

A summary step is cached under SHA-256 of what it summarises (``_chunk_key``); a shared store
keeps these keys across processes and versions, so their bytes must not change. Finding a
chunk seen before by its messages' fields (``_ChunkKeys``) spares building and hashing its
wire text on every request of a conversation.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress, count
from operator import attrgetter

from ..memo import BoundedCache
from ..messages import Message
from .history_hashing import _calls_identity, _digest, _plain_text, _wire_text

__all__: list[str] = []


def _span_fields(
    messages: Sequence[Message], spans: Sequence[list[int]]
) -> list[tuple[object, ...]] | None:
    """Per span (of message indices, ascending, the spans in order), its messages' fields as
    one tuple of one item per message: ``(role, content, name, tool_call_id)``, with the
    calls' fields after these for a message with tool calls. None when a message has extra
    keys (``_general_identity`` then).

    Built by C calls (``map`` of getters) over the spans' whole window: this runs over every
    folded message of every request, where a Python test per message per step was a fifth of
    a warm request."""
    lo = spans[0][0]
    window = messages[lo : spans[-1][-1] + 1]
    if any(map(_EXTRA, window)):
        return None
    fields: list[tuple[object, ...]] = list(map(_IDENTITY, window))
    for k in list(compress(count(), map(_TOOL_CALLS, window))):  # those with tool calls
        fields[k] = (*fields[k], _calls_identity(window[k]))
    out: list[tuple[object, ...]] = []
    for span in spans:
        a, b = span[0] - lo, span[-1] - lo + 1
        out.append(
            tuple(fields[a:b]) if b - a == len(span) else tuple(fields[i - lo] for i in span)
        )
    return out


_EXTRA = attrgetter("model_extra")
_IDENTITY = attrgetter("role", "content", "name", "tool_call_id")
_TOOL_CALLS = attrgetter("tool_calls")


def _general_identity(
    messages: Sequence[Message], span: list[int], head: str
) -> tuple[object, ...]:
    """A chunk's identity when ``_span_fields`` cannot give it (extra keys, content parts):
    ``head``, then per message its role and content when that is all it has, else ``""`` (no
    role is empty, so the two never meet) and a tuple of every field the wire text holds
    (the wire text itself for content parts or extra keys). It never equals a fast one,
    ``(head, fields)``: its second item is a string, not a tuple."""
    out: list[object] = [head]
    for i in span:
        m = messages[i]
        plain = _plain_text(m)
        if plain is not None:
            out += (m.role, plain)
        elif m.model_extra or not (m.content is None or type(m.content) is str):
            out += ("", _wire_text(m))
        else:
            out += ("", (m.role, m.content, m.name, m.tool_call_id, _calls_identity(m)))
    return tuple(out)


def _chunk_data(messages: Sequence[Message], span: list[int], head: str) -> str:
    return "\x1e".join([head, *(_wire_text(messages[i]) for i in span)])


def _chunk_key(messages: Sequence[Message], span: list[int], head: str) -> str:
    """The summary cache's key for a step: SHA-256 over ``head`` and the chunk's wire texts
    (a shared store keeps these across processes and versions: the bytes must not change)."""
    return _digest(_chunk_data(messages, span, head))


#: the first summary key's head, by its settings (the same on nearly every request)
_head_digest: BoundedCache[str, str] = BoundedCache(
    max_entries=256, max_size=1_000_000, compute=_digest
)


class _ChunkKeys:
    """Summary keys of chunks seen before, by their identity: ``(head, fields)`` from
    ``_span_fields``, else ``_general_identity``.

    A conversation resends its whole history with every request, parsed anew: the folded
    chunks come back as new objects with the same text, and building their wire texts and
    hashing them was the largest part of a warm request. A dict keyed by the tuple of strings
    finds them by each string's hash, which Python keeps on the string once computed (the
    token counter's lookup computed it), and confirms a hit by comparing the strings
    themselves: a hit is never a different chunk. The tuples keep their strings alive, so the
    memo is bounded by the characters it holds (oldest entries go first)."""

    def __init__(self, max_chars: int = 4_000_000, max_entries: int = 65_536) -> None:
        self.cache: BoundedCache[tuple[object, ...], str] = BoundedCache(
            max_entries=max_entries, max_size=max_chars
        )

    def key(self, messages: Sequence[Message], span: list[int], head: str) -> str:
        return self.chain(messages, [span], head)[-1]

    def chain(
        self, messages: Sequence[Message], spans: Sequence[list[int]], head: str
    ) -> list[str]:
        """The keys of consecutive summary steps: step ``j`` summarises ``spans[j]`` and its
        head is step ``j - 1``'s key (``head`` for the first)."""
        fields = _span_fields(messages, spans) if spans else None
        keys: list[str] = []
        for j, span in enumerate(spans):
            ident: tuple[object, ...] | None = None if fields is None else (head, fields[j])
            hit: str | None = None
            if ident is not None:
                try:
                    hit = self.cache.get(ident)
                except TypeError:  # content parts: a list, unhashable
                    ident = None
            if ident is None:
                ident = _general_identity(messages, span, head)
                hit = self.cache.get(ident)
            head = hit if hit is not None else self._store(ident, messages, span, head)
            keys.append(head)
        return keys

    def _store(
        self, ident: tuple[object, ...], messages: Sequence[Message], span: list[int], head: str
    ) -> str:
        data = _chunk_data(messages, span, head)
        key = _digest(data)
        self.cache.put(ident, key, len(data))
        return key


_CHUNK_KEYS = _ChunkKeys()
