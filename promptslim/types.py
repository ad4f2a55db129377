"""Request and response types (pydantic v2).

``Request.from_openai`` / ``Result.to_openai`` round-trip an OpenAI chat-completions body:
fields promptslim does not know are carried in ``extra`` (on the request) or as model extras
(on messages, content parts and tool calls) and written back untouched.

Models are frozen: a stage that changes something builds a new object (``model_copy``), so
objects it did not touch keep their identity and their cached token counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

from .errors import ConfigError, InvalidRequest

__all__ = [
    "Budget",
    "Change",
    "ContentPart",
    "Document",
    "FunctionCall",
    "Message",
    "Report",
    "Request",
    "Result",
    "Role",
    "StageReport",
    "ToolCall",
]

Role = Literal["system", "developer", "user", "assistant", "tool", "function"]
#: Roles whose messages form the instruction prefix (the part prefix caching is about).
PREFIX_ROLES: frozenset[str] = frozenset({"system", "developer"})


def _field_path(loc: Sequence[str | int], root: str = "") -> str:
    path = root
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


def invalid_from_validation(exc: ValidationError, *, root: str = "") -> InvalidRequest:
    """The first error of a pydantic ``ValidationError`` as an ``InvalidRequest`` naming the field."""
    err = exc.errors()[0]
    # pydantic puts the union member tried ("str", "list[ContentPart]") in loc; drop those.
    loc = [p for p in err["loc"] if isinstance(p, int) or not _is_type_tag(p)]
    msg = err["msg"]
    inner = err.get("ctx", {}).get("error")
    if isinstance(inner, InvalidRequest):  # ours, raised inside validation (a nested Budget)
        msg = inner.reason
        loc += [inner.field] if inner.field else []
    more = len(exc.errors()) - 1
    msg += f" (and {more} more error{'s' if more > 1 else ''})" if more else ""
    return InvalidRequest(msg, field=_field_path(loc, root) or root or None)


def _is_type_tag(part: str) -> bool:
    return part in {"str", "int", "float", "bool", "none"} or "[" in part or part[:1].isupper()


M = TypeVar("M", bound=BaseModel)
_set = object.__setattr__
_plain_models: set[type[BaseModel]] = set()  # classes trusted() has checked it can build


def trusted(cls: type[M], **fields: Any) -> M:
    """``cls.model_construct(**fields)`` for our own report objects, with every field given.

    Every stage builds a StageReport, a Report and a Result per run; pydantic's model_construct
    walks each field's aliases and defaults in Python (about 5 us an object, a third of a bare
    pipeline run). With every field passed there is nothing to look up, so set what
    model_construct would set. Only for models without private attributes, extras or
    ``model_post_init``, which it checks (tests/test_types.py compares with model_construct).
    """
    if cls not in _plain_models:
        if (
            cls.__private_attributes__
            or cls.__pydantic_post_init__
            or cls.model_config.get("extra") == "allow"
        ):
            raise TypeError(f"{cls.__name__}: trusted() is for plain models; use model_construct")
        _plain_models.add(cls)
    if fields.keys() != cls.__pydantic_fields__.keys():
        mismatched = sorted(cls.__pydantic_fields__.keys() ^ fields.keys())
        raise TypeError(f"{cls.__name__}: trusted() needs every field and no other: {mismatched}")
    obj = cls.__new__(cls)
    _set(obj, "__dict__", fields)
    _set(obj, "__pydantic_fields_set__", set(fields))
    _set(obj, "__pydantic_extra__", None)
    _set(obj, "__pydantic_private__", None)
    return obj


# ---------------------------------------------------------------- messages


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class _CountCache:
    """Frozen models memoise their token counts; a copy with changed fields must not inherit
    them (pydantic's model_copy shares private attributes)."""

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Any:
        new = super().model_copy(update=update, deep=deep)  # type: ignore[misc]
        if update:
            new.__pydantic_private__["_token_counts"] = {}
        return new

    def __eq__(self, other: object) -> bool:
        # fields and extras only: pydantic would also compare private attributes (our caches)
        if type(other) is not type(self):
            return NotImplemented
        return bool(
            self.__dict__ == other.__dict__
            and self.__pydantic_extra__ == other.__pydantic_extra__  # type: ignore[attr-defined]
        )

    __hash__ = None  # type: ignore[assignment]  # content parts may hold dicts: not hashable


class ContentPart(_Model):
    """One part of a multi-part message (``{"type": "text", "text": ...}``, images, audio...)."""

    type: str
    text: str | None = None


class FunctionCall(_Model):
    name: str
    arguments: str = ""


class ToolCall(_Model):
    id: str
    type: str = "function"
    function: FunctionCall


class Message(_CountCache, _Model):
    """An OpenAI-style chat message. ``pinned`` (ours, never sent) keeps it through trimming."""

    role: Role
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    pinned: bool = Field(default=False, exclude=True)

    # token counts by counter name; valid because the model is frozen
    _token_counts: dict[str, int] = PrivateAttr(default_factory=dict)

    @property
    def text(self) -> str:
        """The message's text: the string content, or its text parts joined by newlines."""
        if isinstance(self.content, str):
            return self.content
        if not self.content:
            return ""
        return "\n".join(p.text for p in self.content if p.text is not None)

    def with_text(self, text: str) -> Message:
        """A copy with its text replaced. A multi-part message keeps its parts in order, each
        with its extra keys (``cache_control``...): the first text part takes the new text, and
        later text parts fold into it, their extra keys carried over (the part's own win)."""
        content: str | list[ContentPart] = text
        if isinstance(self.content, list) and self.content:
            same = text == self.text  # parts kept as they are, several text parts included
            content = self.content if same else _with_text_parts(self.content, text)
        copied: Message = self.model_copy(update={"content": content})
        return copied

    def to_openai(self) -> dict[str, Any]:
        return self.model_dump(exclude_unset=True, exclude={"pinned"})


def _with_text_parts(parts: list[ContentPart], text: str) -> list[ContentPart]:
    first = next((i for i, p in enumerate(parts) if p.text is not None), None)
    if first is None:
        return [ContentPart(type="text", text=text), *parts]
    extras = dict(parts[first].model_extra or {})
    for part in parts[first + 1 :]:
        if part.text is not None:
            extras = {**(part.model_extra or {}), **extras}
    new = parts[first].model_copy(update={**extras, "text": text})
    return [*parts[:first], new, *(p for p in parts[first + 1 :] if p.text is None)]


# ---------------------------------------------------------------- documents


class Document(_CountCache, BaseModel):
    """A retrieved passage. ``id`` and ``metadata`` survive every stage unchanged."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    text: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    score: float | None = None
    #: a precomputed embedding (vector stores hold one); reused instead of re-embedding
    embedding: list[float] | None = None

    _token_counts: dict[str, int] = PrivateAttr(default_factory=dict)

    @property
    def title(self) -> str | None:
        title = self.metadata.get("title")
        return str(title) if title is not None else None


# ---------------------------------------------------------------- budget


class Budget(BaseModel):
    """Token budget for the prompt. ``total`` covers the whole prompt; segment caps are optional.

    When only ``total`` is given the pipeline splits what the stable prefix and the last user
    message leave over between history and documents (``history_share`` to history when both
    want more than there is; what one segment does not use goes to the other).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    # strict: a config's `true` or "500" is a mistake to name, not 1 or 500 tokens
    total: int | None = Field(default=None, ge=1, strict=True)
    history: int | None = Field(default=None, ge=0, strict=True)
    documents: int | None = Field(default=None, ge=0, strict=True)
    history_share: float = Field(default=0.5, ge=0.0, le=1.0)

    def __init__(self, /, **data: Any) -> None:
        """Raises ``ConfigError`` naming the field (a ``ValueError``, as pydantic's error is)."""
        try:
            super().__init__(**data)
        except ValidationError as exc:
            err = invalid_from_validation(exc)
            raise ConfigError(err.reason, field=err.field) from exc


# ---------------------------------------------------------------- request


class Request(BaseModel):
    """What promptslim works on: chat messages, retrieved documents and the query."""

    model_config = ConfigDict(frozen=True)

    messages: list[Message]
    documents: list[Document] = Field(default_factory=list)
    #: the question the context should answer; defaults to the last user message's text
    query: str | None = None
    #: the query's embedding when the caller already has it (the vector search that produced
    #: ``documents`` embedded the query with the same model): the retrieval stage reuses it
    #: instead of embedding the query again
    query_embedding: list[float] | None = None
    #: the served model (the body's ``model`` field)
    model: str | None = None
    #: a local Hugging Face tokenizer (path or cached name) to count tokens with; None: cl100k
    tokenizer: str | None = None
    tools: list[dict[str, Any]] | None = None
    #: caller-marked spans that compression must keep byte-exact
    protect: list[str] = Field(default_factory=list)
    #: opt in to compressing the last user message (DESIGN.md invariant 1)
    compress_last_user: bool = False
    #: number of leading messages that later stages must not change (set by the prefix stage)
    frozen_prefix: int = Field(default=0, ge=0)
    #: the previous request's ``history_fingerprint`` (from its Report), so the history stage
    #: can report how many leading tokens a prefix cache can still reuse
    previous: str | None = None
    #: every other field of the request body, written back untouched
    extra: dict[str, Any] = Field(default_factory=dict)
    #: problems found in the input that were skipped rather than fatal
    warnings: list[str] = Field(default_factory=list)

    #: ``count_request``'s memo: (counter name, messages, documents, tools, total). It keeps the
    #: lists' items as they were counted, so it is only reused while they are the same objects
    #: (or equal ones; the tools: the same list); a copy from ``replace`` carries it over, and
    #: it holds for the copy exactly when the copy's messages, documents and tools are unchanged.
    _token_total: tuple[str, list[Message], list[Document], Any, int] | None = PrivateAttr(
        default=None
    )

    @field_validator("frozen_prefix")
    @classmethod
    def _frozen_prefix_fits(cls, n: int, info: ValidationInfo) -> int:
        messages: list[Message] | None = info.data.get("messages")
        if not n or messages is None:
            return n
        if n > len(messages):
            raise PydanticCustomError(
                "frozen_prefix", f"{n} is more than the number of messages ({len(messages)})"
            )
        users = [i for i, m in enumerate(messages) if m.role == "user"]
        last = users[-1] if users else None
        if last is not None and n > last:
            raise PydanticCustomError(
                "frozen_prefix",
                f"{n} would freeze the last user message (messages[{last}]), which stages must "
                f"not rewrite; at most {last}",
            )
        return n

    # ---- construction

    @classmethod
    def from_openai(cls, body: Mapping[str, Any], **options: Any) -> Request:
        """Build a Request from a chat-completions body (plus an optional ``documents`` list).

        A document that cannot be read is skipped and named in ``warnings``; anything else that
        is malformed raises ``InvalidRequest`` naming the field. ``options`` set Request fields
        that are not part of the body (``query``, ``tokenizer``, ``protect``...).
        """
        if not isinstance(body, Mapping):
            raise InvalidRequest(f"expected a JSON object, got {type(body).__name__}", field="body")
        unknown = options.keys() - cls.__pydantic_fields__.keys()
        if unknown:
            raise InvalidRequest(
                f"unknown option; known: {', '.join(_OPTIONS)}", field=min(unknown)
            )
        if "messages" not in body:
            raise InvalidRequest("is required", field="messages")
        raw_messages = body["messages"]
        if not isinstance(raw_messages, list):
            raise InvalidRequest(
                f"expected a list, got {type(raw_messages).__name__}", field="messages"
            )
        messages = [_parse_message(m, i) for i, m in enumerate(raw_messages)]
        documents, warnings = _parse_documents(body.get("documents", []))
        tools = body.get("tools")
        if tools is not None and not (
            isinstance(tools, list) and all(isinstance(t, dict) for t in tools)
        ):
            raise InvalidRequest("expected a list of objects", field="tools")
        model = body.get("model")
        if model is not None and not isinstance(model, str):
            raise InvalidRequest(f"expected a string, got {type(model).__name__}", field="model")
        extra = {k: v for k, v in body.items() if k not in _BODY_FIELDS}
        fields: dict[str, Any] = {
            "messages": messages,
            "documents": documents,
            "model": model,
            "tools": tools,
            "extra": extra,
            "warnings": warnings,
        }
        fields.update(options)
        try:
            request = cls.model_validate(fields)
        except ValidationError as exc:
            raise invalid_from_validation(exc) from exc
        # remember which body keys were present, so absent ones stay absent on the way out
        request._body_keys = tuple(k for k in _BODY_FIELDS if k in body)
        return request

    _body_keys: tuple[str, ...] = PrivateAttr(default=("messages", "model", "tools"))

    def to_openai(self) -> dict[str, Any]:
        """The request as a body again, ``documents`` included as a top-level list."""
        body = self._body(render_documents=False)
        if self.documents or "documents" in self._body_keys:
            body["documents"] = [d.model_dump(exclude_defaults=True) for d in self.documents]
        return body

    def _body(self, *, render_documents: bool) -> dict[str, Any]:
        from .render import insert_documents

        body: dict[str, Any] = {}
        if self.model is not None or "model" in self._body_keys:
            body["model"] = self.model
        messages = [m.to_openai() for m in self.messages]
        if render_documents:
            messages = insert_documents(messages, self.documents, self.last_user_index())
        body["messages"] = messages
        if self.tools is not None:
            body["tools"] = self.tools
        body.update(self.extra)
        return body

    # ---- queries used by every stage

    def last_user_index(self) -> int | None:
        for i in range(len(self.messages) - 1, -1, -1):
            if self.messages[i].role == "user":
                return i
        return None

    @property
    def effective_query(self) -> str:
        if self.query is not None:
            return self.query
        i = self.last_user_index()
        return self.messages[i].text if i is not None else ""

    def prefix_end(self) -> int:
        """Index just past the stable prefix: ``frozen_prefix`` if a stage set it, else the
        leading run of system/developer messages."""
        if self.frozen_prefix:
            return min(self.frozen_prefix, len(self.messages))
        n = 0
        while n < len(self.messages) and self.messages[n].role in PREFIX_ROLES:
            n += 1
        return n

    def replace(self, **changes: Any) -> Request:
        """A copy with fields replaced (no re-validation: callers pass already-typed values).
        pydantic's copy carries the private attributes over (``_body_keys``, and the count
        memos, which check the lists they counted); setting one again on the frozen copy
        cost twice the copy itself."""
        return self.model_copy(update=changes)

    def __eq__(self, other: object) -> bool:
        # pydantic compares private attributes too; the count memo is a cache, not content
        if type(other) is not type(self):
            return NotImplemented
        return bool(self.__dict__ == other.__dict__ and self._body_keys == other._body_keys)

    __hash__ = None  # type: ignore[assignment]  # list fields: never hashable


_BODY_FIELDS = ("messages", "model", "tools", "documents")
#: the Request fields ``from_openai`` takes as options (the others come from the body)
_OPTIONS = tuple(
    k for k in Request.__pydantic_fields__ if k not in {*_BODY_FIELDS, "extra", "warnings"}
)


def _parse_message(raw: Any, i: int) -> Message:
    if not isinstance(raw, dict):
        raise InvalidRequest(f"expected an object, got {type(raw).__name__}", field=f"messages[{i}]")
    try:
        message = Message.model_validate(raw)
    except ValidationError as exc:
        raise invalid_from_validation(exc, root=f"messages[{i}]") from exc
    if message.role == "tool" and message.tool_call_id is None:
        raise InvalidRequest("a tool message needs a tool_call_id", field=f"messages[{i}].tool_call_id")
    return message


def _parse_documents(raw: Any) -> tuple[list[Document], list[str]]:
    if not isinstance(raw, list):
        raise InvalidRequest(f"expected a list, got {type(raw).__name__}", field="documents")
    documents: list[Document] = []
    warnings: list[str] = []
    for i, item in enumerate(raw):
        if isinstance(item, str):
            item = {"text": item}
        if not isinstance(item, dict):
            warnings.append(f"documents[{i}]: skipped, expected an object or a string")
            continue
        fields = _document_fields(item, i, warnings)
        if fields is None:
            continue
        try:
            documents.append(Document.model_validate(fields))
        except ValidationError as exc:
            warnings.append(f"skipped: {invalid_from_validation(exc, root=f'documents[{i}]')}")
    return documents, warnings


_DOCUMENT_FIELDS = frozenset(Document.__pydantic_fields__)


def _document_fields(item: dict[Any, Any], i: int, warnings: list[str]) -> dict[Any, Any] | None:
    """A document object's fields for ``Document``: a missing or null id becomes ``doc-<i>``,
    an integer id a string; keys Document does not have (``title``, ``url``...) go into
    ``metadata``. None (and a warning) when the id is of another type."""
    doc_id = item.get("id")
    if doc_id is None:
        doc_id = f"doc-{i}"
    elif isinstance(doc_id, int) and not isinstance(doc_id, bool):
        doc_id = str(doc_id)
    elif not isinstance(doc_id, str):
        problem = f"expected a string or an integer, got {type(doc_id).__name__}"
        warnings.append(f"skipped: {InvalidRequest(problem, field=f'documents[{i}].id')}")
        return None
    fields = {k: v for k, v in item.items() if k in _DOCUMENT_FIELDS}
    fields["id"] = doc_id
    if "metadata" in fields and fields["metadata"] is None:
        del fields["metadata"]  # null metadata: none, as a missing one
    unknown = {k: v for k, v in item.items() if k not in _DOCUMENT_FIELDS}
    metadata = fields.get("metadata", {})
    if unknown and isinstance(metadata, dict):
        for key in (k for k in unknown if k in metadata):  # in the body's order: deterministic
            warnings.append(f"documents[{i}].{key}: also in metadata; the metadata's value kept")
        fields["metadata"] = {**metadata, **{k: v for k, v in unknown.items() if k not in metadata}}
    return fields


# ---------------------------------------------------------------- reports


class Change(BaseModel):
    """One thing a stage did to the input, and why."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["dropped", "moved", "summarised", "compressed", "reordered", "rewritten"]
    #: what it was done to: ``messages[3]``, ``document:<id>``, ``system[0]:120-146``
    target: str
    tokens: int = 0
    reason: str = ""
    score: float | None = None


class StageReport(BaseModel):
    """What one stage did: tokens in and out, time, changes, warnings, stage-specific numbers."""

    stage: str
    tokens_in: int
    tokens_out: int
    ms: float
    changes: list[Change] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    details: dict[str, Any] = Field(default_factory=dict)

    def of_kind(self, kind: str) -> list[Change]:
        return [c for c in self.changes if c.kind == kind]


class Report(BaseModel):
    """The whole run: one StageReport per stage, totals, and the prefix-cache figures."""

    stages: list[StageReport] = Field(default_factory=list)
    tokens_in: int = 0
    tokens_out: int = 0
    ms: float = 0.0
    warnings: list[str] = Field(default_factory=list)
    #: SHA-256 of the stable prefix's canonical bytes, when the prefix stage ran
    prefix_fingerprint: str | None = None
    #: leading tokens a prefix cache can reuse across requests, when known
    cacheable_tokens: int | None = None
    #: the configured degradation taken when the budget was infeasible, if any
    degraded: str | None = None

    @property
    def ratio(self) -> float:
        """tokens out / tokens in (1.0 for an empty prompt)."""
        return self.tokens_out / self.tokens_in if self.tokens_in else 1.0

    def stage(self, name: str) -> StageReport:
        for s in self.stages:
            if s.stage == name:
                return s
        raise KeyError(name)


class Result(BaseModel):
    """The slimmed request and the report of how it was slimmed."""

    request: Request
    report: Report

    @property
    def messages(self) -> list[Message]:
        return self.request.messages

    @property
    def documents(self) -> list[Document]:
        return self.request.documents

    def to_openai(self) -> dict[str, Any]:
        """The body to send: kept documents rendered into a message just before the last user
        message (the last user message itself is untouched), every other field as it came."""
        return self.request._body(render_documents=True)
