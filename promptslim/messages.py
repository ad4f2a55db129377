"""Chat messages and retrieved documents (pydantic v2, frozen).

Fields promptslim does not know are kept as model extras (on messages, content parts and tool
calls) and written back untouched. Models are frozen: a stage that changes something builds a
new object (``model_copy``), so objects it did not touch keep their identity.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationInfo, field_validator

__all__ = [
    "HEADING_KEYS",
    "PREFIX_ROLES",
    "ContentPart",
    "Document",
    "FunctionCall",
    "Message",
    "Role",
    "ToolCall",
]

#: the metadata keys LangChain's header splitters (Markdown and HTML) write the headings of a
#: section under, in their documentation and by default: they take the headings out of the
#: text, so these are all that says what the section is about, and they serve as its title
HEADING_KEYS = tuple(f"Header {n}" for n in range(1, 7))
#: the metadata key LlamaIndex's Markdown parser writes a section's enclosing headings under
#: (``/Handbook/Films/``, by default): the section keeps its own heading in its text, and
#: only there says which part of the document it is in
_HEADER_PATH = "header_path"

Role = Literal["system", "developer", "user", "assistant", "tool", "function"]
#: Roles whose messages form the instruction prefix (the part prefix caching is about).
PREFIX_ROLES: frozenset[str] = frozenset({"system", "developer"})


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class ContentPart(_Model):
    """One part of a multi-part message (``{"type": "text", "text": ...}``, images, audio...)."""

    type: str
    text: str | None = None


class FunctionCall(_Model):
    name: str
    arguments: str = ""


class ToolCall(_Model):
    """One tool call of an assistant message. A call of a type other than ``"function"``
    (``"custom"`` tools take free-form input) is kept as it came, in the model extras, and
    written back untouched; only a function call must carry ``function``."""

    id: str
    type: str = "function"
    function: FunctionCall | None = Field(default=None, validate_default=True)

    @field_validator("function")
    @classmethod
    def _required_for_function_calls(
        cls, value: FunctionCall | None, info: ValidationInfo
    ) -> FunctionCall | None:
        if value is None and info.data.get("type") == "function":
            raise ValueError("is required for a function tool call")
        return value

    @property
    def name(self) -> str:
        """The function's name, or for another type its ``{type: {"name": ...}}`` name."""
        if self.function is not None:
            return self.function.name
        body = (self.model_extra or {}).get(self.type)
        return str(body.get("name", "")) if isinstance(body, dict) else ""

    @property
    def payload(self) -> str:
        """What the call sends: the function's arguments, or another type's input as JSON."""
        if self.function is not None:
            return self.function.arguments
        return json.dumps(self.model_extra or {}, sort_keys=True, ensure_ascii=False)


class Message(_Model):
    """An OpenAI-style chat message. ``pinned`` (ours, never sent) keeps it through trimming."""

    role: Role
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    pinned: bool = Field(default=False, exclude=True)
    #: where a caller's own message came from (an index the framework adapters set): never
    #: sent, and carried by ``model_copy``, so a message a stage rewrote keeps it
    _origin: int | None = PrivateAttr(default=None)

    __hash__ = None  # type: ignore[assignment]  # content parts may hold dicts: not hashable

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


class Document(BaseModel):
    """A retrieved passage. ``id`` and ``metadata`` survive every stage unchanged."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    text: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    score: float | None = None
    #: a precomputed embedding (vector stores hold one); reused instead of re-embedding
    embedding: list[float] | None = None

    __hash__ = None  # type: ignore[assignment]  # metadata is a dict: not hashable

    @property
    def title(self) -> str | None:
        """``metadata["title"]``, else the headings a header splitter cut the text under
        (``HEADING_KEYS``, outermost first, joined by `` / ``), else the headings a section
        is under (``header_path``, its outer separators stripped), else None."""
        title = self.metadata.get("title")
        if title is not None:
            return str(title)
        headings = [str(self.metadata[k]) for k in HEADING_KEYS if self.metadata.get(k)]
        path = self.metadata.get(_HEADER_PATH)
        if not headings and isinstance(path, str):
            return path.strip("/").strip() or None
        return " / ".join(headings) or None
