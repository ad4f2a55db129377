"""The history stage: fit the conversation into its share of the budget, cache-friendly.

What it works on is the *history span*: the messages between the stable prefix
(``request.prefix_end()``, never touched — invariant 7) and the last user message (never touched
— invariant 1); anything after the last user message (an agent's pending tool round) is kept too.

Units. A tool round — an assistant message with ``tool_calls`` and the tool results that follow
it — is one *atom* (invariant 4). With ``start_on="user"`` (default) the unit of trimming is a
whole turn: a user message and every atom up to the next user message, so whatever is kept
after trimming starts with a user message, never with an assistant reply or an orphan tool
result. With ``start_on="any"`` the unit is the atom. Pinned messages (``Message.pinned``, the
first user message with ``pin_first_user=True``, and the prefix stage's moved-volatile context
message, which it pins) always stay, in their original order; pinning an atom's message pins
the whole atom. Units are only ever removed from the *front* of the span: the kept history is a
suffix of units, plus the pinned atoms that came before it.

Strategies.

- ``last``: keep the newest units that fit; drop the rest.
- ``summarize``: keep the newest units that fit next to a summary message; the dropped units
  are summarised into it. The cut moves with every new turn (a sliding window), so the summary
  and every message after it change on every request: a prefix-cache miss after the pinned part.
- ``cache_aware`` (default): the same summary-plus-recent-turns shape, but the fold point only
  moves in discrete steps, so consecutive requests share everything up to the newest turn and
  the summary message stays byte-identical until the next step.

The cache-aware fold rule (stateless: decided from the request alone, so request N and N+1 of
a conversation agree without the library remembering anything):

1. ``avail`` = the history cap from ``allocate`` minus the pinned messages' tokens: what this
   request's history may use. The grid is laid on a steadier figure, ``basis``: the cap the
   request would get if its last user message took no tokens (``Allocation.history_basis``,
   less the pinned tokens), rounded *down* to a coarse grid (8 steps per power of two: 2,460
   becomes 2,304). Questions differ in length from request to request; ``basis`` does not
   see them, so consecutive requests agree on the grid and on the summary's size.
2. ``room`` = ``avail`` minus the summary message's reserve (``summary_tokens``, at most a
   quarter of ``basis`` and half of ``avail``, plus the header and message overhead).
3. Grid: walk the units from the start of the span, summing their (unpinned) tokens; a *fold
   boundary* sits at every unit where that running sum crosses a multiple of ``G`` tokens,
   ``G = fold_tokens`` or ``fold_fraction`` of ``basis`` less the reserve. Earlier units
   never change as the conversation grows, so the boundaries never move.
4. The fold point is the first boundary whose suffix (everything from it to the end of the
   span) fits ``room``. With ``fold_fraction=0.5``, each time the kept part overflows the fold
   point jumps by about half of ``room`` at once; between jumps it stays put. Only when the
   newest units alone are too big for any boundary is the smallest fitting unit cut taken.
5. The summary is rolling along the grid: chunk ``j`` (units between boundaries ``j-1`` and
   ``j``) is summarised together with the summary of chunks ``< j``. Each step is cached under
   a hash of the turns it covers (and the summariser's settings), so a fold costs one
   summariser call and everything else is a cache lookup.

Fingerprints. The report's details carry ``message_hashes`` (one 16-hex-digit SHA-256 prefix per
output message) and ``history_fingerprint`` (the same joined by ``"."``). Pass either back as
``run(..., previous=...)`` on the next request and the report states ``unchanged_messages`` and
``unchanged_tokens`` — the leading messages identical to the previous request's, counted at
message granularity (a lower bound on what a prefix cache reuses) — and sets
``Report.cacheable_tokens`` to that count.
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate, compress, count, pairwise
from operator import attrgetter, itemgetter
from typing import Any, Literal

from ..backends.summarisers import (
    SUMMARISERS,
    ExtractiveSummariser,
    LRUSummaryCache,
    Summariser,
    SummaryCache,
    clip_to_tokens,
)
from ..backends.summary_store import summary_cache_from_spec
from ..budget import _any_pinned, allocate, history_span
from ..errors import BudgetInfeasible, ConfigError
from ..tokens import MESSAGE_OVERHEAD, TokenCounter, count_message, message_counts
from ..types import Budget, Message, Request, Result
from .base import BaseStage, StageLog, run_with_fallback

__all__ = [
    "DEFAULT_SUMMARY_CACHE",
    "STRATEGIES",
    "SUMMARY_HEADER",
    "HistoryStage",
    "fingerprint",
    "message_hash",
    "message_hashes",
    "unchanged_leading",
]

STRATEGIES: tuple[str, ...] = ("cache_aware", "last", "summarize")
SUMMARY_HEADER = "Summary of the earlier conversation:"
#: the process-wide summary cache used when a stage is given none
DEFAULT_SUMMARY_CACHE: SummaryCache = LRUSummaryCache(maxsize=4096)
_MIN_SUMMARY_TOKENS = 16

Strategy = Literal["cache_aware", "last", "summarize"]


# ---------------------------------------------------------------- fingerprints


def _wire_text(message: Message) -> str:
    """What the message sends, as one string (fast paths for plain and tool-call messages)."""
    content = message.content
    if message.__pydantic_extra__ or not isinstance(content, (str, type(None))):
        return json.dumps(message.to_openai(), sort_keys=True, ensure_ascii=False)
    if message.tool_calls or message.name or message.tool_call_id:
        return f"{message.role}\x1f{_calls_json(message)}\x1f{content or ''}"
    return _plain_wire(message.role, content or "")


def _plain_wire(role: str, content: str) -> str:
    return f"{role}\x1f{content}"


def _plain_text(message: Message) -> str | None:
    """The content of a message that is a role and a text and nothing else (most of a
    history), else None: such a message's wire text is ``_plain_wire(role, content)``."""
    content = message.content
    if (
        type(content) is str
        and message.tool_calls is None
        and message.name is None
        and message.tool_call_id is None
        and not message.__pydantic_extra__
    ):
        return content
    return None


_json_str = json.encoder.encode_basestring_ascii  # what json.dumps writes for a str


def _calls_json(message: Message) -> str:
    """``json.dumps([name, tool_call_id, [call.model_dump(), ...]], sort_keys=True)``, written
    out directly when no call carries extra fields (json.dumps costs more than the rest of a
    request's hashing); the bytes are the same."""
    calls = message.tool_calls
    name, call_id = message.name, message.tool_call_id
    if calls and any(c.__pydantic_extra__ or c.function.__pydantic_extra__ for c in calls):
        dumped = [c.model_dump() for c in calls]
        return json.dumps([name, call_id, dumped], sort_keys=True)
    head = (
        f"[{'null' if name is None else _json_str(name)}, "
        f"{'null' if call_id is None else _json_str(call_id)}, "
    )
    if not calls:  # a tool result (a fifth of a tool-using history): no join to set up
        return head + "[]]"
    parts = ", ".join(
        f'{{"function": {{"arguments": {_json_str(c.function.arguments)}, "name": '
        f'{_json_str(c.function.name)}}}, "id": {_json_str(c.id)}, "type": {_json_str(c.type)}}}'
        for c in calls
    )
    return f"{head}[{parts}]]"


def message_hash(message: Message) -> str:
    """16 hex digits of SHA-256 over what the message sends (``pinned`` is not sent). SHA-256,
    as for the prefix fingerprint: with the CPU's SHA instructions it hashed a 67 KB history
    2.5x faster than BLAKE2b here."""
    text = _plain_text(message)
    if text is not None:
        return _plain_hash(message.role, text)
    content = message.content
    if message.__pydantic_extra__ or not (content is None or type(content) is str):
        return _digest(_wire_text(message), 16)
    # a tool call or result (a quarter of a tool-using history): memoised by its fields, as
    # _ChunkKeys finds chunks. Equal fields send equal bytes: the wire text is made of them
    key = (message.role, content, message.name, message.tool_call_id, _calls_identity(message))
    found = _FIELD_HASHES.get(key)
    if found is None:
        wire = _wire_text(message)
        found = _digest(wire, 16)
        _FIELD_HASHES.put(key, found, len(wire))
    return found


_HASH_MEMO_SIZE = 16_384  # messages whose hashes are memoised, of each kind


@functools.lru_cache(maxsize=_HASH_MEMO_SIZE)
def _plain_hash(role: str, content: str) -> str:
    """A role-and-text message's hash, memoised by the two strings: a conversation's kept
    turns come back with every request, parsed anew (the token counter memoises by text for
    the same reason)."""
    return _digest(_plain_wire(role, content), 16)


def message_hashes(messages: Sequence[Message]) -> list[str]:
    return [message_hash(m) for m in messages]


def fingerprint(messages: Sequence[Message]) -> str:
    """The messages' hashes joined by ``"."``: what ``previous=`` accepts on the next request."""
    return ".".join(message_hashes(messages))


def unchanged_leading(
    previous: str | Sequence[str],
    messages: Sequence[Message],
    counter: TokenCounter,
    hashes: Sequence[str] | None = None,
) -> tuple[int, int]:
    """``(messages, tokens)``: how many leading messages equal the previous request's, and
    their tokens (``count_message``, overhead included)."""
    prev = previous.split(".") if isinstance(previous, str) else list(previous)
    hashes = hashes if hashes is not None else message_hashes(messages)
    n = 0
    while n < len(prev) and n < len(hashes) and prev[n] == hashes[n]:
        n += 1
    return n, sum(count_message(m, counter) for m in messages[:n])


# ---------------------------------------------------------------- summary keys


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
    # the fields from each model's __dict__ (where pydantic keeps them) by itemgetter: a
    # fifth cheaper than attrgetter on the models, whose attribute lookup goes through
    # pydantic's __getattr__ hook
    values = list(map(_VALUES, window))
    fields: list[tuple[object, ...]] = list(map(_IDENTITY, values))
    for k in list(compress(count(), map(_TOOL_CALLS, values))):  # those with tool calls
        fields[k] = (*fields[k], _calls_identity(window[k]))
    out: list[tuple[object, ...]] = []
    for span in spans:
        a, b = span[0] - lo, span[-1] - lo + 1
        out.append(tuple(fields[a:b]) if b - a == len(span) else tuple(fields[i - lo] for i in span))
    return out


_EXTRA = attrgetter("__pydantic_extra__")
_VALUES = attrgetter("__dict__")
_IDENTITY = itemgetter("role", "content", "name", "tool_call_id")
_TOOL_CALLS = itemgetter("tool_calls")


def _calls_identity(message: Message) -> object:
    """A message's tool calls as a tuple of their fields (their JSON with extra keys)."""
    out = []
    for call in message.tool_calls or ():
        function = call.function
        if call.__pydantic_extra__ or function.__pydantic_extra__:
            return _calls_json(message)
        out.append((call.id, call.type, function.name, function.arguments))
    return tuple(out)


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
        elif m.__pydantic_extra__ or not (m.content is None or type(m.content) is str):
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


def _digest(data: str, digits: int = 32) -> str:
    """The first ``digits`` hex digits of SHA-256 over ``data`` (16 for a message's hash, 32
    for a summary key)."""
    return hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()[:digits]


#: the first summary key's head, by its settings (the same on nearly every request)
_head_digest = functools.lru_cache(maxsize=256)(_digest)


class _CharBoundedMemo:
    """Strings by keys that are tuples of strings, bounded by the characters the keys keep
    alive (and, when given, by entries): the oldest entries go first. A hit compares the key's
    strings themselves, so it is never another key's value."""

    def __init__(self, max_chars: int = 4_000_000, max_entries: int | None = None) -> None:
        self.max_chars = max_chars
        self.max_entries = max_entries
        self._keys: dict[tuple[object, ...], tuple[str, int]] = {}
        self._chars = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[object, ...]) -> str | None:
        """The value, or None; TypeError for a key holding a list (content parts)."""
        hit = self._keys.get(key)
        return None if hit is None else hit[0]

    def put(self, key: tuple[object, ...], value: str, chars: int) -> None:
        if chars > self.max_chars:
            return
        entries = self.max_entries
        with self._lock:
            while self._keys and (
                self._chars + chars > self.max_chars
                or (entries is not None and len(self._keys) >= entries)
            ):
                self._chars -= self._keys.pop(next(iter(self._keys)))[1]
            if key not in self._keys:
                self._keys[key] = (value, chars)
                self._chars += chars


class _ChunkKeys(_CharBoundedMemo):
    """Summary keys of chunks seen before, by their identity: ``(head, fields)`` from
    ``_span_fields``, else ``_general_identity``.

    A conversation resends its whole history with every request, parsed anew: the folded
    chunks come back as new objects with the same text, and building their wire texts and
    hashing them was the largest part of a warm request. A dict keyed by the tuple of strings
    finds them by each string's hash, which Python keeps on the string once computed (the
    token counter's lookup computed it), and confirms a hit by comparing the strings
    themselves: a hit is never a different chunk. The tuples keep their strings alive, so the
    memo is bounded by the characters it holds (oldest entries go first)."""

    def key(self, messages: Sequence[Message], span: list[int], head: str) -> str:
        return self.chain(messages, [span], head)[-1]

    def chain(self, messages: Sequence[Message], spans: Sequence[list[int]], head: str) -> list[str]:
        """The keys of consecutive summary steps: step ``j`` summarises ``spans[j]`` and its
        head is step ``j - 1``'s key (``head`` for the first)."""
        fields = _span_fields(messages, spans) if spans else None
        keys: list[str] = []
        for j, span in enumerate(spans):
            ident: tuple[object, ...] | None = None if fields is None else (head, fields[j])
            hit: str | None = None
            if ident is not None:
                try:
                    hit = self.get(ident)
                except TypeError:  # content parts: a list, unhashable
                    ident = None
            if ident is None:
                ident = _general_identity(messages, span, head)
                hit = self.get(ident)
            head = hit if hit is not None else self._store(ident, messages, span, head)
            keys.append(head)
        return keys

    def _store(
        self, ident: tuple[object, ...], messages: Sequence[Message], span: list[int], head: str
    ) -> str:
        data = _chunk_data(messages, span, head)
        key = _digest(data)
        self.put(ident, key, len(data))
        return key


_CHUNK_KEYS = _ChunkKeys()
#: message_hash's memo for messages with tool calls, a name or a call id, by their fields
_FIELD_HASHES = _CharBoundedMemo(max_entries=_HASH_MEMO_SIZE)


# ---------------------------------------------------------------- units


@dataclass(slots=True)
class _Unit:
    """One unit of trimming, ``messages[first:stop]`` (units partition the span in order), and
    its token split. ``atoms`` (lists of message indices) and which of them are pinned are
    None from ``_turn_units``, which runs only when nothing is pinned: they are read only
    where something is."""

    first: int
    stop: int
    droppable: int = 0  # tokens of unpinned atoms
    pinned: int = 0  # tokens of pinned atoms
    atoms: list[list[int]] | None = None
    pinned_atoms: list[bool] | None = None


def _atoms(messages: Sequence[Message], start: int, end: int) -> list[list[int]]:
    """Message indices grouped so that an assistant's tool calls and their results are one
    atom. A result joins the atom of the call it answers, with everything between (parallel
    calls answered around an assistant note); a result with no known call (an orphan, or a
    legacy ``function`` message) joins the atom before it. So a tool result can never lead the
    kept history, nor outlive its call."""
    atoms: list[list[int]] = []
    call_atom: dict[str, int] = {}  # tool call id -> index of the atom that made the call
    for i in range(start, end):
        m = messages[i]
        if m.role in ("tool", "function") and atoms:
            home = call_atom.get(m.tool_call_id or "", len(atoms) - 1)
            if home < len(atoms) - 1:  # answered after other messages: they join the round
                atoms[home:] = [[j for atom in atoms[home:] for j in atom]]
                for call_id, at in call_atom.items():  # calls made in the merged atoms
                    if at > home:
                        call_atom[call_id] = home
            atoms[-1].append(i)
        else:
            atoms.append([i])
        for call in m.tool_calls or ():
            call_atom[call.id] = len(atoms) - 1
    return atoms


def _units(
    messages: Sequence[Message],
    atoms: list[list[int]],
    pinned: set[int],
    start_on: str,
    tokens_of: Sequence[int],
) -> list[_Unit]:
    """Atoms grouped into units; ``tokens_of[i]`` is message ``i``'s ``count_message``."""
    units: list[_Unit] = []
    unit = _Unit(0, 0)
    unit_atoms: list[list[int]] = []
    unit_pins: list[bool] = []
    by_atom = start_on == "any"
    for atom in atoms:
        first = atom[0]
        if not units or by_atom or messages[first].role == "user":
            unit_atoms, unit_pins = [], []
            unit = _Unit(first, first, 0, 0, unit_atoms, unit_pins)
            units.append(unit)
        unit.stop = atom[-1] + 1
        if len(atom) == 1:  # most atoms: no generator needed
            is_pinned = first in pinned
            tokens = tokens_of[first]
        else:
            is_pinned = not pinned.isdisjoint(atom)
            tokens = sum(tokens_of[i] for i in atom)
        unit_atoms.append(atom)
        unit_pins.append(is_pinned)
        if is_pinned:
            unit.pinned += tokens
        else:
            unit.droppable += tokens
    return units


def _turn_units(
    messages: Sequence[Message], start: int, end: int, tokens_of: Sequence[int]
) -> list[_Unit] | None:
    """``_units(messages, _atoms(messages, start, end), set(), "user", tokens_of)`` in one
    pass, for the common case (nothing pinned, whole turns), without the atoms: the two passes
    and their per-atom bookkeeping were over a quarter of a warm request. None when a tool
    result answers a call made before the atom just built (the general path merges atoms then)."""
    firsts: list[int] = []  # each unit's first message
    atoms = 0
    made: dict[str, int] = {}  # tool call id -> number of the atom that made the call
    for i in range(start, end):
        m = messages[i].__dict__  # its fields: see _span_fields
        role = m["role"]
        if (role == "tool" or role == "function") and atoms:
            if made and made.get(m["tool_call_id"] or "", atoms) != atoms:
                return None
        else:
            atoms += 1
            if role == "user" or not firsts:
                firsts.append(i)
        if m["tool_calls"]:
            for call in m["tool_calls"]:
                made[call.id] = atoms
    sums = list(accumulate(tokens_of[start:end], initial=0))
    firsts.append(end)
    return [_Unit(a, b, sums[b - start] - sums[a - start]) for a, b in pairwise(firsts)]


def _quantize(n: int) -> int:
    """``n`` rounded down to 8 steps per power of two (2,460 -> 2,304; 1,000 -> 960)."""
    if n < 64:
        return n
    step = 1 << (n.bit_length() - 4)
    return n // step * step


# ---------------------------------------------------------------- the stage


class HistoryStage(BaseStage):
    """Fits the history span into its budget share; see the module docstring for the rules.

    ``summariser`` is a name in ``SUMMARISERS`` (``extractive``, ``lm``, ``openai``) built with
    ``summariser_options``, or a ``Summariser`` instance. ``summary_cache`` is any
    ``SummaryCache`` (default: a process-wide in-memory LRU), or its name in a config:
    ``"memory"`` (that default) or ``"sqlite:PATH"`` (``SqliteSummaryCache``: one file shared
    by every process on the host, such as the workers of ``promptslim serve --workers``). A
    summariser that is missing, fails or exceeds ``time_limit_ms`` (per summariser call) is
    replaced by the extractive one for that request, with a warning; ``strict=True`` raises
    instead.
    """

    name = "history"

    def __init__(
        self,
        *,
        strategy: Strategy = "cache_aware",
        summariser: str | Summariser = "extractive",
        summariser_options: dict[str, Any] | None = None,
        summary_tokens: int = 256,
        fold_fraction: float = 0.5,
        fold_tokens: int | None = None,
        pin_first_user: bool = False,
        start_on: Literal["user", "any"] = "user",
        summary_role: Literal["system", "user", "assistant"] = "system",
        summary_cache: SummaryCache | str | None = None,
        strict: bool = False,
        time_limit_ms: float | None = None,
    ) -> None:
        if strategy not in STRATEGIES:
            raise ConfigError(f"must be one of {', '.join(STRATEGIES)}", field="strategy")
        if not isinstance(summary_tokens, int) or summary_tokens < _MIN_SUMMARY_TOKENS:
            raise ConfigError(f"must be an int >= {_MIN_SUMMARY_TOKENS}", field="summary_tokens")
        if not 0.0 < fold_fraction < 1.0:
            raise ConfigError("must be between 0 and 1 (exclusive)", field="fold_fraction")
        if fold_tokens is not None and (not isinstance(fold_tokens, int) or fold_tokens < 1):
            raise ConfigError("must be an int >= 1 or None", field="fold_tokens")
        if start_on not in ("user", "any"):
            raise ConfigError("must be 'user' or 'any'", field="start_on")
        if summary_role not in ("system", "user", "assistant"):
            raise ConfigError("must be 'system', 'user' or 'assistant'", field="summary_role")
        if isinstance(summary_cache, str):  # a config's name for one: "memory", "sqlite:PATH"
            cache = summary_cache_from_spec(summary_cache)
        elif summary_cache is None or isinstance(summary_cache, SummaryCache):
            cache = summary_cache
        else:
            raise ConfigError("must have get(key) and set(key, value)", field="summary_cache")
        if time_limit_ms is not None and not (
            isinstance(time_limit_ms, (int, float)) and time_limit_ms > 0
        ):
            raise ConfigError("must be a positive number or None", field="time_limit_ms")
        self.strategy = strategy
        self.summariser = summariser
        self.summariser_options = summariser_options
        self.summary_tokens = summary_tokens
        self.fold_fraction = fold_fraction
        self.fold_tokens = fold_tokens
        self.pin_first_user = pin_first_user
        self.start_on = start_on
        self.summary_role = summary_role
        self.summary_cache = summary_cache  # as given: a config string stays one
        self._cache = cache if cache is not None else DEFAULT_SUMMARY_CACHE
        self.strict = strict
        self.time_limit_ms = time_limit_ms
        self._summariser = _build_summariser(summariser, summariser_options)
        self._fallback = ExtractiveSummariser()

    # ---- running

    def run(
        self,
        request: Request,
        budget: Budget | None = None,
        *,
        previous: str | Sequence[str] | None = None,
    ) -> Result:
        """As ``BaseStage.run``; with ``previous`` (the previous request's ``message_hashes`` or
        ``history_fingerprint``; default ``request.previous``) the report also states how many
        leading tokens are unchanged."""
        result = super().run(request, budget)
        if previous is None:
            previous = request.previous  # how a Pipeline passes it on
        if previous is not None:
            details = result.report.stages[0].details
            n, tokens = unchanged_leading(
                previous,
                result.request.messages,
                _counter_of(result.request),
                details["message_hashes"],
            )
            details["unchanged_messages"] = n
            details["unchanged_tokens"] = tokens
            result.report.cacheable_tokens = tokens
        return result

    def apply(self, request: Request, budget: Budget, log: StageLog) -> Request:
        out = self._trim(request, budget, log)
        log.details["message_hashes"] = message_hashes(out.messages)
        log.details["history_fingerprint"] = ".".join(log.details["message_hashes"])
        return out

    # ---- planning

    def _trim(self, request: Request, budget: Budget, log: StageLog) -> Request:
        counter = log.counter
        messages = request.messages
        start, end = history_span(request)
        log.details["strategy"] = self.strategy
        # each message's count, as the stage's tokens_in counted them (memoised on the request)
        tokens_of = message_counts(request, counter)
        try:
            alloc = allocate(request, budget, counter)
        except BudgetInfeasible as exc:  # the fixed part alone is over: pinned messages add
            pinned_tokens = sum(tokens_of[i] for i in self._pinned(request, start, end))
            if not pinned_tokens:
                raise
            raise BudgetInfeasible(
                "the stable prefix, the last user message and the pinned messages alone "
                "exceed the budget",
                minimum=exc.minimum + pinned_tokens,
                budget=exc.budget,
            ) from exc
        if end <= start:
            return request
        pinned = self._pinned(request, start, end)
        if alloc.history is None or alloc.history_needed <= alloc.history and not pinned:
            log.details.update(history_cap=alloc.history, folded_units=0, summary_tokens=0)
            return request  # fits as it is: no need to look at units at all
        units = None
        if not pinned and self.start_on == "user":
            units = _turn_units(messages, start, end, tokens_of)
        if units is None:
            units = _units(messages, _atoms(messages, start, end), pinned, self.start_on, tokens_of)
        drops = list(map(_DROPPABLE, units))
        pinned_tokens = sum(map(_PINNED_TOKENS, units))
        droppable = sum(drops)
        cap = alloc.history
        log.details.update(history_cap=cap, pinned_tokens=pinned_tokens, units=len(units))
        if cap is None or pinned_tokens + droppable <= cap:
            log.details.update(folded_units=0, summary_tokens=0)
            return request
        # a last user message the compress stage may shrink is not a fixed cost
        fixed = 0 if request.compress_last_user else alloc.fixed
        self._check_feasible(fixed, pinned_tokens, budget)
        # pinned messages stay even when the history share is smaller than they are: the
        # total still fits (checked above) once documents take less
        avail = max(cap, pinned_tokens) - pinned_tokens
        # the same without this request's question: what the cache-aware grid is laid on
        basis = alloc.history_basis
        stable = avail if basis is None else max(avail, basis - pinned_tokens)
        suffix = list(accumulate(reversed(drops), initial=0))[::-1]  # suffix[i]: sum(drops[i:])
        fold, chunks, body_cap, reserve = self._plan(units, suffix, avail, stable, counter)
        log.details.update(folded_units=fold)
        summary = None
        if fold and body_cap:
            summary = self._summary(messages, units, chunks, body_cap, reserve, counter, log)
        return self._assemble(request, start, end, units, fold, summary, tokens_of, log)

    def _plan(
        self,
        units: list[_Unit],
        suffix: list[int],
        avail: int,
        stable: int,
        counter: TokenCounter,
    ) -> tuple[int, list[tuple[int, int]], int, int]:
        """``(fold point in units, summary chunks as unit ranges, summary body cap, reserve)``.

        ``avail`` is what this request's unpinned history may use; ``stable`` the same as if
        its question took no tokens. The cache-aware grid and summary size come from
        ``stable``, rounded: consecutive requests whose questions differ in length then agree
        on both, and only the fold point answers to this request's ``avail``."""
        n = len(units)
        if self.strategy == "last":
            return _first_fit(suffix, avail), [], 0, 0
        basis = _quantize(stable) if self.strategy == "cache_aware" else avail
        # half of the room stays for recent turns, however long the question
        body_cap = min(self.summary_tokens, basis // 4, avail // 2)
        reserve = 0
        if body_cap >= _MIN_SUMMARY_TOKENS:
            reserve = MESSAGE_OVERHEAD + counter.count(SUMMARY_HEADER + "\n") + body_cap + 1
        else:
            body_cap = 0
        room = avail - reserve
        if self.strategy == "summarize":
            fold = _first_fit(suffix, room)
            return fold, [(0, fold)], body_cap, reserve
        step = self.fold_tokens or max(1, int(self.fold_fraction * (basis - reserve)))
        boundaries = [0]
        running = 0
        for i in range(n):
            before = running
            running += units[i].droppable
            if running // step > before // step:
                boundaries.append(i + 1)
        on_grid = next((b for b in boundaries if suffix[b] <= room), None)
        # when the newest units alone overflow every boundary, cut off-grid
        fold = on_grid if on_grid is not None else _first_fit(suffix, room)
        edges = sorted({b for b in boundaries if b <= fold} | {fold})
        return fold, list(pairwise(edges)), body_cap, reserve

    def _pinned(self, request: Request, start: int, end: int) -> set[int]:
        messages = request.messages
        pinned: set[int] = set()
        if _any_pinned(request, start, end):
            pinned = {i for i in range(start, end) if messages[i].pinned}
        # a call whose result comes after the last user message (kept whole) must stay too
        answered = {m.tool_call_id for m in messages[end:] if m.tool_call_id}
        if answered:
            pinned.update(
                i
                for i in range(start, end)
                if any(c.id in answered for c in messages[i].tool_calls or ())
            )
        if self.pin_first_user:
            first = next((i for i, m in enumerate(messages) if m.role == "user"), None)
            if first is not None and start <= first < end:
                pinned.add(first)
        return pinned

    def _check_feasible(self, fixed: int, pinned_tokens: int, budget: Budget) -> None:
        if budget.total is not None and fixed + pinned_tokens > budget.total:
            raise BudgetInfeasible(
                "the stable prefix, the last user message and the pinned messages alone "
                "exceed the budget",
                minimum=fixed + pinned_tokens,
                budget=budget.total,
            )
        if budget.history is not None and pinned_tokens > budget.history:
            raise BudgetInfeasible(
                "the pinned history messages alone exceed budget.history",
                minimum=pinned_tokens,
                budget=budget.history,
            )

    # ---- summarising

    def _summary(
        self,
        messages: Sequence[Message],
        units: list[_Unit],
        chunks: list[tuple[int, int]],
        body_cap: int,
        reserve: int,
        counter: TokenCounter,
        log: StageLog,
    ) -> Message | None:
        cache = self._cache
        spans = [_unpinned(units, a, b) for a, b in chunks]
        spans = [s for s in spans if s]
        head = f"{self._summariser.cache_id()}|{counter.name}|{body_cap}"
        keys = _CHUNK_KEYS.chain(messages, spans, _head_digest(head))
        # the newest cached step, then roll forward from it
        text: str | None = None
        done = 0
        for j in range(len(keys) - 1, -1, -1):
            text = cache.get(keys[j])
            if text is not None:
                done = j + 1
                break
        log.details["summary_cached"] = done == len(keys)
        fell_back = False
        for j in range(done, len(keys)):
            chunk = [messages[i] for i in spans[j]]
            previous = text or None

            def primary(chunk: list[Message] = chunk, previous: str | None = previous) -> str:
                return self._summariser.summarise(
                    chunk, max_tokens=body_cap, counter=counter, previous=previous
                )

            def fallback(chunk: list[Message] = chunk, previous: str | None = previous) -> str:
                # the extractive summary stands in uncached, so the configured summariser is
                # tried again on the next request
                nonlocal fell_back
                fell_back = True
                return self._fallback.summarise(
                    chunk, max_tokens=body_cap, counter=counter, previous=previous
                )

            if fell_back or self._summariser.name == self._fallback.name:
                text = fallback() if fell_back else primary()
            else:
                text = run_with_fallback(
                    primary,
                    fallback,
                    backend=f"{self._summariser.name} summariser",
                    fallback_name="extractive",
                    extra="lm",
                    log=log,
                    strict=self.strict,
                    time_limit_ms=self.time_limit_ms,
                )
                if fell_back:
                    log.details["summary_fallback"] = log.details["fallback"]["error"]
            if not fell_back:
                cache.set(keys[j], text)
        if not text:
            return None
        content = f"{SUMMARY_HEADER}\n{text}"
        summary = Message(role=self.summary_role, content=content)
        over = count_message(summary, counter) - reserve
        if over > 0:  # a BPE merge across lines can add a token or two; never go over budget
            text = clip_to_tokens(text, max(0, body_cap - over - 2), counter)
            if not text:
                return None
            summary = Message(role=self.summary_role, content=f"{SUMMARY_HEADER}\n{text}")
        return summary

    # ---- output

    def _assemble(
        self,
        request: Request,
        start: int,
        end: int,
        units: list[_Unit],
        fold: int,
        summary: Message | None,
        tokens_of: Sequence[int],
        log: StageLog,
    ) -> Request:
        messages = request.messages
        # units partition the span in order, so what is kept is messages[cut:end]
        cut = units[fold].first if fold < len(units) else end
        lead: list[int] = []  # pinned atoms of folded units keep their place before the summary
        dropped: list[tuple[int, int]] = [(start, cut)] if start < cut else []
        if any(map(_PINNED_TOKENS, units[:fold])):  # see _unpinned
            folded: list[int] = []
            for unit in units[:fold]:
                for atom, is_pinned in zip(unit.atoms or (), unit.pinned_atoms or ()):
                    (lead if is_pinned else folded).extend(atom)
            dropped = _runs(folded)
        kind = "summarised" if summary is not None else "dropped"
        reason = f"history over budget ({self.strategy})"
        for a, b in dropped:
            log.change(kind, f"messages[{a}:{b}]", tokens=sum(tokens_of[a:b]), reason=reason)
        span = [messages[i] for i in lead]
        if summary is not None:
            span.append(summary)
            log.details["summary_tokens"] = count_message(summary, log.counter)
        else:
            log.details["summary_tokens"] = 0
        log.details["fold_message"] = cut if fold else start
        return request.replace(messages=[*messages[:start], *span, *messages[cut:]])


# ---------------------------------------------------------------- helpers


def _first_fit(suffix: list[int], room: int) -> int:
    """The smallest unit index whose suffix fits ``room`` (the span's end always does)."""
    for i, tokens in enumerate(suffix):
        if tokens <= room:
            return i
    return len(suffix) - 1


def _unpinned(units: list[_Unit], a: int, b: int) -> list[int]:
    if a >= b:
        return []
    # a unit's pinned tokens are 0 only when it has no pinned atom (a message counts at least
    # MESSAGE_OVERHEAD); without one, units are contiguous runs of messages
    if not any(map(_PINNED_TOKENS, units[a:b])):
        return list(range(units[a].first, units[b - 1].stop))
    return [
        i
        for unit in units[a:b]
        for atom, is_pinned in zip(unit.atoms or (), unit.pinned_atoms or ())
        if not is_pinned
        for i in atom
    ]


_PINNED_TOKENS = attrgetter("pinned")  # of a _Unit
_DROPPABLE = attrgetter("droppable")


def _runs(indices: list[int]) -> list[tuple[int, int]]:
    """Sorted indices as half-open contiguous runs: [1, 2, 3, 7] -> [(1, 4), (7, 8)]."""
    runs: list[tuple[int, int]] = []
    for i in indices:
        if runs and runs[-1][1] == i:
            runs[-1] = (runs[-1][0], i + 1)
        else:
            runs.append((i, i + 1))
    return runs


def _counter_of(request: Request) -> TokenCounter:
    from ..tokens import get_counter

    return get_counter(request.tokenizer)


def _build_summariser(name: str | Summariser, options: dict[str, Any] | None) -> Summariser:
    if isinstance(name, Summariser):
        if options:
            raise ConfigError("only for a summariser given by name", field="summariser_options")
        return name
    if not isinstance(name, str):
        raise ConfigError("must be a summariser name or a Summariser", field="summariser")
    if options is not None and not isinstance(options, dict):
        raise ConfigError("must be a dict", field="summariser_options")
    cls = SUMMARISERS.get(name, field="summariser")  # UnknownName lists the known ones
    try:
        return cls(**(options or {}))
    except ConfigError as exc:
        raise ConfigError(
            exc.reason, field="summariser_options" + (f".{exc.field}" if exc.field else "")
        ) from exc
    except TypeError as exc:
        raise ConfigError(str(exc), field="summariser_options") from exc
