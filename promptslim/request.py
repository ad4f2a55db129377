"""The request promptslim works on, and the token budget it is fitted into (pydantic v2).

``Request.from_openai`` / ``Result.to_openai`` round-trip an OpenAI chat-completions body:
fields promptslim does not know are carried in ``extra`` (on the request) or as model extras
(on messages, content parts and tool calls) and written back untouched.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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
from .limits import DEFAULT_LIMITS, RequestLimits, check_body
from .messages import PREFIX_ROLES, Document, Message
from .render import DocumentsPlacement, insert_documents
from .validation import invalid_from_validation

__all__ = ["Budget", "Request"]


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
    #: opt in to compressing the last user message (docs/architecture.md, invariant 1)
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
    def from_openai(
        cls, body: Mapping[str, Any], *, limits: RequestLimits = DEFAULT_LIMITS, **options: Any
    ) -> Request:
        """Build a Request from a chat-completions body (plus an optional ``documents`` list).

        A document that cannot be read is skipped and named in ``warnings``; anything else that
        is malformed raises ``InvalidRequest`` naming the field. ``options`` set Request fields
        that are not part of the body (``query``, ``tokenizer``, ``protect``...). The body is
        first held to ``limits`` (messages, documents, characters, nesting: see
        ``promptslim.limits``).
        """
        if not isinstance(body, Mapping):
            raise InvalidRequest(f"expected a JSON object, got {type(body).__name__}", field="body")
        check_body(body, limits)  # bounded work for every stage after this (promptslim.limits)
        unknown = options.keys() - cls.model_fields.keys()
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
        # ``"pinned": true`` on a message is promptslim's extension: honoured (kept through
        # trimming), never sent on, and said in the report so its effect is not silent
        warnings += [
            f"messages[{i}]: pinned by the request, kept through trimming (the key is not sent)"
            for i, m in enumerate(messages)
            if m.pinned
        ]
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

    def _body(
        self, *, render_documents: bool, placement: DocumentsPlacement = "message"
    ) -> dict[str, Any]:

        body: dict[str, Any] = {}
        if self.model is not None or "model" in self._body_keys:
            body["model"] = self.model
        messages = [m.to_openai() for m in self.messages]
        if render_documents:
            last_user = self.last_user_index()
            messages = insert_documents(messages, self.documents, last_user, placement)
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
        """``query``, or the last user message's text. Retrieval and compression score against
        :func:`promptslim.ask_of` instead, which also reads the turns before a follow-up."""
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
        pydantic's copy carries ``_body_keys`` over."""
        return self.model_copy(update=changes)

    __hash__ = None  # type: ignore[assignment]  # list fields: never hashable


_BODY_FIELDS = ("messages", "model", "tools", "documents")
#: the Request fields ``from_openai`` takes as options (the others come from the body)
_OPTIONS = tuple(
    k for k in Request.model_fields if k not in {*_BODY_FIELDS, "extra", "warnings"}
)


def _parse_message(raw: Any, i: int) -> Message:
    if not isinstance(raw, dict):
        raise InvalidRequest(
            f"expected an object, got {type(raw).__name__}", field=f"messages[{i}]"
        )
    try:
        message = Message.model_validate(raw)
    except ValidationError as exc:
        raise invalid_from_validation(exc, root=f"messages[{i}]") from exc
    if message.role == "tool" and message.tool_call_id is None:
        raise InvalidRequest(
            "a tool message needs a tool_call_id", field=f"messages[{i}].tool_call_id"
        )
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


_DOCUMENT_FIELDS = frozenset(Document.model_fields)


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
