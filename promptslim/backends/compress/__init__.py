"""Compressors: one interface, several backends, looked up by name in ``COMPRESSORS``.

A compressor gets the dynamic-context items (documents, or older history messages) with the
query and a token budget, and returns each item's compressed text (``""`` drops the item)::

    compressor = COMPRESSORS.get("extractive")()
    texts = compressor.compress(items, query="who won?", budget=800, counter=get_counter())

Built-ins, imported on first use so that naming one never loads torch:

- ``extractive`` (default): query-aware sentence selection, pure Python, milliseconds.
- ``lm``: LLMLingua-style token pruning by self-information under a small causal LM.
- ``llmlingua``: the llmlingua package (LLMLingua, LongLLMLingua, LLMLingua-2).

Contract every compressor keeps: original order inside an item; protected spans
(``Item.protected``) are kept byte-exact or dropped whole, never altered or split; the result
is deterministic for the same input and settings.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ...registry import Registry
from ...text import Span
from ...tokens import TokenCounter

__all__ = ["COMPRESSORS", "Compressor", "Item", "TruncateCompressor"]


@dataclass(frozen=True)
class Item:
    """One unit of dynamic context to compress.

    ``overhead`` is what keeping the item costs beyond its text (a document's rendered
    header); it is freed when the item is dropped. ``protected`` are spans of ``text`` that
    must stay byte-exact. ``score`` is an upstream relevance score (retrieval), if any.
    """

    text: str
    title: str | None = None
    score: float | None = None
    overhead: int = 0
    protected: tuple[Span, ...] = field(default_factory=tuple)


class Compressor(ABC):
    """The interface: ``compress(items, query=, budget=, counter=) -> list[str]``.

    ``budget`` caps the sum over kept items of ``overhead + counter.count(text)``; a
    compressor aims close to it from below (the stage checks and retries when tokenisation
    drift takes it over).
    """

    name: ClassVar[str]

    @abstractmethod
    def compress(
        self, items: Sequence[Item], *, query: str, budget: int, counter: TokenCounter
    ) -> list[str]:
        """Compressed text per item, same order and length as ``items``; ``""`` drops one."""

    def get_params(self) -> dict[str, Any]:
        import inspect

        params = inspect.signature(type(self).__init__).parameters
        return {p: getattr(self, p) for p in params if p != "self" and hasattr(self, p)}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"


class TruncateCompressor(Compressor):
    """Keeps each item's leading characters in proportion to the budget: the naive baseline
    (what cutting every passage short does) that the real compressors are measured against,
    and a model-free seam for the stage's tests. Never splits a protected span: it cuts
    before it."""

    name = "truncate"

    def __init__(self) -> None:
        pass

    def compress(
        self, items: Sequence[Item], *, query: str, budget: int, counter: TokenCounter
    ) -> list[str]:
        total = sum(it.overhead + counter.count(it.text) for it in items) or 1
        share = min(1.0, budget / total)
        out = []
        for it in items:
            cut = int(len(it.text) * share)
            for span in it.protected:
                if span.start < cut < span.end:
                    cut = span.start
            out.append(it.text[:cut].rstrip())
        return out


#: Compressor classes by name (``"module:Class"`` strings are imported on first use).
COMPRESSORS: Registry[type[Compressor]] = Registry(
    "compressor",
    {
        "extractive": "promptslim.backends.compress.extractive:ExtractiveCompressor",
        "lm": "promptslim.backends.compress.lm:LMCompressor",
        "llmlingua": "promptslim.backends.compress.lingua:LLMLinguaCompressor",
        "truncate": "promptslim.backends.compress:TruncateCompressor",
    },
)
