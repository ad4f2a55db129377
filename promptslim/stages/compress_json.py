"""A JSON document too large for the documents' target, cut to the items that matter rather
than dropped whole.

A JSON document is one protected unit (invariant 5): a sentence compressor keeps it whole or
not at all, so an export larger than the whole target would go, and its answer with it. The
tools stage's JSON compressor (``backends.tools.json_crusher``) cuts such a document along its
structure instead: each long array keeps the items that hold the query's literals and words,
those whose status differs from the rest, numeric outliers and one item of each shape, every
kept value byte-exact, and a marker for each run left out (how many items, what their status
fields held). The result is still JSON. When that is still over the target a tighter pass runs
on the original (no head or tail items, fewer of the others); a document still over the target
after it goes to the compressor as before, which drops it.

Only a document that alone exceeds the target is cut: one that fits is kept whole or dropped
whole by relevance, as any protected unit is.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..backends.tools import ToolContext
from ..backends.tools.json_crusher import JsonCompressor, NotJson
from ..tokens import TokenCounter

__all__ = ["crush_json_documents"]

#: the passes, loosest first: the tools stage's defaults, then only what the query names, one
#: item whose status stands out and one item per shape
_PASSES = (
    JsonCompressor(),
    JsonCompressor(head=0, tail=0, word_matches=1, max_anomalies=1, max_outliers=0, max_schema=1),
)


def crush_json_documents(
    texts: Sequence[str],
    sizes: Sequence[int],
    target: int,
    context: ToolContext,
    counter: TokenCounter,
) -> list[str]:
    """Each text, or, where it is a JSON object or array whose document's tokens (``sizes``:
    with its rendered header) exceed ``target``, that JSON cut by the first pass that brings
    the document within ``target`` (the tightest pass's cut when none does)."""
    return [
        text if size <= target else _crushed(text, size, target, context, counter)
        for text, size in zip(texts, sizes)
    ]


def _crushed(text: str, size: int, target: int, context: ToolContext, counter: TokenCounter) -> str:
    if text.lstrip()[:1] not in ("[", "{"):
        return text
    header = size - counter.count(text)
    best = text
    for crusher in _PASSES:
        try:
            result = crusher.compress_json(text, context)
        except NotJson:
            return text  # a bracket that opens no JSON value: prose, a log line
        if result is None or len(result.text) >= len(best):
            continue
        best = result.text
        if counter.count(best) + header <= target:
            break
    return best
