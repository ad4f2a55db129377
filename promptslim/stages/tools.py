"""The tools stage: compress tool results once, the same way on every turn, reversibly.

Agent prompts are mostly tool output (API JSON, logs, file reads, search results). Each tool
message after the stable prefix whose text is at least ``min_chars`` long goes, when it is a
search's passages (a JSON document list or prose in blank-line blocks: ``tools_documents``), to
a retrieval stage, and otherwise to a compressor chosen by its content
(``promptslim.backends.tools``: JSON, log, code, text). What the compressor may
read is fixed when the result first appears: its text, the query of the turn that introduced
it (the last user message before it), the arguments of the tool call it answers, and the
caller's protected literals. Nothing that changes on later turns (the newest message, the
budget, the other results) enters, and the compressors are deterministic: so every later
request sends the same bytes for that result and the prefix cache keeps hitting. A memo keyed
by a hash of those inputs makes the later turns cost a hash, not a compression.

Every elision leaves a marker with an id in the text and its original in a ``ToolStore``
(``store``: ``"memory"``, ``"memory:BYTES"``, ``"sqlite:PATH"`` or a ToolStore); ``expand(id)``
reads it back, and ``expand_tool=True`` adds the ``promptslim_expand`` tool to the request so
the model can ask for it. Tool calls, their ids and the messages' order are never touched;
a tool message that answers ``promptslim_expand`` is left whole. The report lists every
elision (id, kind, count, where) under ``details["tools"]``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ..backends.tools import TOOL_COMPRESSORS, Compressed, ToolCompressor, ToolContext
from ..backends.tools.documents import find_documents, parse_json
from ..backends.tools.expand import EXPAND_TOOL, EXPAND_TOOL_NAME, answer_expand_call
from ..backends.tools.passages import find_passages
from ..backends.tools.prose import Found
from ..backends.tools.router import route
from ..backends.tools.store import ToolStore, tool_store_from_spec
from ..errors import ConfigError
from ..memo import BoundedCache
from ..tokens import count_message
from ..types import Budget, FunctionCall, Message, Request
from .base import BaseStage, StageLog
from .tools_documents import ToolDocuments
from .tools_options import DEFAULT_TOOL_COMPRESSORS, ToolsOptions

__all__ = ["ToolsStage"]

_TOOL_ROLES = ("tool", "function")
_PATH_KEYS = ("path", "file", "filename", "file_path", "filepath", "target_file", "uri")
_MAX_HINT = 200


class ToolsStage(BaseStage):
    """Compress tool results (see the module docstring).

    ``min_chars``: shorter results are left alone. ``compressors``: the names to route
    among (``TOOL_COMPRESSORS``). ``options``: per-compressor keyword arguments
    (``{"json": {"head": 3}}``). ``documents``: a search's passages go to a ``RetrievalStage``
    (True: its defaults; a dict: its options; False: they go to the compressors too).
    ``store``/``namespace``: where originals go. ``expand_tool``: add the ``promptslim_expand``
    tool definition to every request (always, so the tools JSON is the same bytes on every
    turn). ``memo_chars``: the bound of the compressed-result memo.
    """

    name = "tools"

    def __init__(
        self,
        *,
        min_chars: int = 1500,
        compressors: tuple[str, ...] | list[str] = DEFAULT_TOOL_COMPRESSORS,
        options: dict[str, dict[str, Any]] | None = None,
        store: str | ToolStore = "memory",
        namespace: str = "default",
        expand_tool: bool = False,
        memo_chars: int = 32_000_000,
        documents: bool | dict[str, Any] = True,
    ) -> None:
        ToolsOptions.parse(
            min_chars=min_chars,
            compressors=compressors,
            options=options,
            store=store,
            namespace=namespace,
            expand_tool=expand_tool,
            memo_chars=memo_chars,
            documents=documents,
        )
        # every setting under its own name, as given: get_params reads them back
        self.min_chars = min_chars
        self.compressors = tuple(compressors)
        self.options = options
        self.store = store
        self.namespace = namespace
        self.expand_tool = expand_tool
        self.memo_chars = memo_chars
        self.documents = documents
        self._store = tool_store_from_spec(store)
        self._backends = self._build(self.compressors, options or {})
        self._documents = (
            ToolDocuments({} if documents is True else documents)
            if documents is not False
            else None
        )
        settings = [
            min_chars,
            documents,
            *(f"{n}{b.get_params()}" for n, b in sorted(self._backends.items())),
        ]
        self._settings = repr(settings)
        self._memo: BoundedCache[str, Compressed | bool] = BoundedCache(
            max_entries=1 << 20, max_size=memo_chars
        )

    def warm_up(self) -> None:
        """Load what the first document list would (``documents``): the scorer's model."""
        if self._documents is not None:
            self._documents.warm_up()

    def answer_expand(self, call: Any) -> dict[str, Any]:
        """The tool message answering a model's ``promptslim_expand`` call, from this stage's
        store and namespace (see ``promptslim.backends.tools.expand.answer_expand_call``)."""
        return answer_expand_call(call, store=self._store, namespace=self.namespace)

    @staticmethod
    def _build(
        names: tuple[str, ...], options: dict[str, dict[str, Any]]
    ) -> dict[str, ToolCompressor]:
        unknown = set(options) - set(names)
        if unknown:
            raise ConfigError(
                f"options for a compressor not in use: {min(unknown)}", field="options"
            )
        built: dict[str, ToolCompressor] = {}
        for i, name in enumerate(names):
            if not isinstance(name, str) or name not in TOOL_COMPRESSORS:
                known = ", ".join(TOOL_COMPRESSORS.names())
                raise ConfigError(
                    f"unknown tool compressor {name!r}; known: {known}", field=f"compressors[{i}]"
                )
            try:
                built[name] = TOOL_COMPRESSORS.get(name)(**options.get(name, {}))
            except TypeError as exc:
                raise ConfigError(str(exc), field=f"options.{name}") from exc
        return built

    # ---- the stage

    def apply(self, request: Request, budget: Budget, log: StageLog) -> Request:
        messages = request.messages
        start = request.prefix_end()
        calls: dict[str, FunctionCall] = {}
        query = ""
        new: list[Message] | None = None
        entries: list[dict[str, Any]] = []
        for i, m in enumerate(messages):
            if m.role == "user":
                query = m.text
            elif m.tool_calls:
                calls.update((c.id, c.function) for c in m.tool_calls if c.function is not None)
            if m.role not in _TOOL_ROLES or i < start or m.pinned:
                continue
            call = calls.get(m.tool_call_id or "")
            if call is not None and call.name == EXPAND_TOOL_NAME:
                continue  # an original the model asked for: it stays whole
            text = m.text
            if len(text) < self.min_chars:
                continue
            out, cached = self._compressed(text, _context(query, call, request.protect), log)
            if out is None:
                continue
            if new is None:
                new = list(messages)
            new[i] = m.with_text(out.text)
            saved = count_message(m, log.counter) - count_message(new[i], log.counter)
            reason = f"tools/{out.kind}: {len(out.elisions)} elisions"
            log.change("compressed", f"messages[{i}]", tokens=saved, reason=reason)
            elided = [e.as_dict() for e in out.elisions]
            entries.append({"message": i, "kind": out.kind, "cached": cached, "elisions": elided})
        if entries:
            log.details["tools"] = entries
        tools = request.tools
        if self.expand_tool and not any(_tool_name(t) == EXPAND_TOOL_NAME for t in tools or ()):
            tools = [*(tools or []), EXPAND_TOOL]
        if new is None and tools is request.tools:
            return request
        return request.replace(messages=new if new is not None else messages, tools=tools)

    def _compressed(
        self, text: str, context: ToolContext, log: StageLog
    ) -> tuple[Compressed | None, bool]:
        """The result's compression, from the memo when this content was seen in this turn
        context before (then the store already holds its originals): a document list's by
        ``documents``, any other result's by the compressor its content routes to."""
        key = _key(self._settings, context, text)
        hit = self._memo.get(key)
        if hit is not None:
            return (hit if isinstance(hit, Compressed) else None), True
        out = self._route(text, context, log)
        if out is not None:
            for e in out.elisions:
                self._store.put(self.namespace, e.id, e.original.encode("utf-8", "surrogatepass"))
            # the memo keeps the compressed text and the elision records, originals included
            # (they are what ``expand`` would need if the store evicted them)
            size = len(out.text) + sum(len(e.original) + 64 for e in out.elisions)
        else:
            size = 64
        self._memo.put(key, out if out is not None else False, size)  # False: left as it was
        return out, False

    def _route(self, text: str, context: ToolContext, log: StageLog) -> Compressed | None:
        """A JSON document list or a text's prose passages to ``documents`` (its answer
        final: kept whole when it keeps every item), anything else to the compressor its
        content routes to, JSON parsed once."""
        parsed = None
        if self._documents is not None:
            parsed = parse_json(text)
            found: Found | None = (
                find_documents(parsed, text, messages=True)
                if parsed is not None
                else find_passages(text)
            )
            if found is not None:
                return self._documents.compress(found, context, log.warnings)
        return route(text, context, self._backends, parsed=parsed)


def _key(settings: str, context: ToolContext, text: str) -> str:
    h = hashlib.blake2b(digest_size=16)
    for part in (settings, context.query, *context.hints, "\x00", *context.protect, "\x00", text):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x1f")
    return h.hexdigest()


def _context(query: str, call: FunctionCall | None, protect: list[str]) -> ToolContext:
    """The turn context of a result: the query, and literals from the call's arguments."""
    if call is None:
        return ToolContext(query=query, protect=tuple(protect))
    hints: list[str] = [call.name]
    path: str | None = None
    try:
        args = json.loads(call.arguments) if call.arguments else {}
    except ValueError:
        args = call.arguments  # not JSON: the raw string is the one hint
    stack: list[tuple[str, Any]] = [("", args)]
    while stack and len(hints) < 64:
        key, value = stack.pop()
        if isinstance(value, dict):
            stack.extend(reversed(list(value.items())))
        elif isinstance(value, list):
            stack.extend((key, v) for v in reversed(value))
        elif isinstance(value, bool) or value is None:
            continue
        elif isinstance(value, (int, float, str)):
            literal = str(value)
            if 0 < len(literal) <= _MAX_HINT:
                hints.append(literal)
                if path is None and key.lower() in _PATH_KEYS and isinstance(value, str):
                    path = value
    return ToolContext(
        query=query, hints=tuple(dict.fromkeys(hints)), protect=tuple(protect), path=path
    )


def _tool_name(tool: Any) -> str | None:
    function = tool.get("function") if isinstance(tool, dict) else None
    return function.get("name") if isinstance(function, dict) else None
