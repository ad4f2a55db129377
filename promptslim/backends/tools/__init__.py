"""Tool-result compressors: one small interface, one module per kind of content.

A compressor gets one tool result's text and what the turn that introduced it knew (the
query, literals from the assistant's tool-call arguments, the caller's protected literals),
and returns the compressed text with one ``Elision`` per stretch it left out. Every elision
is marked in the text by a short marker carrying its id, and its original goes to a
``ToolStore`` (``promptslim.backends.tools.store``) so ``expand(id)`` can bring it back::

    compressor = TOOL_COMPRESSORS.get("json")()
    out = compressor.compress(text, ToolContext(query="state of issue 1234"))
    out.text, [(e.id, e.kind, e.count) for e in out.elisions]

Built-ins (``route`` picks one by content):

- ``json``: structure-aware array crushing; valid JSON out for valid JSON in.
- ``log``: command output and logs; repeated lines collapsed, errors and the tail kept.
- ``code``: file reads; query-relevant regions with their enclosing signatures.
- ``text``: the extractive compressor, with markers where sentences were left out.

Before any of them, the tools stage sends a search's passages (a JSON document list:
``documents``; prose in blank-line blocks: ``passages``; what reads as prose: ``prose``) to a
retrieval stage.

Contract every compressor keeps: deterministic for the same text, context and settings (the
tools stage relies on it for cache stability); protected spans kept byte-exact or elided
whole; nothing left out without an ``Elision`` that names it; ``None`` when the compressor
cannot or need not shrink the text (then the original goes on untouched).
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ...registry import Registry

__all__ = [
    "TOOL_COMPRESSORS",
    "Compressed",
    "Elision",
    "ToolCompressor",
    "ToolContext",
    "elision_id",
    "marker",
]

#: the prefix of every elision id: a marker is recognisable and ``expand`` can check its input
ID_PREFIX = "ps"


@dataclass(frozen=True)
class ToolContext:
    """What the turn that introduced a tool result knew; everything in it is fixed once that
    result has been sent, so a compressor that reads only this is cache-stable.

    ``query``: the last user message before the result. ``hints``: literal values from the
    assistant's tool-call arguments (ids, names, numbers) and the function name. ``protect``:
    the caller's protected literals. ``path``: a file path among the arguments, if any (the
    code compressor picks its comment syntax by it).
    """

    query: str = ""
    hints: tuple[str, ...] = ()
    protect: tuple[str, ...] = ()
    path: str | None = None


@dataclass(frozen=True)
class Elision:
    """One stretch left out: ``id`` (what ``expand`` takes), ``kind`` of unit (``items``,
    ``lines``, ``chars``, ``sentences``), ``count`` of units, ``where`` (a JSON path or a line
    range) and ``original``, the exact text left out (stored, never sent)."""

    id: str
    kind: str
    count: int
    where: str
    original: str = field(repr=False)
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The report entry: everything but the original text (prompt text stays out of
        reports: docs/architecture.md, invariant 8)."""
        out: dict[str, Any] = {"id": self.id, "kind": self.kind, "count": self.count}
        out["where"] = self.where
        if self.note:
            out["note"] = self.note
        return out


@dataclass(frozen=True)
class Compressed:
    """A compressor's answer: the new text, what it left out, and which compressor it was."""

    text: str
    elisions: tuple[Elision, ...]
    kind: str


def elision_id(original: str) -> str:
    """The id of an elided stretch: a hash of its text, so the same original always gets the
    same id (the same bytes on every turn and every replica) and storing it twice is one row."""
    digest = hashlib.blake2b(original.encode("utf-8", "surrogatepass"), digest_size=6)
    return f"{ID_PREFIX}{digest.hexdigest()}"


def marker(count: int, unit: str, ident: str, note: str = "") -> str:
    """The short text that stands where a stretch was elided (one wording everywhere, so a
    model learns it once, and the ``promptslim_expand`` tool's description names it): short,
    since a marker costs tokens on every turn: ``[… 24 items elided (state: open 24) id=ps…]``.
    One line, whatever ``note`` holds: a marker split over lines no longer reads as one."""
    one_line = " ".join(note.split())
    extra = f" ({one_line})" if one_line else ""
    return f"[… {count} {unit} elided{extra} id={ident}]"


class ToolCompressor(ABC):
    """The interface: ``compress(text, context) -> Compressed | None``."""

    name: ClassVar[str]

    @abstractmethod
    def compress(self, text: str, context: ToolContext) -> Compressed | None:
        """The compressed result, or None to send ``text`` unchanged."""

    def get_params(self) -> dict[str, Any]:
        import inspect

        params = inspect.signature(type(self).__init__).parameters
        return {p: getattr(self, p) for p in params if p != "self" and hasattr(self, p)}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"


#: Tool-result compressor classes by name, imported on first use.
TOOL_COMPRESSORS: Registry[type[ToolCompressor]] = Registry(
    "tool compressor",
    {
        "json": "promptslim.backends.tools.json_crusher:JsonCompressor",
        "log": "promptslim.backends.tools.logs:LogCompressor",
        "code": "promptslim.backends.tools.code:CodeCompressor",
        "text": "promptslim.backends.tools.text:TextCompressor",
    },
)
