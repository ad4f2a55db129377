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

import hashlib
import json
import math
import re
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from ..errors import ConfigError
from ..text import PATTERNS, Span, find_protected_spans, merge_spans
from ..tokens import TokenCounter, count_message
from ..types import ContentPart, Message, Request
from .base import BaseStage, StageLog
from .prefix_options import (
    CACHE_HINTS,
    DEFAULT_VOLATILE_KINDS,
    Placement,
    Policy,
    PrefixOptions,
)

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
_CONTEXT_HEADER = "Context for the instructions above (values that change per request):"
#: appended to pad the prefix to a block boundary: one token per copy in common BPEs
_PAD_UNIT = " ."

# ---------------------------------------------------------------- canonicalisation

_LINE_ENDINGS = re.compile(r"\r\n?")
_TRAILING_CHARS = " \t\f\v\u00a0"
_HAS_TRAILING_WS = re.compile(r"[ \t\f\v\u00a0](?:\n|\Z)")
_BLANK_RUNS = re.compile(r"\n{3,}")


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ValueError("duplicate keys")  # re-serialising would drop one: leave the block as is
    return out


def canonicalise_json(value: Any) -> str:
    """JSON with sorted keys, ``,``/``:`` separators and UTF-8 characters kept."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _load_exact(raw: str) -> Any:
    """``json.loads`` for re-serialising: ValueError when writing the value back would change
    it (duplicate keys, a number a float cannot hold, ``-0``) or it nests too deep to read."""
    try:
        return json.loads(
            raw,
            object_pairs_hook=_reject_duplicates,
            parse_float=_exact_float,
            parse_int=_exact_int,
        )
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _exact_int(literal: str) -> int:
    if literal == "-0":  # read as 0, written back as 0: a different number in JavaScript
        raise ValueError("-0")
    return int(literal)


def _exact_float(literal: str) -> float:
    """A JSON number as a float, only when the float is that number exactly (``1.50``, ``1e5``):
    re-serialising ``1E400`` (infinity) or ``0.10000000000000000555`` (0.1) would change it,
    so the block is left as written."""
    value = float(literal)
    if not math.isfinite(value) or Decimal(repr(value)) != Decimal(literal):
        raise ValueError(f"{literal} is not exactly a float")
    return value


def _canonical_json_blocks(text: str) -> str:
    if "{" not in text:
        return text
    out: list[str] = []
    pos = 0
    for span in find_protected_spans(text, kinds=()):  # kinds=(): JSON spans only
        raw = span.of(text)
        if not raw.lstrip("[").startswith("{"):
            continue  # "[1, 2]" in prose is a citation more often than data: leave it
        try:
            value = _load_exact(raw)
            new = canonicalise_json(value)
            if json.loads(new) != value:  # e.g. NaN: not equal to itself, keep the original
                continue
        except ValueError:
            continue
        if not unicodedata.is_normalized("NFC", new):
            # a character NFC would change (written as an escape in the prompt): kept escaped,
            # or the next canonicalisation would normalise it and change the data
            new = json.dumps(value, sort_keys=True, separators=(",", ":"))
        out.append(text[pos : span.start])
        out.append(new)
        pos = span.end
    out.append(text[pos:])
    return "".join(out)


def canonicalise_text(text: str) -> str:
    """NFC, ``\\n`` line endings, no trailing whitespace, no runs of blank lines, no leading or
    trailing blank lines, JSON objects re-serialised canonically. Idempotent; keeps every word."""
    # each step is skipped when a cheap check shows it has nothing to do (re.sub over a long
    # prompt costs ~1 ms on its own)
    if not unicodedata.is_normalized("NFC", text):
        text = unicodedata.normalize("NFC", text)
    if "\r" in text:
        text = _LINE_ENDINGS.sub("\n", text)
    text = _canonical_json_blocks(text)
    if _HAS_TRAILING_WS.search(text) is not None:
        text = "\n".join([line.rstrip(_TRAILING_CHARS) for line in text.split("\n")])
    if "\n\n\n" in text:
        text = _BLANK_RUNS.sub("\n\n", text)
    return text.strip("\n")


def _sorted_value(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted_value(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted_value(v) for v in value]
    return value


def canonicalise_tools(
    tools: Sequence[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[str]]:
    """Tools with keys sorted at every level, in a stable order (type, then function name).

    A tool that cannot be serialised, or whose ``parameters`` is a string that is not JSON, is
    kept exactly as it is and named in the returned warnings."""
    out: list[dict[str, Any]] = []
    warnings: list[str] = []
    for i, tool in enumerate(tools):
        try:
            canonicalise_json(tool)  # raises on values JSON cannot hold
            params = tool.get("function", {}).get("parameters")
            if isinstance(params, str):
                parsed = _load_exact(params)
                tool = {
                    **tool,
                    "function": {**tool["function"], "parameters": canonicalise_json(parsed)},
                }
            out.append(_sorted_value(tool))
        except (TypeError, ValueError, AttributeError):
            warnings.append(f"tools[{i}]: not a valid JSON schema; left as is")
            out.append(tool)
    out.sort(key=_tool_order)
    return out, warnings


def _tool_order(tool: dict[str, Any]) -> tuple[str, str]:
    function = tool.get("function")
    name = function.get("name") if isinstance(function, dict) else tool.get("name")
    return (str(tool.get("type", "")), str(name or ""))


# ---------------------------------------------------------------- cache-model counts


def cacheable_by_model(tokens: int, *, block_size: int = 16) -> dict[str, int]:
    """Leading tokens of a stable prefix of ``tokens`` tokens each cache model would reuse:
    vLLM whole blocks, SGLang every token, OpenAI 1,024 + 128-token steps (0 below 1,024),
    Anthropic all of it with a breakpoint at its end (0 below 1,024)."""
    openai = 1024 + (tokens - 1024) // 128 * 128 if tokens >= 1024 else 0
    return {
        "vllm": tokens // block_size * block_size,
        "sglang": tokens,
        "openai": openai,
        "anthropic": tokens if tokens >= 1024 else 0,
    }


# ---------------------------------------------------------------- the stage


@dataclass(frozen=True)
class _Analysed:
    """One prefix text, canonicalised and cut at its volatile spans (memoised per text)."""

    canonical: str
    segments: tuple[str, ...]  # stable text around the spans: len(spans) + 1 pieces
    spans: tuple[Span, ...]  # positions in ``canonical``


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
        self._template_res = [_compile_template(t) for t in options.templates]
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
        self._patterns = [(k, PATTERNS[k]) for k in self.volatile_kinds]
        # longest first, so "Ann Lee" wins over "Ann"
        self._variables_re = (
            re.compile(
                "|".join(re.escape(v) for v in sorted(set(variables), key=len, reverse=True))
            )
            if variables
            else None
        )
        self._memo: OrderedDict[str, _Analysed] = OrderedDict()
        self._message_memo: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
        self._fingerprint_memo: OrderedDict[tuple[Any, ...], tuple[str, int]] = OrderedDict()
        self._tools_memo: OrderedDict[str, tuple[list[dict[str, Any]], list[str], str, bool]] = (
            OrderedDict()
        )
        self._lock = threading.Lock()

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
            block = self._context_block(moved)
            gain = cost = 0
            if self.min_gain:  # counting the block costs about as much as the rest of the stage
                gain, cost = self._move_gain(
                    request.messages, messages, end, moved, block, log.counter
                )
            if gain >= self.min_gain * cost:
                self._place_context(messages, end, block, request, log)
            else:
                messages[:end] = [self._in_place(m) for m in request.messages[:end]]
                log.changes[first_change:] = [
                    c for c in log.changes[first_change:] if c.kind != "moved"
                ]
                log.details["move_skipped"] = {"cacheable_gain_tokens": gain, "added_tokens": cost}
        if end and self.align_to_block:
            messages[end - 1] = self._align(messages, end, tools_json, log.counter, log)
        if end and "anthropic" in self.cache_hints:
            messages[end - 1] = _with_cache_control(messages[end - 1])

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
            with self._lock:
                self._message_memo[key] = found
                if len(self._message_memo) > self.cache_size:
                    self._message_memo.popitem(last=False)
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
                volatile.append(
                    {"target": where, "start": span.start, "end": span.end, "kind": span.kind}
                )
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
            with self._lock:
                if text in self._memo:
                    self._memo.move_to_end(text)
            return found
        canonical = canonicalise_text(text) if self.canonicalise else text
        spans = self._volatile_spans(canonical)
        cuts = [0, *(p for s in spans for p in (s.start, s.end)), len(canonical)]
        segments = tuple(canonical[cuts[k] : cuts[k + 1]] for k in range(0, len(cuts), 2))
        analysed = _Analysed(canonical, segments, tuple(spans))
        if self.cache_size:
            with self._lock:
                self._memo[text] = analysed
                if len(self._memo) > self.cache_size:
                    self._memo.popitem(last=False)
        return analysed

    def _volatile_spans(self, text: str) -> list[Span]:
        spans: list[Span] = []
        # a pattern only runs on the lines that hold one of its trigger strings: a pattern
        # anchored on \\b tries every position, ~1-4 ms each over a 4,000-token prompt
        windows: dict[tuple[str, ...], list[tuple[int, int]]] = {}
        for kind, rx in self._patterns:
            needles = _TRIGGERS.get(kind)
            if needles is None:
                ranges = [(0, len(text))]
            else:
                ranges = windows.get(needles) or windows.setdefault(
                    needles, _lines_with(text, needles)
                )
            for start, end in ranges:
                spans.extend(Span(m.start(), m.end(), kind) for m in rx.finditer(text, start, end))
        if self._variables_re is not None:
            spans.extend(
                Span(m.start(), m.end(), "variable") for m in self._variables_re.finditer(text)
            )
        for rx in self._template_res:
            for m in rx.finditer(text):
                spans.extend(
                    Span(m.start(g), m.end(g), "variable")
                    for g in range(1, (rx.groups or 0) + 1)
                    if m.end(g) > m.start(g)
                )
        return merge_spans(spans)

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
                with self._lock:
                    self._tools_memo[raw] = found
                    if len(self._tools_memo) > self.cache_size:
                        self._tools_memo.popitem(last=False)
        canonical, warnings, tools_json, unchanged = found
        for w in warnings:
            log.warning(w)
        if unchanged:
            return tools, tools_json  # already canonical: keep the caller's objects
        log.change("reordered", "tools", reason="canonical key order and tool order")
        return canonical, tools_json

    # ---- placement, alignment, hints, fingerprint

    @staticmethod
    def _context_block(moved: Sequence[tuple[str, str]]) -> str:
        return "\n".join([_CONTEXT_HEADER, *(f"{ref}: {value}" for ref, value in moved)])

    def _move_gain(
        self,
        original: Sequence[Message],
        stable: Sequence[Message],
        end: int,
        moved: Sequence[tuple[str, str]],
        block: str,
        counter: TokenCounter,
    ) -> tuple[int, int]:
        """``(gain, cost)`` of moving: the stable prefix's tokens from the first reference on
        (what becomes cacheable across requests whose values differ), and the tokens the move
        adds to the request (the block as a message, references in place of values)."""
        first_ref = moved[0][0]
        gain = 0
        for j in range(end):
            text = stable[j].text
            at = text.find(first_ref) if stable[j] is not original[j] else -1
            if at >= 0:
                gain = counter.count(text) - counter.count(text[:at])
                gain += sum(count_message(m, counter) for m in stable[j + 1 : end])
                break
        added = count_message(Message(role="system", content=block), counter)
        before = sum(count_message(m, counter) for m in original[:end])
        after = sum(count_message(m, counter) for m in stable[:end])
        return gain, added + after - before

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

    def _place_context(
        self,
        messages: list[Message],
        end: int,
        block: str,
        request: Request,
        log: StageLog,
    ) -> None:
        first_user = next(
            (k for k in range(end, len(messages)) if messages[k].role == "user"), None
        )
        if (
            self.placement == "first_user"
            and first_user is not None
            and first_user != request.last_user_index()
            and not messages[first_user].pinned
        ):
            m = messages[first_user]
            messages[first_user] = m.with_text(f"{block}\n\n{m.text}").model_copy(
                update={"pinned": True}
            )
            log.details["context_placement"] = f"messages[{first_user}]"
            return
        role = messages[end - 1].role if end else "system"
        messages.insert(end, Message(role=role, content=block, pinned=True))
        log.details["context_placement"] = f"messages[{end}]"

    def _align(
        self,
        messages: list[Message],
        end: int,
        tools_json: str,
        counter: TokenCounter,
        log: StageLog,
    ) -> Message:
        last = messages[end - 1]
        base = self._prefix_tokens(messages[:end], tools_json, counter)
        need = -base % self.block_size
        if need == 0 or isinstance(last.content, list):
            return last
        text = last.text
        # one pad unit is one token in common BPEs; check, and give up rather than loop
        for extra in range(need, need + self.block_size):
            candidate = last.with_text(text + _PAD_UNIT * extra)
            tokens = self._prefix_tokens([*messages[: end - 1], candidate], tools_json, counter)
            if tokens % self.block_size == 0:
                log.details["alignment_pad_tokens"] = tokens - base
                return candidate
        log.warning(f"could not align the prefix to {self.block_size}-token blocks")
        return last

    def _prefix_tokens(
        self, prefix: Sequence[Message], tools_json: str, counter: TokenCounter
    ) -> int:
        tools = counter.count(tools_json) if tools_json else 0
        return tools + sum(count_message(m, counter) for m in prefix)

    def _fingerprint_and_tokens(
        self, prefix: Sequence[Message], tools_json: str, counter: TokenCounter
    ) -> tuple[str | None, int]:
        if not prefix and not tools_json:
            return None, 0
        # the texts are usually the same str objects as last time (memoised), so hashing the
        # key is a cached lookup; sha256 over the prefix is not
        key = (tools_json, counter.name, *((m.role, _sent_text(m)) for m in prefix))
        found = self._fingerprint_memo.get(key)
        if found is None:
            found = (
                self._fingerprint(prefix, tools_json),
                self._prefix_tokens(prefix, tools_json, counter),
            )
            if self.cache_size:
                with self._lock:
                    self._fingerprint_memo[key] = found
                    if len(self._fingerprint_memo) > self.cache_size:
                        self._fingerprint_memo.popitem(last=False)
        return found

    def _fingerprint(self, prefix: Sequence[Message], tools_json: str) -> str:
        digest = hashlib.sha256()
        if self.tenant_salt:
            digest.update(b"salt\x00" + _utf8(self.tenant_salt) + b"\x1e")
        digest.update(b"tools\x00" + _utf8(tools_json) + b"\x1e")
        for m in prefix:
            digest.update(m.role.encode() + b"\x00" + _utf8(_sent_text(m)) + b"\x1e")
        return digest.hexdigest()


def _utf8(text: str) -> bytes:
    # JSON input may carry lone surrogates ("\\ud800" is valid JSON); they hash as themselves
    return text.encode("utf-8", "surrogatepass")


def _sent_text(message: Message) -> str:
    """What the fingerprint covers of a prefix message: its text when that is all it sends
    (the usual system prompt, so fingerprints stay as they were), else its whole wire form,
    so two prompts that differ only in a name, an image or a vendor field differ."""
    if (
        isinstance(message.content, str)
        and not message.name
        and not message.tool_calls
        and not message.tool_call_id
        and not message.__pydantic_extra__
    ):
        return message.text
    return json.dumps(message.to_openai(), sort_keys=True, ensure_ascii=False)


# ---------------------------------------------------------------- helpers

_DIGITS = tuple("0123456789")
#: strings one of which is on every line a pattern can match (patterns not listed run everywhere)
_TRIGGERS: dict[str, tuple[str, ...]] = {
    "iso_datetime": _DIGITS,
    "date": (*_DIGITS, "day"),
    "time": _DIGITS,
    "time_ampm": _DIGITS,
    "unix_timestamp": _DIGITS,
    "uuid": _DIGITS,
    "hex_id": _DIGITS,
    "code_id": _DIGITS,
    "email": ("@",),
    "jwt": ("eyJ",),
    "api_key": ("sk-", "sk_", "pk-", "pk_", "rk-", "rk_", "ghp_", "gho_", "xox", "AKIA"),
}


def _lines_with(text: str, needles: tuple[str, ...]) -> list[tuple[int, int]]:
    """``(start, end)`` of each line holding one of ``needles`` (str.find: no regex)."""
    lines: set[tuple[int, int]] = set()
    for needle in needles:
        pos = text.find(needle)
        while pos != -1:
            start = text.rfind("\n", 0, pos) + 1
            end = text.find("\n", pos)
            end = len(text) if end == -1 else end
            lines.add((start, end))
            pos = text.find(needle, end)
    return sorted(lines)


def _compile_template(template: str) -> re.Pattern[str]:
    """``"The user's name is {name}."`` matches the literal text, each ``{...}`` a value."""
    if not isinstance(template, str) or not re.search(r"\{[^{}]*\}", template):
        raise ConfigError("a template needs a {placeholder}", field="templates")
    parts = re.split(r"\{[^{}]*\}", template)
    pattern = ""
    for k, literal in enumerate(parts):
        pattern += re.escape(literal)
        if k < len(parts) - 1:
            # up to the next literal on the same line; to the line's end when nothing follows
            pattern += r"([^\n]+?)" if parts[k + 1] else r"([^\n]+)"
    return re.compile(pattern)


def _with_cache_control(message: Message) -> Message:
    """The message in content-part form, ``cache_control`` on its last text part."""
    if isinstance(message.content, list):
        parts = list(message.content)
    else:
        parts = [ContentPart(type="text", text=message.content or "")]
    for k in range(len(parts) - 1, -1, -1):
        if parts[k].text is not None:
            data = parts[k].model_dump()
            data["cache_control"] = {"type": "ephemeral"}
            parts[k] = ContentPart.model_validate(data)
            break
    hinted: Message = message.model_copy(update={"content": parts})
    return hinted
