"""The prefix stage: make the stable system prefix byte-stable so prefix caches hit.

For the leading system/developer messages (and ``Request.tools``) it

1. canonicalises: Unicode NFC, ``\\n`` line endings, no trailing whitespace, at most one blank
   line in a row; JSON objects in the text and tool schemas re-serialised with sorted keys and
   fixed separators (checked equal as data); tools sorted by type and name (stable sort);
2. finds volatile content (dates and times, Unix timestamps, UUIDs, hex ids and hashes, JWTs and
   API keys, emails, and the caller's declared ``variables`` / ``templates``);
3. with ``policy="move"`` replaces each volatile span by a stable reference (``[date 1]``) and
   puts the values, verbatim, into one context block after the stable prefix: a message of its
   own (``placement="message"``) or the start of the first user turn (``"first_user"``, used
   only when that turn is not the last user message: docs/architecture.md invariant 1). The block is
   ``pinned`` so history trimming keeps it. ``policy="flag"`` only reports. By default every
   volatile value moves, so requests differing only in those values share their prefix bytes.
   ``min_gain`` makes the move cost-aware: it happens only when the prefix tokens it makes
   cacheable (from the first volatile value to the end of the stable prefix) are at least
   ``min_gain`` times the tokens it adds (the block, the references); otherwise the values
   stay where they are (canonicalised) and the report says why (``move_skipped``). A short
   system prompt with a name near its end gains a few cacheable tokens, pays for the block on
   every request, and reads worse to a small model (measured: builtin:chat with SmolLM2);
4. fingerprints the stable prefix (SHA-256 of its canonical bytes, optional ``tenant_salt``),
   counts its cacheable leading tokens under each cache model, optionally pads it to a whole
   number of ``block_size`` blocks, and adds provider hints when asked (Anthropic
   ``cache_control`` on the prefix's last content part, OpenAI ``prompt_cache_key``).

``Request.frozen_prefix`` is set to the number of stable messages, so later stages leave them
alone (invariant 7). Canonicalisation is memoised by text in a bounded LRU: the same system
prompt recurs on every request, so a warm request costs a few dictionary lookups.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..memo import BoundedCache
from ..tokens import TokenCounter
from ..types import ContentPart, Message, Request
from .base import BaseStage, StageLog
from .prefix_canonical import (  # noqa: F401  (re-exported: the stage's public helpers)
    _BLANK_RUNS,
    cacheable_by_model,
    canonicalise_json,
    canonicalise_text,
    canonicalise_tools,
)
from .prefix_fingerprint import prefix_fingerprint, prefix_tokens, sent_text
from .prefix_options import (
    CACHE_HINTS,
    DEFAULT_VOLATILE_KINDS,
    Placement,
    Policy,
    PrefixOptions,
)
from .prefix_placement import align, context_block, move_gain, place_context, with_cache_control
from .prefix_volatile import Analysed as _Analysed
from .prefix_volatile import VolatileFinder

__all__ = [
    "DEFAULT_VOLATILE_KINDS",
    "PrefixStage",
    "cacheable_by_model",
    "canonicalise_json",
    "canonicalise_text",
    "canonicalise_tools",
]

_LABELS = {
    "iso_datetime": "date",
    "date": "date",
    "time": "time",
    "time_ampm": "time",
    "zh_date": "date",
    "zh_time": "time",
    "zh_weekday": "date",
    "zh_relative_day": "date",
    "unix_timestamp": "timestamp",
    "uuid": "id",
    "hex_id": "id",
    "code_id": "id",
    "jwt": "token",
    "api_key": "key",
    "email": "email",
}
_HINTS = CACHE_HINTS
#: characters each of the stage's memos may keep alive in its keys
_MEMO_CHARS = 8_000_000

# ---------------------------------------------------------------- the stage


class PrefixStage(BaseStage):
    """Byte-stable system prefix: canonicalise, move volatile content out, fingerprint."""

    name = "prefix"

    def __init__(
        self,
        *,
        policy: Policy = "move",
        placement: Placement = "message",
        volatile_kinds: Sequence[str] = DEFAULT_VOLATILE_KINDS,
        variables: Sequence[str] = (),
        templates: Sequence[str] = (),
        canonicalise: bool = True,
        sort_tools: bool = True,
        tenant_salt: str | None = None,
        align_to_block: bool = False,
        block_size: int = 16,
        cache_hints: Sequence[str] = (),
        cache_size: int = 1024,
        min_gain: float = 0.0,
    ) -> None:
        options = PrefixOptions.parse(
            policy=policy,
            placement=placement,
            volatile_kinds=volatile_kinds,
            variables=variables,
            templates=templates,
            canonicalise=canonicalise,
            sort_tools=sort_tools,
            tenant_salt=tenant_salt,
            align_to_block=align_to_block,
            block_size=block_size,
            cache_hints=cache_hints,
            cache_size=cache_size,
            min_gain=min_gain,
        )
        self._finder = VolatileFinder(options.volatile_kinds, options.variables, options.templates)
        # every setting under its own name: get_params reads them back
        self.policy = options.policy
        self.placement = options.placement
        self.volatile_kinds = options.volatile_kinds
        self.variables = options.variables
        self.templates = options.templates
        self.canonicalise = options.canonicalise
        self.sort_tools = options.sort_tools
        self.tenant_salt = options.tenant_salt
        self.align_to_block = options.align_to_block
        self.block_size = options.block_size
        self.cache_hints = options.cache_hints
        self.cache_size = options.cache_size
        self.min_gain = options.min_gain
        # memos, each bounded by cache_size entries and by the characters their keys hold
        self._memo: BoundedCache[str, _Analysed] = _memo(cache_size)
        self._message_memo: BoundedCache[tuple[Any, ...], Any] = _memo(cache_size)
        self._fingerprint_memo: BoundedCache[tuple[Any, ...], tuple[str, int]] = _memo(cache_size)
        self._tools_memo: BoundedCache[str, Any] = _memo(cache_size)

    # ---- the stage

    def apply(self, request: Request, budget: Any, log: StageLog) -> Request:
        end = request.prefix_end()
        messages = list(request.messages)
        moved: list[tuple[str, str]] = []  # (reference, value) in order
        volatile: list[dict[str, Any]] = []
        first_change = len(log.changes)
        # a prefix frozen already (by the caller, or by an earlier run) keeps its bytes: it is
        # only fingerprinted and counted
        for i in range(0 if request.frozen_prefix else end):
            messages[i] = self._stabilise(messages[i], i, moved, volatile, log)
        tools, tools_json = self._tools(request.tools, log)
        log.details["volatile"] = volatile

        changes: dict[str, Any] = {"messages": messages, "frozen_prefix": end}
        if tools is not request.tools:
            changes["tools"] = tools
        if moved and self.policy == "move":
            block = context_block(moved)
            gain = cost = 0
            if self.min_gain:  # counting the block costs about as much as the rest of the stage
                gain, cost = move_gain(request.messages, messages, end, moved, block, log.counter)
            if gain >= self.min_gain * cost:
                place_context(messages, end, block, request, log, self.placement)
            else:
                messages[:end] = [self._in_place(m) for m in request.messages[:end]]
                log.changes[first_change:] = [
                    c for c in log.changes[first_change:] if c.kind != "moved"
                ]
                log.details["move_skipped"] = {"cacheable_gain_tokens": gain, "added_tokens": cost}
        if end and self.align_to_block:
            messages[end - 1] = align(messages, end, tools_json, log.counter, log, self.block_size)
        if end and "anthropic" in self.cache_hints:
            messages[end - 1] = with_cache_control(messages[end - 1])

        fingerprint, cacheable = self._fingerprint_and_tokens(
            messages[:end], tools_json, log.counter
        )
        log.details["fingerprint"] = fingerprint
        log.details["cacheable_tokens"] = cacheable
        log.details["stable_messages"] = end
        log.details["cacheable_by_model"] = cacheable_by_model(
            cacheable, block_size=self.block_size
        )
        if fingerprint and "openai" in self.cache_hints and "prompt_cache_key" not in request.extra:
            changes["extra"] = {**request.extra, "prompt_cache_key": f"ps-{fingerprint[:32]}"}
        return request.replace(**changes)

    # ---- per message

    def _stabilise(
        self,
        message: Message,
        i: int,
        moved: list[tuple[str, str]],
        volatile: list[dict[str, Any]],
        log: StageLog,
    ) -> Message:
        """``_stabilise_text`` memoised for the common case (a plain text message whose
        references are numbered from 1): a recurring system prompt then reuses the very same
        stable Message, whose token count is memoised on it."""
        simple = (
            isinstance(message.content, str)
            and not moved
            and message.name is None
            and message.tool_calls is None
            and not message.model_extra
            and self.cache_size > 0
        )
        if not simple:
            return self._stabilise_text(message, i, moved, volatile, log)
        key = (i, message.role, message.content, message.pinned)
        found = self._message_memo.get(key)
        if found is None:
            n_changes, n_warnings = len(log.changes), len(log.warnings)
            stable = self._stabilise_text(message, i, moved, volatile, log)
            found = (
                stable,
                tuple(moved),
                tuple(volatile),
                tuple(log.changes[n_changes:]),
                tuple(log.warnings[n_warnings:]),
            )
            self._message_memo.put(key, found, len(message.content) + 1)  # type: ignore[arg-type]
            return stable
        reused: Message = found[0]
        moved.extend(found[1])
        volatile.extend(found[2])
        log.changes.extend(found[3])
        log.warnings.extend(found[4])
        return reused

    def _stabilise_text(
        self,
        message: Message,
        i: int,
        moved: list[tuple[str, str]],
        volatile: list[dict[str, Any]],
        log: StageLog,
    ) -> Message:
        content = message.content
        if isinstance(content, list) and any(p.text is None for p in content):
            log.warning(f"messages[{i}]: non-text content parts in the prefix; left as is")
            return message
        if content is None or content == "":
            return message
        texts = [content] if isinstance(content, str) else [p.text or "" for p in content]
        new_texts: list[str] = []
        for part, text in enumerate(texts):
            analysed = self._analyse(text)
            where = f"messages[{i}]" + (f".content[{part}]" if isinstance(content, list) else "")
            for span in analysed.spans:
                volatile.append({
                    "target": where, "message": i,
                    "part": part if isinstance(content, list) else None,
                    "start": span.start, "end": span.end, "kind": span.kind,
                })  # fmt: skip
            if self.policy == "move" and analysed.spans:
                pieces = [analysed.segments[0]]
                for span, after in zip(analysed.spans, analysed.segments[1:]):
                    ref = f"[{_LABELS.get(span.kind, 'value')} {len(moved) + 1}]"
                    moved.append((ref, span.of(analysed.canonical)))
                    pieces.append(ref)
                    pieces.append(after)
                    log.change(
                        "moved",
                        f"{where}:{span.start}-{span.end}",
                        tokens=log.counter.count(span.of(analysed.canonical)),
                        reason=f"volatile {span.kind}",
                    )
                new_texts.append("".join(pieces))
            else:
                new_texts.append(analysed.canonical)
            if analysed.canonical != text:
                log.change("rewritten", where, reason="canonicalised")
        if new_texts == texts:
            return message
        new_content: str | list[ContentPart] = (
            new_texts[0]
            if isinstance(content, str)
            else [p.model_copy(update={"text": t}) for p, t in zip(content, new_texts)]
        )
        stable: Message = message.model_copy(update={"content": new_content})
        return stable

    def _analyse(self, text: str) -> _Analysed:
        found = self._memo.get(text)
        if found is not None:
            return found
        canonical = canonicalise_text(text) if self.canonicalise else text
        spans = self._finder.spans(canonical)
        cuts = [0, *(p for s in spans for p in (s.start, s.end)), len(canonical)]
        segments = tuple(canonical[cuts[k] : cuts[k + 1]] for k in range(0, len(cuts), 2))
        analysed = _Analysed(canonical, segments, tuple(spans))
        if self.cache_size:
            self._memo.put(text, analysed, len(text) + len(canonical) + 1)
        return analysed

    # ---- tools

    def _tools(
        self, tools: list[dict[str, Any]] | None, log: StageLog
    ) -> tuple[list[dict[str, Any]] | None, str]:
        """Canonical tools and their canonical JSON. Memoised by the caller's serialisation;
        the returned list is shared between requests with the same tools: treat it as
        read-only (copying it would cost more than the rest of the stage)."""
        if not tools:
            return tools, ""
        # repr (C code, no escaping) is a cheaper memo key than json.dumps for the same tools
        raw = repr(tools)
        found = self._tools_memo.get(raw)
        if found is None:
            try:
                as_sent = json.dumps(tools, ensure_ascii=False)
            except (TypeError, ValueError):
                log.warning("tools: not serialisable as JSON; left as is")
                return tools, ""
            canonical, warnings = canonicalise_tools(tools) if self.sort_tools else (tools, [])
            try:
                tools_json = canonicalise_json(canonical)
            except (TypeError, ValueError):
                tools_json = as_sent
            unchanged = json.dumps(canonical, ensure_ascii=False) == as_sent
            found = (canonical, warnings, tools_json, unchanged)
            if self.cache_size:
                self._tools_memo.put(raw, found, len(raw) + len(tools_json) + 1)
        canonical, warnings, tools_json, unchanged = found
        for w in warnings:
            log.warning(w)
        if unchanged:
            return tools, tools_json  # already canonical: keep the caller's objects
        log.change("reordered", "tools", reason="canonical key order and tool order")
        return canonical, tools_json

    # ---- placement, alignment, hints, fingerprint

    def _in_place(self, message: Message) -> Message:
        """``message`` canonicalised with its volatile values where they are (a skipped move)."""
        content = message.content
        new: str | list[ContentPart]
        if isinstance(content, str) and content:
            new = self._analyse(content).canonical
        elif isinstance(content, list) and all(p.text is not None for p in content):
            new = [
                p.model_copy(update={"text": self._analyse(p.text or "").canonical})
                for p in content
            ]
        else:
            return message
        if new == content:
            return message
        out: Message = message.model_copy(update={"content": new})
        return out

    def _fingerprint_and_tokens(
        self, prefix: Sequence[Message], tools_json: str, counter: TokenCounter
    ) -> tuple[str | None, int]:
        if not prefix and not tools_json:
            return None, 0
        # the texts are usually the same str objects as last time (memoised), so hashing the
        # key is a cached lookup; sha256 over the prefix is not
        key = (tools_json, counter.name, *((m.role, sent_text(m)) for m in prefix))
        found = self._fingerprint_memo.get(key)
        if found is None:
            found = (
                prefix_fingerprint(prefix, tools_json, self.tenant_salt),
                prefix_tokens(prefix, tools_json, counter),
            )
            if self.cache_size:
                size = len(tools_json) + sum(len(text) for _, text in key[2:]) + 1
                self._fingerprint_memo.put(key, found, size)
        return found


def _memo(cache_size: int) -> BoundedCache[Any, Any]:
    # cache_size 0 turns memoising off (nothing is put); a BoundedCache holds at least one
    return BoundedCache(max_entries=max(1, cache_size), max_size=_MEMO_CHARS)
